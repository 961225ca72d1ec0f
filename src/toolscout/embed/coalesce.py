"""Concurrent requests' query texts encoded together: one encoder run for many callers.

A server process answers several discoveries at once on its threads, and each asks the
encoder for one to a few short texts. An encoder run reads all of the model's weights
however few rows it has, so one run over eight requests' texts costs far less than
eight runs (docs/history/http-load.md). :class:`CoalescingEmbedder` wraps an
embedder: a caller that finds the encoder idle runs its own texts at once (no waiting,
so one request alone is as fast as before); callers that arrive while a run is under way
queue up, and when it ends one of them runs everything queued in one call. At most one
run is under way per wrapper, so a process never has more encoder runs than it has
wrappers, whatever its thread count.

The vectors are the wrapped embedder's: a row's vector does not depend on the other rows
of its batch (within float rounding, ``tests/test_embed.py``).

A wrapped embedder that pools spans (``SpanEmbedder``: the default model) keeps that
capability through :func:`coalescing`: a request read in parts is then one run of its own
text with its parts pooled from it, exactly as in a library process, instead of a run over
the request and each part (1.9 texts a new-text request on ``load.py``'s mix,
docs/history/http-load.md, round twelve). Such a run takes its turn with the coalesced
ones: still at most one run under way per wrapper.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from toolscout.embed.base import Embedder, SpanEmbedder, Vectors, Wrapped, span_embedder
from toolscout.errors import ConfigError

#: a call with more texts than this (an index being built) runs on its own, not queued
#: behind or ahead of requests
SOLO_TEXTS = 64
#: the most texts one coalesced run takes (the rest wait for the next run)
MAX_TEXTS = 64


@dataclass(slots=True)
class _Ask:
    texts: list[str]
    vectors: Vectors | None = None
    error: BaseException | None = None
    done: bool = field(default=False)


class CoalescingEmbedder(Wrapped):
    """An :class:`Embedder` whose concurrent ``embed`` calls share encoder runs."""

    def __init__(self, inner: Embedder, *, max_texts: int = MAX_TEXTS) -> None:
        if max_texts < 1:
            raise ConfigError(f"max_texts must be at least 1, got {max_texts}")
        super().__init__(inner)
        self.max_texts = max_texts
        self._cond = threading.Condition()
        self._queue: list[_Ask] = []
        self._running = False
        #: encoder runs made, and calls answered (runs < calls: texts were coalesced)
        self.runs = 0
        self.calls = 0

    def load(self) -> None:
        """Load the wrapped model now, when it can be loaded ahead."""
        load = getattr(self.inner, "load", None)
        if callable(load):
            load()

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) > SOLO_TEXTS:
            return self.inner.embed(texts)
        ask = _Ask(list(texts))
        with self._cond:
            self._queue.append(ask)
        while True:
            with self._cond:
                while not ask.done and self._running:
                    self._cond.wait()
                if ask.done:
                    return self._answer(ask)
                self._running = True
                batch = self._take()
            try:
                self._run(batch)
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()

    def _take(self) -> list[_Ask]:
        """The queued asks of the next run (the oldest first, within ``max_texts``; the
        first is always taken). Called with the lock held."""
        batch: list[_Ask] = []
        total = 0
        while self._queue and (not batch or total + len(self._queue[0].texts) <= self.max_texts):
            ask = self._queue.pop(0)
            batch.append(ask)
            total += len(ask.texts)
        return batch

    def _run(self, batch: list[_Ask]) -> None:
        """Encode ``batch``'s texts in one call; each ask gets its rows, or the error."""
        texts = [t for ask in batch for t in ask.texts]
        try:
            vectors = self.inner.embed(texts)
        except BaseException as exc:  # every caller of the run gets the error
            with self._cond:
                for ask in batch:
                    ask.error, ask.done = exc, True
            return
        start = 0
        with self._cond:
            self.runs += 1
            self.calls += len(batch)
            for ask in batch:
                ask.vectors = vectors[start : start + len(ask.texts)]
                ask.done = True
                start += len(ask.texts)

    @staticmethod
    def _answer(ask: _Ask) -> Vectors:
        if ask.error is not None:
            raise ask.error
        assert ask.vectors is not None
        return ask.vectors


class CoalescingSpanEmbedder(CoalescingEmbedder):
    """A :class:`CoalescingEmbedder` over a ``SpanEmbedder``, with ``embed_spans``: one
    run of the text alone, in turn with the coalesced runs."""

    def __init__(self, inner: Embedder, *, max_texts: int = MAX_TEXTS) -> None:
        spanner = span_embedder(inner)
        if spanner is None:
            raise ConfigError(f"{type(inner).__name__} does not pool spans (embed_spans)")
        super().__init__(inner, max_texts=max_texts)
        self._spanner: SpanEmbedder = spanner

    def embed_spans(
        self, text: str, spans: Sequence[tuple[int, int]]
    ) -> tuple[Vectors, list[bool]]:
        with self._cond:
            while self._running:
                self._cond.wait()
            self._running = True
        try:
            got = self._spanner.embed_spans(text, spans)
        finally:
            with self._cond:
                self._running = False
                self.runs += 1
                self.calls += 1
                self._cond.notify_all()
        return got


def coalescing(inner: Embedder, *, max_texts: int = MAX_TEXTS) -> CoalescingEmbedder:
    """``inner`` behind a coalescing wrapper that keeps its span pooling, if it has it."""
    if span_embedder(inner) is not None:
        return CoalescingSpanEmbedder(inner, max_texts=max_texts)
    return CoalescingEmbedder(inner, max_texts=max_texts)


__all__ = ["MAX_TEXTS", "SOLO_TEXTS", "CoalescingEmbedder", "CoalescingSpanEmbedder", "coalescing"]
