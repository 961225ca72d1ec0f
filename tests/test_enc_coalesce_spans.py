"""A server's coalescing encoder keeps the default model's span pooling (round twelve,
h/enc): a request read in parts with its parts pooled is one run of its own text in a
server process, as in a library process, and that run takes its turn with the coalesced
ones."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from support import embedder, spec
from toolscout.discovery import parts, queryvectors
from toolscout.discovery.catalog import Catalog
from toolscout.embed import QUERY_ENCODER_ENV, server_embedder
from toolscout.embed.base import Vectors, span_embedder
from toolscout.embed.coalesce import CoalescingEmbedder, CoalescingSpanEmbedder, coalescing
from toolscout.embed.queries import query_embedder
from toolscout.errors import ConfigError
from toolscout.policy import Principal

LONG = (
    "I'm planning a family holiday in Lisbon next month with my parents. "
    "Can you find flights from Berlin to Lisbon for four passengers? "
    "Also check the weather forecast for the first week, and convert 500 euros to dollars."
)


class Spans:
    """An inner encoder with ``embed_spans`` whose first ``embed`` waits until released;
    it records the order in which its runs start."""

    model_id = "spans"
    dim = 4

    def __init__(self) -> None:
        self.started: list[str] = []
        self.embedding = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.started.append("embed")
        self.embedding.set()
        assert self.release.wait(30)
        return np.ones((len(texts), self.dim), dtype=np.float32)

    def embed_spans(
        self, text: str, spans: Sequence[tuple[int, int]]
    ) -> tuple[Vectors, list[bool]]:
        self.started.append("spans")
        return np.ones((1 + len(spans), self.dim), dtype=np.float32), [True] * len(spans)


class Plain:
    model_id = "plain"
    dim = 4

    def embed(self, texts: Sequence[str]) -> Vectors:
        return np.ones((len(texts), self.dim), dtype=np.float32)


def test_the_wrapper_pools_spans_exactly_as_the_model_does() -> None:
    model = embedder()
    wrapped = coalescing(model)
    assert span_embedder(wrapped) is wrapped
    spans = [(0, 20), (21, 60)]
    got, covered = wrapped.embed_spans(LONG, spans)
    want, want_covered = model.embed_spans(LONG, spans)
    assert got.tobytes() == want.tobytes() and covered == want_covered


def test_a_model_without_span_pooling_is_wrapped_without_it() -> None:
    wrapped = coalescing(Plain())  # type: ignore[arg-type]
    assert type(wrapped) is CoalescingEmbedder and span_embedder(wrapped) is None
    with pytest.raises(ConfigError, match="does not pool spans"):
        CoalescingSpanEmbedder(Plain())  # type: ignore[arg-type]


def test_a_span_run_waits_for_the_coalesced_run_under_way() -> None:
    inner = Spans()
    wrapped = coalescing(inner)  # type: ignore[arg-type]
    first = threading.Thread(target=wrapped.embed, args=(["a"],))
    first.start()
    assert inner.embedding.wait(30)
    spanned = threading.Thread(target=wrapped.embed_spans, args=("a b", [(0, 1)]))
    spanned.start()
    spanned.join(0.2)
    assert inner.started == ["embed"]  # not beside the run under way
    inner.release.set()
    first.join(30)
    spanned.join(30)
    assert inner.started == ["embed", "spans"]
    assert isinstance(wrapped, CoalescingEmbedder) and wrapped.runs == 2


def test_a_server_reads_a_pooled_request_in_one_run_of_its_own_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parts, "DISAGREE_RANK", math.inf)  # every request in parts pooled
    monkeypatch.setattr(parts, "AGREEING", "pooled")
    monkeypatch.setenv(QUERY_ENCODER_ENV, "float")
    served = server_embedder(embedder())
    assert span_embedder(query_embedder(served)) is not None
    assert isinstance(served, CoalescingEmbedder)
    who = Principal.of("u", scopes=["*"])
    specs = [
        spec("travel.flights", "Search flights between two cities for some passengers."),
        spec("weather.forecast", "The weather forecast for a city for the coming days."),
        spec("money.convert", "Convert an amount of money from one currency to another."),
    ]
    with Catalog.open(tmp_path / "c.db", embedder=served, log=False) as cat:
        cat.add(specs)
        queryvectors.clear_query_cache()
        runs = served.runs
        cat.discover(LONG, who, k=3, tier="progressive")
    assert served.runs == runs + 1  # the request alone, its parts pooled from that run
