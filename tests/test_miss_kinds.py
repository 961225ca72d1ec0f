"""benchmarks/miss_kinds.py: where a gold tool was lost, the properties a miss is described
by, and the tables (synthetic runs and a small synthetic catalog only)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import miss_kinds as mk  # noqa: E402


def _view(**kw: object) -> mk.GoldView:
    base: dict[str, object] = {
        "shown": ("a", "b", "c", "d", "e", "f", "g"),
        "no_dedupe": ("a", "b", "c", "d", "e", "f", "g"),
        "candidates": ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"),
        "lexical": frozenset("abcdefghijkl"),
        "dense": frozenset("abcdefghijkl"),
    }
    base.update(kw)
    return mk.GoldView(**base)  # type: ignore[arg-type]


def test_a_gold_tool_in_the_top_five_is_not_a_miss() -> None:
    assert mk.stage_of("c", _view()) is None


def test_each_stage_is_where_the_gold_tool_was_lost() -> None:
    assert mk.stage_of("f", _view()) == "ranked 6-10"
    assert mk.stage_of("l", _view()) == "ranked 11+"
    assert mk.stage_of("z", _view()) == "never retrieved"
    # in the retrieval's first five, pushed out by what selection puts in front
    front = ("x", "y", "a", "b", "c", "e")
    assert mk.stage_of("e", _view(shown=front, no_dedupe=front)) == "displaced"
    # in the top five only with the near-duplicate rule off
    dd = _view(shown=("a", "b", "c", "d", "f", "e"), no_dedupe=("a", "b", "c", "d", "e"))
    assert mk.stage_of("e", dd) == "dedupe"
    # a refused or abstained request loses every gold tool there, whatever retrieval did
    assert mk.stage_of("z", _view(shown=(), refused=True)) == "refused"
    assert mk.stage_of("a", _view(shown=(), abstained=True)) == "abstained"
    # only one pool held it: still retrieved, so lost to the ranking
    only_dense = _view(candidates=("a",) * 0, lexical=frozenset(), dense=frozenset({"q"}))
    assert mk.stage_of("q", only_dense) == "ranked 11+"
    assert mk.found_by("q", only_dense) == "dense only"


def test_the_name_match_reads_verbatim_stemmed_partly_and_none() -> None:
    assert mk.name_match(["refund", "order"], ["refund", "order"], ["refund", "order", "x"],
                         ["refund", "order", "x"]) == "verbatim"  # fmt: skip
    assert mk.name_match(["refunds"], ["refund"], ["refund"], ["refund"]) == "stemmed"
    assert mk.name_match(["refund", "order"], ["refund", "order"], ["refund"], ["refund"]) == (
        "partly"
    )
    assert mk.name_match(["refund"], ["refund"], ["ship"], ["ship"]) == "none"
    assert mk.name_match([], [], ["ship"], ["ship"]) == "none"


def test_length_buckets_cover_every_length_once() -> None:
    labels = [mk.length_bucket(n) for n in range(0, 200)]
    assert labels[10] == "≤10 words" and labels[11] == "11-30 words"
    assert labels[64] == "31-64 words" and labels[65] == ">64 words"
    assert set(labels) == {label for _, _, label in mk.LENGTHS}


def test_the_tally_counts_stages_and_properties_of_missed_against_found() -> None:
    t = mk.Tally()
    t.add(None, ["short", "long request"])
    t.add("dedupe", ["short"])
    t.add("ranked 6-10", ["short", "long request"])
    out = t.to_json()
    assert out["gold"] == 3 and out["gold_missed"] == 2
    assert out["stages"]["dedupe"] == 1 and out["stages"]["ranked 6-10"] == 1
    assert out["stages"]["never retrieved"] == 0
    assert out["properties"]["short"] == {"missed": 2, "found": 1}
    assert out["by_stage"]["dedupe"] == {"short": 1}
    table = mk.render({"s": out})
    assert "| s | 0 | 0 | 2 of 3 |" in table
    assert "| short | 100% / 100% |" in table
    assert "| long request | 50% / 100% |" in table


def test_properties_describe_the_card_and_the_request() -> None:
    facts = {
        "derived": True,
        "summary_words": 2,
        "shared_summary": True,
        "name_words": ["refund", "order"],
        "name_terms": ["refund", "order"],
        "card_terms": frozenset({"refund", "order", "payment"}),
        "over_128": False,
        "full_view_over_128": False,
    }
    v = _view(exact=frozenset({"b"}), parts=2)
    props = mk.properties(facts, v, "a", "please refund my payment", ["refund"], ["payment"], 1)
    assert "name in request: partly" in props
    assert "summary empty (derived)" in props and "summary shared with another card" in props
    assert "another tool named in the request" in props and "read in parts" in props
    assert "request ≤10 words" in props and "pools: both" in props
    assert not any(p.startswith("no term shared") or p.startswith("shared terms") for p in props)
    # the only shared term was pruned as frequent
    pruned = mk.properties(facts, _view(), "a", "payment now", [], ["payment"], 7)
    assert "shared terms all pruned as frequent" in pruned and "more than 5 gold tools" in pruned
    none = mk.properties(facts, _view(), "a", "ship it", ["ship"], [], 1)
    assert "no term shared with the card" in none and "name in request: none" in none
