"""Tests for toolscout.cli.gateway: ``token issue`` and ``audit``, mounted as the main CLI does."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
import typer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from typer.testing import CliRunner

from _gateway_kit import AUDIENCE, ISSUER, SECRET
from toolscout.cli.gateway import audit, parse_duration, parse_since, token_app
from toolscout.gateway.audit import AuditLog, args_digest
from toolscout.gateway.auth import JWTVerifier
from toolscout.policy import Principal

app = typer.Typer()
app.add_typer(token_app, name="token")
app.command("audit")(audit)
runner = CliRunner()


def test_token_issue_hs256() -> None:
    result = runner.invoke(
        app,
        ["token", "issue", "--sub", "alice", "--tenant", "acme", "--scopes", "a:read, b:write",
         "--roles", "support", "--ttl", "15m", "--key", SECRET, "--iss", ISSUER, "--aud", AUDIENCE],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    tok = result.stdout.strip()
    p = JWTVerifier(key=SECRET, issuer=ISSUER, audience=AUDIENCE).verify(tok)
    assert p == Principal.of("alice", "acme", ["a:read", "b:write"], ["support"])


def test_token_issue_es256_key_file_and_env_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = tmp_path / "key.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    result = runner.invoke(
        app,
        [
            "token",
            "issue",
            "--sub",
            "bot",
            "--tenant",
            "t",
            "--alg",
            "ES256",
            "--key-file",
            str(pem),
        ],
    )
    assert result.exit_code == 0, result.output
    v = JWTVerifier(key=pem.read_bytes(), algorithms=["ES256"])
    assert v.verify(result.stdout.strip()).subject == "bot"
    monkeypatch.setenv("TOOLSCOUT_TOKEN_KEY", SECRET)
    result = runner.invoke(app, ["token", "issue", "--sub", "bot", "--tenant", "t"])
    assert result.exit_code == 0
    assert JWTVerifier(key=SECRET).verify(result.stdout.strip()).tenant == "t"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--key", "short"], "at least 32 bytes"),
        (["--key", SECRET, "--alg", "none"], "never allowed"),
        (["--key", SECRET, "--ttl", "soon"], "not a duration"),
        ([], "exactly one of --key"),
        (["--key-file", "/nonexistent/key.pem"], "cannot read"),
    ],
)
def test_token_issue_errors_are_one_line_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["token", "issue", "--sub", "a", "--tenant", "t", *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def _fill(db: Path) -> None:
    with AuditLog(db) as log:
        log.append(subject="alice", tenant="acme", tool_id="billing.get_invoice",
                   args_digest=args_digest({}), decision="allowed", reason="ok",
                   latency_ms=1.5, status="ok", ts=time.time() - 7200)  # fmt: skip
        log.append(subject="bob", tenant="acme", tool_id="[red]billing.issue_full_refund\x1b[2J",
                   args_digest=args_digest({}), decision="denied", reason="missing_scope",
                   latency_ms=0.2, status="refused")  # fmt: skip


def test_audit_lists_filters_and_verifies(tmp_path: Path) -> None:
    db = tmp_path / "toolscout.db"
    _fill(db)
    out = runner.invoke(app, ["audit", "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert "alice" in out.stdout and "missing_scope" in out.stdout
    assert "[red]billing.issue_full_refund" in out.stdout  # shown literally, not as markup
    assert "\x1b" not in out.stdout
    out = runner.invoke(app, ["audit", "--db", str(db), "--since", "1h", "--json"])
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["subject"] for r in rows] == ["bob"]
    out = runner.invoke(app, ["audit", "--db", str(db), "--subject", "alice", "--json"])
    assert [json.loads(line)["decision"] for line in out.stdout.splitlines()] == ["allowed"]
    out = runner.invoke(app, ["audit", "--db", str(db), "--verify"])
    assert out.exit_code == 0 and "UNKEYED" in out.stdout and "2 records" in out.stdout
    assert "intact" not in out.stdout and "cannot prove integrity" in out.stdout


def test_audit_verify_of_a_rechained_unkeyed_log_does_not_say_intact(tmp_path: Path) -> None:
    """Someone who can write an unkeyed log rewrites a row and recomputes every hash:
    the chain holds, and --verify says it cannot prove anything (it said "intact")."""
    from toolscout.gateway.audit_rows import _row_hash

    db = tmp_path / "toolscout.db"
    _fill(db)
    head = runner.invoke(app, ["audit", "--db", str(db), "--head"]).stdout.strip()
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER audit_log_no_update")
    conn.execute("UPDATE audit_log SET decision = 'allowed', reason = 'ok' WHERE id = 2")
    prev = "0" * 64
    for row in conn.execute("SELECT * FROM audit_log ORDER BY id").fetchall():
        fields = (*row[:10], row[12], row[13], row[14])
        digest = _row_hash(prev, fields, None)
        conn.execute("UPDATE audit_log SET prev_hash = ?, hash = ? WHERE id = ?",
                     (prev, digest, row[0]))  # fmt: skip
        prev = digest
    conn.execute(
        "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log "
        "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END"
    )  # and the trigger put back: nothing shows
    conn.commit()
    conn.close()
    out = runner.invoke(app, ["audit", "--db", str(db), "--verify"])
    assert "intact" not in out.stdout and "UNKEYED" in out.stdout, out.stdout
    assert (
        json.loads(runner.invoke(app, ["audit", "--db", str(db), "--verify", "--json"]).stdout)[
            "keyed"
        ]
        is False
    )
    out = runner.invoke(app, ["audit", "--db", str(db), "--verify", "--expect-head", head])
    assert out.exit_code == 1 and "does not match the exported head" in out.stdout


def test_audit_verify_detects_tampering(tmp_path: Path) -> None:
    db = tmp_path / "toolscout.db"
    _fill(db)
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER audit_log_no_update")
    conn.execute("UPDATE audit_log SET decision = 'allowed' WHERE id = 2")
    conn.commit()
    conn.close()
    out = runner.invoke(app, ["audit", "--db", str(db), "--verify"])
    assert out.exit_code == 1 and "TAMPERED" in out.stdout and "record 2" in out.stdout
    out = runner.invoke(app, ["audit", "--db", str(db), "--verify", "--json"])
    data = json.loads(out.stdout)
    assert (data["ok"], data["first_bad_id"], data["count"]) == (False, 2, 2)


def test_audit_errors(tmp_path: Path) -> None:
    out = runner.invoke(app, ["audit", "--db", str(tmp_path / "missing.db")])
    assert out.exit_code == 2 and "no database" in out.stderr
    db = tmp_path / "toolscout.db"
    _fill(db)
    out = runner.invoke(app, ["audit", "--db", str(db), "--since", "yesterday-ish"])
    assert out.exit_code == 2 and "not a duration or ISO" in out.stderr


def test_default_db_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "env.db"
    _fill(db)
    monkeypatch.setenv("TOOLSCOUT_DB", str(db))
    out = runner.invoke(app, ["audit", "--verify"])
    assert out.exit_code == 0 and "2 records" in out.stdout


def test_durations() -> None:
    assert parse_duration("90") == 90 and parse_duration("15m") == 900
    assert parse_duration("2h") == 7200 and parse_duration("1.5d") == 129600
    with pytest.raises(ValueError):
        parse_duration("0s")
    assert parse_since("1h", now=10_000) == 6400
    assert parse_since("2026-01-01T00:00:00+00:00") == 1767225600.0


AUDIT_KEY = "an-audit-key-kept-elsewhere-0123"


def test_audit_head_keyed_verify_and_expect_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tools.audit.db"
    with AuditLog(path, key=AUDIT_KEY) as log:
        for i in range(3):
            log.append(subject=f"u{i}", tenant="acme", tool_id="t", args_digest=log.digest({}),
                       decision="allowed", reason="ok", latency_ms=1, status="ok")  # fmt: skip
    db = tmp_path / "tools.db"  # the catalog: its audit log is the sibling file
    out = runner.invoke(app, ["audit", "--db", str(db), "--verify"])
    assert out.exit_code == 1 and "keyed" in out.stdout
    monkeypatch.setenv("TOOLSCOUT_AUDIT_KEY", AUDIT_KEY)
    out = runner.invoke(app, ["audit", "--db", str(db), "--head"])
    assert out.exit_code == 0, out.output
    head = out.stdout.strip()
    assert head.startswith("3:")
    out = runner.invoke(app, ["audit", "--db", str(db), "--verify", "--expect-head", head])
    assert out.exit_code == 0 and "intact: 3 records" in out.stdout
    out = runner.invoke(app, ["audit", "--audit-db", str(path), "--json"])
    assert [json.loads(line)["subject"] for line in out.stdout.splitlines()] == ["u0", "u1", "u2"]
    path.write_bytes(b"")
    out = runner.invoke(app, ["audit", "--db", str(db), "--verify", "--expect-head", head])
    assert out.exit_code == 1 and "NOT VERIFIED" in out.stdout and "erased" in out.stdout
    out = runner.invoke(app, ["audit", "--db", str(db), "--verify", "--expect-head", "3:zz"])
    assert out.exit_code == 2 and "not an audit head" in out.stderr


def test_audit_reads_a_read_only_file_without_changing_it(tmp_path: Path) -> None:
    db = tmp_path / "toolscout.db"
    _fill(db)
    sqlite3.connect(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").connection.close()
    (tmp_path / "toolscout.db-wal").unlink(missing_ok=True)
    (tmp_path / "toolscout.db-shm").unlink(missing_ok=True)
    before = db.read_bytes()
    db.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        out = runner.invoke(app, ["audit", "--db", str(db), "--json"])
        assert out.exit_code == 0, out.output
        assert len(out.stdout.splitlines()) == 2
        out = runner.invoke(app, ["audit", "--db", str(db), "--verify"])
        assert out.exit_code == 0, out.output
    finally:
        tmp_path.chmod(0o755)
        db.chmod(0o644)
    assert db.read_bytes() == before
