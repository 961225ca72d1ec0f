"""Catalog lint: what will confuse retrieval or the policy, found before deployment.

``lint_paths`` checks catalog files, ``lint_catalog`` an indexed catalog. Each
finding has a stable code (:data:`CHECKS`), a severity, the tools involved and
a concrete fix; lint never changes the catalog.
"""

from __future__ import annotations

from toolscout.lint.findings import CHECKS, Check, Finding, LintReport, OverlapPair, Severity
from toolscout.lint.run import lint_catalog, lint_paths

__all__ = [
    "CHECKS",
    "Check",
    "Finding",
    "LintReport",
    "OverlapPair",
    "Severity",
    "lint_catalog",
    "lint_paths",
]
