"""Running every check over a catalog: from files, or from an indexed catalog."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from toolscout.cards import ToolSpec
from toolscout.lint import access, duplicates, ids, overlap, schema, source, text
from toolscout.lint.findings import Finding, LintReport, OverlapPair
from toolscout.policy import DEFAULT_ADMIN_SCOPE

if TYPE_CHECKING:
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.base import Embedder


def static_findings(
    tools: Sequence[source.LintTool],
    *,
    token_budget: int = text.DEFAULT_TOKEN_BUDGET,
    admin_scope: str = DEFAULT_ADMIN_SCOPE,
) -> list[Finding]:
    """Every check that reads cards alone (no retrieval)."""
    return [
        *ids.check_ids(tools),
        *text.check_size(tools, token_budget),
        *text.check_summary(tools),
        *text.check_aliases(tools),
        *access.check_access(tools, admin_scope),
        *access.check_risk_declared(tools, admin_scope),
        *duplicates.check_duplicates(tools),
        *schema.check_schemas(tools),
    ]


def overlap_pairs(
    catalog: Catalog, specs: Sequence[ToolSpec], *, max_probes: int = overlap.MAX_PROBES
) -> tuple[list[OverlapPair], int]:
    """Measure overlapping tools with the catalog's own retriever, everything entitled."""
    return overlap.measure(specs, catalog, max_probes=max_probes)


def lint_catalog(
    catalog: Catalog,
    *,
    token_budget: int = text.DEFAULT_TOKEN_BUDGET,
    measure_overlap: bool = True,
    max_probes: int = overlap.MAX_PROBES,
) -> LintReport:
    """Lint an indexed catalog (``toolscout lint --db``)."""
    start = time.perf_counter()
    specs = catalog.specs()
    found = static_findings(
        source.from_specs(specs).tools,
        token_budget=token_budget,
        admin_scope=catalog.policy.admin_scope,
    )
    pairs: list[OverlapPair] = []
    n = 0
    if measure_overlap and len(specs) > 1:
        pairs, n = overlap_pairs(catalog, specs, max_probes=max_probes)
        found += overlap.findings(pairs)
    return LintReport.build(found, len(specs), pairs, n, time.perf_counter() - start)


def lint_paths(
    paths: Sequence[str | Path],
    *,
    embedder: Embedder | None = None,
    token_budget: int = text.DEFAULT_TOKEN_BUDGET,
    admin_scope: str = DEFAULT_ADMIN_SCOPE,
    measure_overlap: bool = True,
    max_probes: int = overlap.MAX_PROBES,
    cache: str | Path | None = None,
) -> LintReport:
    """Lint catalog files: every tool is checked; overlap is measured on an in-memory index.

    Raises :class:`~toolscout.errors.CatalogFileError` only for a file that cannot be read
    or parsed at all; everything wrong inside a readable file is a finding. ``cache`` is
    a SQLite file that keeps lint's own index between runs, so that only changed cards
    are embedded again (default: in memory, nothing kept).
    """
    start = time.perf_counter()
    read = source.read(paths)
    found = [*read.findings]
    found += static_findings(read.tools, token_budget=token_budget, admin_scope=admin_scope)
    unique = list({t.id: t.spec for t in reversed(read.tools)}.values())[::-1]
    pairs: list[OverlapPair] = []
    n = 0
    if measure_overlap and len(unique) > 1:
        from toolscout.discovery.catalog import Catalog

        where = str(cache) if cache is not None else ":memory:"
        with Catalog.open(where, embedder=embedder, log=False) as catalog:
            catalog.add(unique, replace_all=True)
            pairs, n = overlap_pairs(catalog, catalog.specs(), max_probes=max_probes)
        found += overlap.findings(pairs)
    return LintReport.build(found, len(read.tools), pairs, n, time.perf_counter() - start)
