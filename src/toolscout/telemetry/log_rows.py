"""What the discovery log's readers get back: one row type per question."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FalseNegative:
    tool_id: str
    misses: int  # calls that followed a discovery which did not show the tool
    calls: int
    example_queries: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DiscoveryRow:
    """One logged discovery, as the report reads it."""

    id: str
    ts: float
    subject: str
    tenant: str
    conversation: str | None
    query: str | None  # None unless query text is kept
    query_hash: str | None  # None with query_log="none"
    shown: tuple[str, ...]
    confidence: float
    low: bool


@dataclass(frozen=True, slots=True)
class EventRow:
    """A tool executed (``kind="call"``) or named right by feedback (``"feedback"``)."""

    ts: float
    discovery_id: str | None
    tool_id: str
    ok: bool
    kind: str
    subject: str | None
    tenant: str | None
    conversation: str | None
