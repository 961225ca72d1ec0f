"""Re-import protection and the import warning summary (toolscout.imports)."""

from __future__ import annotations

from typing import Any

import pytest

from toolscout.cards import ToolSpec, WarningKind, make_spec
from toolscout.errors import ImportRefused
from toolscout.imports import import_warnings, plan_import, summarise_warnings


def tool(tool_id: str = "acme.admin_tool", **kw: Any) -> ToolSpec:
    data: dict[str, Any] = {
        "id": tool_id,
        "summary": "Reset a user's password.",
        "scopes": ["users:admin"],
        "tenants": ["acme"],
        "risk": "admin",
        "source": "acme_catalog",
    }
    data.update(kw)
    return make_spec(data)


def stored(*specs: ToolSpec) -> dict[str, ToolSpec]:
    return {s.id: s for s in specs}


def test_added_updated_unchanged() -> None:
    existing = stored(tool(), tool("acme.other", risk="read", scopes=[]))
    plan = plan_import(
        existing,
        [
            tool(),
            tool("acme.other", risk="read", scopes=[], summary="New words."),
            tool("acme.new"),
        ],
    )
    assert plan.added == ("acme.new",)
    assert plan.unchanged == ("acme.admin_tool",)
    (change,) = plan.updated
    assert change.tool_id == "acme.other" and [c.field for c in change.changes] == ["summary"]
    assert not change.protected and plan.forced == ()
    assert plan.to_dict()["unchanged"] == 1


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        ({"source": "globex_catalog"}, "source", "another source"),
        ({"tenants": []}, "tenants", "[acme] → every tenant (widened)"),
        ({"tenants": ["acme", "globex"]}, "tenants", "widened"),
        ({"scopes": []}, "scopes", "no longer requires users:admin"),
        ({"scopes": ["users:read"]}, "scopes", "no longer requires users:admin"),
        ({"risk": "read"}, "risk", "admin → read (lowered)"),
        ({"risk": "write"}, "risk", "lowered"),
    ],
)
def test_widening_or_taking_over_is_refused_unless_forced(
    change: dict[str, Any], field: str, fragment: str
) -> None:
    existing = stored(tool())
    incoming = [tool(**change)]
    with pytest.raises(ImportRefused) as info:
        plan_import(existing, incoming)
    ((tool_id, what),) = info.value.conflicts
    assert tool_id == "acme.admin_tool" and field in what and fragment in what
    assert "--force" in str(info.value)
    plan = plan_import(existing, incoming, force=True)
    assert [c.tool_id for c in plan.forced] == ["acme.admin_tool"]
    assert plan.updated[0].protected[0].field == field


def test_narrowing_is_allowed() -> None:
    existing = stored(tool(risk="write", tenants=["acme", "globex"], scopes=["users:admin"]))
    plan = plan_import(
        existing, [tool(risk="destructive", tenants=["acme"], scopes=["users:admin", "x:y"])]
    )
    fields = {c.field for c in plan.updated[0].changes}
    assert fields == {"risk", "tenants", "scopes"} and plan.forced == ()


def test_refusal_lists_every_protected_change_across_tools() -> None:
    existing = stored(tool(), tool("acme.b"), tool("acme.c"))
    incoming = [
        tool(tenants=[], risk="read", source="evil"),
        tool("acme.b", summary="Harmless new words."),
        tool("acme.c", scopes=[]),
    ]
    with pytest.raises(ImportRefused) as info:
        plan_import(existing, incoming)
    conflicts = dict(info.value.conflicts)
    assert set(conflicts) == {"acme.admin_tool", "acme.c"}
    first = conflicts["acme.admin_tool"]
    assert "source" in first and "tenants" in first and "risk" in first
    assert "\n" not in str(info.value)


def test_warning_summary_counts_by_kind_and_names_the_first_tools() -> None:
    bad_schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": "5"}}}
    specs = [make_spec({"id": f"r.t{i}"}) for i in range(5)]
    specs.append(make_spec({"id": "r.s", "summary": "S.", "parameters": bad_schema}))
    specs.append(make_spec({"id": "r.ok", "summary": "Fine."}))
    warnings = import_warnings(specs)
    assert len(warnings) == 6
    lines = summarise_warnings(warnings, first=3)
    assert len(lines) == 2
    assert lines[0].startswith("5 × empty_summary") and "r.t0, r.t1, r.t2, … (2 more)" in lines[0]
    assert lines[1].startswith("1 × invalid_schema") and lines[1].endswith("r.s")
    assert warnings[-1].kind is WarningKind.INVALID_SCHEMA
