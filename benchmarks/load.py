"""Load: ``wrk`` against ``toolscout serve`` on 127.0.0.1, discover and execute.

    python benchmarks/load.py [--seconds 60] [--workers 2] [--connections 16] [--postgres]
        [--bench DIR] [--no-cached] [--no-execute] [--server-src DIR]

Builds the bundled demo catalog (205 tools, its policy) in a temporary SQLite file
(or, with ``--postgres``, in a database on the test suite's embedded PostgreSQL),
starts ``toolscout serve --workers N --dry-run`` and drives it with ``wrk``
(Debian package ``wrk``) for ``--seconds`` per run, three runs:

- ``discover`` (the headline): ``POST /v1/discover`` with NEW query text on every
  request, drawn in seeded order from the dev sets' ``queries.jsonl`` under
  ``--bench`` (8,000+ distinct texts; each ``wrk`` thread walks its own stride of the
  list, so no text repeats within a run and the query-vector cache never hits);
- ``discover_cached``: the same endpoint over a rotation of 16 realistic requests, so
  after warm-up every query vector comes from the cache (the encoder never runs) —
  the figure earlier versions of this benchmark published as *the* throughput;
- ``execute``: ``POST /v1/execute`` of an entitled tool from 64 support agents.

Both discover runs come from 64 principals (the roles and tenants of ``PRINCIPALS`` in
turn), each well under the per-principal discovery budget (10 a second, burst 50, per
worker) at the rates measured: the limits are the server's defaults, and a run that
still meets them shows it in its ``429`` column rather than in its throughput.

Reports successful requests/s (an answer that did what was asked, counted by a ``wrk``
response hook), latency percentiles, every answer by HTTP status (``statuses``; a 429 is
the rate limiter refusing), socket errors by kind, the 1-minute load average before and
after each run (the machine may be shared), the server's CPU per request and the part of
it its workers' event-loop threads spent (HTTP parsing, routing, token checks, writing
answers: ``server_loop_cpu_ms_per_request``; discoveries run on other threads), and the
server processes' RSS sampled every 5 s (memory must stay flat after warm-up). Writes
``benchmarks/results/load_<store>.json``. ``--server-src`` runs the server from another
source tree (another checkout's ``src``), to compare two versions on the same machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

KEY = "load-benchmark-key-0123456789abcdef012345"
#: the audit chain's own key (never the token key)
AUDIT_KEY = "load-benchmark-audit-key-0123456789"
DEFAULT_BENCH = ROOT.parent / "shared" / "bench"
#: seed of the order the dev sets' queries are sent in
SEED = 20261201

PRINCIPALS = [
    ("alice@acme", "acme", ["support_agent"]),
    ("bob@acme", "acme", ["billing_admin"]),
    ("carol@acme", "acme", ["engineer"]),
    ("dan@acme", "acme", ["dba"]),
    ("erin@globex", "globex", ["support_agent"]),
]
QUERIES = [
    "where is order 94218",
    "refund invoice INV-1024",
    "kill the stuck job",
    "restart the payments pod in staging",
    "who is on call for the database",
    "open a ticket for the broken checkout page",
    "send a message to the support channel",
    "look up the customer with email jane@example.com",
    "what changed in the last deploy",
    "cancel my subscription",
    "show failed logins for user 5512",
    "create a pull request for the hotfix branch",
    "how much did we bill acme last month",
    "run a query on the orders table",
    "change the shipping address of order 1182",
    "page the infra team about high latency",
]

LUA = """
local bodies = {%s}
local tokens = {%s}
local success = %s
local i = 0
local stride = 1
local threads = {}
local nthreads = 0
function setup(thread)
  table.insert(threads, thread)
  thread:set("first", nthreads)
  nthreads = nthreads + 1
end
function init(args)
  good = 0
  bad = 0
  statuses = {}
  -- each thread walks its own stride of the bodies: no two threads send one text
  i = first
  stride = %d
