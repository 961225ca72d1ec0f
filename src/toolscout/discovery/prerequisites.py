"""Prerequisite tools: the finder a shortlisted tool needs for an id the request lacks.

A tool that requires ``person_id`` cannot serve "how many movies did Sofia Coppola
direct" until another tool has found the person: the request names the person, never
the endpoint that looks her up, so retrieval by similarity to the request rarely ranks
that endpoint. Multi-step tasks lose their first step this way (RestBench's solutions
start with such a search in most of its tasks).

The rule, with no constant fitted to any data:

- a tool's required parameter ``<entity>_id`` (``person_id``, ``playlistId``,
  ``movie_ids``) names an entity it needs an identifier for; a bare ``id`` names none;
- when the request itself carries nothing that looks like an identifier (a run of three
  or more digits, a token mixing letters and digits, a long hex string), the tool is
  followed in the shortlist by the catalog's *finder* for that entity: an entitled tool
  whose name has a finder verb (search, find, lookup, list) and the entity's words, and
  that does not itself require an identifier of that entity; the finder with the fewest
  name words wins (``search_person`` over ``list_person_movie_credits``), then the one
  retrieval scored higher, then the id;
- the shortlist keeps its length: tools are taken in rank order, each followed by its
  missing finders, until ``k`` are chosen. A finder is only ever an entitled tool, and
  exact mentions keep their places at the front.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import replace

from toolscout.cards import ToolSpec
from toolscout.discovery.lexical import terms
from toolscout.discovery.search import Candidate

#: name words (stemmed) that make a tool a finder
FINDER_VERBS: frozenset[str] = frozenset({"search", "find", "lookup", "list"})
#: how many finders per entity are checked against their own required parameters
FINDER_CANDIDATES = 8

#: ``person_id``, ``person-ids``, ``personId``, ``personIDs`` (not ``paid``, ``android``)
_ENTITY_ID = re.compile(
    r"^(?P<entity>[A-Za-z][A-Za-z0-9_-]*?)"
    r"(?:[_-](?:id|ids|Id|Ids|ID|IDs)|(?<=[a-z0-9])(?:Id|Ids|ID|IDs))$"
)
#: something in the request that reads as an identifier value, not as a name
_IDENTIFIER_VALUE = re.compile(r"\b\d{3,}\b|\b[0-9a-fA-F]{8,}\b")  # 12345; a hash, a uuid
_TOKEN = re.compile(r"[A-Za-z0-9_]+")
_ORDINAL = re.compile(r"^\d+(?:st|nd|rd|th|s)$", re.IGNORECASE)  # 2nd, 10th, 1990s


def entity_of(param: str) -> tuple[str, ...]:
    """The stemmed words of the entity a parameter identifies (``person_id`` → person);
    empty for a bare ``id`` or a parameter that is not an identifier."""
    m = _ENTITY_ID.match(param.strip())
    if m is None:
        return ()
    return tuple(dict.fromkeys(terms(m.group("entity").replace("_", " ").replace("-", " "))))


def gives_identifier(text: str) -> bool:
    """Whether the request carries a value that reads as an identifier: a run of three
    or more digits, a long hex string, or a token of four or more characters mixing
    letters and digits (``usr_42x``, ``A1B2``; not ``10th``)."""
    if _IDENTIFIER_VALUE.search(text):
        return True
    return any(
        len(tok) >= 4
        and any(ch.isdigit() for ch in tok)
        and any(ch.isalpha() for ch in tok)
        and not _ORDINAL.match(tok)
        for tok in _TOKEN.findall(text)
    )


def needed_entities(spec: ToolSpec) -> list[tuple[str, ...]]:
    """The entities ``spec`` requires an identifier of, in its parameters' order."""
    params = spec.parameters if isinstance(spec.parameters, Mapping) else {}
    required = params.get("required", [])
    if not isinstance(required, list):
        return []
    out: list[tuple[str, ...]] = []
    for name in required:
        if isinstance(name, str) and (entity := entity_of(name)) and entity not in out:
            out.append(entity)
    return out


class FinderIndex:
    """The catalog's finders (tools named with a finder verb) by the words of their name.

    Built from each tool's stemmed name terms (tool id → terms, in catalog order: the
    ranker's :class:`~toolscout.discovery.calibrate.FieldTerms` already holds them)."""

    def __init__(self, name_terms: Mapping[str, frozenset[str]]) -> None:
        self.name_terms: dict[str, frozenset[str]] = {}
        self._by_term: dict[str, list[str]] = {}
        for tool_id, words in name_terms.items():
            if not words & FINDER_VERBS:
                continue
            self.name_terms[tool_id] = words
            for term in words - FINDER_VERBS:
                self._by_term.setdefault(term, []).append(tool_id)

    def __len__(self) -> int:
        return len(self.name_terms)

    def finders(self, entity: Sequence[str], allowed: Set[str]) -> list[str]:
        """Entitled finders of ``entity``, fewest name words first (then by id)."""
        if not entity:
            return []
        pool = self._by_term.get(entity[0], [])
        wanted = set(entity)
        found = [t for t in pool if t in allowed and wanted <= self.name_terms[t]]
        return sorted(found, key=lambda t: (len(self.name_terms[t]), t))


def add_prerequisites(
    chosen: Sequence[Candidate],
    k: int,
    *,
    request: str,
    index: FinderIndex,
    allowed: Set[str],
    specs_of: Callable[[Sequence[str]], Sequence[ToolSpec]],
    candidates: Sequence[Candidate],
) -> list[Candidate]:
    """``chosen`` in order, each tool followed by the finders it lacks, cut to ``k``
    (``candidates``: the retrieval's pool, whose scores an added finder keeps)."""
    if not chosen or not len(index) or gives_identifier(request):
        return list(chosen)
    retrieved = {c.id: c for c in candidates}
    specs = {s.id: s for s in specs_of([c.id for c in chosen])}
    out: list[Candidate] = []
    taken: set[str] = set()
    for c in chosen:
        if len(out) >= k:
            break
        if c.id in taken:
            continue
        out.append(c)
        taken.add(c.id)
        spec = specs.get(c.id)
        for entity in needed_entities(spec) if spec is not None else []:
            if len(out) >= k:
                break
            finder = _finder(entity, c.id, index, allowed, specs_of, retrieved)
            if finder is not None and finder not in taken:
                got = retrieved.get(finder) or Candidate(finder)
                out.append(replace(got, needed_by=c.id))
                taken.add(finder)
    return out


def _finder(
    entity: tuple[str, ...],
    needed_by: str,
    index: FinderIndex,
    allowed: Set[str],
    specs_of: Callable[[Sequence[str]], Sequence[ToolSpec]],
    retrieved: Mapping[str, Candidate],
) -> str | None:
    found = [t for t in index.finders(entity, allowed) if t != needed_by]
    if not found:
        return None
    # fewest name words, then the better retrieval score, then the id
    found.sort(key=lambda t: (len(index.name_terms[t]), -_fused(retrieved, t), t))
    for spec in specs_of(found[:FINDER_CANDIDATES]):
        if entity not in needed_entities(spec):  # a finder that needs the id finds nothing
            return spec.id
    return None


def _fused(retrieved: Mapping[str, Candidate], tool_id: str) -> float:
    got = retrieved.get(tool_id)
    return got.fused if got is not None else 0.0
