"""The storage seam: small protocols, and the values that flow through them.

A backend keeps capability cards and their schemas (``CardStore``), answers
searches restricted to a set of allowed ids (``SearchIndex``), caches vectors
by content hash (``VectorCache``), keeps small settings such as the policy
(``MetaStore``) and the usage-learned phrases (``LearnedStore``). ``Store`` is
all five: what :class:`~toolscout.discovery.catalog.Catalog` needs of a backend.

A store never ranks by policy, and holds no ranking decision of its own: BM25
field weights come from the caller, and the learned-alias vote is computed in
:mod:`toolscout.discovery.search` from the raw neighbours a store returns.

Every write bumps :meth:`CardStore.generation`, so an object holding derived
state (another process's catalog, a replica) can tell that it is stale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.errors import StoreError

Vector = npt.NDArray[np.float32]

#: kinds of embedded text a tool may own
KIND_CARD = "card"
KIND_ALIAS = "alias"
KIND_LEARNED = "learned"

#: learned phrases are stored as "<tenant><LEARNED_SEP><phrase>" (no separator: every tenant)
LEARNED_SEP = "\x1f"

#: a part of no rows in the header of a map kept as rows (``toolscout.discovery.kept``
#: writes it, a store's removal of other versions' rows reads it): the map's readers hold
#: the store's readers' lock while they may read it, so once none does it may be removed
#: for its own generation. A toolscout before the locks does not know the part and never
#: reads such a map (its parts differ from the ones it knows)
HELD_PART = "~held"


def learned_kind(tenant: str) -> str:
    """The vector kind of phrases learned from ``tenant``'s usage (each tenant its own)."""
    return f"{KIND_LEARNED}:{tenant}" if tenant else KIND_LEARNED


def learned_entry(tenant: str, phrase: str) -> str:
    return f"{tenant}{LEARNED_SEP}{phrase}" if tenant else phrase


def split_learned(entry: str) -> tuple[str, str]:
    """(tenant, phrase) of a stored learned entry."""
    tenant, sep, phrase = entry.partition(LEARNED_SEP)
    return (tenant, phrase) if sep else ("", entry)


#: the lexical fields every store indexes, in this order
LEXICAL_FIELDS: tuple[str, ...] = ("name", "aliases", "tags", "summary", "params", "learned")


@dataclass(frozen=True, slots=True)
class IndexedTool:
    """A tool as handed to a store: its spec, lexical fields and embedded texts."""

    spec: ToolSpec
    fields: Mapping[str, str]  # lexical field name -> pre-normalised terms
    texts: Sequence[tuple[str, str]]  # (kind, text hash) pairs owning vectors
    #: the indexer's digest of everything ``fields`` and ``texts`` were derived from (the
    #: spec, learned phrases, model, index version); when given, it is the stored hash, so
    #: the indexer can tell an unchanged tool before deriving anything (see ``unchanged``)
    source: str = ""


def indexed_hash(tool: IndexedTool) -> str:
    """What decides whether a stored tool is unchanged: its spec, fields and owned texts."""
    import hashlib
    import json

    if tool.source:
        return tool.source
    extra = json.dumps([sorted(tool.fields.items()), sorted(tool.texts)])
    return hashlib.sha256((tool.spec.content_hash() + extra).encode()).hexdigest()


def uncached_texts(tools: Sequence[IndexedTool], vectors: Mapping[str, Vector]) -> list[str]:
    """Text hashes the tools own that ``vectors`` does not carry (the store's cache must)."""
    return sorted({h for tool in tools for _, h in tool.texts} - set(vectors))


def require_vectors(missing: Set[str], model_id: str) -> None:
    """Refuse an upsert whose texts have no vector, given or cached."""
    if missing:
        raise StoreError(f"{len(missing)} embedded text(s) have no vector for model {model_id!r}")


@dataclass(frozen=True, slots=True)
class UpsertPlan:
    """What an upsert changes, decided the same way in every store: by content hash."""

    changed: tuple[tuple[IndexedTool, str], ...]  # (tool, its new hash): added or updated
    added: int
    updated: int
    unchanged: int
    gone: tuple[str, ...]  # stored ids that ``replace_all`` drops


