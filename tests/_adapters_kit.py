"""What the adapter tests share: the examples' demo setup (one catalog per test session,
indexed once), tokens, the recorded replies and helpers reading what an SDK sent."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))

import _demo  # noqa: E402

from demo_fixture import _shared, demo_db_copy  # noqa: E402
from toolscout import Principal, Toolscout  # noqa: E402
from toolscout.adapters.replay import Recorded, ReplayEndpoint  # noqa: E402

K = 5
SUPPORT = Principal.of("alice", "acme", roles=["support_agent"])


def _build_demo(db: Path) -> None:
    """The examples' demo catalog indexed into ``db`` (``_demo.demo``) and closed."""
    before = os.environ.get("TOOLSCOUT_EXAMPLE_DB")
    os.environ["TOOLSCOUT_EXAMPLE_DB"] = str(db)
    try:
        _demo.demo().close()
    finally:
        if before is None:
            del os.environ["TOOLSCOUT_EXAMPLE_DB"]
        else:
            os.environ["TOOLSCOUT_EXAMPLE_DB"] = before


def demo_db(factory: pytest.TempPathFactory) -> Path:
    """The examples' demo database, in this session's base temporary directory: a copy of
    one indexed once per run (the xdist workers share it: ``demo_fixture``), so a worker
    does not index the 205 cards again."""
    path = factory.getbasetemp() / "adapters-demo" / "demo.db"
    if not path.exists():
        demo_db_copy(_shared(factory, "adapters-demo", _build_demo), path.parent)
    os.environ["TOOLSCOUT_EXAMPLE_DB"] = str(path)
    return path


def open_demo(factory: pytest.TempPathFactory) -> Toolscout:
    demo_db(factory)
    return _demo.demo()


def token(role: str = "support_agent") -> str:
    return _demo.token(role)


def replay(name: str) -> ReplayEndpoint:
    return _demo.replay(name)


def entitled_names(ts: Toolscout, role: str = "support_agent") -> set[str]:
    names = ts.catalog.names()
    return {names[c.id] for c in ts.entitled(Principal.of("alice", "acme", roles=[role]))}


def all_names(ts: Toolscout) -> set[str]:
    return set(ts.catalog.names().values())


def raw_tools(request: Recorded) -> bytes:
    """The bytes of the top-level ``"tools"`` array exactly as the SDK serialised it."""
    text = request.raw.decode()
    depth, i, in_string = 0, 0, False
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            if depth == 1 and text.startswith('"tools"', i):
                start = text.index(":", i + len('"tools"')) + 1
                while text[start].isspace():
                    start += 1
                _, end = json.JSONDecoder().raw_decode(text[start:])
                return text[start : start + end].encode()
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        i += 1
    raise AssertionError("the request has no top-level tools")


def function_name(tool: dict[str, Any]) -> str:
    fn = tool.get("function")
    return str(fn["name"]) if isinstance(fn, dict) else str(tool.get("name", ""))
