"""``toolscout serve`` as an operator starts it: secrets, keys, start-up output, readiness."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest

from fork_kit import toolscout as fork_toolscout
from serve_fixture import AUDIT_KEY, KEY, LOGS, auth, start_server, stop, token
from toolscout.errors import ConfigError
from toolscout.gateway.audit import AuditLog

TOOLS = [
    {"id": "orders.find_order", "name": "find_order", "summary": "Find an order by its id.",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
    {"id": "billing.refund", "name": "refund", "summary": "Refund an invoice.",
     "scopes": ["billing:write"], "parameters": {}},
]  # fmt: skip
ISSUER, AUDIENCE = "https://idp.example", "toolscout-api"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support import embedder
    from toolscout import Settings, Toolscout
    from toolscout.cards import make_spec

    path = tmp_path_factory.mktemp("serve") / "tools.db"
    with Toolscout.open(Settings(db=str(path), log=False), embedder=embedder()) as ts:
        ts.catalog.add([make_spec(t) for t in TOOLS])
    return path


def serve_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``toolscout serve ARGS`` refusing its options: what it prints and exits with (a
    process forked with the imports done, ``fork_kit``; the start of a server that serves
    is tested cold by ``test_each_worker_prints_its_start_up_line...``)."""
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSCOUT_")}
    return subprocess.run(
        fork_toolscout("serve", *args),
        capture_output=True, text=True, timeout=120, env={**base, **(env or {})},
    )  # fmt: skip


def server_log(proc: subprocess.Popen[bytes]) -> str:
    log = LOGS[proc.pid]
    log.seek(0)
    return str(log.read().decode(errors="replace"))


def test_audit_key_is_its_own_secret_and_a_fresh_keyed_file_starts(
    catalog: Path, tmp_path: Path
) -> None:
    """With $TOOLSCOUT_AUDIT_KEY on a fresh audit file, serve starts (it refused: "keyed and
    the key given does not match"), the chain is keyed with that key — not the token key —
    and the token key comes from a file, with issuer and audience required."""
    key_file = tmp_path / "token.key"
    key_file.write_text(KEY + "\n")
    audit = tmp_path / "fresh.audit.db"
    proc, url = start_server(
        "--db", str(catalog), "--audit", str(audit), "--dry-run",
        "--jwt-key-file", str(key_file), "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE,
        env={"TOOLSCOUT_TOKEN_KEY": ""},
    )  # fmt: skip
    try:
        good = auth(token(issuer=ISSUER, audience=AUDIENCE))
        call = {"name": "orders.find_order", "arguments": {"order_id": "94218"}}
        r = httpx.post(f"{url}/v1/execute", json=call, headers=good, timeout=60)
        assert r.status_code == 200, r.text
        for other in (token(), token(issuer="https://else", audience=AUDIENCE)):
            r = httpx.post(f"{url}/v1/execute", json=call, headers=auth(other), timeout=60)
            assert r.status_code == 401, r.text
    finally:
        stop_log = server_log(proc)
        stop(proc)
    assert "warning" not in stop_log.lower(), stop_log
    with AuditLog(audit, key=AUDIT_KEY) as log:
        assert [r.tool_id for r in log.read() if r.status == "ok"] == ["orders.find_order"]
    with pytest.raises(ConfigError, match="does not match"):
        AuditLog(audit, key=KEY)


def test_the_token_key_never_keys_the_audit_chain(catalog: Path, tmp_path: Path) -> None:
    from toolscout.cli.serve import build_service

    audit = tmp_path / "unkeyed.audit.db"
    build_service(str(catalog), jwt_key=KEY, audit=str(audit)).close()
    with AuditLog(audit) as log:  # opens without a key: it was not keyed with the token's
        assert not log.keyed


def test_key_on_the_command_line_warns_and_missing_or_bad_keys_are_one_line(
    tmp_path: Path,
) -> None:
    missing = str(tmp_path / "none.db")
    r = serve_cli("--db", missing, "--jwt-key", KEY)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--jwt-key puts the secret on the command line" in r.stderr
    assert "TOOLSCOUT_TOKEN_KEY" in r.stderr
    r = serve_cli("--db", missing)
    assert r.returncode == 2 and "a token key is required" in r.stderr, r.stderr
    r = serve_cli("--db", missing, env={"TOOLSCOUT_TOKEN_KEY": KEY})
    assert r.returncode == 2 and "no catalog" in r.stderr and "warning" not in r.stderr
    (tmp_path / "empty.key").write_text("\n")
    for args, fragment in (
        (["--jwt-key-file", str(tmp_path / "nope.key")], "--jwt-key-file: cannot read"),
        (["--jwt-key-file", str(tmp_path / "empty.key")], "is empty"),
        (["--jwt-key", KEY, "--jwt-key-file", str(tmp_path / "empty.key")], "not both"),
        (["--audit-key-file", str(tmp_path / "nope.key")], "--audit-key-file: cannot read"),
    ):
        r = serve_cli("--db", missing, *args, env={"TOOLSCOUT_TOKEN_KEY": KEY})
        assert r.returncode == 2 and fragment in r.stderr, (args, r.stderr)
        assert r.stderr.count("error:") == 1 and "Traceback" not in r.stderr


