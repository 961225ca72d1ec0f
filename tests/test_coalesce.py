from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from support import embedder
from toolscout.embed.base import Vectors
from toolscout.embed.coalesce import SOLO_TEXTS, CoalescingEmbedder
from toolscout.errors import ConfigError


class Recording:
    """An inner embedder whose first call waits until released (so others queue behind
    it); each row holds its text's number, so a caller can check it got its own rows."""

    model_id = "recording"
    dim = 4

    def __init__(self, fail_on: str = "") -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        self.fail_on = fail_on

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        if len(self.calls) == 1:
            self.started.set()
            assert self.release.wait(30)
        if self.fail_on in texts:
            raise RuntimeError(f"cannot encode {self.fail_on!r}")
        return np.array([[float(t)] * self.dim for t in texts], dtype=np.float32)


def _queued(coal: CoalescingEmbedder, n: int) -> None:
    deadline = time.monotonic() + 30
    while len(coal._queue) < n:
        assert time.monotonic() < deadline, "the callers never queued"
        time.sleep(0.005)


def _ask_all(coal: CoalescingEmbedder, asks: list[list[str]]) -> tuple[list, list]:
    got: list = [None] * len(asks)
    errors: list = [None] * len(asks)

    def call(i: int) -> None:
        try:
            got[i] = coal.embed(asks[i])
        except Exception as exc:
            errors[i] = exc

    first = threading.Thread(target=call, args=(0,))
    first.start()
    assert coal.inner.started.wait(30)  # type: ignore[attr-defined]
    rest = [threading.Thread(target=call, args=(i,)) for i in range(1, len(asks))]
    for t in rest:
        t.start()
    _queued(coal, len(asks) - 1)
    coal.inner.release.set()  # type: ignore[attr-defined]
    for t in [first, *rest]:
        t.join(30)
    return got, errors


def test_callers_that_arrive_during_a_run_share_the_next_run_and_get_their_own_rows() -> None:
    inner = Recording()
    coal = CoalescingEmbedder(inner)
    asks = [["1"], ["2", "3"], ["4"], ["5", "6", "7"]]
    got, errors = _ask_all(coal, asks)
    assert errors == [None] * 4
    # the first ran alone at once; the three that came meanwhile ran together, in order
    assert inner.calls[0] == ["1"]
    assert inner.calls[1:] == [["2", "3", "4", "5", "6", "7"]]
    for ask, vectors in zip(asks, got, strict=True):
        assert vectors[:, 0].tolist() == [float(t) for t in ask]
    assert (coal.runs, coal.calls) == (2, 4)


def test_one_run_takes_at_most_max_texts() -> None:
    inner = Recording()
    coal = CoalescingEmbedder(inner, max_texts=3)
    asks = [["1"], ["2", "3"], ["4"], ["5", "6"]]
    got, errors = _ask_all(coal, asks)
    assert errors == [None] * 4
    assert inner.calls == [["1"], ["2", "3", "4"], ["5", "6"]]
    assert got[3][:, 0].tolist() == [5.0, 6.0]


def test_an_error_reaches_every_caller_of_its_run_and_no_other() -> None:
    inner = Recording(fail_on="3")
    coal = CoalescingEmbedder(inner)
    got, errors = _ask_all(coal, [["1"], ["2"], ["3"]])
    assert got[0] is not None and errors[0] is None
    assert [type(e) for e in errors[1:]] == [RuntimeError, RuntimeError]
    assert "cannot encode '3'" in str(errors[2])
    # the wrapper is usable afterwards
    assert coal.embed(["9"])[:, 0].tolist() == [9.0]


def test_a_large_call_runs_on_its_own_and_empty_input_runs_nothing() -> None:
    inner = Recording()
    inner.release.set()
    coal = CoalescingEmbedder(inner)
    texts = [str(i) for i in range(SOLO_TEXTS + 1)]
    assert coal.embed(texts).shape == (SOLO_TEXTS + 1, 4)
    assert coal.embed([]).shape == (0, 4)
    assert inner.calls == [texts] and coal.runs == 0
    with pytest.raises(ConfigError, match="max_texts must be at least 1"):
        CoalescingEmbedder(inner, max_texts=0)


def test_concurrent_callers_get_the_models_vectors() -> None:
    coal = CoalescingEmbedder(embedder())
    assert (coal.model_id, coal.dim) == (embedder().model_id, embedder().dim)
    texts = [
        ["kill the stuck job"],
        ["refund invoice INV-1024", "refund"],
        ["who is on call for the database this weekend and next"],
        ["page the infra team about high latency", "page", "the infra team"],
    ] * 3
    got: list = [None] * len(texts)

    def call(i: int) -> None:
        got[i] = coal.embed(texts[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for ask, vectors in zip(texts, got, strict=True):
        assert np.allclose(vectors, embedder().embed(ask), atol=1e-5)
    assert coal.calls == len(texts) and coal.runs <= coal.calls
