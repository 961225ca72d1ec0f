"""Catalog lint: each check on a catalog built to trip it, and on one that does not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support import embedder
from toolscout.lint import CHECKS, LintReport, Severity, lint_paths
from toolscout.lint.overlap import probes_of, sample_probes
from toolscout.lint.text import sentences

CLEAN = {
    "id": "weather.get_forecast",
    "name": "get_forecast",
    "summary": "Get the weather forecast for a city by name and date.",
    "scopes": ["weather:read"],
    "aliases": ["will it rain tomorrow", "weather in Paris this weekend"],
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "date": {"type": "string", "format": "date", "description": "Day, e.g. 2025-06-01"},
        },
        "required": ["city"],
    },
}


def write(tmp_path: Path, *cards: dict[str, Any], name: str = "tools.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"tools": list(cards)}))
    return path


def static(tmp_path: Path, *cards: dict[str, Any]) -> LintReport:
    return lint_paths([write(tmp_path, *cards)], measure_overlap=False)


def card(tool_id: str, **changes: Any) -> dict[str, Any]:
    return {**CLEAN, "id": tool_id, "name": tool_id.rsplit(".", 1)[-1], **changes}


def codes(report: LintReport) -> dict[str, list[tuple[str, ...]]]:
    out: dict[str, list[tuple[str, ...]]] = {}
    for f in report.findings:
        out.setdefault(f.code, []).append(f.tools)
    return out


def test_a_clean_card_has_no_findings(tmp_path: Path) -> None:
    report = static(tmp_path, CLEAN)
    assert report.findings == () and not report.fails(Severity.WARNING)


def test_card_text_checks(tmp_path: Path) -> None:
    report = static(
        tmp_path,
        card("a.long_card", aliases=[f"a rather long alias number {i} for it" for i in range(8)]),
        card("a.two_sentences", summary="Gets the forecast. Also returns the UV index!"),
        card("a.echo_name", name="echo_name", summary="Echo name."),
        card("a.no_summary", summary=""),
        card("a.no_alias", aliases=[]),
        card(
            "a.query_freight_telemetry",
            summary="Read carrier dispatch and freight telemetry events for a shipment.",
            aliases=["why is my parcel late", "track a parcel"],
        ),
    )
    found = codes(report)
    assert found["card-too-long"] == [("a.long_card",)]
    assert found["summary-multi-sentence"] == [("a.two_sentences",)]
    assert found["description-name-only"] == [("a.echo_name",)]
    assert found["description-empty"] == [("a.no_summary",)]
    assert found["aliases-missing"] == [("a.no_alias",)]
    assert found["jargon-name"] == [("a.query_freight_telemetry",)]
    jargon = report.of_code("jargon-name")[0]
    assert "freight" in jargon.message and jargon.fix
    assert report.of_code("description-empty")[0].severity is Severity.ERROR


def test_a_name_users_also_say_is_not_jargon(tmp_path: Path) -> None:
    report = static(
        tmp_path,
        card("a.query_freight_telemetry", aliases=["freight status of my shipment"]),
    )
    assert "jargon-name" not in codes(report)


def test_sentence_counting() -> None:
    assert sentences("Get one order by id, e.g. 4417802.") == 1
    assert sentences("Costs 3.50 USD per call.") == 1
    assert sentences("Do a thing. Then another.") == 2
    assert sentences("") == 0


def test_access_checks(tmp_path: Path) -> None:
    report = static(
        tmp_path,
        card("db.drop_table", summary="Drop a table.", scopes=["db:write"], risk="write"),
        card("db.purge_logs", summary="Purge old logs.", scopes=["db:write"], risk="destructive"),
        card("db.open_tool", scopes=[]),
        card("db.get_and_reset", summary="Get a counter and reset it.", risk="write"),
        {**card("db.read_rows", summary="Read rows."), "annotations": {"destructiveHint": True}},
        card("db.grant_role", summary="Grant a role.", scopes=["db:admin"], risk="admin"),
    )
    found = codes(report)
    assert found["privileged-not-gated"] == [("db.drop_table",)]
    assert found["admin-scope-missing"] == [("db.purge_logs",)]
    assert found["scopes-missing"] == [("db.open_tool",)]
    assert found["write-named-read"] == [("db.get_and_reset",)]
    assert found["read-annotated-destructive"] == [("db.read_rows",)]
    assert "'db:admin'" in report.of_code("privileged-not-gated")[0].fix
    # a correctly gated admin tool is fine
    access = ("privileged-not-gated", "admin-scope-missing", "scopes-missing", "write-named-read")
    assert all(("db.grant_role",) not in found[code] for code in access)


def test_schema_checks(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": [], "description": "Mode"},
            "limit": {"type": "integer"},
            "filters": {
                "type": "object",
                "properties": {"a": {"type": "string", "description": "A"}},
                "required": ["a", "b"],
            },
        },
        "required": ["mode", "owner_id"],
    }
    report = static(
        tmp_path,
        card("s.shapes", parameters=schema),
        card(
            "s.broken",
            parameters={
                "type": "object",
                "properties": {"x": {"type": "strin", "description": "X"}},
            },
        ),
        card(
            "s.unmentioned",
            summary="Resize a disk.",
            parameters={
                "type": "object",
                "properties": {"volume_id": {"type": "string", "description": "Volume"}},
                "required": ["volume_id"],
            },
        ),
    )
    found = codes(report)
    assert found["enum-empty"] == [("s.shapes",)]
    assert len(found["required-not-property"]) == 2  # owner_id at the root, b in filters
    undescribed = report.of_code("param-undescribed")
    assert [f.tools for f in undescribed] == [("s.shapes",)]
    assert undescribed[0].evidence["parameters"] == ["limit", "filters"]
    assert found["schema-invalid"] == [("s.broken",)]
    assert "/properties/x/type" in report.of_code("schema-invalid")[0].message
    assert ("s.unmentioned",) in found["param-unmentioned"]


def test_id_checks(tmp_path: Path) -> None:
    first = write(tmp_path, card("orders.find_order"), card("Orders.Find-Order"), name="a.json")
    second = write(
        tmp_path,
        card("orders.find_order"),
        card("tools.a1b2c3d4e5f6a7b8"),
        card("orders.search_v2"),
        name="b.json",
    )
    report = lint_paths([first, second], measure_overlap=False)
    found = codes(report)
    assert found["id-duplicate"] == [("orders.find_order",)]
    assert "a.json" in report.of_code("id-duplicate")[0].message
    assert found["id-collision"] == [("Orders.Find-Order", "orders.find_order")]
    assert sorted(found["id-unstable"]) == [("orders.search_v2",), ("tools.a1b2c3d4e5f6a7b8",)]


def test_a_card_indexing_refuses_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    report = static(tmp_path, card("x.bad", risk="extreme"), CLEAN)
    assert codes(report)["card-invalid"] == [("x.bad",)]
    assert "risk" in report.of_code("card-invalid")[0].message
    assert report.tools == 1  # the good card is still checked


def test_every_code_is_documented() -> None:
    doc = (Path(__file__).parents[1] / "docs" / "lint.md").read_text()
    for code in CHECKS:
        assert f"`{code}`" in doc, code


# -- overlap, measured with the real retriever --------------------------------------------

ORDERS = [
    {
        "id": "orders.search_orders",
        "summary": "Search customer orders by date range or customer email.",
        "scopes": ["orders:read"],
        "aliases": ["orders this customer placed last month", "find orders by email"],
    },
    {
        "id": "orders.find_order",
        "summary": "Get one customer order and its details.",
        "scopes": ["orders:read"],
        "aliases": ["where is my order", "status of an order"],
    },
    {
        "id": "orders.get_order",
        "summary": "Get the details of one customer order.",
        "scopes": ["orders:read"],
        "aliases": ["where is the order", "status of an order"],
    },
    {
        "id": "weather.get_forecast",
        "summary": "Get the weather forecast for a city and date.",
        "scopes": ["weather:read"],
        "aliases": ["will it rain tomorrow", "weather in Paris"],
    },
    {
        "id": "hr.request_leave",
        "summary": "Request paid time off for an employee.",
        "scopes": ["hr:write"],
        "aliases": ["book a vacation", "take Friday off"],
    },
    {
        "id": "chat.send_message",
        "summary": "Post a message to a chat channel.",
        "scopes": ["chat:write"],
        "aliases": ["tell the team", "post in #general"],
    },
]


def test_overlapping_tools_are_measured_and_unhinted_pairs_are_errors(tmp_path: Path) -> None:
    report = lint_paths([write(tmp_path, *ORDERS)], embedder=embedder())
    assert report.probes >= 2 * len(ORDERS)
    pairs = {frozenset((p.a, p.b)): p for p in report.pairs}
    order_tools = {"orders.search_orders", "orders.find_order", "orders.get_order"}
    top = report.pairs[0]
    assert {top.a, top.b} <= order_tools and top.steals >= 2
    assert not any("weather.get_forecast" in k for k in pairs)  # nothing confuses the weather
    unhinted = report.of_code("overlap-unhinted")
    assert unhinted and all(set(f.tools) <= order_tools for f in unhinted)
    assert report.fails(Severity.ERROR)
    assert "not_for" in unhinted[0].fix and unhinted[0].evidence["examples"]


def test_not_for_hints_turn_the_error_into_a_warning(tmp_path: Path) -> None:
    hinted = [dict(c) for c in ORDERS]
    names = ["orders.search_orders", "orders.find_order", "orders.get_order"]
    for c in hinted:
        if c["id"] in names:
            others = [n for n in names if n != c["id"]]
            c["not_for"] = [f"other lookups — use {o}" for o in others]
    report = lint_paths([write(tmp_path, *hinted)], embedder=embedder())
    assert not report.of_code("overlap-unhinted")
    assert report.of_code("overlap") and not report.fails(Severity.ERROR)


def test_probes_and_sampling() -> None:
    from toolscout.cards import make_spec

    specs = [make_spec(c) for c in ORDERS]
    refer = {s.id: s.id for s in specs}
    hinted = make_spec({**ORDERS[0], "not_for": ["lookups by id — use orders.find_order"]})
    probes = probes_of(hinted, refer)
    kinds = [p.kind for p in probes]
    assert kinds[:2] == ["alias", "alias"] and "masked-summary" in kinds
    not_for = next(p for p in probes if p.kind == "not-for")
    assert not_for.text == "lookups by id" and not_for.expected == "orders.find_order"
    few = sample_probes(specs * 10, max_probes=30)
    assert len(few) <= 30 + len(specs) * 10 and len(few) >= len(specs) * 10 // 2
    assert few == sample_probes(specs * 10, max_probes=30)  # seeded: the same every run
