"""Shared test helpers (plain functions; fixtures live in the test modules)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from toolscout.cards import ToolSpec, make_spec
from toolscout.embed.minilm import MiniLMEmbedder

FIXTURES = Path(__file__).parent / "fixtures"
BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"


@lru_cache(maxsize=1)
def embedder() -> MiniLMEmbedder:
    """The real default model, loaded once per test session."""
    return MiniLMEmbedder()


def spec(tool_id: str, summary: str = "Does a thing.", **kw: Any) -> ToolSpec:
    return make_spec({"id": tool_id, "summary": summary, **kw})
