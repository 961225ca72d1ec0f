"""``toolscout call``: the gateway from the shell, as an independent checker would use it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from demo_fixture import demo_db_copy, demo_template  # noqa: F401  (fixture)
from fork_kit import toolscout as fork_toolscout
from test_cli import run
from toolscout.gateway.audit import AuditLog, audit_path_for
from toolscout.gateway.auth import issue_token

KEY = "test-secret-0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory, demo_template: Path) -> Path:  # noqa: F811
    """What ``toolscout demo`` leaves (one run's copy: tests/demo_fixture.py)."""
    return demo_db_copy(demo_template, tmp_path_factory.mktemp("call"))


def call(db: Path, tool: str, token: str, args: str = "{}") -> subprocess.CompletedProcess[str]:
    argv = fork_toolscout("call", tool, "--token", token, "--key", KEY,
            "--args", args, "--db", str(db))  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ), timeout=120)


def test_admin_tool_forged_and_expired_tokens_are_refused_and_audited(demo_db: Path) -> None:
    agent = issue_token(subject="alice", tenant="acme", roles=["support_agent"], key=KEY)
    forged = issue_token(subject="alice", tenant="acme", roles=["billing_admin"], key=KEY + "x")
    an_hour_ago = time.time() - 3600
    expired = issue_token(
        subject="alice", tenant="acme", roles=["support_agent"], key=KEY, ttl_seconds=60,
        now=an_hour_ago,
    )  # fmt: skip
    refund = '{"order_id": "5512"}'
    outcomes = [
        call(demo_db, "billing.issue_full_refund", agent, refund),
        call(demo_db, "billing.issue_full_refund", forged, refund),
        call(demo_db, "billing.issue_full_refund", expired, refund),
    ]
    for proc in outcomes:
        assert proc.returncode == 3 and proc.stderr.startswith("refused: "), proc.stderr
        assert "Traceback" not in proc.stderr
    allowed = call(demo_db, "orders.find_order", agent, '{"order_id": "94218"}')
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)["value"] == {
        "dry_run": True, "tool": "orders.find_order", "arguments": {"order_id": "94218"}
    }  # fmt: skip
    log = AuditLog(audit_path_for(demo_db))  # the audit has its own file beside the catalog
    try:
        records = log.read()
        reasons = [r.reason for r in records if r.tool_id == "billing.issue_full_refund"]
        assert reasons == ["missing_scope", "token_bad_signature", "token_expired"]
        assert log.verify().ok
    finally:
        log.close()
    verify = run("audit", "--verify", db=demo_db)
    # an unkeyed log is consistent but cannot prove its integrity, and says so
    assert verify.returncode == 0 and "UNKEYED" in verify.stdout, verify.stdout
    assert "consistent" in verify.stdout and "intact" not in verify.stdout


def test_bad_call_inputs(demo_db: Path) -> None:
    agent = issue_token(subject="alice", tenant="acme", roles=["support_agent"], key=KEY)
    bad_json = call(demo_db, "orders.find_order", agent, "{oops")
    assert bad_json.returncode == 2 and bad_json.stderr.startswith(
        "error: --args is not valid JSON"
    )
    unknown = call(demo_db, "orders.nope", agent)
    assert unknown.returncode == 3 and "unknown_tool" in unknown.stderr
    hallucinated = call(demo_db, "orders.find_order", agent, '{"order_number": "94218"}')
    assert hallucinated.returncode == 3 and "order_number" in hallucinated.stderr


def test_parse_arguments_refuses_nan_infinity_and_runaway_nesting() -> None:
    from toolscout.cli.gateway import parse_arguments

    assert parse_arguments('{"a": 1.5, "b": [1, {"c": null}]}') == {"a": 1.5, "b": [1, {"c": None}]}
    for text, why in (
        ('{"bonus_target_percent": NaN}', "NaN"),
        ('{"x": Infinity}', "Infinity"),
        ('{"x": [-Infinity]}', "-Infinity"),
        ("[1, 2]", "must be a JSON object"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nest"),
        ('{"a": ' * 100 + "1" + "}" * 100, "nest"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_arguments(text)


def test_call_with_eddsa_and_bad_args_in_process(demo_db: Path, tmp_path: Path) -> None:
    import typer
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from typer.testing import CliRunner

    from toolscout.cli.gateway import call as call_command

    app = typer.Typer()
    app.command("call")(call_command)
    app.command("noop")(lambda: None)
    private = ed25519.Ed25519PrivateKey.generate()
    priv_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )  # fmt: skip
    pub = tmp_path / "ed25519.pub"
    pub.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    tok = issue_token(subject="alice", tenant="acme", roles=["support_agent"], key=priv_pem,
                      algorithm="EdDSA")  # fmt: skip
    base = ["call", "orders.find_order", "--token", tok, "--key-file", str(pub), "--db",
            str(demo_db)]  # fmt: skip
    runner = CliRunner()
    out = runner.invoke(app, [*base, "--alg", "EdDSA", "--args", '{"order_id": "94218"}'])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["value"]["arguments"] == {"order_id": "94218"}
    out = runner.invoke(app, [*base, "--alg", "Ed448x", "--args", "{}"])
    assert out.exit_code == 2 and "allowed:" in out.stderr and "EdDSA" in out.stderr
    out = runner.invoke(app, [*base, "--alg", "EdDSA", "--args", '{"order_id": NaN}'])
    assert out.exit_code == 2 and "NaN" in out.stderr and len(out.stderr.splitlines()) == 1


def test_call_with_a_keyed_audit_log_and_no_key_is_one_line(
    demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import typer
    from typer.testing import CliRunner

    from toolscout.cli.gateway import call as call_command

    db = tmp_path / "demo.db"
    shutil.copy(demo_db, db)
    AuditLog(audit_path_for(db), key="an-audit-key-0123456789").close()  # a keyed log
    app = typer.Typer()
    app.command("call")(call_command)
    app.command("noop")(lambda: None)
    agent = issue_token(subject="alice", tenant="acme", roles=["support_agent"], key=KEY)
    argv = ["call", "orders.find_order", "--token", agent, "--key", KEY, "--db", str(db),
            "--args", '{"order_id": "94218"}']  # fmt: skip
    monkeypatch.delenv("TOOLSCOUT_AUDIT_KEY", raising=False)
    out = CliRunner().invoke(app, argv)
    assert out.exit_code == 2 and "TOOLSCOUT_AUDIT_KEY" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.output
    monkeypatch.setenv("TOOLSCOUT_AUDIT_KEY", "an-audit-key-0123456789")
    out = CliRunner().invoke(app, argv)
    assert out.exit_code == 0, out.output
