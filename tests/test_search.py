from __future__ import annotations

import numpy as np
import pytest

from support import spec
from toolscout.discovery.search import Candidate, PhraseIndex, _fuse, parse_query, select
from toolscout.errors import ConfigError, QueryError
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits


def test_parse_query_validates() -> None:
    s = SearchSettings()
    for bad in ("", "   \n"):
        with pytest.raises(QueryError, match="empty"):
            parse_query(bad, {}, 10, s)
    with pytest.raises(QueryError, match="102400 characters"):
        parse_query("x" * 102_400, {}, 10, s)


def test_frequent_terms_are_pruned_but_never_all() -> None:
    df = {"fetch": 900, "weather": 3}
    q = parse_query("fetch the weather", df, 1000, SearchSettings())
    assert q.terms == ("weather",) and q.dropped == ("fetch",)
    only_common = parse_query("fetch", df, 1000, SearchSettings())
    assert only_common.terms == ("fetch",)


def test_phrase_index_matches_every_spelling() -> None:
    specs = [
        spec("cloud.terminate_batch_process", aliases=["kill the stuck job"]),
        spec("orders.find_order"),
        spec("x.speak", name="speak"),
    ]
    idx = PhraseIndex(specs, df={"speak": 40})
    allowed = frozenset(s.id for s in specs)
    for text in (
        "please run terminate_batch_process",
        "terminateBatchProcess now",
        "terminate batch process",
        "cloud.terminate_batch_process",
    ):
        assert "cloud.terminate_batch_process" in idx.find(text, allowed)
    assert idx.find("kill the stuck job please", allowed) == {
        "cloud.terminate_batch_process": "alias"
    }
    assert idx.find("find_order 12", frozenset()) == {}  # never outside the entitled set
    assert idx.find("speak to me", allowed) == {}  # common one-word names are not mentions


def test_weighted_fusion_mixes_normalised_scores() -> None:
    lex = Hits(["a", "b"], [10.0, 5.0])
    dense = Hits(["b", "c", "a"], [0.8, 0.6, 0.4])
    cands = _fuse(lex, dense, 0.5, SearchSettings())
    scores = {c.id: round(c.fused, 3) for c in cands}
    # a: 0.5*1.0 + 0.5*0.0 ; b: 0.5*0.5 + 0.5*1.0 ; c: 0 + 0.5*0.5
    assert scores == {"a": 0.5, "b": 0.75, "c": 0.25}
    assert [c.id for c in cands] == ["b", "a", "c"]


def test_rrf_fusion() -> None:
    cands = _fuse(
        Hits(["a"], [1.0]), Hits(["b", "a"], [0.9, 0.1]), 0.5, SearchSettings(fusion="rrf")
    )
    assert cands[0].id == "a"


def test_settings_validate() -> None:
    with pytest.raises(ConfigError):
        SearchSettings(lexical=False, dense=False)
    with pytest.raises(ConfigError):
        SearchSettings(dense_weight=1.5)
    with pytest.raises(ConfigError):
        SearchSettings(fusion="magic")


def _cands(*ids: str) -> list[Candidate]:
    return [Candidate(t, fused=1.0 - i * 0.1) for i, t in enumerate(ids)]


def test_select_forces_exact_hits_and_suppresses_duplicates() -> None:
    base = np.eye(4, dtype=np.float32)
    vecs = {"a": base[0], "a2": base[0], "b": base[1], "c": base[2], "x": base[3]}
    chosen = select(
        _cands("a", "a2", "b", "c"),
        {"x": "name"},
        3,
        dedupe=True,
        card_vectors=lambda ids: {i: vecs[i] for i in ids if i in vecs},
    )
    assert [c.id for c in chosen] == ["x", "a", "b"]
    assert chosen[0].exact == "name"
    no_dedupe = select(_cands("a", "a2", "b"), {}, 2, dedupe=False, card_vectors=None)
    assert [c.id for c in no_dedupe] == ["a", "a2"]


def test_a_near_duplicate_yields_only_to_a_distinct_tool_nearly_as_likely() -> None:
    base = np.eye(3, dtype=np.float32)
    vecs = {"a": base[0], "a2": base[0], "b": base[1], "c": base[2]}

    def pick(scores: dict[str, float], yield_: float) -> list[str]:
        cands = [Candidate(t, fused=f) for t, f in scores.items()]
        chosen = select(
            cands,
            {},
            2,
            dedupe=True,
            dedupe_yield=yield_,
            card_vectors=lambda ids: {i: vecs[i] for i in ids if i in vecs},
        )
        return [c.id for c in chosen]

    close = {"a": 1.0, "a2": 0.9, "b": 0.8, "c": 0.1}
    far = {"a": 1.0, "a2": 0.9, "b": 0.2, "c": 0.1}
    # 0 is the plain rule: any distinct tool goes before a copy
    assert pick(far, 0.0) == ["a", "b"]
    # a distinct tool scoring half the copy's score or more takes its place ...
    assert pick(close, 0.5) == ["a", "b"]
    # ... one far less likely does not
    assert pick(far, 0.5) == ["a", "a2"]
    # with nothing distinct below, the copy keeps its place whatever the share
    assert pick({"a": 1.0, "a2": 0.9}, 0.0) == ["a", "a2"]
    with pytest.raises(ConfigError, match="dedupe_yield"):
        SearchSettings(dedupe_yield=1.5)


def test_select_respects_token_budget_but_keeps_one() -> None:
    cost = {"a": 300, "b": 100, "c": 500}
    chosen = select(
        _cands("a", "b", "c"),
        {},
        3,
        dedupe=False,
        card_vectors=None,
        token_cost=cost.__getitem__,
        token_budget=450,
    )
    assert [c.id for c in chosen] == ["a", "b"]
    tiny = select(
        _cands("c", "b"),
        {},
        2,
        dedupe=False,
        card_vectors=None,
        token_cost=cost.__getitem__,
        token_budget=10,
    )
    assert [c.id for c in tiny] == ["c"]


def test_everyday_phrases_are_not_mentions() -> None:
    specs = [spec("x.help_me", name="help_me"), spec("x.get_weather", name="get_weather")]
    idx = PhraseIndex(specs, df={})
    allowed = frozenset(s.id for s in specs)
    assert idx.find("can you help me plan my day", allowed) == {}
    assert idx.find("call help_me now", allowed) == {"x.help_me": "name"}
    assert idx.find("use getWeather for Paris", allowed) == {"x.get_weather": "name"}
    assert idx.find("get weather in Paris", allowed) == {}


def test_a_rescored_candidate_keeps_every_other_field() -> None:
    """``Candidate.rescored`` names its fields one by one: a field added later and not
    passed there would be reset without this."""
    from dataclasses import fields, replace

    given = {f.name: (f"{f.name}-value" if f.type == "str" else 0.25) for f in fields(Candidate)}
    c = Candidate(**given)  # type: ignore[arg-type]
    assert c.rescored(0.75) == replace(c, fused=0.75)