end
request = function()
  i = i + stride
  local n = (i %% #bodies) + 1
  local t = (i %% #tokens) + 1
  return wrk.format("POST", "%s", {["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. tokens[t]}, bodies[n])
end
-- an HTTP 200 is not a success by itself: an execution refused by the rate limiter is
-- a 200 with status "refused"; count the answers that did what was asked
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status == 200 and string.find(body, success, 1, true) then
    good = good + 1
  else
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local g, b = 0, 0
  local by = {}
  for _, t in ipairs(threads) do
    g = g + t:get("good")
    b = b + t:get("bad")
    for code, n in pairs(t:get("statuses")) do
      by[code] = (by[code] or 0) + n
    end
  end
  io.write(string.format("toolscout-answers good %%d bad %%d\\n", g, b))
  for code, n in pairs(by) do
    io.write(string.format("toolscout-status %%d %%d\\n", code, n))
  end
end
"""
#: what a successful answer of each endpoint contains (compact JSON from the server)
#: (a discovery id is only given where a discovery log is kept: not with --postgres)
SUCCESS = {"/v1/discover": '"tools":[', "/v1/execute": '"status":"ok"'}
#: distinct support agents the execute run spreads over: each principal may make 10 calls
#: a second (the gateway's default rate limit), so one token would measure refusals
EXECUTE_PRINCIPALS = 64
#: distinct principals the discover runs spread over (the roles and tenants of
#: ``PRINCIPALS`` in turn): discovery has the same per-principal budget (10 a second, a
#: burst of 50, per worker), and five principals at 200+ requests a second were refused
#: half the time (429), which measured the limiter, not discovery
DISCOVER_PRINCIPALS = 64


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lua_string(text: str) -> str:
    return "[==[" + text + "]==]"


def build_catalog(target: str, audit: str) -> None:
    from toolscout import Settings, Toolscout
    from toolscout.loader import demo_catalog_dir, read_catalog, read_policy

    with Toolscout.open(Settings(db=target, jwt_key=KEY, audit_path=audit)) as ts:
        ts.catalog.set_policy(read_policy(demo_catalog_dir() / "policy.yaml"))
        ts.catalog.add(read_catalog([demo_catalog_dir()]))


def rss_mb(pid: int) -> float:
    """RSS of a process and its children (uvicorn workers), in MiB."""
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs) / 2**20
    except psutil.Error:
        return 0.0


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by a process and its children (the workers)."""
    import psutil

    total = 0.0
    try:
        proc = psutil.Process(pid)
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
    except psutil.Error:
        pass
    return total


def loop_cpu_seconds(pid: int) -> float:
    """CPU time used so far by the workers' main threads, which run their event loops:
    the HTTP parsing, routing, token checks and answer writing a request costs there (a
    discovery itself runs on other threads)."""
    import psutil

    total = 0.0
    try:
        for p in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += sum(t.user_time + t.system_time for t in p.threads() if t.id == p.pid)
    except psutil.Error:
        pass
    return total


def run_wrk(url: str, path: str, bodies: list[str], tokens: list[str], args: Any) -> dict[str, Any]:
    script = LUA % (
        ", ".join(lua_string(b) for b in bodies),
        ", ".join(lua_string(t) for t in tokens),
        lua_string(SUCCESS[path]),
        args.threads,
        path,
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    cmd = ["wrk", "-t", str(args.threads), "-c", str(args.connections), "-d",
           f"{args.seconds}s", "--timeout", "10s", "--latency", "-s", f.name, url]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    os.unlink(f.name)
    return parse_wrk(proc.stdout)


def _ms(text: str) -> float:
    value, unit = re.match(r"([\d.]+)(\w+)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


def parse_wrk(out: str) -> dict[str, Any]:
    pct = dict(re.findall(r"^\s+(\d+)%\s+([\d.]+\w+)", out, re.M))
    total = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    answers = re.search(r"toolscout-answers good (\d+) bad (\d+)", out)
    seconds = re.search(r"requests in ([\d.]+)(\w+),", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "requests": int(total.group(1)) if total else 0,
        "requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50_ms": _ms(pct["50"]),
        "p90_ms": _ms(pct["90"]),
        "p99_ms": _ms(pct["99"]),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "successful": int(answers.group(1)) if answers else 0,
        "unsuccessful": int(answers.group(2)) if answers else 0,
        "successful_per_s": round(
            int(answers.group(1)) / (_ms(seconds.group(1) + seconds.group(2)) / 1000), 1
        )
        if answers and seconds
        else 0.0,
        "socket_errors": sum(int(x) for x in sock.groups()) if sock else 0,
        "socket_error_kinds": dict(
            zip(
                ("connect", "read", "write", "timeout"),
                (int(x) for x in sock.groups()),
                strict=True,
            )
        )
        if sock
        else {},
        # every answer by HTTP status: a 429 is the per-principal budget refusing
        "statuses": {
            code: int(n) for code, n in re.findall(r"^toolscout-status (\d+) (\d+)$", out, re.M)
        },
    }


def dev_queries(bench: Path, seed: int = SEED) -> list[str]:
    """Every distinct query text of the dev sets under ``bench``, in a seeded order."""
    import random

    files = sorted(bench.glob("*/queries.jsonl"))
    if not files:
        raise SystemExit(f"error: no */queries.jsonl under {bench} (give --bench DIR)")
    seen: dict[str, None] = {}
    for f in files:
        for line in f.open(encoding="utf-8"):
            if line.strip():
                text = " ".join(str(json.loads(line)["query"]).split())[:8000]
                if text and "]==]" not in text:
                    seen.setdefault(text, None)
    texts = list(seen)
    random.Random(seed).shuffle(texts)
    return texts


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@dataclass
class Server:
    url: str
    pid: int
    tokens: list[str]
    work: Path


def _wait_ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            raise SystemExit(f"the server did not start: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.3)


@contextmanager
def serving(workers: int, postgres: bool, server_src: Path | None = None) -> Iterator[Server]:
    """``toolscout serve --dry-run`` over the demo catalog, on SQLite or PostgreSQL."""
    from toolscout.gateway.auth import issue_token

    tokens = [issue_token(subject=s, key=KEY, tenant=t, roles=r, ttl_seconds=3600)
              for s, t, r in PRINCIPALS]  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="load-"))
    server_pg = None
    server = None
    try:
        if postgres:
            from pg_fixture import PostgresServer

            server_pg = PostgresServer()
            target = server_pg.new_database()
            store_args = ["--postgres", target, "--audit", str(work / "audit.db")]
        else:
            target = str(work / "demo.db")
            store_args = ["--db", target]
        build_catalog(target, str(work / "build.audit.db"))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "toolscout", "serve", "--port", str(port),
             "--workers", str(workers), "--dry-run", *store_args],
            stdout=subprocess.DEVNULL, stderr=(work / "serve.log").open("wb"),
            env={**os.environ, "TOOLSCOUT_TOKEN_KEY": KEY, "TOOLSCOUT_AUDIT_KEY": AUDIT_KEY,
                 **({"PYTHONPATH": str(server_src)} if server_src else {})},
        )  # fmt: skip
        _wait_ready(url, server, work / "serve.log")
        # warm every worker (model load, caches) before measuring
        hdr = {"Authorization": f"Bearer {tokens[0]}"}
        for q in QUERIES * 4:
            httpx.post(f"{url}/v1/discover", json={"query": q}, headers=hdr, timeout=30)
        yield Server(url, server.pid, tokens, work)
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
        if server_pg is not None:
            server_pg.stop()
        log = work / "serve.log"
        if log.is_file() and ("Traceback" in (text := log.read_text(errors="replace"))):
            # a 5xx is the server's own failure: show what it logged before the log goes
            print(f"the server logged an error; its log:\n{text[-6000:]}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--postgres", action="store_true")
    ap.add_argument(
        "--bench",
        type=Path,
        default=DEFAULT_BENCH,
        help="directory of dev sets (*/queries.jsonl): the new query texts",
    )
    ap.add_argument("--no-cached", action="store_true",
                    help="skip the cached-query discover run")  # fmt: skip
    ap.add_argument("--no-execute", action="store_true", help="skip the execute run")
    ap.add_argument(
        "--server-src",
        type=Path,
        default=None,
        help="run the server from this source tree (e.g. another checkout's src, to"
        " compare two versions under the same load)",
    )
    ap.add_argument("--out", type=Path, default=None,
                    help="results (default: benchmarks/results/load_<store>.json)")  # fmt: skip
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")
    texts = dev_queries(args.bench)
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    runs: dict[str, Any] = {}
    with serving(args.workers, args.postgres, args.server_src) as srv:
        t0 = time.monotonic()

        def sample() -> None:
            while not stop.is_set():
                samples.append((round(time.monotonic() - t0, 1), round(rss_mb(srv.pid), 1)))
                stop.wait(5)

        threading.Thread(target=sample, daemon=True).start()
        try:
            askers = [discover_agent(i) for i in range(DISCOVER_PRINCIPALS)]
            plan: list[tuple[str, str, list[str], list[str]]] = [
                ("discover", "/v1/discover",
                 [json.dumps({"query": q, "k": 3}) for q in texts], askers),
            ]  # fmt: skip
            if not args.no_cached:
                plan.append(
                    (
                        "discover_cached",
                        "/v1/discover",
                        [json.dumps({"query": q, "k": 3}) for q in QUERIES],
                        askers,
                    )
                )
            agents = [issue_agent(i) for i in range(EXECUTE_PRINCIPALS)]
            calls = [("orders.find_order", {"order_id": "94218"})]
            if not args.no_execute:
                plan.append(
                    (
                        "execute",
                        "/v1/execute",
                        [json.dumps({"name": n, "arguments": a}) for n, a in calls],
                        agents,
                    )
                )
            for name, path, bodies, tokens in plan:
                before = load_avg()
                cpu = cpu_seconds(srv.pid)
                loop = loop_cpu_seconds(srv.pid)
                began = time.monotonic()
                out = run_wrk(srv.url, path, bodies, tokens, args)
                # the server's CPU per answer: steadier than req/s on a shared machine
                used = cpu_seconds(srv.pid) - cpu
                answered = max(out["requests"], 1)
                out["server_cpu_ms_per_request"] = round(1000 * used / answered, 2)
                # of which the workers' event loops (the rest: the discovery threads)
                looped = loop_cpu_seconds(srv.pid) - loop
                out["server_loop_cpu_ms_per_request"] = round(1000 * looped / answered, 2)
                # the cores the server kept busy: under the machine's count, something else
                # had the rest (or the server waited), and req/s says less about the server
                out["server_cores_busy"] = round(used / max(time.monotonic() - began, 1e-9), 2)
                out["load_avg_before"] = before
                out["load_avg_after"] = load_avg()
                runs[name] = out
                print(name, json.dumps(out), flush=True)
            check = httpx.post(
                f"{srv.url}/v1/execute",
                json={"name": calls[0][0], "arguments": calls[0][1]},
                headers={"Authorization": f"Bearer {srv.tokens[0]}"},
                timeout=30,
            ).json()
            if check["status"] != "ok":
                raise SystemExit(f"execute did not succeed: {check}")
        finally:
            stop.set()
    result = {
        "store": "postgres" if args.postgres else "sqlite",
        "workers": args.workers,
        "connections": args.connections,
        "seconds_per_run": args.seconds,
        "new_query_texts": len(texts),
        "cpus": os.cpu_count(),
        # the server's request encoder ($TOOLSCOUT_QUERY_ENCODER, inherited by the server)
        "query_encoder": os.environ.get("TOOLSCOUT_QUERY_ENCODER", "") or "(default)",
        "server_src": str(args.server_src) if args.server_src else "",
        **runs,
        "rss_mb_samples": samples,
    }
    path = args.out or ROOT / "benchmarks" / "results" / f"load_{result['store']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'run':<16} {'requests':>9} {'ok req/s':>9} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}"
          f" {'bad':>5} {'429':>5} {'non2xx':>6} {'sockerr':>7} {'cpu ms':>7} {'loop ms':>7}"
          "  load avg before -> after")  # fmt: skip
    for name, r in runs.items():
        print(
            f"{name:<16} {r['requests']:>9} {r['successful_per_s']:>9} {r['p50_ms']:>8.1f}"
            f" {r['p90_ms']:>8.1f} {r['p99_ms']:>8.1f} {r['unsuccessful']:>5}"
            f" {r['statuses'].get('429', 0):>5} {r['non_2xx']:>6}"
            f" {r['socket_errors']:>7} {r['server_cpu_ms_per_request']:>7}"
            f" {r['server_loop_cpu_ms_per_request']:>7}"
            f"  {r['load_avg_before']} -> {r['load_avg_after']}"
        )
    print("rss MiB over time:", samples)
    print(f"written {path}")


def discover_agent(i: int) -> str:
    """The token of the ``i``-th discovering principal (the roles and tenants of
    :data:`PRINCIPALS` in turn)."""
    _, tenant, roles = PRINCIPALS[i % len(PRINCIPALS)]
    return issue_agent(i, tenant=tenant, role=roles[0], prefix="asker")


def issue_agent(
    i: int, tenant: str = "acme", role: str = "support_agent", prefix: str = "agent"
) -> str:
    from toolscout.gateway.auth import issue_token

    return issue_token(subject=f"{prefix}{i}@{tenant}", key=KEY, tenant=tenant,
                       roles=[role], ttl_seconds=3600)  # fmt: skip


if __name__ == "__main__":
    main()