def plan_upsert(
    tools: Sequence[IndexedTool],
    existing: Mapping[str, str],
    *,
    replace_all: bool,
    unchanged_ids: Sequence[str] = (),
) -> UpsertPlan:
    """Compare ``tools`` with the stored content hashes (id -> hash).

    ``unchanged_ids`` are tools the caller found unchanged itself (by
    :attr:`IndexedTool.source`) and did not hand over: counted as unchanged, and kept
    by ``replace_all``."""
    changed: list[tuple[IndexedTool, str]] = []
    kept = [t for t in unchanged_ids if t in existing]
    added = updated = 0
    unchanged = len(kept)
    for tool in tools:
        chash = indexed_hash(tool)
        old = existing.get(tool.spec.id)
        if old == chash:
            unchanged += 1
            continue
        if old is None:
            added += 1
        else:
            updated += 1
        changed.append((tool, chash))
    keep = {t.spec.id for t in tools}.union(kept)
    gone = tuple(t for t in existing if t not in keep) if replace_all else ()
    return UpsertPlan(tuple(changed), added, updated, unchanged, gone)


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


@runtime_checkable
class CardStore(Protocol):
    """Cards and their schemas; every write is one transaction and bumps the generation."""

    def upsert(
        self,
        tools: Sequence[IndexedTool],
        vectors: Mapping[str, Vector],
        *,
        model_id: str,
        replace_all: bool = False,
        unchanged: Sequence[str] = (),
    ) -> UpsertStats:
        """Store tools and new vectors atomically; with ``replace_all`` drop the rest.

        ``unchanged`` are ids the caller found unchanged by :meth:`content_hashes` and
        left out of ``tools``: counted as unchanged and kept by ``replace_all``.
        Every text hash a tool owns must have a vector, given here or cached before
        (:class:`~toolscout.errors.StoreError` otherwise, and nothing is written)."""
        ...

    def content_hashes(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored hash (:func:`indexed_hash`) of each of ``ids`` that exists."""
        ...

    def delete(self, ids: Sequence[str]) -> int: ...

    def cards(self) -> list[CapabilityCard]:
        """Every stored card, in insertion order (no schemas: they are read lazily)."""
        ...

    def specs(self, ids: Sequence[str]) -> dict[str, ToolSpec]:
        """Full specs (schemas included) of the ids that exist."""
        ...

    def generation(self) -> int:
        """A counter that grows with every committed write, in any process."""
        ...


@runtime_checkable
class SearchIndex(Protocol):
    """Lexical and dense search, always restricted to the ``allowed`` ids."""

    def lexical(
        self,
        terms: Sequence[str],
        allowed: Set[str],
        limit: int,
        *,
        weights: Mapping[str, float],
    ) -> Hits:
        """BM25 over the lexical fields with these per-field weights (0 or absent: unused)."""
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

    def neighbours(
        self, vector: Vector, allowed: Set[str], *, kind: str, k: int, model_id: str = ""
    ) -> list[tuple[str, float]]:
        """The ``k`` vectors of ``kind`` closest to ``vector``, as (owning tool id, cosine)."""
        ...

    def card_vectors(self, ids: Sequence[str], model_id: str) -> dict[str, Vector]:
        """The ``card`` vector of each id that has one."""
        ...

    def document_frequency(self) -> tuple[Mapping[str, int], int]:
        """Per-term document counts of the lexical index, and the number of documents."""
        ...


@runtime_checkable
class VectorCache(Protocol):
    """Embeddings by content hash, so unchanged texts are never embedded again."""

    def cached(self, hashes: Sequence[str], model_id: str) -> set[str]: ...

    def vectors_of(self, hashes: Sequence[str], model_id: str) -> dict[str, Vector]: ...


@runtime_checkable
class MetaStore(Protocol):
    """Small named values kept with the catalog (the policy, the calibration...)."""

    def meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``; bumps the generation."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class LearnedStore(Protocol):
    """Usage-learned (tool, phrase) pairs with their use counts."""

    def learned_add(self, pairs: Sequence[tuple[str, str, int]]) -> None: ...

    def learned(self, limit_per_tool: int) -> dict[str, list[str]]:
        """Phrases per tool, most used first."""
        ...

    def learned_clear(self) -> None: ...


@runtime_checkable
class Store(CardStore, SearchIndex, VectorCache, MetaStore, LearnedStore, Protocol):
    """Everything the catalog needs of a backend."""


class LearnedAliases:
    """The learned phrases of any :class:`LearnedStore`, under the older name."""

    def __init__(self, store: LearnedStore) -> None:
        self._store = store

    def add(self, pairs: Sequence[tuple[str, str, int]]) -> None:
        self._store.learned_add(pairs)

    def of(self, limit_per_tool: int) -> dict[str, list[str]]:
        return self._store.learned(limit_per_tool)

    def clear(self) -> None:
        self._store.learned_clear()
