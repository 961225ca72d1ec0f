"""The derived parts a catalog keeps between processes, what builds each, and its key.

Three structures are derived from a generation's cards and kept as rows
(:mod:`toolscout.discovery.kept`): the phrase index (its ranker fields, phrase tables and
first words), the name table, and the finder index. Each is kept under
``name:<digest>``, the digest naming **the code that builds that part** — the modules in
:data:`BUILDERS` — and nothing else: a release that changes how requests are ranked
(``search.py``, ``fusion.py``, ...) reads the rows an earlier release kept, where a
digest of every discovery module made each such release derive all three again (seconds
at 100k tools, on its first request or beside it).

The lists are checked, not trusted: ``tests/test_cold11_keys.py`` runs each builder under
a profiler and fails if it executes a toolscout function outside its part's modules (a
builder split into, or calling, a module not listed), and changes each listed module's
source to see the key move.
"""

from __future__ import annotations

import importlib
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.discovery import inject
from toolscout.discovery.indexing import INDEX_VERSION
from toolscout.discovery.kept import (
    KIND_FLAG,
    KIND_LIST,
    KIND_PAIRS,
    KIND_SET,
    KIND_STR,
    code_digest,
)
from toolscout.discovery.prerequisites import FinderIndex
from toolscout.discovery.query import PhraseIndex


class Source(Protocol):
    """What the builders read of a generation: every card (catalog order) and the lexical
    index's document frequencies."""

    @property
    def cards(self) -> Sequence[CapabilityCard]: ...

    @property
    def df(self) -> Mapping[str, int]: ...


__all__ = [
    "BUILDERS",
    "FINDER_KINDS",
    "NAME_KINDS",
    "PHRASE_KINDS",
    "Source",
    "finder_parts",
    "kept_key",
    "name_parts",
    "part_modules",
    "phrase_parts",
]

#: the parts of the kept phrase index (its ranker fields, phrase tables and first words),
#: of the name table, and of the finder index, with the kind each part's values are
PHRASE_KINDS = {"name": KIND_SET, "summary": KIND_SET, "keys": KIND_SET, "in_name": KIND_SET,
                "in_summary": KIND_SET, "phrases": KIND_PAIRS, "identifiers": KIND_PAIRS,
                "starts": KIND_FLAG}  # fmt: skip
NAME_KINDS = {"names": KIND_STR, "rendered": KIND_STR}
FINDER_KINDS = {"name_terms": KIND_SET, "by_term": KIND_LIST}

#: every kept part is read through the row format of ``kept`` and built by a function of
#: this module from cards that ``cards`` parsed
_EVERY = ("toolscout.discovery.keptparts", "toolscout.discovery.kept", "toolscout.cards")
_PHRASES = ("toolscout.discovery.query", "toolscout.discovery.features",
            "toolscout.discovery.lexical")  # fmt: skip
#: part -> the modules whose source builds it (the finder index is built from the phrase
#: index's name terms: its builders are the phrase index's and ``prerequisites``)
BUILDERS: Mapping[str, tuple[str, ...]] = {
    "phrase-index": (*_EVERY, *_PHRASES),
    "name-table": (*_EVERY, "toolscout.discovery.inject"),
    "finder-index": (*_EVERY, *_PHRASES, "toolscout.discovery.prerequisites"),
}
#: a change of this scheme, of the index, or of Unicode's tables (which the words and the
#: names are split and normalised by) is a change of every part
_SEED = f"parts-1:{INDEX_VERSION}:{unicodedata.unidata_version}".encode()
_DIGESTS: dict[str, str] = {}  # part -> digest, computed once per process


def part_modules(name: str) -> tuple[str, ...]:
    """The modules that build the kept part ``name`` (a name not in :data:`BUILDERS` is a
    programming error: a KeyError)."""
    return BUILDERS[name]


def kept_key(name: str) -> str:
    """The key the part ``name`` is kept under: ``name:`` and the first 16 hex digits of a
    sha256 of the source of the modules that build it (read once per process)."""
    digest = _DIGESTS.get(name)
    if digest is None:
        modules = [sys.modules.get(m) or importlib.import_module(m) for m in part_modules(name)]
        digest = _DIGESTS[name] = code_digest(*modules, seed=_SEED + name.encode())
    return f"{name}:{digest}"


# -- the builders ----------------------------------------------------------------------
def phrase_parts(state: Source) -> dict[str, Any]:
    """The kept parts of a phrase index built from ``state``'s cards (cards only: no schema
    is read or parsed for it; at 100k tools that was most of a first discovery)."""
    index = PhraseIndex([ToolSpec(c) for c in state.cards], state.df)
    fields = index.fields
    return {
        "name": fields.name,
        "summary": fields.summary,
        "keys": fields.keys,
        "in_name": fields.in_name,
        "in_summary": fields.in_summary,
        "phrases": index.phrases,
        "identifiers": index.identifiers,
        "starts": index.starts,
    }


def name_parts(state: Source) -> dict[str, Any]:
    names = inject.name_table(state.cards)
    return {"names": names, "rendered": {n: t for t, n in names.items()}}


def finder_parts(name_terms: Mapping[str, frozenset[str]]) -> dict[str, Any]:
    index = FinderIndex(name_terms)
    return {"name_terms": index.name_terms, "by_term": vars(index)["_by_term"]}
