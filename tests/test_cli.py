"""The command line as a user runs it: a real process, a real SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from demo_fixture import STDOUT, demo_template  # noqa: F401  (fixture)
from fork_kit import toolscout as fork_toolscout
from mini_fixture import mini_indexed  # noqa: F401  (fixture)
from pg_fixture import pg_dsn, pg_server  # noqa: F401  (fixtures)
from support import BENCH, FIXTURES, copy_catalog
from toolscout.cards import ToolSpec, check_unique
from toolscout.discovery.indexing import embedding_texts, lexical_fields, source_hash
from toolscout.loader import read_catalog
from toolscout.stores.base import KIND_CARD

MINI = FIXTURES / "mini_tools.jsonl"


def run(
    *args: str, db: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``toolscout ARGS`` in a new process; ``timeout`` only guards against a hang."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    argv = fork_toolscout(*args)  # a process forked with the imports done (fork_kit)
    if db is not None:
        argv += ["--db", str(db)]
    return subprocess.run(argv, capture_output=True, text=True, env=full_env, timeout=timeout)


def assert_clean_error(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, mini_indexed: Path) -> Path:  # noqa: F811
    """A copy of the mini catalog as the run's one ``toolscout index`` of it left it
    (``mini_fixture``); that command's output said what it did."""
    first = (mini_indexed.parent / "index.out").read_text()
    assert "12 added" in first and "12 texts embedded" in first
    return copy_catalog(mini_indexed, tmp_path_factory.mktemp("cli") / "mini.db")


def test_reindex_embeds_nothing(db: Path) -> None:
    proc = run("index", str(MINI), db=db)
    assert (
        proc.returncode == 0 and "12 unchanged" in proc.stdout and "0 texts embedded" in proc.stdout
    )


