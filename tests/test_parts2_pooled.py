"""A long request's parts pooled from the whole request's encoder run (round ten, h/parts2):
where each part stands in the request, the span vectors, and the retriever's use of them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support import CountingEmbedder, embedder, spec
from toolscout.discovery import parts, queryvectors
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.parts import request_parts
from toolscout.discovery.queryvectors import embed_keys, piece_spans
from toolscout.embed.base import SpanEmbedder, Vectors, span_embedder
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.policy import Principal

LONG = (
    "I'm planning a family holiday in Lisbon next month with my parents. "
    "Can you find flights from Berlin to Lisbon for four passengers? "
    "Also check the weather forecast for the first week, and convert 500 euros to dollars."
)


def test_each_part_is_found_in_the_request_even_where_a_clause_word_was_dropped() -> None:
    keys = embed_keys([LONG, *request_parts(LONG)])
    spans = piece_spans(keys[0], keys[1:])
    assert all(s is not None for s in spans)
    found = [keys[0][a:b] for a, b in (s for s in spans if s is not None)]
    assert found[1] == keys[2]
    # "and" joined the last two clauses: the part's words are found around it
    assert found[-1] == keys[-1]
    assert [a for a, _ in (s for s in spans if s is not None)] == sorted(
        a for a, _ in (s for s in spans if s is not None)
    )


def test_a_part_the_request_does_not_hold_has_no_span() -> None:
    whole = "look up the weather in paris"
    assert piece_spans(whole, ["the weather", "book a table"]) == [(8, 19), None]
    # a word is not found inside a longer one, and parts are found in order only
    assert piece_spans("weatherman says rain", ["weather"]) == [None]
    assert piece_spans("paris weather", ["weather", "paris"]) == [(6, 13), None]


def test_parts_of_text_without_spaces_are_found_too() -> None:
    text = (
        "请帮我查一下北京明天和后天的天气预报，温度用华氏度显示。"
        "另外把一百美元换算成人民币，再换算成日元。"
    )
    keys = embed_keys([text, *request_parts(text)])
    assert len(keys) == 3
    assert all(s is not None for s in piece_spans(keys[0], keys[1:]))


def test_the_request_row_is_the_plain_vector_and_each_span_is_its_own() -> None:
    enc = embedder()
    assert span_embedder(enc) is enc
    keys = embed_keys([LONG, *request_parts(LONG)])
    spans = piece_spans(keys[0], keys[1:])
    rows, covered = enc.embed_spans(keys[0], [s or (0, 0) for s in spans])
    assert np.array_equal(rows[0], enc.embed([keys[0]])[0])
    assert covered == [True] * len(spans)
    assert np.allclose(np.linalg.norm(rows[1:], axis=1), 1.0, atol=1e-5)
    alone = enc.embed(keys[1:])
    sims = rows[1:] @ alone.T
    # each pooled part is nearer its own text encoded alone than any other part's
    assert list(sims.argmax(axis=1)) == list(range(len(spans)))


def test_a_span_past_the_models_length_is_not_read() -> None:
    short = MiniLMEmbedder(max_tokens=16, spin_wait=False)
    text = "restart the payments pod " + "then check the disk usage of every node " * 4
    spans = piece_spans(text, ["restart the payments pod", "of every node"])
    rows, covered = short.embed_spans(text, [s or (0, 0) for s in spans])
    assert covered == [True, False]
    assert not rows[2].any()


class _CountedSpans(CountingEmbedder):
    def embed_spans(
        self, text: str, spans: Sequence[tuple[int, int]]
    ) -> tuple[Vectors, list[bool]]:
        self.calls.append(f"spans {len(spans)}")
        return self.inner.embed_spans(text, spans)


SPECS = [
    spec("travel.find_flights", "Find flights between two cities for a date and passengers."),
    spec("weather.forecast", "The weather forecast for a city over the coming days."),
    spec("fx.convert", "Convert an amount of money from one currency to another."),
    spec("hotels.search", "Search hotels in a city for given dates."),
]


def _discover(tmp_path: Path, emb: Any, texts: Sequence[str]) -> list[list[str]]:
    who = Principal.of("u", scopes=["*"])
    with Catalog.open(tmp_path / "c.db", embedder=emb, log=False) as cat:
        cat.add(SPECS)
        queryvectors.clear_query_cache()
        emb.calls.clear()
        return [cat.discover(t, who, k=4, tier="progressive").ids for t in texts]


def _pooling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request in parts read with its parts pooled (no part disagrees)."""
    monkeypatch.setattr(parts, "DISAGREE_RANK", math.inf)
    monkeypatch.setattr(parts, "AGREEING", "pooled")


