"""Exact names always work: a request that *is* a tool's name returns that tool first.

A query that is a tool's id, rendered function name or card name — with or without a
server prefix (``github__create_issue``, ``github.create_issue``, ``mcp__github__x``),
or in the ``select:name[,name...]`` form the providers' own tool searches use — puts
those tools first in the shortlist, with confidence 1, whatever retrieval thought and
even if the tool was already shown. Only entitled tools are ever returned; a name
that fits two tools equally (two servers' ``search``) stays with retrieval.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Sequence, Set
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolscout.cards import CapabilityCard
    from toolscout.discovery.catalog import Catalog

SELECT = "select:"
#: separators between a server (or namespace) prefix and a tool name
_SEPARATORS = re.compile(r"__|[.:/]")
#: a query longer than this is a request, not a name
MAX_NAME_CHARS = 256

_cache: weakref.WeakKeyDictionary[Catalog, tuple[int, dict[str, frozenset[str]]]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def _keys(card: CapabilityCard, rendered: str) -> set[str]:
    """Every spelling of one tool a query may use: id, rendered and card name, and each
    of them with leading prefixes taken off."""
    out: set[str] = set()
    for full in (card.id, rendered, card.name):
        key = full.strip().lower()
        if not key:
            continue
        out.add(key)
        for m in _SEPARATORS.finditer(key):
            rest = key[m.end() :]
            if rest:
                out.add(rest)
    return out


def name_index(catalog: Catalog) -> dict[str, frozenset[str]]:
    """Lower-cased spelling → the tool ids it may mean (built once per catalog generation)."""
    gen = catalog.generation
    with _lock:
        hit = _cache.get(catalog)
        if hit is not None and hit[0] == gen:
            return hit[1]
    names = catalog.names()
    index: dict[str, set[str]] = {}
    for card in catalog.cards():
        for key in _keys(card, names.get(card.id, card.id)):
            index.setdefault(key, set()).add(card.id)
    frozen = {k: frozenset(v) for k, v in index.items()}
    with _lock:
        _cache[catalog] = (gen, frozen)
    return frozen


def _candidates(part: str) -> list[str]:
    """The spellings to try for one name: as written, then without each prefix."""
    key = part.strip().strip("`'\"").lower()
    out = [key]
    if key.startswith("mcp__"):
        out.append(key[5:])
    for m in _SEPARATORS.finditer(key):
        out.append(key[m.end() :])
    return [k for k in out if k]


def named_tools(catalog: Catalog, query: str, allowed: Set[str]) -> list[str]:
    """The entitled tools the whole query names, in the order named (empty: not a name)."""
    text = query.strip()
    if not text or len(text) > MAX_NAME_CHARS:
        return []
    selecting = text.lower().startswith(SELECT)
    if selecting:
        parts: Sequence[str] = text[len(SELECT) :].split(",")
    elif any(ch.isspace() for ch in text):
        return []  # a sentence: exact mentions inside it are search.PhraseIndex's job
    else:
        parts = [text]
    index = name_index(catalog)
    found: list[str] = []
    for part in parts:
        for key in _candidates(part):
            ids = index.get(key, frozenset()) & allowed
            exact_id = [t for t in ids if t.lower() == key]
            if len(ids) == 1 or exact_id:
                tool_id = exact_id[0] if exact_id else next(iter(ids))
                if tool_id not in found:
                    found.append(tool_id)
                break
    return found
