"""The test suite's own hygiene: nothing in it depends on how long the whole suite takes."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import jwt
import pytest

from demo_fixture import _shared, demo_db_copy
from serve_fixture import TOKEN_TTL_S, token

TESTS = Path(__file__).resolve().parent
#: functions that mint a token with the library's short default lifetime (15 minutes)
SHORT_LIVED = {"issue_token"}
#: helpers that mint a short-lived token unless given ttl_seconds
SHORT_HELPERS = {"_gateway_kit": {"token", "expired_token"}}


def _calls(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def _name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def test_tokens_of_the_serve_fixture_outlive_any_suite_run() -> None:
    claims = jwt.decode(token(), options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] >= TOKEN_TTL_S >= 86400


def short_lived_offenders() -> list[str]:
    """``file:line`` of every module-level call that mints a short-lived token."""
    offenders = []
    for path in sorted(TESTS.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        imported: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module in SHORT_HELPERS:
                imported |= {a.asname or a.name for a in node.names} & SHORT_HELPERS[node.module]
        if path.stem == "_gateway_kit":
            imported |= SHORT_HELPERS["_gateway_kit"]
        for node in tree.body:  # module level only: functions run when a test runs
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            for call in _calls(node):
                short = _name(call) in SHORT_LIVED | imported
                if short and not any(k.arg == "ttl_seconds" for k in call.keywords):
                    offenders.append(f"{path.name}:{call.lineno}")
    return offenders


def test_no_module_mints_a_short_lived_token_at_import() -> None:
    """A token minted at import with a 15-minute lifetime expired after 20 minutes of a
    loaded run of `make test` (12 failures). Module-level code may mint only through
    serve_fixture.token (long-lived) or with an explicit ttl_seconds.

    The files are parsed in a fresh interpreter: in CPython 3.11 an earlier test's
    RecursionError can leave the AST validator's depth count wrong for the rest of the
    process ("AST constructor recursion depth mismatch"), whatever is parsed next."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); "
        "from test_fixtures import short_lived_offenders; "
        "print(json.dumps(short_lived_offenders()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(TESTS)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    offenders = json.loads(proc.stdout)
    assert not offenders, f"tokens minted at import with a short lifetime: {offenders}"


def test_a_shared_catalog_copies_under_its_own_name_in_one_process(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without xdist the run's common directory is the process's own base, the one a kit
    copies into (``_adapters_kit.demo_db``: ``<base>/adapters-demo``): the shared build must
    not be that same folder (it was: 15 errors of ``shutil.SameFileError``)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # as in one process
    built: list[Path] = []

    def build(db: Path) -> None:
        db.write_text("catalog\n")
        db.with_suffix(".audit").write_text("log\n")
        built.append(db)

    name = "kit-selftest"
    shared = _shared(tmp_path_factory, name, build)
    assert _shared(tmp_path_factory, name, build) == shared and len(built) == 1  # built once
    into = tmp_path_factory.getbasetemp() / name
    copy = demo_db_copy(shared, into)
    assert copy == into / "demo.db" and copy.read_text() == "catalog\n"
    assert (into / "demo.audit").read_text() == "log\n"
    with pytest.raises(ValueError, match="its own directory"):
        demo_db_copy(shared, shared.parent)