def test_a_request_in_parts_takes_one_encoder_run_when_the_encoder_pools_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pooling(monkeypatch)
    emb = _CountedSpans(embedder())
    assert isinstance(emb, SpanEmbedder)
    _discover(tmp_path, emb, [LONG])
    assert emb.calls == [f"spans {len(request_parts(LONG))}"]


def test_without_the_capability_each_part_is_encoded_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pooling(monkeypatch)
    emb = CountingEmbedder(embedder())
    assert span_embedder(emb) is None
    _discover(tmp_path, emb, [LONG])
    assert emb.calls == [f"embed {1 + len(request_parts(LONG))}"]


def test_switched_off_the_parts_are_encoded_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pooling(monkeypatch)
    monkeypatch.setattr(queryvectors, "POOLED_PARTS", False)
    emb = _CountedSpans(embedder())
    _discover(tmp_path, emb, [LONG])
    assert emb.calls == [f"embed {1 + len(request_parts(LONG))}"]


def test_a_pooled_part_vector_never_answers_a_request_that_is_that_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pooling(monkeypatch)
    emb = _CountedSpans(embedder())
    part = request_parts(LONG)[1]
    _discover(tmp_path, emb, [LONG, part, LONG])
    # the part asked on its own is encoded (not taken from the long request's pooled row);
    # the long request again is answered from the cache
    assert emb.calls == [f"spans {len(request_parts(LONG))}", "embed 1"]
    key = embed_keys([part])[0]
    cached = queryvectors.QUERY_VECTORS.get((emb.model_id, key))
    assert cached is not None
    assert np.array_equal(cached, emb.inner.embed([key])[0])


def test_disagreement_is_the_farthest_rank_of_a_parts_first_tool() -> None:
    whole = ["a", "b", "c"]
    assert parts.disagreement(whole, ["a", "c"]) == 2
    assert parts.disagreement(whole, ["a", "z"]) == parts.ABSENT
    assert parts.disagreement(whole, []) == -1
    assert parts.parts_disagree(whole, ["a", "b"], rank=1)
    assert not parts.parts_disagree(whole, ["a", "a"], rank=1)


def test_without_a_gate_every_part_is_read() -> None:
    assert parts.DISAGREE_RANK is None or parts.DISAGREE_RANK >= 0
    assert parts.parts_disagree(["a"], ["a"], rank=None) == (parts.DISAGREE_RANK is None)


AGREEING = (
    "Find direct flights from Berlin to Lisbon for four adult passengers on Friday morning. "
    "Then find return flights from Lisbon to Berlin for those travellers on Sunday evening."
)


@pytest.mark.parametrize("agreeing", ["whole", "pooled"])
def test_parts_are_read_alone_only_where_one_points_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agreeing: str
) -> None:
    monkeypatch.setattr(parts, "DISAGREE_RANK", 1)
    monkeypatch.setattr(parts, "AGREEING", agreeing)
    assert len(request_parts(AGREEING)) == 2
    emb = _CountedSpans(embedder())
    _discover(tmp_path, emb, [AGREEING, LONG])
    # both parts find the flights tool, as the whole request does: read whole (or pooled);
    # the holiday request's parts find the weather and the exchange rate: read alone
    first = "embed 1" if agreeing == "whole" else "spans 2"
    assert emb.calls == [first, f"embed {1 + len(request_parts(LONG))}"]
