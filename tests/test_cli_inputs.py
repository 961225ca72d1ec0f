"""Bad input to the command line: one clear line on stderr, exit 2, the database unchanged.

Every case runs ``toolscout`` as a real process on a real SQLite file and compares
the file's bytes before and after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fork_kit import toolscout as fork_toolscout
from mini_fixture import mini_indexed  # noqa: F401  (fixture)
from support import FIXTURES, copy_catalog

MINI = FIXTURES / "mini_tools.jsonl"


def run(*args: str, db: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = fork_toolscout(*args)  # a process forked with the imports done (fork_kit)
    if db is not None:
        argv += ["--db", str(db)]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)


def assert_clean_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def db(mini_indexed: Path, tmp_path: Path) -> Path:  # noqa: F811
    """A copy of the mini catalog, indexed once per run (``mini_fixture``)."""
    return copy_catalog(mini_indexed, tmp_path / "catalog.db")


def write_cards(folder: Path, name: str, body: str, policy: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(body)
    if policy is not None:
        (folder / "policy.yaml").write_text(policy)
    return folder


def test_binary_and_non_utf8_card_files(db: Path, tmp_path: Path) -> None:
    before = db.read_bytes()
    for name in ("blob.yaml", "blob.json"):
        (tmp_path / name).write_bytes(bytes(range(256)) * 8)
        assert_clean_error(run("index", str(tmp_path / name), db=db), name, "binary file")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"tools:\n  - id: a.b\n    summary: caf\xe9 au lait\n")
    assert_clean_error(run("index", str(latin), db=db), "latin.yaml:3", "not UTF-8")
    escaped = tmp_path / "escaped.jsonl"  # valid UTF-8 whose JSON escapes are not text
    escaped.write_text('{"id": "a.b", "description": "lone \\ud800 surrogate"}\n')
    assert_clean_error(run("index", str(escaped), db=db), "escaped.jsonl:1", "lone surrogate")
    assert db.read_bytes() == before


def test_index_into_a_read_only_database(db: Path) -> None:
    """The refusal reads the mode bits, so it holds for a superuser too."""
    before = db.read_bytes()
    db.chmod(0o444)
    try:
        assert_clean_error(run("index", str(MINI), db=db), "read-only (mode 0444)")
    finally:
        db.chmod(0o644)
    assert db.read_bytes() == before


def test_corrupted_database(db: Path) -> None:
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 4 * page
    data[3 * page : 4 * page] = b"\xff" * page
    db.write_bytes(bytes(data))
    assert_clean_error(run("search", "weather in Paris", db=db), "corrupted")
    assert_clean_error(run("index", str(MINI), db=db), "corrupted")
    assert db.read_bytes() == bytes(data)


def test_files_that_are_not_catalogs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    assert_clean_error(run("search", "weather", db=empty), "empty file, not a toolscout catalog")
    assert empty.stat().st_size == 0
    text = tmp_path / "notes.db"
    text.write_text("hello, this is not a database\n" * 10)
    before = text.read_bytes()
    assert_clean_error(run("search", "weather", db=text), "not an SQLite database")
    assert_clean_error(run("index", str(MINI), db=text), "not an SQLite database")
    assert text.read_bytes() == before
    other = tmp_path / "other.db"
    import sqlite3

    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = other.read_bytes()
    assert_clean_error(run("search", "weather", db=other), "not a toolscout catalog")
    assert other.read_bytes() == before


@pytest.fixture
def holder(db: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the database's write lock."""
    code = (
        "import sqlite3, sys, time\n"
        "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "con.execute('BEGIN IMMEDIATE')\n"
        "print('locked', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    yield proc
    proc.kill()
    proc.wait()
    proc.stdout.close()


def test_index_into_a_locked_database(
    db: Path, holder: subprocess.Popen[str], tmp_path: Path
) -> None:
    before = db.read_bytes()
    changed = tmp_path / "more.jsonl"
    changed.write_text(MINI.read_text().replace("next days", "coming days"))
    start = time.perf_counter()
    assert_clean_error(run("index", str(changed), db=db), "locked by another writer")
    assert time.perf_counter() - start < 60
    assert db.read_bytes() == before


def test_yaml_alias_bomb_does_not_hang_index(db: Path, tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    lines.append("tools:\n  - id: a.b\n    summary: x\n    tags: *a9")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    before = db.read_bytes()
    proc = run("index", str(bomb), db=db)
    assert_clean_error(proc, "bomb.yaml", "alias bomb")
    assert db.read_bytes() == before


POLICY_A = "admin_scope: toolscout:admin\nroles:\n  support: [orders:read]\n"
POLICY_B = "admin_scope: toolscout:admin\nroles:\n  support: [orders:read, orders:write]\n"
ORDERS = """service: orders
tools:
  - id: orders.find_order
    summary: Retrieve one order by its id.
    scopes: [orders:read]
  - id: orders.cancel_order
    summary: Cancel an order that has not shipped.
    scopes: [orders:write]
    risk: write
"""


def test_search_with_nothing_entitled_says_why(tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    cards = write_cards(tmp_path / "cat", "orders.yaml", ORDERS, POLICY_A)
    first = run("index", str(cards), db=db)
    assert first.returncode == 0, first.stderr
    assert "policy: stored" in first.stdout  # a catalog without a policy adopts it, and says so
    proc = run("search", "where is my order", db=db)
    assert_clean_error(
        proc, "nothing is entitled", "all 2 tools", "missing_scope", "no --scopes or --roles"
    )
    assert "policy roles: support" in proc.stderr
    assert_clean_error(run("search", "order", "--roles", "admin", db=db), "admin are not in")
    ok = run("search", "where is my order", "--roles", "support", "--json", db=db)
    assert ok.returncode == 0, ok.stderr
    assert [t["id"] for t in json.loads(ok.stdout)["tools"]] == ["orders.find_order"]


def test_policy_beside_the_catalog_needs_a_flag_to_replace(tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    first = write_cards(tmp_path / "one", "orders.yaml", ORDERS, POLICY_A)
    assert run("index", str(first), db=db).returncode == 0
    before = db.read_bytes()
    second = write_cards(tmp_path / "two", "orders.yaml", ORDERS, POLICY_B)
    proc = run("index", str(second), db=db)
    assert_clean_error(proc, "policy.yaml differs from the policy stored", "--replace-policy")
    assert db.read_bytes() == before
    # the stored policy is still A: support cannot see the write tool
    seen = run("search", "cancel the order", "--roles", "support", "--json", db=db)
    assert "orders.cancel_order" not in [t["id"] for t in json.loads(seen.stdout)["tools"]]
    replaced = run("index", str(second), "--replace-policy", db=db)
    assert replaced.returncode == 0, replaced.stderr
    assert f"policy: stored {second / 'policy.yaml'}" in replaced.stdout
    seen = run("search", "cancel the order", "--roles", "support", "--json", db=db)
    assert "orders.cancel_order" in [t["id"] for t in json.loads(seen.stdout)["tools"]]
    again = run("index", str(second), db=db)
    assert again.returncode == 0 and "(unchanged)" in again.stdout
    assert_clean_error(
        run("index", str(MINI), "--replace-policy", db=db), "no policy.yaml beside the catalog"
    )


MESSY = [
    {
        "id": "rapid:getWeatherForecast",
        "description": "",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
    {
        "id": "mcp:run_sql_query",
        "description": "Run a read-only SQL query against the analytics warehouse.",
        "parameters": {
            "type": "object",
            "properties": {
                "sql": {"type": "string", "required": True},
                "timeout": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                "limit": {"type": "integer", "maximum": "50"},
            },
        },
    },
    {"id": "rapid:convertCurrency", "description": " ", "parameters": {}},
    {"id": "clean:send_email", "description": "Send an email to a recipient.", "parameters": {}},
]


def test_messy_catalog_imports_with_warnings_and_is_searchable(tmp_path: Path) -> None:
    tools = tmp_path / "messy.jsonl"
    tools.write_text("".join(json.dumps(r) + "\n" for r in MESSY))
    db = tmp_path / "messy.db"
    strict = run("index", str(tools), "--strict", db=db)
    assert_clean_error(strict, "messy.jsonl:1", "summary", "strict")
    assert not db.exists()  # refused before anything was opened
    proc = run("index", str(tools), db=db)
    assert proc.returncode == 0, proc.stderr
    assert "4 added" in proc.stdout
    assert "2 × empty_summary" in proc.stderr and "rapid:getWeatherForecast" in proc.stderr
    assert "1 × invalid_schema" in proc.stderr and "mcp:run_sql_query" in proc.stderr
    again = run("index", str(tools), "--json", db=db)
    report = json.loads(again.stdout)
    assert report["unchanged"] == 4 and report["warning_counts"] == {
        "empty_summary": 2,
        "invalid_schema": 1,
    }
    assert {(w["tool_id"], w["kind"]) for w in report["warnings"]} == {
        ("rapid:getWeatherForecast", "empty_summary"),
        ("rapid:convertCurrency", "empty_summary"),
        ("mcp:run_sql_query", "invalid_schema"),
    }
    assert all(w["where"].startswith(str(tools) + ":") for w in report["warnings"])
    found = run("search", "weather forecast for Lyon", "--json", "--tier", "progressive", db=db)
    assert json.loads(found.stdout)["tools"][0]["id"] == "rapid:getWeatherForecast"
    schema = run("schema", "mcp:run_sql_query", "--format", "mcp", db=db)
    assert json.loads(schema.stdout)["inputSchema"]["properties"]["limit"]["maximum"] == "50"


ADMIN_TOOL = """service: acme
tools:
  - id: users.reset_password
    summary: Reset a user's password.
    scopes: [users:admin]
    tenants: [acme]
    risk: admin
"""


def test_reimport_cannot_widen_or_take_over_a_tool(tmp_path: Path) -> None:
    db = tmp_path / "users.db"
    acme = write_cards(tmp_path / "acme", "users.yaml", ADMIN_TOOL)
    assert run("index", str(acme), db=db).returncode == 0
    before = db.read_bytes()
    other = write_cards(
        tmp_path / "other",
        "users.yaml",
        ADMIN_TOOL.replace("service: acme", "service: globex")
        .replace("[users:admin]", "[]")
        .replace("tenants: [acme]", "tenants: [globex]")
        .replace("risk: admin", "risk: read"),
    )
    proc = run("index", str(other), db=db)
    assert_clean_error(
        proc, "import refused", "users.reset_password", "source", "tenants", "risk", "--force"
    )
    assert db.read_bytes() == before
    widened = write_cards(tmp_path / "wide", "users.yaml", ADMIN_TOOL.replace("[acme]", "[]"))
    assert_clean_error(run("index", str(widened), db=db), "every tenant (widened)")
    assert db.read_bytes() == before
    forced = run("index", str(widened), "--force", db=db)
    assert forced.returncode == 0, forced.stderr
    assert "1 updated" in forced.stdout and "forced: users.reset_password" in forced.stdout
    renamed = write_cards(
        tmp_path / "same", "users.yaml", ADMIN_TOOL.replace("[acme]", "[]").replace("a user", "one")
    )
    fine = run("index", str(renamed), "--json", db=db)
    (change,) = json.loads(fine.stdout)["changes"]["updated"]
    assert [c["field"] for c in change["changes"]] == ["summary"]


def test_arguments_that_are_not_utf8(db: Path) -> None:
    before = db.read_bytes()
    query = os.fsdecode(b"weather in Paris \xff\xfe")
    assert_clean_error(run("search", query, db=db), "the query is not valid UTF-8", "0xff")
    tenant = os.fsdecode(b"acme\xe9")
    assert_clean_error(run("search", "weather", "--tenant", tenant, db=db), "--tenant", "0xe9")
    assert db.read_bytes() == before
