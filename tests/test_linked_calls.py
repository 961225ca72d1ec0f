"""A call linked to a discovery: whose discovery it is, decided without stalling anyone.

``Toolscout.aexecute`` links a call to the discovery it names only when the caller made
that discovery. A discovery this process made is known from memory (no read of the log,
which would also write what the log holds); any other id is looked up in the log off the
event loop, since on a shared log an unknown id is asked again for up to a second and the
MCP gateway serves every other request on that loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from support import embedder, spec
from toolscout import DryRunExecutor, Principal, Settings, Toolscout

ALICE = Principal.of("alice", tenant="acme", scopes=["*"])
BOB = Principal.of("bob", tenant="acme", scopes=["*"])


@pytest.fixture
def ts(tmp_path: Path) -> Any:
    settings = Settings(db=tmp_path / "c.db")
    with Toolscout.open(settings, embedder=embedder(), executors=DryRunExecutor()) as ts:
        ts.add(
            [
                spec("shop.track_parcel", "Track a parcel by its tracking number."),
                spec("shop.refund_order", "Refund an order to the card it was paid with."),
            ]
        )
        yield ts


def _counting_owner(ts: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    log = ts.catalog.log
    assert log is not None
    asked: list[str] = []
    real = log.owner

    def owner(discovery_id: str) -> tuple[str, str] | None:
        asked.append(discovery_id)
        return real(discovery_id)

    monkeypatch.setattr(log, "owner", owner)
    return asked


def test_a_call_linked_to_this_process_discovery_does_not_read_the_log(
    ts: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    did = ts.discover(ALICE, "track my parcel").discovery_id
    assert did is not None
    asked = _counting_owner(ts, monkeypatch)
    result = asyncio.run(ts.aexecute(ALICE, "shop.track_parcel", {}, discovery_id=did))
    assert result.ok and result.discovery_id == did
    assert asked == []  # known from memory
    # another caller naming alice's discovery is not linked to it, from memory too
    other = asyncio.run(ts.aexecute(BOB, "shop.track_parcel", {}, discovery_id=did))
    assert other.ok and other.discovery_id != did
    assert asked == []


def test_feedback_on_this_process_discovery_is_decided_from_memory(
    ts: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    did = ts.discover(ALICE, "refund an order").discovery_id
    asked = _counting_owner(ts, monkeypatch)
    ts.feedback(ALICE, did, "shop.refund_order")
    assert asked == []


def test_an_unknown_discovery_id_is_looked_up_off_the_event_loop(ts: Any) -> None:
    """The log looks for an id of its own form for up to ``owner_wait_s``; meanwhile the
    loop keeps serving (here: a ticker). Looked up on the loop, the ticker never ran."""
    unknown = "0" * 32  # the form the log hands out, written by no process

    async def run() -> tuple[Any, int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)  # the ticker's first turn
        before = ticks
        result = await ts.aexecute(ALICE, "shop.track_parcel", {}, discovery_id=unknown)
        ran = ticks - before
        stop.set()
        await task
        return result, ran

    result, ran = asyncio.run(run())
    assert result.ok and result.discovery_id != unknown  # not linked to an unknown id
    assert ran >= 3, ran  # the loop turned while the log was asked (~1 s)
