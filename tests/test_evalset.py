"""Tests for toolscout.evaluate.evalset: reading eval sets, seeded samples, the warm split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import FIXTURES
from toolscout.errors import CatalogFileError, ConfigError
from toolscout.evaluate.evalset import (
    EvalQuery,
    QueryFileError,
    read_queries,
    read_tools,
    sample,
    split_history,
)

EVAL = FIXTURES / "eval"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reads_the_fixture() -> None:
    queries = read_queries(EVAL / "queries.jsonl")
    assert [q.id for q in queries] == [f"fx:q{i}" for i in range(1, 6)]
    assert queries[2].gold == ("fx:calendar.schedule_meeting", "fx:chat.send_message")
    specs, renamed = read_tools(EVAL / "tools.jsonl")
    assert len(specs) == 8 and renamed == {}
    salary = next(s for s in specs if s.id == "fx:hr.view_salary")
    assert salary.card.tenants == ("acme",) and salary.card.summary.startswith("Look up")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "each line must be a JSON object"),
        ('{"id": "", "query": "q", "gold": ["t"]}', "'id' must be a non-empty string"),
        ('{"id": "q9", "query": "  ", "gold": ["t"]}', "query q9: 'query' must be a non-empty"),
        ('{"id": "q9", "query": "q", "gold": []}', "query q9: 'gold' must be a non-empty list"),
        ('{"id": "q9", "query": "q", "gold": "t"}', "'gold' must be a non-empty list"),
        ('{"id": "q9", "query": "q", "gold": ["t"], "source": 3}', "'source' must be a string"),
        ('{"id": "q1", "query": "again", "gold": ["t"]}', "duplicate query id 'q1'"),
    ],
)
def test_bad_queries_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    good = json.dumps({"id": "q1", "query": "find a tool", "gold": ["t"]})
    path = _write(tmp_path / "queries.jsonl", [good, "", line])
    with pytest.raises(QueryFileError) as info:
        read_queries(path)
    assert str(info.value).startswith(f"{path}:3: ")
    assert message in str(info.value)
    assert info.value.line == 3 and "\n" not in str(info.value)


def test_unreadable_or_empty_queries(tmp_path: Path) -> None:
    with pytest.raises(QueryFileError, match="cannot read"):
        read_queries(tmp_path / "absent.jsonl")
    with pytest.raises(QueryFileError, match="no queries"):
        read_queries(_write(tmp_path / "empty.jsonl", [""]))


def test_bad_tools_name_file_and_line(tmp_path: Path) -> None:
    ok = json.dumps({"id": "t1", "name": "t1", "description": "Does one thing."})
    for line, message in [
        ("{nope", "invalid JSON"),
        ("7", "each line must be a JSON object"),
        (ok, "duplicate id"),
    ]:
        path = _write(tmp_path / "tools.jsonl", [ok, line])
        with pytest.raises(CatalogFileError) as info:
            read_tools(path)
        assert str(info.value).startswith(f"{path}"), line
        assert message in str(info.value), line
        if message != "duplicate id":
            assert info.value.line == 2


def test_imperfect_real_world_tools_are_still_evaluated(tmp_path: Path) -> None:
    ok = json.dumps({"id": "t1", "name": "t1", "description": "Does one thing."})
    empty = json.dumps({"id": "t2", "description": ""})
    bad_schema = json.dumps(
        {"id": "t3", "description": "x", "parameters": {"type": "object", "properties": 3}}
    )
    specs, _ = read_tools(_write(tmp_path / "tools.jsonl", [ok, empty, bad_schema]))
    assert [s.id for s in specs] == ["t1", "t2", "t3"]
    assert specs[1].card.summary  # derived from the name


def test_ids_the_card_rules_reject_are_renamed(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "set:has\ttab", "description": "First tool."}),
        json.dumps({"id": "set:has_tab", "description": "Already takes the plain name."}),
        json.dumps({"id": "set:inner space", "description": "Inner spaces are fine."}),
    ]
    specs, renamed = read_tools(_write(tmp_path / "tools.jsonl", lines))
    new = renamed["set:has\ttab"]
    assert new.startswith("set:has_tab-") and len(new) == len("set:has_tab-") + 8
    assert [s.id for s in specs] == [new, "set:has_tab", "set:inner space"]
    assert specs[0].card.name == "set:has\ttab"  # the name people read is kept
    assert "set:inner space" not in renamed


def _queries(n: int) -> list[EvalQuery]:
    return [EvalQuery(f"q{i}", f"query number {i}", ("t",)) for i in range(n)]


def test_sample_is_seeded_and_in_file_order() -> None:
    qs = _queries(50)
    picked = sample(qs, 10)
    assert picked == sample(qs, 10) and len(picked) == 10
    assert picked != qs[:10]  # shuffled, not the head of the file
    assert [qs.index(q) for q in picked] == sorted(qs.index(q) for q in picked)
    assert sample(qs, None) == qs and sample(qs, 500) == qs
    assert sample(qs, 10, seed=1) != picked
    with pytest.raises(ConfigError):
        sample(qs, 0)


def test_split_history_is_seeded_disjoint_and_drops_shared_texts() -> None:
    qs = _queries(20)
    history, test = split_history(qs)
    assert (history, test) == split_history(qs)
    assert len(test) == 10 and len(history) == 10
    assert not {q.id for q in history} & {q.id for q in test}
    # the same request asked twice (ids differ): a history copy of a test text is dropped
    twins = [EvalQuery(f"q{i}", f"query  number {i // 2}", ("t",)) for i in range(20)]
    history2, test2 = split_history(twins)
    texts = {" ".join(q.query.split()) for q in test2}
    assert len(test2) == 10 and len(history2) < 10
    assert all(" ".join(q.query.split()) not in texts for q in history2)