def test_search_json(db: Path) -> None:
    proc = run("search", "what's the weather in Paris tomorrow", "-k", "2", "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["tools"][0]["id"] == "weather.get_forecast"
    assert set(data["tools"][0]) >= {"id", "score", "lexical", "dense", "confidence"}
    assert data["names"][data["schemas"][0]["function"]["name"]] == "weather.get_forecast"
    assert 0 < data["tokens"]["injected"] < data["tokens"]["catalog"]
    assert data["schemas"][0]["type"] == "function"


def test_search_table_and_formats(db: Path) -> None:
    proc = run("search", "send a mail to bob", "--format", "gemini", db=db)
    assert (
        proc.returncode == 0
        and "mail.send_email" in proc.stdout
        and "tokens injected" in proc.stdout
    )
    schema = run("schema", "mail.send_email", "--format", "mcp", db=db)
    assert json.loads(schema.stdout)["inputSchema"]["required"] == ["to", "subject", "body"]


def test_db_from_environment(db: Path) -> None:
    proc = run("schema", "math.gcd", env={"TOOLSCOUT_DB": str(db)})
    assert proc.returncode == 0 and "gcd" in proc.stdout


def test_a_command_imports_only_its_own_module(db: Path) -> None:
    """``search``/``schema`` do not import the commands that live in modules of their own
    (lint and report bring numpy's linters, call the gateway's audit log); ``lint`` imports
    its own alone; ``--help`` still lists every command."""
    show = (
        "import atexit, sys; atexit.register(lambda: print(sorted(m for m in sys.modules "
        "if m.startswith(('toolscout.cli.', 'toolscout.lint'))))); "
        "from toolscout.cli import main; main(sys.argv[1:])"
    )

    def loaded(*args: str) -> tuple[list[str], str]:
        argv = [sys.executable, "-c", show, *args]
        env = {**os.environ, "COLUMNS": "200"}
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
        *text, modules = proc.stdout.splitlines()
        return json.loads(modules.replace("'", '"')), "\n".join(text)

    modules = {f"toolscout.cli.{m}" for m in ("eval", "gateway", "lint", "report", "serve", "mcp")}
    assert not modules & set(loaded("schema", "math.gcd", "--db", str(db))[0])
    assert modules & set(loaded("lint", "--help")[0]) == {"toolscout.cli.lint"}
    every, text = loaded("--help")
    assert modules <= set(every)
    for command in ("index", "search", "schema", "demo", "eval", "call", "token", "audit"):
        assert f" {command} " in text, command
    assert all(f" {c} " in text for c in ("lint", "report", "serve", "mcp"))


def test_a_command_that_asks_no_query_loads_no_model_ahead(db: Path, tmp_path: Path) -> None:
    """``schema``, ``call`` and a re-index ask no query: opening the catalog does not start
    loading the query encoder, the stemmer and the dense index on threads that the process
    then waits for at its exit (0.1-0.2 s of CPU each, more where the model is loaded).
    ``search`` still does (what the probe would see if they did)."""
    from toolscout.gateway.auth import issue_token

    probe = (
        "import atexit, sys, threading; seen = []; start = threading.Thread.start\n"
        "def spy(t): seen.append(t.name); start(t)\n"
        "threading.Thread.start = spy\n"
        "atexit.register(lambda: print('toolscout-prefetch' in seen,\n"
        "                              'snowballstemmer' in sys.modules))\n"
        "from toolscout.cli import main; main(sys.argv[1:])"
    )
    copy = tmp_path / "mini.db"
    copy.write_bytes(db.read_bytes())
    key = "a-test-secret-of-at-least-32-bytes!"
    token = issue_token(subject="alice", scopes=[], key=key)
    args_ab = json.dumps({"a": 12, "b": 18})

    def loaded(*args: str) -> str:
        argv = [sys.executable, "-c", probe, *args, "--db", str(copy)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()[-1]

    assert loaded("search", "greatest common divisor") == "True True"
    for args in (
        ("schema", "math.gcd"),
        ("index", str(MINI)),
        ("call", "math.gcd", "--dry-run", "--token", token, "--key", key, "--args", args_ab),
    ):
        assert loaded(*args) == "False False", args


def test_bad_inputs_get_one_line_errors(db: Path, tmp_path: Path) -> None:
    assert_clean_error(run("index", str(tmp_path / "nope.jsonl"), db=db), "no such file")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(MINI.read_text() + "{oops\n")
    assert_clean_error(run("index", str(broken), db=db), ":13: invalid JSON")
    assert_clean_error(run("schema", "no.such_tool", db=db), "unknown tool id 'no.such_tool'")
    assert_clean_error(
        run("search", "weather", "--format", "cohere", db=db), "unknown format 'cohere'"
    )
    assert_clean_error(run("schema", "math.gcd", "--format", "xml", db=db), "unknown format 'xml'")
    assert_clean_error(run("search", "   ", db=db), "query is empty")
    assert_clean_error(run("search", "x" * 100_000, db=db), "limit is")
    assert_clean_error(run("search", "weather", "-k", "0", db=db), "k must be between 1 and 10")
    assert_clean_error(run("search", "weather", db=tmp_path / "missing.db"), "no catalog at")
    # the failed index left the stored catalog as it was
    proc = run("search", "factorial of 5", "--json", db=db)
    assert json.loads(proc.stdout)["tokens"]["catalog"] > 0
    assert "math.factorial" in [t["id"] for t in json.loads(proc.stdout)["tools"]]


def test_demo_runs(demo_template: Path) -> None:  # noqa: F811
    """``toolscout demo`` exits 0 (the template's build asserts it) and prints its requests'
    shortlists: the run's one ``toolscout demo --db DB`` (``demo_fixture``), its stdout."""
    out = (demo_template.parent / STDOUT).read_text()
    assert "cloud.terminate_batch_process" in out and "orders.query_freight_telemetry" in out
    assert "filtered by policy" in out and "tokens injected" in out


BFCL = BENCH / "bfcl" / "tools.jsonl"


def bfcl_sample(lines: list[str]) -> list[str]:
    """A part of bfcl's catalog, as its lines: every 32nd tool (the file runs through its
    source files in order, so the sample spans them), the 5 longest (card texts the encoder
    truncates) and every tool a factorial request could be mistaken for (``math``'s group,
    any name with "factorial"). Indexing all 1,853 tools embeds 7,392 card views with the
    real model (150-250 s of CPU, most of the suite's longest unit); this part is about a
    twenty-fourth of that. What indexing derives from a tool before the encoder (its card
    views, lexical fields and digest) is derived for every one of the 1,853 by
    ``test_every_bfcl_tool_derives_its_index_entry``, in-process."""
    longest = set(sorted(range(len(lines)), key=lambda i: len(lines[i]))[-5:])
    return [
        line
        for i, line in enumerate(lines)
        if i % 32 == 0
        or i in longest
        or json.loads(line)["group"] == "math"
        or "factorial" in json.loads(line)["name"]
    ]


@pytest.fixture(scope="module")
def bfcl_specs() -> list[ToolSpec]:
    assert BFCL.is_file(), f"the dev set is expected beside the repo at {BFCL}"
    return read_catalog([BFCL])


def test_bfcl_whole_catalog_reads(bfcl_specs: list[ToolSpec]) -> None:
    """Every one of bfcl's 1,853 tools (a real third-party catalog, messy) is read as a
    tool of its own, with its namespace: what indexing reads before it embeds."""
    specs = bfcl_specs
    assert len({s.id for s in specs}) == len(specs) == 1853
    assert all(s.id.startswith("bfcl:") for s in specs)


def test_every_bfcl_tool_derives_its_index_entry(bfcl_specs: list[ToolSpec]) -> None:
    """What ``toolscout index`` derives from each of bfcl's 1,853 tools before it embeds
    (``Indexing._indexed``: the texts embedded for it, its lexical fields, the digest of its
    inputs) derives without error and is not empty: the part of indexing the whole catalog
    that ``test_bfcl_index_then_search`` leaves to its sample."""
    specs = check_unique(bfcl_specs)
    digests = set()
    for spec in specs:
        texts = embedding_texts(spec)
        assert texts[0][0] == KIND_CARD, spec.id
        assert all(views and all(isinstance(v, str) and v.strip() for v in views)
                   for _, views in texts), spec.id  # fmt: skip
        fields = lexical_fields(spec)
        assert set(fields) == {"name", "aliases", "tags", "summary", "params", "learned"}
        assert fields["name"].strip() and all(isinstance(v, str) for v in fields.values())
        digests.add(source_hash(spec, (), "model"))
    assert len(digests) == len(specs)


def test_bfcl_index_then_search(tmp_path: Path) -> None:
    assert BFCL.is_file(), f"the dev set is expected beside the repo at {BFCL}"
    lines = bfcl_sample(BFCL.read_text().splitlines())
    tools = tmp_path / "tools.jsonl"
    tools.write_text("\n".join(lines) + "\n")
    db = tmp_path / "bfcl.db"
    # embedding the tools and fitting their calibration is a minute of CPU: on a 2-core
    # machine busy with other suites it is several, so the hang guard is longer here
    first = run("index", str(tools), db=db, timeout=2400)
    assert first.returncode == 0, first.stderr
    assert f"{len(lines)} added" in first.stdout
    again = run("index", str(tools), db=db)
    assert "0 texts embedded" in again.stdout and f"{len(lines)} unchanged" in again.stdout
    # a request written here (not a row of the evaluation set's queries.jsonl)
    proc = run(
        "search",
        "In how many orders can 8 runners finish? Work out 8 factorial.",
        "--json",
        "-k",
        "5",
        db=db,
    )
    assert "bfcl:math.factorial" in [t["id"] for t in json.loads(proc.stdout)["tools"]]


def test_index_and_search_over_postgres(pg_dsn: str) -> None:  # noqa: F811
    """``--db`` takes a postgresql:// DSN as well as a file; output never shows its password."""
    assert pg_dsn.startswith("postgresql://postgres@")
    dsn = pg_dsn.replace("postgres@", "postgres:hunter2@", 1)  # trust auth ignores it
    first = run("index", str(MINI), "--json", "--db", dsn)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["added"] == 12 and "hunter2" not in first.stdout + first.stderr
    assert ":***@" in report["db"]
    proc = run("search", "what's the weather in Paris tomorrow", "--json", "--db", dsn)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tools"][0]["id"] == "weather.get_forecast"
