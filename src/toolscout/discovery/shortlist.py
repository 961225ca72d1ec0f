"""What one discovery returns: the shortlist, its scores, schemas and token figures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolscout.discovery import inject
from toolscout.stores.base import UpsertStats


@dataclass(frozen=True, slots=True)
class ScoredTool:
    id: str
    name: str
    score: float
    lexical: float
    dense: float
    exact: str = ""
    #: set when the tool was added as the finder of an identifier this shortlisted tool
    #: requires and the request does not give (discovery/prerequisites.py)
    needed_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "score": round(self.score, 4),
            "lexical": round(self.lexical, 4),
            "dense": round(self.dense, 4),
            "exact": self.exact or None,
            "needed_by": self.needed_by or None,
        }


@dataclass(frozen=True, slots=True)
class TokenReport:
    catalog: int  # the whole entitled catalog's schemas, in this format
    injected: int  # the shortlist's schemas
    pinned: int = 0  # the pinned tools' schemas, sent on every turn (reported apart)

    @property
    def saved(self) -> int:
        return max(self.catalog - self.injected, 0)


@dataclass(frozen=True, slots=True)
class Trace:
    """Where each stage left the query: for failure analysis, never shown to the model.

    ``lexical`` and ``dense`` are the whole candidate pools each retriever handed
    to fusion (best first); ``fused`` is the fused top 10."""

    lexical: tuple[str, ...] = ()
    dense: tuple[str, ...] = ()
    fused: tuple[str, ...] = ()
    dense_weight: float = 0.0
    dropped_terms: tuple[str, ...] = ()
    #: why the query encoder was skipped (discovery/skip.py: "exact", "margin"), or ""
    encoder_skipped: str = ""


@dataclass(frozen=True, slots=True)
class Shortlist:
    query: str
    tier: inject.Tier
    format: str
    tools: tuple[ScoredTool, ...]
    schemas: tuple[dict[str, Any], ...]
    confidence: float
    low_confidence: bool
    #: how many entitled-out tools, and why: shown to administrators only (else None / {})
    filtered_by_policy: int | None
    policy_reasons: Mapping[str, int]
    tokens: TokenReport
    reformulations: tuple[str, ...] = ()
    grant: str | None = None
    discovery_id: str | None = None
    latency_ms: float = 0.0
    trace: Trace = field(default_factory=Trace)
    #: rendered function name -> tool id, for every schema in ``schemas`` and ``pinned_schemas``
    names: Mapping[str, str] = field(default_factory=dict)
    #: the caller's pinned tools (discovery/pinned.py): always sent, never deferred
    pinned: tuple[str, ...] = ()
    pinned_schemas: tuple[dict[str, Any], ...] = ()
    #: why the shortlist is empty on purpose (discovery/abstain.py); None: it did not abstain
    abstained: str | None = None

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.tools]

    def tool_id(self, name: str) -> str | None:
        """The id of the tool the model called ``name`` (a rendered name or an id)."""
        if name in self.names:
            return self.names[name]
        return name if name in self.ids else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "tier": self.tier.value,
            "format": self.format,
            "tools": [{**t.to_dict(), "confidence": round(self.confidence, 4)} for t in self.tools],
            "schemas": list(self.schemas),
            "confidence": round(self.confidence, 4),
            "low_confidence": self.low_confidence,
            "reformulations": list(self.reformulations),
            "filtered_by_policy": self.filtered_by_policy,
            "policy_reasons": dict(self.policy_reasons),
            "tokens": {
                "catalog": self.tokens.catalog,
                "injected": self.tokens.injected,
                "pinned": self.tokens.pinned,
                "saved": self.tokens.saved,
            },
            "pinned": list(self.pinned),
            "pinned_schemas": list(self.pinned_schemas),
            "abstained": self.abstained,
            "names": dict(self.names),
            "grant": self.grant,
            "discovery_id": self.discovery_id,
            "latency_ms": round(self.latency_ms, 3),
        }


@dataclass(frozen=True, slots=True)
class IndexReport:
    stats: UpsertStats
    seconds: float
    warnings: tuple[str, ...] = ()
    #: the catalog's ranker calibration, in one line (discovery/calibrate.py)
    calibration: str = ""
