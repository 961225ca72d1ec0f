"""``toolscout serve`` as an operator starts it: secrets, keys, start-up output, readiness."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

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
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSCOUT_")}
    return subprocess.run(
        [sys.executable, "-m", "toolscout", "serve", *args],
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
