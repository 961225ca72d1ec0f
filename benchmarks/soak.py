"""Soak: load and faults against two ``toolscout serve`` replicas, with nothing lost.

    python benchmarks/soak.py [--seconds 120] [--agents 64] [--workers 2] [--out FILE] [--logs DIR]

Starts the test suite's embedded PostgreSQL, builds the bundled demo catalog in a
fresh database, and starts two replicas — ``toolscout serve --postgres DSN --workers N
--dry-run`` — that share the catalog, the discovery log and one audit chain. ``--agents``
threads (one principal each) discover and execute through both replicas for
``--seconds`` while faults are injected mid-run, one at a time:

* ``replica_kill``   replica B killed with SIGKILL, then started again;
* ``postgres_restart`` PostgreSQL stopped (immediate) and started again;
* ``reimport``       the whole catalog re-imported (every tool) while calls go on.

Afterwards it reconciles every answer with the audit chain and asserts:

* every answered execute has exactly one audit row (allowed or refused), no two answers
  share one, and every audit row of the agents has one answer — except rows whose
  call's answer was lost to a fault (a connection cut or a 5xx), which are counted;
* the chain verifies with its key;
* no call executed without its audit row (an ``ok`` answer always has one);
* no 5xx and no connection error outside the fault windows;
* after the racing re-import the catalog is identical to a clean import;

and reports each fault's recovery time (from the fault to the first successful
execute through the affected replica). Prints a table, writes
``benchmarks/results/soak.json``, exits 1 when an assertion fails.

Not covered here (see docs/benchmarks.md): an upstream MCP server behind the replicas
(``serve`` binds no upstream executors) and a read-only SQLite audit disk (the audit
is in PostgreSQL).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

KEY = "soak-benchmark-token-key-0123456789abcdef"
AUDIT_KEY = "soak-benchmark-audit-key-0123456789"
QUERIES = [
    "where is order 94218",
    "look up the customer with email jane@example.com",
    "open a ticket for the broken checkout page",
    "send a message to the support channel",
    "change the shipping address of order 1182",
    "track the parcel of order 5512",
    "search orders of customer 77",
    "what is the status of my refund",
]
FIND = ("orders.find_order", {"order_id": "94218"})
#: how long after a fault ends its window still excuses errors (clients reconnecting)
GRACE_S = 3.0


@dataclass
class Answer:
    agent: int
    replica: str
    kind: str  # discover | execute
    t0: float
    t1: float
    status: int  # HTTP status; 0 = no answer (connection error, time-out)
    audit_id: int | None = None
    result: str = ""  # the execute's status (ok, refused, error)
    reason: str = ""


@dataclass
class Fault:
    name: str
    start: float
    end: float = 0.0
    replica: str = ""  # the replica it hit ("" = both)
    recovery_s: float | None = None
    note: str = ""


@dataclass
class Soak:
    answers: list[Answer] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, answer: Answer) -> None:
        with self.lock:
            self.answers.append(answer)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_specs() -> tuple[list[Any], Any]:
    from toolscout.loader import demo_catalog_dir, read_catalog, read_policy

    return read_catalog([demo_catalog_dir()]), read_policy(demo_catalog_dir() / "policy.yaml")


def build_catalog(dsn: str) -> None:
    from toolscout import Settings, Toolscout

    specs, policy = demo_specs()
    with Toolscout.open(Settings(db=dsn, jwt_key=KEY, audit_key=AUDIT_KEY)) as ts:
        ts.catalog.set_policy(policy)
        ts.catalog.add(specs)


def catalog_digest(dsn: str) -> dict[str, str]:
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed import default_embedder

    with Catalog.open(dsn, embedder=default_embedder(), log=False) as catalog:
        return {s.id: s.content_hash() for s in catalog.specs()}


class Replica:
    """One ``toolscout serve --postgres`` process (its workers on one port)."""

    def __init__(self, name: str, dsn: str, workers: int, log_dir: Path) -> None:
        self.name, self.dsn, self.workers = name, dsn, workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log_dir / f"serve-{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "TOOLSCOUT_TOKEN_KEY": KEY, "TOOLSCOUT_AUDIT_KEY": AUDIT_KEY}
        cmd = [sys.executable, "-m", "toolscout", "serve", "--postgres", self.dsn, "--port",
               str(self.port), "--workers", str(self.workers), "--dry-run"]  # fmt: skip
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 180) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise SystemExit(f"replica {self.name} exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return time.monotonic() - start
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"replica {self.name} not ready in {timeout:.0f} s")

    def kill(self) -> None:
        """SIGKILL the replica and its workers (the process group of a real crash)."""
        import psutil

        assert self.proc is not None
        procs = [self.proc.pid, *(c.pid for c in psutil.Process(self.proc.pid).children(True))]
        for pid in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def agent(n: int, replicas: list[Replica], soak: Soak, stop: threading.Event) -> None:
    from toolscout.gateway.auth import issue_token

    tok = issue_token(subject=f"agent{n}@acme", key=KEY, tenant="acme",
                      roles=["support_agent"], ttl_seconds=86400)  # fmt: skip
    headers = {"Authorization": f"Bearer {tok}"}
    rng = random.Random(n)
    with httpx.Client(timeout=30, headers=headers) as http:
        i = 0
        while not stop.is_set():
            replica = replicas[(n + i) % len(replicas)]
            i += 1
            t0 = time.monotonic()
            did, name, args = None, FIND[0], dict(FIND[1])
            try:
                r = http.post(f"{replica.url}/v1/discover", json={"query": rng.choice(QUERIES)})
                soak.add(Answer(n, replica.name, "discover", t0, time.monotonic(), r.status_code))
                if r.status_code == 200 and rng.random() < 0.5:
                    body = r.json()
                    if body["tools"]:
                        did, name, args = body.get("discovery_id"), body["tools"][0]["id"], {}
            except httpx.HTTPError:
                soak.add(Answer(n, replica.name, "discover", t0, time.monotonic(), 0))
                stop.wait(0.2)
                continue
            call: dict[str, Any] = {"name": name, "arguments": args}
            if did:
                call["discovery_id"] = did
            t0 = time.monotonic()
            try:
                r = http.post(f"{replica.url}/v1/execute", json=call)
            except httpx.HTTPError:
                soak.add(Answer(n, replica.name, "execute", t0, time.monotonic(), 0))
                stop.wait(0.2)
                continue
            answer = Answer(n, replica.name, "execute", t0, time.monotonic(), r.status_code)
            if r.status_code == 200:
                body = r.json()
                answer.audit_id = int(body["audit_id"]) if body.get("audit_id") else None
                answer.result, answer.reason = body["status"], body["reason"]
            soak.add(answer)


def recovered(soak: Soak, fault: Fault, replica: str) -> float | None:
    """Seconds from the fault to the first ok execute through ``replica`` ("" = any)."""
    oks = [
        a.t1
        for a in soak.answers
        if a.kind == "execute" and a.result == "ok" and a.t0 >= fault.start
        and (not replica or a.replica == replica)
    ]  # fmt: skip
    return min(oks) - fault.start if oks else None


def inject(name: str, soak: Soak, replicas: list[Replica], pg: Any, dsn: str) -> Fault:
    fault = Fault(name, time.monotonic())
    if name == "replica_kill":
        fault.replica = replicas[1].name
        replicas[1].kill()
        replicas[1].start()
        replicas[1].wait_ready()
    elif name == "postgres_restart":
        pg.restart(down_s=2.0)
    elif name == "reimport":
        from toolscout import Settings, Toolscout

        specs, _ = demo_specs()
        with Toolscout.open(Settings(db=dsn, jwt_key=KEY, audit_key=AUDIT_KEY)) as ts:
            report = ts.catalog.add(specs)
        fault.note = f"{report.stats.unchanged} unchanged, {report.stats.updated} updated"
    fault.end = time.monotonic()
    soak.faults.append(fault)
    return fault


def in_window(t0: float, t1: float, faults: list[Fault]) -> bool:
    return any(t0 <= f.end + GRACE_S and t1 >= f.start for f in faults)


def reconcile(soak: Soak, dsn: str) -> dict[str, Any]:
    from toolscout.gateway.audit_pg import PostgresAuditLog

    with PostgresAuditLog(dsn, key=AUDIT_KEY) as log:
        verification = log.verify()
        rows = [r for r in log.read(outcomes=True) if r.subject.startswith("agent")]
    executes = [a for a in soak.answers if a.kind == "execute"]
    row_ids = {r.id for r in rows}
    # an answer names its attempt's id when the outcome write looked failed to the server
    # (a commit cut by the database's crash may still have landed): the outcome row that
    # completes that attempt is then its row
    completes = {r.ref: r.id for r in rows if r.kind == "outcome"}

    def row_of(a: Answer) -> int | None:
        if not a.audit_id:
            return None
        return a.audit_id if a.audit_id in row_ids else completes.get(a.audit_id)

    answered = Counter(row_of(a) for a in executes if row_of(a) is not None)
    lost = [a for a in executes if a.audit_id and row_of(a) is None]
    ok_without_row = [a for a in executes if a.result == "ok" and not a.audit_id]
    no_row = [a for a in executes if a.status == 200 and not a.audit_id]
    # a refusal whose audit write failed while the database was down stands unrecorded
    # (nothing ran: gateway/core.py); outside the database's outage it counts as lost
    outages = [f for f in soak.faults if f.name == "postgres_restart"]
    unexcused_no_row = [
        a for a in no_row
        if a.reason != "audit_unavailable"
        and not (a.result == "refused" and in_window(a.t0, a.t1, outages))
    ]  # fmt: skip
    unanswered = [r for r in rows if r.id not in answered]
    cut = [a for a in executes if a.status == 0 or a.status >= 500]
    errors_outside = [
        a for a in soak.answers
        if (a.status == 0 or a.status >= 500) and not in_window(a.t0, a.t1, soak.faults)
    ]  # fmt: skip
    return {
        "executes_answered": sum(1 for a in executes if a.status == 200),
        "discoveries_answered": sum(
            1 for a in soak.answers if a.kind == "discover" and a.status == 200
        ),
        "ok": sum(1 for a in executes if a.result == "ok"),
        "refused": sum(1 for a in executes if a.result == "refused"),
        "audit_rows": len(rows),
        "duplicated": sum(n - 1 for n in answered.values() if n > 1),
        "answers_without_row": len(lost) + len(unexcused_no_row),
        "answers_without_row_reasons": sorted(
            {f"{a.result}:{a.reason}" for a in [*lost, *unexcused_no_row]}
        ),
        "refused_unrecorded_audit_down": len(no_row) - len(unexcused_no_row),
        "ok_without_row": len(ok_without_row),
        "rows_without_answer": len(unanswered),
        "answers_cut_by_faults": len(cut),
        "errors_outside_faults": len(errors_outside),
        # which they were (times in seconds of the process's clock, made relative below)
        "errors_outside_detail": [
            {"kind": a.kind, "replica": a.replica, "status": a.status, "t0": a.t0, "t1": a.t1}
            for a in errors_outside
        ],
        "chain_ok": verification.ok,
        "chain_problem": verification.problem,
        "chain_records": verification.count,
    }


def run(
    *,
    seconds: float,
    agents: int,
    workers: int,
    faults: list[str],
    out: Path | None = None,
    logs: Path | None = None,
) -> dict[str, Any]:
    """The soak; the replicas' logs (``serve-A.log``, ``serve-B.log``) go to ``logs``, kept,
    or without it to a temporary directory removed when the soak passes (kept, and named
    in the result's ``logs``, when it fails or stops with an error)."""
    from pg_fixture import PostgresServer

    work = logs if logs is not None else Path(tempfile.mkdtemp(prefix="soak-"))
    work.mkdir(parents=True, exist_ok=True)
    pg = PostgresServer()
    replicas: list[Replica] = []
    stop = threading.Event()
    soak = Soak()
    try:
        dsn = pg.new_database()
        t = time.monotonic()
        build_catalog(dsn)
        clean = catalog_digest(dsn)
        build_s = time.monotonic() - t
        replicas = [Replica(name, dsn, workers, work) for name in ("A", "B")]
        for replica in replicas:
            replica.start()
        ready_s = max(replica.wait_ready() for replica in replicas)
        threads = [
            threading.Thread(target=agent, args=(n, replicas, soak, stop), daemon=True)
            for n in range(agents)
        ]
        start = time.monotonic()
        for thread in threads:
            thread.start()
        # the faults spread over the middle of the run, one at a time, calls going on
        for i, name in enumerate(faults):
            at = start + seconds * (i + 1) / (len(faults) + 1)
            stop.wait(max(0.0, at - time.monotonic()))
            inject(name, soak, replicas, pg, dsn)
        stop.wait(max(0.0, start + seconds - time.monotonic()))
        stop.set()
        for thread in threads:
            thread.join(60)
        time.sleep(1.0)  # outcome rows of the last calls
        for fault in soak.faults:
            fault.recovery_s = recovered(soak, fault, fault.replica)
        result = reconcile(soak, dsn)
        result["catalog_identical_after_reimport"] = catalog_digest(dsn) == clean
    finally:
        stop.set()
        for replica in replicas:
            replica.stop()
        pg.stop()
    result.update(
        seconds=seconds, agents=agents, workers=workers, replicas=len(replicas),
        build_s=round(build_s, 1), ready_s=round(ready_s, 1),
        faults=[asdict(f) | {"start": round(f.start - start, 2), "end": round(f.end - start, 2)}
                for f in soak.faults],
    )  # fmt: skip
    for error in result.get("errors_outside_detail", []):  # on the faults' time base
        error["t0"], error["t1"] = round(error["t0"] - start, 2), round(error["t1"] - start, 2)
    failures = check(result)
    result["failures"] = failures
    if logs is None and not failures:
        shutil.rmtree(work, ignore_errors=True)
    else:
        result["logs"] = str(work)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def check(result: dict[str, Any]) -> list[str]:
    """The soak's assertions, as the list of those that failed."""
    failures = []
    for key in ("duplicated", "answers_without_row", "ok_without_row", "errors_outside_faults"):
        if result[key]:
            failures.append(f"{key} = {result[key]}")
    if result["errors_outside_faults"]:
        failures.append(f"errors outside faults: {result['errors_outside_detail']}")
    if result["rows_without_answer"] > result["answers_cut_by_faults"]:
        failures.append(
            f"{result['rows_without_answer']} audit rows without an answer, more than the "
            f"{result['answers_cut_by_faults']} answers faults cut"
        )
    if not result["chain_ok"]:
        failures.append(f"audit chain: {result['chain_problem']}")
    if not result["catalog_identical_after_reimport"]:
        failures.append("the catalog differs from a clean import after the racing re-import")
    for fault in result["faults"]:
        if fault["recovery_s"] is None:
            failures.append(f"no successful execute after {fault['name']}")
    if not result["ok"]:
        failures.append("no execute succeeded")
    return failures


def table(result: dict[str, Any]) -> str:
    rows = [
        ("discoveries answered", result["discoveries_answered"]),
        ("executes answered (ok / refused)",
         f"{result['executes_answered']} ({result['ok']} / {result['refused']})"),
        ("audit rows of the agents", result["audit_rows"]),
        ("lost (answer without row)", result["answers_without_row"]),
        ("duplicated (two answers, one row)", result["duplicated"]),
        ("ok answer without audit row", result["ok_without_row"]),
        ("rows without answer / answers cut by faults",
         f"{result['rows_without_answer']} / {result['answers_cut_by_faults']}"),
        ("refused unrecorded (audit down)", result["refused_unrecorded_audit_down"]),
        ("5xx or connection errors outside faults", result["errors_outside_faults"]),
        ("audit chain", f"{'intact' if result['chain_ok'] else 'BROKEN'} "
                        f"({result['chain_records']} records)"),
        ("catalog = clean import after re-import", result["catalog_identical_after_reimport"]),
    ] + [
        (f"fault {f['name']} at {f['start']:.0f}s (took {f['end'] - f['start']:.1f}s)",
         f"recovered in {f['recovery_s']:.2f}s" if f["recovery_s"] is not None else "NO RECOVERY")
        for f in result["faults"]
    ]  # fmt: skip
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--faults", default="replica_kill,postgres_restart,reimport",
        help="comma-separated, in order: replica_kill, postgres_restart, reimport",
    )  # fmt: skip
    parser.add_argument(
        "--logs", type=Path, default=None,
        help="where the replicas' logs go, kept (default: a temporary directory, removed "
        "when the soak passes)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "soak.json",
        help="where the JSON goes",
    )  # fmt: skip
    args = parser.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    unknown = set(faults) - {"replica_kill", "postgres_restart", "reimport"}
    if unknown or args.seconds <= 0 or args.agents < 1 or args.workers < 1:
        parser.error(f"bad options (unknown faults: {sorted(unknown)})")
    print(" ".join([Path(sys.executable).name, *sys.argv]), flush=True)
    result = run(
        seconds=args.seconds, agents=args.agents, workers=args.workers, faults=faults,
        out=args.out, logs=args.logs,
    )  # fmt: skip
    print(table(result))
    if result["failures"]:
        print("FAILED: " + "; ".join(result["failures"]))
        print(f"the replicas' logs: {result['logs']}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
