"""The storage seam: the ``Store`` protocol and what flows through it.

A store keeps capability cards and their schemas, a lexical index and the
embedding vectors, and answers lexical and dense searches restricted to a set
of allowed ids. It never ranks by policy itself: the caller passes the allowed
ids it got from :func:`toolscout.policy.entitle`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from toolscout.cards import ToolSpec

Vector = npt.NDArray[np.float32]

#: kinds of embedded text a tool may own
KIND_CARD = "card"
KIND_ALIAS = "alias"
KIND_LEARNED = "learned"


@dataclass(frozen=True, slots=True)
class IndexedTool:
    """A tool as handed to a store: its spec, lexical fields and embedded texts."""

    spec: ToolSpec
    fields: Mapping[str, str]  # lexical field name -> pre-normalised terms
    texts: Sequence[tuple[str, str]]  # (kind, text hash) pairs owning vectors


@dataclass(frozen=True, slots=True)
class UpsertStats:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    embedded: int = 0


@dataclass(slots=True)
class Hits:
    """Scores by tool id, best first."""

    ids: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.ids, self.scores, strict=True))


class Store(Protocol):
    """Cards, schemas, the lexical index and vectors, searched within allowed ids."""

    def upsert(
        self,
        tools: Sequence[IndexedTool],
        vectors: Mapping[str, Vector],
        *,
        model_id: str,
        replace_all: bool = False,
    ) -> UpsertStats:
        """Store tools and new vectors in one transaction; with ``replace_all`` drop the rest."""
        ...

    def delete(self, ids: Sequence[str]) -> int: ...

    def load(self) -> list[ToolSpec]:
        """Every stored tool, in insertion order."""
        ...

    def lexical(
        self, terms: Sequence[str], allowed: Set[str], limit: int, *, fields: Sequence[str] = ()
    ) -> Hits:
        """BM25 over the lexical fields (all, or only ``fields``); only ids in ``allowed``."""
        ...

    def dense(
        self,
        vector: Vector,
        allowed: Set[str],
        limit: int,
        *,
        kinds: Set[str],
        also: Sequence[str] = (),
        model_id: str = "",
    ) -> Hits:
        """Max cosine over each tool's vectors of the given kinds; ``also`` ids are scored too."""
        ...

    def votes(
        self, vector: Vector, allowed: Set[str], *, kind: str, k: int, model_id: str = ""
    ) -> Hits:
        """Tools ranked by a nearest-neighbour vote among their vectors of ``kind``."""
        ...


class VectorCache(Protocol):
    """Embeddings by content hash, so unchanged texts are never embedded again."""

    def cached(self, hashes: Sequence[str], model_id: str) -> set[str]: ...

    def vectors_of(self, hashes: Sequence[str], model_id: str) -> dict[str, Vector]: ...
