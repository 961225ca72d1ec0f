"""Explicit settings objects, built at the entry points and passed down.

Nothing here reads the environment on import; :func:`default_db_path` does so
only when called.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from toolscout.errors import ConfigError

DB_ENV = "TOOLSCOUT_DB"


def default_db_path() -> Path:
    """``$TOOLSCOUT_DB`` if set, else ``toolscout.db`` under the user's data directory."""
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("toolscout", appauthor=False)) / "toolscout.db"


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """Knobs of the retrieval pipeline; each quality feature can be switched off."""

    lexical: bool = True
    dense: bool = True
    #: weight of the dense score in the fused score (the rest is lexical)
    dense_weight: float = 0.7
    #: shift the weight towards lexical when the query carries identifiers or rare exact terms
    adaptive_fusion: bool = True
    #: "weighted" (normalised score mix) or "rrf" (reciprocal rank fusion)
    fusion: str = "weighted"
    #: an exact tool name, id or alias in the query always makes the shortlist
    exact_hits: bool = True
    #: reformulate low-confidence queries (identifier splitting, catalog synonyms, feedback)
    reformulate: bool = True
    #: push near-duplicates (card cosine >= 0.97) behind distinct tools in the top-K
    dedupe: bool = True
    #: use aliases learned from the discovery log
    learned_aliases: bool = True
    #: a fused top score below this is reported as low confidence
    confidence_threshold: float = 0.45
    #: how many candidates each retriever hands to fusion
    candidate_pool: int = 50
    #: queries longer than this are refused
    max_query_chars: int = 8192

    def __post_init__(self) -> None:
        if not (self.lexical or self.dense):
            raise ConfigError("at least one of lexical and dense retrieval must be on")
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ConfigError(f"dense_weight must be within [0, 1], got {self.dense_weight}")
        if self.fusion not in ("weighted", "rrf"):
            raise ConfigError(f"fusion must be 'weighted' or 'rrf', got {self.fusion!r}")
        if self.candidate_pool < 10:
            raise ConfigError(f"candidate_pool must be at least 10, got {self.candidate_pool}")

    def but(self, **changes: object) -> SearchSettings:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)  # type: ignore[arg-type]
