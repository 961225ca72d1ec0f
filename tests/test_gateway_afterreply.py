"""An audit outcome held until the answer went (gateway/afterreply.py), the attempt not."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from _gateway_kit import gateway, spec, token
from toolscout.cards import ToolSpec
from toolscout.errors import ExecutorError, PolicyDenied
from toolscout.gateway.afterreply import AFTER_REPLY, AfterReply

CATALOG = [spec("crm.lookup")]


def _kinds(audit: Any) -> list[tuple[str, str]]:
    return [(r.kind, r.status) for r in audit.read()]


class _Watching:
    """An executor that notes the audit rows present while it runs."""

    def __init__(self, audit: Any, fail: bool = False) -> None:
        self.audit, self.fail = audit, fail
        self.seen: list[tuple[str, str]] = []

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        self.seen = _kinds(self.audit)
        if self.fail:
            raise RuntimeError("the disk is full")
        return {"ok": True}

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("fail", [False, True])
def test_the_outcome_is_written_when_the_answer_went(tmp_path: Path, fail: bool) -> None:
    gw, _, audit = gateway(tmp_path, CATALOG, executor=_Watching(None))
    ex = _Watching(audit, fail)
    gw.executors["*"] = ex
    after = AfterReply()

    async def call() -> Any:
        AFTER_REPLY.set(after)
        return await gw.execute(token(), "crm.lookup", {"order_id": "o1"})

    if fail:
        with pytest.raises(ExecutorError) as caught:
            asyncio.run(call())
        audit_id = caught.value.audit_id
    else:
        audit_id = asyncio.run(call()).audit_id
    assert ex.seen == [("attempt", "started")]  # committed before the tool ran
    assert _kinds(audit) == [("attempt", "started")]  # the outcome held
    assert audit_id == audit.read()[0].id  # the call's id is its attempt's
    after.run()
    status = "error" if fail else "ok"
    assert _kinds(audit) == [("attempt", "started"), ("outcome", status)]
    # once the answer went, a later outcome (a call resumed after an input-required
    # answer) is written at once
    ex.fail = False
    asyncio.run(call())
    assert _kinds(audit)[-1] == ("outcome", "ok")


def test_without_an_after_reply_the_outcome_is_written_before_execute_returns(
    tmp_path: Path,
) -> None:
    gw, _, audit = gateway(tmp_path, CATALOG)
    result = asyncio.run(gw.execute(token(), "crm.lookup", {"order_id": "o1"}))
    assert _kinds(audit) == [("attempt", "started"), ("outcome", "ok")]
    assert result.audit_id == audit.read()[-1].id


def test_a_refusal_is_written_at_once(tmp_path: Path) -> None:
    gw, _, audit = gateway(tmp_path, CATALOG)
    after = AfterReply()

    async def call() -> Any:
        AFTER_REPLY.set(after)
        return await gw.execute(token(), "no.such.tool", {})

    with pytest.raises(PolicyDenied):
        asyncio.run(call())
    assert [r.kind for r in audit.read()] == ["record"]


def test_a_failed_write_does_not_lose_the_others() -> None:
    after = AfterReply()
    done: list[int] = []

    def broken() -> None:
        raise RuntimeError("locked")

    after.defer(broken)
    after.defer(lambda: done.append(1))
    assert done == []
    after.run()
    assert done == [1]
