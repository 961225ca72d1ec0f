"""What lint reports: findings with a stable code, a severity, the tools and a fix."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    """How bad a finding is; ``--fail-on`` picks the lowest one that fails the run."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


@dataclass(frozen=True, slots=True)
class Check:
    """One lint check: its stable code, default severity and what it looks for."""

    code: str
    severity: Severity
    title: str


#: Every check lint runs, by code. Codes are stable: tooling may filter on them.
CHECKS: dict[str, Check] = {
    c.code: c
    for c in (
        Check("card-invalid", Severity.ERROR, "the card or schema cannot be indexed at all"),
        Check("id-duplicate", Severity.ERROR, "the same id is used by more than one tool"),
        Check("id-collision", Severity.ERROR, "ids that differ only by case or separator"),
        Check("id-unstable", Severity.WARNING, "an id that looks generated or versioned"),
        Check("overlap-unhinted", Severity.ERROR, "retrieval confuses two tools, no not-for hint"),
        Check("overlap", Severity.WARNING, "retrieval confuses two tools"),
        Check("duplicate-tool", Severity.WARNING, "two tools alike in summary, inputs, outputs"),
        Check("card-too-long", Severity.WARNING, "the card is over the token budget"),
        Check("summary-multi-sentence", Severity.WARNING, "the summary is over one sentence"),
        Check("description-empty", Severity.ERROR, "the tool has no description"),
        Check("description-name-only", Severity.WARNING, "the description only repeats the name"),
        Check("aliases-missing", Severity.INFO, "no aliases in users' words"),
        Check("jargon-name", Severity.WARNING, "the name shares no word with users' words"),
        Check("privileged-not-gated", Severity.ERROR, "an admin/destructive tool not so marked"),
        Check("admin-scope-missing", Severity.WARNING, "a privileged tool without an admin scope"),
        Check("scopes-missing", Severity.ERROR, "a tool with no scopes at all"),
        Check("write-named-read", Severity.ERROR, "a write tool whose name says read"),
        Check("read-annotated-destructive", Severity.ERROR, "read risk, destructive annotation"),
        Check(
            "admin-scope-no-risk", Severity.WARNING, "an admin-scoped tool that declares no risk"
        ),
        Check("risk-undeclared", Severity.WARNING, "no risk, but it writes or deletes"),
        Check("param-undescribed", Severity.WARNING, "a parameter without a description"),
        Check("param-unmentioned", Severity.INFO, "a required parameter the description omits"),
        Check("enum-empty", Severity.ERROR, "an enum with no values"),
        Check("required-not-property", Severity.ERROR, "a required field that is not a property"),
        Check("schema-invalid", Severity.ERROR, "not valid JSON Schema 2020-12"),
    )
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: which check, how bad, which tools, what is wrong and how to fix it."""

    code: str
    tools: tuple[str, ...]
    message: str
    fix: str
    severity: Severity = Severity.WARNING
    evidence: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        code: str,
        tools: Sequence[str],
        message: str,
        fix: str,
        *,
        severity: Severity | None = None,
        **evidence: Any,
    ) -> Finding:
        sev = severity if severity is not None else CHECKS[code].severity
        return cls(code, tuple(tools), message, fix, sev, dict(evidence))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity.value,
            "tools": list(self.tools),
            "message": self.message,
            "fix": self.fix,
        }
        if self.evidence:
            out["evidence"] = self.evidence
        return out


@dataclass(frozen=True, slots=True)
class OverlapPair:
    """Two tools retrieval confuses: how often each took the other's probe queries."""

    a: str
    b: str
    a_to_b: float  # probes for ``a`` that ``b`` matched as well (weighted by closeness)
    b_to_a: float
    probes: int  # probes of a and b together
    hinted: int  # 0: no not-for hint between them, 1: one side names the other, 2: both
    examples: tuple[str, ...] = ()

    @property
    def steals(self) -> float:
        return self.a_to_b + self.b_to_a

    @property
    def rate(self) -> float:
        return self.steals / self.probes if self.probes else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tools": [self.a, self.b],
            "rate": round(self.rate, 3),
            "confused": {
                f"{self.a}->{self.b}": round(self.a_to_b, 2),
                f"{self.b}->{self.a}": round(self.b_to_a, 2),
            },
            "probes": self.probes,
            "not_for_hints": self.hinted,
            "examples": list(self.examples),
        }


@dataclass(frozen=True, slots=True)
class LintReport:
    """Everything one lint run found, worst first."""

    findings: tuple[Finding, ...]
    tools: int
    pairs: tuple[OverlapPair, ...] = ()
    probes: int = 0
    seconds: float = 0.0

    @classmethod
    def build(
        cls,
        findings: Iterable[Finding],
        tools: int,
        pairs: Sequence[OverlapPair] = (),
        probes: int = 0,
        seconds: float = 0.0,
    ) -> LintReport:
        ordered = sorted(findings, key=lambda f: (-f.severity.rank, f.code, f.tools))
        return cls(tuple(ordered), tools, tuple(pairs), probes, seconds)

    def counts(self) -> dict[str, int]:
        """Findings per check code, in the order of :data:`CHECKS`."""
        c = Counter(f.code for f in self.findings)
        return {code: c[code] for code in CHECKS if c[code]}

    def by_severity(self) -> dict[str, int]:
        c = Counter(f.severity.value for f in self.findings)
        return {s.value: c[s.value] for s in Severity}

    def fails(self, level: Severity) -> bool:
        """Whether any finding is at or above ``level``."""
        return any(f.severity.rank >= level.rank for f in self.findings)

    def of_code(self, code: str) -> list[Finding]:
        return [f for f in self.findings if f.code == code]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tools": self.tools,
            "probes": self.probes,
            "seconds": round(self.seconds, 3),
            "by_severity": self.by_severity(),
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.findings],
            "overlapping_pairs": [p.to_dict() for p in self.pairs],
        }
