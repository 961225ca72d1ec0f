"""Semantic duplicates: two tools that do the same job, whether or not retrieval confuses them.

Overlap (``lint.overlap``) measures what retrieval does; a pair it tells apart by
name alone ("search_orders" / "find_orders") still leaves the model, the policy
and the audit log with two tools for one job. Two tools are duplicates when all
three of what they are alike:

- their summaries say the same thing: they open with the same operation and use
  the same content words once word order, stop words, inflection and the usual
  verb synonyms (search/find/look up, create/add, delete/remove...) are set aside,
  and no word only one of them uses is in either tool's name (``delete_albums`` /
  ``delete_tracks``, "Remove albums..." / "Remove tracks...", act on different things);
- they take the same parameters (names compared as words: ``customer_email`` and
  ``customerEmail`` are one), or both take none;
- they return the same outputs (output schema properties), or neither declares any.

Only the words of the cards are read: no model, the same on every run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from toolscout.discovery.lexical import phrase_key, stem, terms, words
from toolscout.lint.findings import Finding
from toolscout.lint.source import LintTool

#: summaries at least this alike (Jaccard of their canonical content words) say the same
SUMMARY_ALIKE = 0.6
#: ... and when neither tool takes a parameter, at least this alike (less else to compare)
SUMMARY_ALIKE_NO_PARAMS = 0.75
#: a summary needs this many content words to be compared at all
MIN_SUMMARY_TERMS = 3
#: parameter (or output) names at least this alike (Jaccard) are the same inputs
PARAMS_ALIKE = 0.75
#: a word in more summaries than this share of the catalog (and 50) starts no comparison
COMMON_TERM_SHARE = 0.05

#: verbs that name one operation, by the word the comparison uses for it (stemmed forms)
_SYNONYMS = {
    "find": "get search lookup look queri retriev fetch locat list return obtain read view",
    "creat": "add new make insert regist post",
    "delet": "remov eras drop purg destroy",
    "updat": "edit modifi chang alter set patch amend",
    "send": "deliv dispatch transmit",
    "cancel": "abort revok void",
    "calcul": "comput determin evalu",
}
_CANON = {syn: head for head, syns in _SYNONYMS.items() for syn in syns.split()}


@dataclass(frozen=True, slots=True)
class _Shape:
    """What one tool is, for comparison."""

    verb: str  # the operation the summary opens with
    summary: frozenset[str]
    name: frozenset[str]
    params: frozenset[str]
    outputs: frozenset[str] | None


def _props(schema: Any) -> frozenset[str]:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return frozenset()
    return frozenset(phrase_key(str(name)) for name in props)


def _shape(tool: LintTool) -> _Shape:
    spec = tool.spec
    summary = frozenset(_CANON.get(t, t) for t in terms(spec.card.summary))
    outputs = _props(spec.output_schema) if spec.output_schema is not None else None
    first = words(spec.card.summary)[:1]
    verb = _CANON.get(stem(first[0]), stem(first[0])) if first else ""
    name = frozenset(_CANON.get(t, t) for t in terms(spec.card.name))
    return _Shape(verb, summary, name, _props(spec.parameters), outputs)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def _alike(a: _Shape, b: _Shape) -> tuple[float, float, float] | None:
    """(summary, parameters, outputs) similarity when the two are duplicates, else None."""
    if a.verb != b.verb or min(len(a.summary), len(b.summary)) < MIN_SUMMARY_TERMS:
        return None
    params = _jaccard(a.params, b.params)
    if params < PARAMS_ALIKE:
        return None
    if (a.outputs is None) != (b.outputs is None):
        return None
    outputs = 1.0 if a.outputs is None or b.outputs is None else _jaccard(a.outputs, b.outputs)
    if outputs < PARAMS_ALIKE:
        return None
    if (a.summary ^ b.summary) & (a.name | b.name):
        return None  # the words that differ are what the names say the tools act on
    summary = _jaccard(a.summary, b.summary)
    needed = SUMMARY_ALIKE if a.params or b.params else SUMMARY_ALIKE_NO_PARAMS
    return (summary, params, outputs) if summary >= needed else None


def _candidates(shapes: Sequence[_Shape]) -> set[tuple[int, int]]:
    """Pairs that share a summary word rare enough to index (all alike pairs do)."""
    postings: dict[str, list[int]] = {}
    for i, s in enumerate(shapes):
        for term in s.summary:
            postings.setdefault(term, []).append(i)
    cap = max(50, int(COMMON_TERM_SHARE * len(shapes)))
    shared: Counter[tuple[int, int]] = Counter()
    for ids in postings.values():
        if len(ids) <= cap:
            shared.update(combinations(ids, 2))
    return {pair for pair, n in shared.items() if n >= 2}


def check_duplicates(tools: Sequence[LintTool]) -> list[Finding]:
    """One ``duplicate-tool`` finding per pair of tools that do the same job."""
    unique = list({t.id: t for t in tools}.values())
    shapes = [_shape(t) for t in unique]
    out: list[Finding] = []
    for i, j in sorted(_candidates(shapes)):
        alike = _alike(shapes[i], shapes[j])
        if alike is None:
            continue
        a, b = sorted((unique[i].id, unique[j].id))
        summary, params, outputs = alike
        inputs = ", ".join(sorted(shapes[i].params | shapes[j].params)) or "no parameters"
        out.append(
            Finding.of(
                "duplicate-tool",
                [a, b],
                f"{a} and {b} look like one tool twice: summaries {summary:.0%} alike, "
                f"parameters {params:.0%} alike ({inputs}), outputs {outputs:.0%} alike",
                "merge them (keep one id; the other's name and summary become its aliases), "
                "or make each summary say what differs and add not_for hints naming the other",
                summary_similarity=round(summary, 3),
                parameter_similarity=round(params, 3),
                output_similarity=round(outputs, 3),
            )
        )
    return out
