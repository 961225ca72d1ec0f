"""The names clients see for the catalog's MCP tools (mcp/tools.py, ``ToolHandlers.names``):
made again only when the catalog's generation moved, and then from that generation."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from _mcp_kit import local_gateway
from toolscout.cards import make_spec


def _spec(server: str, name: str) -> object:
    return make_spec(
        {
            "id": f"{server}/{name}",
            "name": name,
            "description": f"{name.capitalize()} the given text back to the caller.",
            "source": f"mcp:{server}",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
    )


def test_the_names_follow_the_catalogs_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    never = {"command": sys.executable, "args": ["-c", "pass"]}  # never started here
    fixture = local_gateway({"a": never, "b": never}, tmp_path)
    gateway = next(fixture)
    try:
        catalog = gateway.ts.catalog
        catalog.add([_spec("a", "echo"), _spec("a", "shout")])
        first = gateway.names()
        assert first == {"a/echo": "echo", "a/shout": "shout"}
        assert gateway.names() is first  # the generation did not move: the same table
        assert gateway.resolve("echo") == "a/echo"
        catalog.add([_spec("b", "echo")])  # a second tool named echo: neither keeps it
        second = gateway.names()
        assert second == {"a/shout": "shout"} and gateway.resolve("echo") == "echo"
        with catalog.pinned():  # inside a pinned block: that block's generation
            assert gateway.names() is second
        catalog.remove(["b/echo"])
        assert gateway.names() == first and gateway.resolve("echo") == "a/echo"
    finally:
        next(fixture, None)  # the fixture body closes the gateway