def test_ready_means_warm_the_model_loaded_and_nothing_logged(catalog: Path) -> None:
    """/readyz said ready before the model was loaded (the first discovery took 2.3 s)."""
    from fastapi.testclient import TestClient

    from support import embedder
    from toolscout import DryRunExecutor, Settings, Toolscout
    from toolscout.http.app import create_app

    model = embedder()
    model._session = None  # as a fresh process has it: nothing loaded yet
    loads: list[object] = []
    real_load = model._load

    def counted_load() -> None:  # the real loader, counted
        loads.append(None)
        real_load()

    model._load = counted_load  # type: ignore[method-assign]
    service = Toolscout.open(
        Settings(db=str(catalog), jwt_key=KEY, audit_key=AUDIT_KEY),
        embedder=model,
        executors=DryRunExecutor(),
    )
    try:
        logged = len(service.catalog.log.discoveries())
        app = create_app(service)
        with TestClient(app) as client:
            deadline = time.monotonic() + 120
            while (r := client.get("/readyz")).status_code != 200:
                assert r.status_code == 503 and r.json()["error"]["code"] == "unavailable"
                assert time.monotonic() < deadline, r.text
                time.sleep(0.05)
            assert model._session is not None and len(loads) == 1  # warm: the model is loaded
            assert app.state.readiness.seconds is not None
            assert len(service.catalog.log.discoveries()) == logged  # the warm-up is nobody's
            session, state = model._session, service.catalog._state
            assert state is not None  # the catalog's derived state is built too
            r = client.post("/v1/discover", json={"query": "find order 42"}, headers=auth(token()))
            assert r.status_code == 200, r.text
            # the first request loaded nothing and rebuilt nothing: what made it slow (2.3 s)
            # was done before /readyz said ready
            assert len(loads) == 1 and model._session is session
            assert service.catalog._state is state
    finally:
        del model._load  # type: ignore[method-assign]
        service.close()


def test_each_worker_prints_its_start_up_line_and_the_access_log_is_optional(
    catalog: Path,
) -> None:
    proc, url = start_server("--db", str(catalog), "--dry-run", "--workers", "2", "--access-log")
    try:
        deadline = time.monotonic() + 120
        while server_log(proc).count(" ready on ") < 2:  # /readyz reached one of the two
            assert time.monotonic() < deadline, server_log(proc)
            time.sleep(0.2)
        r = httpx.post(f"{url}/v1/discover", json={"query": "refund"}, headers=auth(token()))
        assert r.status_code == 200
        deadline = time.monotonic() + 30
        while '"POST /v1/discover HTTP/1.1" 200' not in server_log(proc):
            assert time.monotonic() < deadline, server_log(proc)
            time.sleep(0.2)
    finally:
        text = server_log(proc)
        stop(proc)
    assert f"starting 2 workers on {url}" in text
    lines = [line for line in text.splitlines() if " ready on " in line]
    assert len(lines) == 2 and len({line.split()[3] for line in lines}) == 2  # two pids
    for line in lines:
        assert f"ready on {url}" in line and f"catalog {catalog} (SQLite, 2 tools)" in line
        assert "(keyed)" in line and "warm in" in line


def test_without_access_log_a_request_prints_nothing(catalog: Path) -> None:
    proc, url = start_server("--db", str(catalog), "--dry-run")
    try:
        r = httpx.post(f"{url}/v1/discover", json={"query": "refund"}, headers=auth(token()))
        assert r.status_code == 200
        proc.terminate()  # all it ever wrote is in its log once it has ended
        proc.wait(30)
    finally:
        text = server_log(proc)
        stop(proc)
    assert "POST /v1/discover" not in text and text.count(" ready on ") == 1


def test_each_workers_encoder_gets_its_share_of_the_cores() -> None:
    from toolscout.cli.serve import encoder_threads

    # ONNX Runtime's default (a thread per core in every worker) oversubscribes the cores
    assert [encoder_threads(w, cores=2) for w in (1, 2, 3, 8)] == [2, 1, 1, 1]
    assert [encoder_threads(w, cores=8) for w in (1, 2, 3, 4)] == [8, 4, 2, 2]
    assert encoder_threads(2) >= 1
