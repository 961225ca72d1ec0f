"""Checks on tool ids: duplicates, near-duplicates by case or separator, unstable ids.

An id is the key that links audit records, learned aliases and the discovery
log to a tool; if it changes between imports, all of that history is lost.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from toolscout.lint.findings import Finding
from toolscout.lint.source import LintTool

_SEPARATORS = re.compile(r"[\s_.\-/:]+")
_UNSTABLE = (
    (
        re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.I),
        "a UUID",
    ),
    (
        re.compile(
            r"(?<![0-9a-z])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{10,}(?![0-9a-z])", re.I
        ),
        "a hash",
    ),
    (re.compile(r"(?:19|20)[0-9]{2}-?[01][0-9]-?[0-3][0-9]"), "a date"),
    (re.compile(r"[0-9]{9,}"), "a long number"),
    (re.compile(r"(?:^|[_.\-/:])v[0-9]+(?:\.[0-9]+)*$", re.I), "a version suffix"),
)


def canonical(tool_id: str) -> str:
    """The id with case and separators folded: ``Orders.Find-Order`` -> ``ordersfindorder``."""
    return _SEPARATORS.sub("", tool_id).casefold()


def check_ids(tools: Sequence[LintTool]) -> list[Finding]:
    out: list[Finding] = []
    by_id: dict[str, list[LintTool]] = defaultdict(list)
    for t in tools:
        by_id[t.id].append(t)
    for tool_id, same in by_id.items():
        if len(same) > 1:
            out.append(
                Finding.of(
                    "id-duplicate",
                    [tool_id],
                    f"{tool_id} is defined {len(same)} times "
                    f"({', '.join(t.where for t in same if t.where) or 'in this catalog'})",
                    "keep one definition, or give each tool its own id; indexing refuses "
                    "duplicates",
                    places=[t.where for t in same],
                )
            )
    by_canon: dict[str, list[str]] = defaultdict(list)
    for tool_id in by_id:
        by_canon[canonical(tool_id)].append(tool_id)
    for ids in by_canon.values():
        if len(ids) > 1:
            out.append(
                Finding.of(
                    "id-collision",
                    sorted(ids),
                    f"ids differ only by case or separator: {', '.join(sorted(ids))}",
                    "merge them if they are one tool; otherwise rename one so names rendered "
                    "for model APIs (which fold separators) cannot collide",
                )
            )
    for tool_id in by_id:
        for pattern, what in _UNSTABLE:
            if pattern.search(tool_id):
                out.append(
                    Finding.of(
                        "id-unstable",
                        [tool_id],
                        f"{tool_id} contains {what}, so it may change on the next import",
                        "use a stable id made of the service and the operation "
                        "(e.g. orders.find_order); audit, aliases and the log key on it",
                        pattern=what,
                    )
                )
                break
    return out
