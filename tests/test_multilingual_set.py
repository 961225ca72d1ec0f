"""The multilingual request set (benchmarks/multilingual/queries.jsonl) and its two helpers.

The file is measurement data: no test asserts on what retrieval finds for it. These check
its shape against the draw its README describes (``check_draw.py``: 300 originals, seven
languages, gold and source unchanged) and that the helpers catch what they are for.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from support import BENCH

HERE = Path(__file__).resolve().parents[1] / "benchmarks" / "multilingual"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"ml_{name}", HERE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_draw = _load("check_draw")
by_part = _load("by_part")


def _original(n: int, gold: list[str]) -> dict[str, Any]:
    return {"id": f"shop:{n}", "query": f"Please list my open invoices number {n}",
            "gold": gold, "source": "shop"}  # fmt: skip


def _rows(originals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{o['id']}#{lang}",
            "of": o["id"],
            "lang": lang,
            "query": o["query"] if lang == "en" else f"{lang} {o['query']}",
            "gold": list(o["gold"]),
            "source": o["source"],
        }
        for o in originals
        for lang in check_draw.LANGS
    ]


def test_the_committed_file_is_the_draw_in_seven_languages() -> None:
    if not BENCH.is_dir():
        pytest.skip(f"the dev sets are expected beside the repo at {BENCH}")
    rows = check_draw._rows(check_draw.QUERIES)
    originals = check_draw.expected(BENCH)
    assert len(originals) == 300
    assert len(rows) == 2100
    assert check_draw.problems(rows, originals) == []
    langs = {r["lang"] for r in rows}
    assert langs == set(check_draw.LANGS)


def test_check_names_a_changed_gold_a_repeated_id_and_an_untranslated_row() -> None:
    originals = [_original(1, ["shop:list"]), _original(2, ["shop:list", "shop:pay"])]
    rows = _rows(originals)
    assert check_draw.problems(rows, originals) == []
    rows[1]["gold"] = ["shop:pay"]
    rows[9]["id"] = rows[8]["id"]
    rows[12]["query"] = originals[1]["query"]
    found = check_draw.problems(rows, originals)
    assert any(line.startswith("row 2: gold") for line in found), found
    assert any("ids repeated" in line for line in found), found
    assert any(line.startswith("row 13: the ja query is the English text") for line in found)
    assert any(
        line.startswith("row 8: missing") for line in check_draw.problems(rows[:7], originals)
    )


def test_parts_count_a_request_complete_only_when_every_gold_tool_is_found() -> None:
    scores = {
        "a": {"en": 1.0, "fr": 0.5},
        "b": {"en": 1.0, "fr": 1.0},
        "c": {"en": 0.0, "fr": 0.0},
        "d": {"en": 0.5, "fr": 0.0},
    }
    s = by_part.summary(scores)
    assert s["recall@5"]["en"] == pytest.approx(0.625)
    assert s["complete@5"]["en"] == pytest.approx(0.5)
    assert s["complete@5"]["fr"] == pytest.approx(0.25)
    assert s["gap_to_en"]["fr"]["gap"] == pytest.approx(0.25)
    run = {"results": {"m": {"per_request": {"hybrid": scores}}}}
    parts = by_part.split(run, ["a", "b", "c", "d"], [2, 2])
    assert parts["m/hybrid"]["1-2"]["recall@5"]["fr"] == pytest.approx(0.75)
    assert parts["m/hybrid"]["3-4"]["recall@5"]["en"] == pytest.approx(0.25)
    with pytest.raises(SystemExit, match="add up to 3"):
        by_part.split(run, ["a", "b", "c", "d"], [2, 1])


def test_by_part_reads_the_original_ids_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    rows = _rows([_original(2, ["shop:list"]), _original(1, ["shop:list"])])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert by_part.originals(path) == ["shop:2", "shop:1"]


def test_lost_pairs_classes_follow_round_twelves_reading() -> None:
    lost_pairs = _load("lost_pairs")
    # (English default, translation default, English dense, translation dense)
    assert lost_pairs.classify(1.0, 1.0, 1.0, 0.0) is None
    assert lost_pairs.classify(0.5, 1.0, 0.0, 0.0) is None
    assert lost_pairs.classify(1.0, 0.0, 1.0, 0.0) == "dense"
    assert lost_pairs.classify(1.0, 0.0, 0.0, 0.0) == "lexical"
    assert lost_pairs.classify(1.0, 0.5, 0.5, 0.5) == "lexical"
    assert lost_pairs.classify(1.0, 0.0, 1.0, 1.0) == "fusion"
