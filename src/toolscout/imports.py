"""What an import changes, and whether it may: re-import protection and the report.

Every tool records its ``source`` (the catalog or service it came from). An
import may freely add tools and update its own ones, but :func:`plan_import`
refuses, with :class:`~toolscout.errors.ImportRefused` listing every such change,
one that

* changes a tool another source published (the source differs), or
* widens who may use a tool: more tenants, or tenant-restricted → every tenant;
  fewer required scopes (a scope dropped or replaced); a lower risk level,

unless ``force``. The plan says what is added, updated (and what changed per
tool), unchanged, and which protected changes a ``force`` let through.

:func:`import_warnings` and :func:`summarise_warnings` gather the quality
warnings the loader put on each spec, for the import report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscout.cards import CardWarning, Risk, ToolSpec, WarningKind
from toolscout.errors import ImportRefused

_RISK_ORDER = {Risk.READ: 0, Risk.WRITE: 1, Risk.ADMIN: 2, Risk.DESTRUCTIVE: 3}
_CARD_FIELDS = ("name", "summary", "tags", "aliases", "not_for", "group")


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One changed field of one tool. ``protected``: needs ``force`` (see the module doc)."""

    field: str
    old: str
    new: str
    protected: bool = False
    why: str = ""

    def __str__(self) -> str:
        text = f"{self.field} {self.old} → {self.new}"
        return f"{text} ({self.why})" if self.why else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "old": self.old,
            "new": self.new,
            "protected": self.protected,
            "why": self.why,
        }


@dataclass(frozen=True, slots=True)
class ToolChange:
    """What an import changes in one stored tool."""

    tool_id: str
    changes: tuple[FieldChange, ...]

    @property
    def protected(self) -> tuple[FieldChange, ...]:
        return tuple(c for c in self.changes if c.protected)

    def __str__(self) -> str:
        return f"{self.tool_id}: " + ", ".join(str(c) for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {"tool_id": self.tool_id, "changes": [c.to_dict() for c in self.changes]}


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """What an import does to the stored catalog."""

    added: tuple[str, ...]
    updated: tuple[ToolChange, ...]
    unchanged: tuple[str, ...]
    #: updates with protected changes that went through because of ``force``
    forced: tuple[ToolChange, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": list(self.added),
            "updated": [c.to_dict() for c in self.updated],
            "unchanged": len(self.unchanged),
            "forced": [c.tool_id for c in self.forced],
        }


def _fmt(values: Iterable[str], empty: str) -> str:
    items = sorted(values)
    return "[" + ", ".join(items) + "]" if items else empty


def _access_changes(old: ToolSpec, new: ToolSpec) -> list[FieldChange]:
    a, b = old.card, new.card
    out: list[FieldChange] = []
    if a.source != b.source:
        out.append(
            FieldChange(
                "source",
                repr(a.source),
                repr(b.source),
                True,
                "the tool belongs to another source",
            )
        )
    if set(a.tenants) != set(b.tenants):
        opened = bool(a.tenants) and (not b.tenants or not set(b.tenants) <= set(a.tenants))
        out.append(
            FieldChange(
                "tenants",
                _fmt(a.tenants, "every tenant"),
                _fmt(b.tenants, "every tenant"),
                opened,
                "widened" if opened else "",
            )
        )
    if set(a.scopes) != set(b.scopes):
        dropped = sorted(set(a.scopes) - set(b.scopes))
        out.append(
            FieldChange(
                "scopes",
                _fmt(a.scopes, "none"),
                _fmt(b.scopes, "none"),
                bool(dropped),
                f"no longer requires {', '.join(dropped)}" if dropped else "",
            )
        )
    if a.risk != b.risk:
        lower = _RISK_ORDER[b.risk] < _RISK_ORDER[a.risk]
        out.append(
            FieldChange("risk", a.risk.value, b.risk.value, lower, "lowered" if lower else "")
        )
    return out


def diff_specs(old: ToolSpec, new: ToolSpec) -> tuple[FieldChange, ...]:
    """Every field ``new`` changes in ``old``; access changes first."""
    changes = _access_changes(old, new)
    for name in _CARD_FIELDS:
        before, after = getattr(old.card, name), getattr(new.card, name)
        if before != after:
            changes.append(
                FieldChange(name, "…", "…") if name == "summary" else _plain(name, before, after)
            )
    if dict(old.parameters) != dict(new.parameters):
        changes.append(FieldChange("parameters", "schema", "new schema"))
    old_out = dict(old.output_schema) if old.output_schema is not None else None
    new_out = dict(new.output_schema) if new.output_schema is not None else None
    if old_out != new_out:
        changes.append(FieldChange("output_schema", "schema", "new schema"))
    return tuple(changes)


def _plain(name: str, before: Any, after: Any) -> FieldChange:
    if isinstance(before, tuple):
        return FieldChange(name, _fmt(before, "none"), _fmt(after, "none"))
    return FieldChange(name, repr(before), repr(after))


def plan_import(
    existing: Mapping[str, ToolSpec], incoming: Sequence[ToolSpec], *, force: bool = False
) -> ImportPlan:
    """What importing ``incoming`` over ``existing`` (by id) changes; refuses a protected
    change unless ``force`` (:class:`~toolscout.errors.ImportRefused`, naming every one)."""
    added: list[str] = []
    updated: list[ToolChange] = []
    unchanged: list[str] = []
    for spec in incoming:
        old = existing.get(spec.id)
        if old is None:
            added.append(spec.id)
            continue
        changes = diff_specs(old, spec)
        if changes:
            updated.append(ToolChange(spec.id, changes))
        else:
            unchanged.append(spec.id)
    protected = tuple(c for c in updated if c.protected)
    if protected and not force:
        raise ImportRefused(
            [(c.tool_id, "; ".join(str(f) for f in c.protected)) for c in protected]
        )
    return ImportPlan(tuple(added), tuple(updated), tuple(unchanged), protected)


# -- quality warnings ----------------------------------------------------------------


def import_warnings(specs: Iterable[ToolSpec]) -> list[CardWarning]:
    """The quality warnings the specs were built with, in catalog order."""
    return [w for spec in specs for w in spec.warnings]


def summarise_warnings(warnings: Sequence[CardWarning], *, first: int = 3) -> list[str]:
    """One line per kind: how many tools, what it means, the first few tool ids."""
    counts = Counter(w.kind for w in warnings)
    lines = []
    for kind in WarningKind:
        n = counts.get(kind, 0)
        if not n:
            continue
        ids = list(dict.fromkeys(w.tool_id for w in warnings if w.kind is kind))
        shown = ", ".join(ids[:first]) + (
            f", … ({len(ids) - first} more)" if len(ids) > first else ""
        )
        lines.append(f"{n} × {kind.value}: {kind.meaning}: {shown}")
    return lines
