"""A forwarded call leaves no reference cycle behind (round sixteen, h/fwd10).

Each call's request objects (its ``Link``, the round, the caller's context and session)
used to be freed only by the cyclic collector: the upstream request's deadline was a
closure that re-armed itself (so referred to itself), and a finished round stayed the
link's ``asker``. About 50 objects a call waited for the collector, which then ran a young
collection every ~12 calls, a middle one (~3 ms) every ~130 and a full one (~80 ms) every
~3,000. Now reference counting frees them when the call ends; these tests run with the
collector off and see each object gone at once.

The deadline itself (``_Deadline``) is checked as before: a request without progress
fails after its window, one whose upstream reports progress is kept alive.
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from _mcp_kit import capable_link
from toolscout.discovery.kept import no_gc
from toolscout.errors import ExecutorError
from toolscout.mcp.config import ServerConfig
from toolscout.mcp.connection import Upstream
from toolscout.mcp.relay import LINK, Link
from toolscout.mcp.rounds import Rounds


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic collector off: what is not freed by reference counting stays."""
    gc.collect()
    with no_gc():
        yield


def _upstream(timeout_s: float = 30.0) -> Upstream:
    up = Upstream(ServerConfig(name="app", command="unused"), timeout_s=timeout_s)
    up.state = "up"
    up._client = object()  # what ``send`` is handed; these sends never use it
    return up


async def _answer(client: Any) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"content": []}


def test_an_upstream_request_frees_its_link_when_it_ends(collector_off: None) -> None:
    async def run() -> tuple[weakref.ref[Link], Any]:
        up = _upstream()
        link = Link(None)
        token = LINK.set(link)
        try:
            answer = await up.raw("tools/call", _answer)
        finally:
            LINK.reset(token)
        return weakref.ref(link), answer

    gone, answer = asyncio.run(run())
    assert answer == {"content": []}
    assert gone() is None  # freed without the collector: no cycle held it


@pytest.mark.parametrize(
    "make_link",
    [lambda: Link(None), capable_link],
    ids=["no capabilities (the caller's task)", "sampling declared (a round's task)"],
)
def test_a_finished_round_frees_its_link_and_itself(collector_off: None, make_link: Any) -> None:
    async def run() -> tuple[str, weakref.ref[Link], list[weakref.ref[Any]]]:
        rounds = Rounds()
        link = make_link()
        seen: list[weakref.ref[Any]] = []

        async def call() -> str:
            await asyncio.sleep(0)
            task = asyncio.current_task()
            assert task is not None
            seen.append(weakref.ref(task))
            return "done"

        result = await rounds.run("caller", link, None, call)
        return result, weakref.ref(link), seen

    result, link, tasks = asyncio.run(run())
    assert result == "done"
    assert link() is None
    assert tasks and all(task() is None for task in tasks)  # the round's task too


def test_a_request_without_progress_times_out_after_its_window() -> None:
    async def run() -> float:
        up = _upstream(timeout_s=0.3)
        link = Link(None)

        async def silent(client: Any) -> None:
            await asyncio.sleep(30)

        token = LINK.set(link)
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            with pytest.raises(ExecutorError) as failed:
                await up.raw("tools/call", silent)
        finally:
            LINK.reset(token)
        assert failed.value.reason == "upstream_timeout"
        return loop.time() - start

    took = asyncio.run(run())
    assert 0.3 <= took < 20  # the window, not the send's 30 s


def test_progress_keeps_a_request_alive_past_its_window() -> None:
    async def run() -> Any:
        up = _upstream(timeout_s=0.4)
        link = Link(None)

        async def reporting(client: Any) -> str:
            for _ in range(24):  # 1.2 s of work, a sign of life every 0.05 s
                await asyncio.sleep(0.05)
                link.last_seen = time.monotonic()
            return "finished"

        token = LINK.set(link)
        try:
            return await up.raw("tools/call", reporting)
        finally:
            LINK.reset(token)

    assert asyncio.run(run()) == "finished"
