"""``toolscout eval`` through the real ``toolscout`` typer app, in-process (CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from support import FIXTURES
from toolscout.cli.app import mounted

app = mounted()  # every command, as `toolscout` without arguments has them

EVAL = FIXTURES / "eval"
ARGS = ["eval", "--tools", str(EVAL / "tools.jsonl"), "--queries", str(EVAL / "queries.jsonl")]


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


def test_json_report_and_out_file(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "r.json"
    result = runner.invoke(
        app, [*ARGS, "-s", "bm25", "-s", "naive", "--k", "1,5", "--json", "--out", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert list(report["strategies"]) == ["bm25", "naive"]
    assert report["k"] == [1, 5]
    assert set(report["strategies"]["bm25"]) >= {"recall@1", "recall@5", "ndcg@10", "mrr@10"}
    assert "recall@3" not in report["strategies"]["bm25"]
    assert json.loads(out.read_text(encoding="utf-8")) == report


def test_table_and_failures(runner: CliRunner) -> None:
    result = runner.invoke(app, [*ARGS, "-s", "bm25", "--failures", "1", "--no-progress"])
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "bm25" in text and "R@5" in text and "p95 ms" in text and "tokens@5" in text
    assert "8 tools, 5 of 5 queries scored" in text
    assert text.count("lost at retrieval") + text.count("lost at policy") == 1


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--k", "0,5"], "each k must be between 1 and 10"),
        (["-s", "fastest"], "unknown strategy 'fastest'"),
    ],
)
def test_bad_options_are_one_line_errors(
    runner: CliRunner, extra: list[str], fragment: str
) -> None:
    result = runner.invoke(app, [*ARGS, *extra])
    assert result.exit_code == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]


def test_bad_queries_file_names_file_and_line(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "queries.jsonl"
    bad.write_text('{"id": "q1", "query": "x", "gold": ["fx:chat.send_message"]}\n{oops\n')
    args = ["eval", "--tools", str(EVAL / "tools.jsonl"), "--queries", str(bad)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert lines == [
        f"error: {bad}:2: invalid JSON: Expecting property name enclosed in double quotes"
    ]


def test_no_gold_id_in_the_catalog_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        '{"id": "q1", "query": "pay my bill", "gold": ["other:billing.pay"]}\n'
        '{"id": "q2", "query": "send a message", "gold": ["other:chat.send"]}\n'
    )
    args = ["eval", "--tools", str(EVAL / "tools.jsonl"), "--queries", str(queries)]
    result = runner.invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {queries}: none of the 2 queries")
    assert "'other:billing.pay'" in lines[0]
