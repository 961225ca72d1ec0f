"""A catalog as messy as real ones, end to end through the library: read with warnings,
indexed, found by search, and its imperfect schemas still validate arguments at execution."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import embedder
from toolscout.cards import WarningKind
from toolscout.discovery.catalog import Catalog
from toolscout.executors.base import DryRunExecutor
from toolscout.imports import import_warnings
from toolscout.loader import read_catalog
from toolscout.policy import Principal
from toolscout.service import Toolscout

ROWS = [
    {"id": "rapid:getCurrencyRates", "description": "", "parameters": {
        "type": "object", "properties": {"base": {"type": "string"}, "symbols": {"type": "string"}},
    }},
    {"id": "mcp:run_sql_query", "description": "Run a SQL query on the analytics warehouse.",
     "parameters": {"type": "object", "properties": {
         "sql": {"type": "string", "required": True},
         "timeout": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
         "limit": {"type": "integer", "maximum": "50"},
     }}},
    {"id": "clean:send_email", "description": "Send an email to a recipient.", "parameters": {
        "type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"],
    }},
]  # fmt: skip

CALLER = Principal.of("tester")


@pytest.fixture
def ts(tmp_path: Path) -> Iterator[Toolscout]:
    path = tmp_path / "messy.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    specs = read_catalog([path])
    kinds = sorted((w.tool_id, w.kind) for w in import_warnings(specs))
    assert kinds == [
        ("mcp:run_sql_query", WarningKind.INVALID_SCHEMA),
        ("rapid:getCurrencyRates", WarningKind.EMPTY_SUMMARY),
    ]
    catalog = Catalog.open(":memory:", embedder=embedder(), log=False)
    report = catalog.add(specs)
    assert report.stats.added == 3
    with Toolscout(catalog, executors={"*": DryRunExecutor()}) as service:
        yield service


def test_messy_tools_are_searchable(ts: Toolscout) -> None:
    found = ts.discover(CALLER, "currency exchange rates for EUR", k=1, tier="progressive")
    assert found.ids == ["rapid:getCurrencyRates"]
    found = ts.discover(CALLER, "query the analytics warehouse with SQL", k=1, tier="progressive")
    assert found.ids == ["mcp:run_sql_query"]
    schema = ts.schema(CALLER, "mcp:run_sql_query", "mcp")
    assert schema["inputSchema"]["properties"]["limit"]["maximum"] == "50"  # as published


@pytest.mark.parametrize(
    "arguments",
    [
        {"timeout": 5},  # "required": true inside the property
        {"sql": "select 1", "limit": 51},  # "maximum": "50"
        {"sql": "select 1", "timeout": 0},  # "exclusiveMinimum": true over minimum 0
        {"sql": 42},
    ],
)
def test_imperfect_schemas_still_refuse_bad_arguments(
    ts: Toolscout, arguments: dict[str, object]
) -> None:
    result = ts.execute(CALLER, "mcp:run_sql_query", arguments)
    assert (result.status, result.reason) == ("refused", "schema_mismatch"), result


def test_imperfect_schemas_accept_good_arguments(ts: Toolscout) -> None:
    result = ts.execute(CALLER, "mcp:run_sql_query", {"sql": "select 1", "limit": 50, "timeout": 1})
    assert result.ok, result
    assert result.value["arguments"] == {"sql": "select 1", "limit": 50, "timeout": 1}
