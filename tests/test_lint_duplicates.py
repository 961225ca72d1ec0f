"""Lint's semantic duplicates and undeclared risks, on catalogs built to trip them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from fork_kit import toolscout as fork_toolscout
from support import FIXTURES
from toolscout.cards import make_spec
from toolscout.lint import LintReport, lint_paths
from toolscout.lint.duplicates import check_duplicates
from toolscout.lint.source import LintTool

PLANTED = FIXTURES / "lint_duplicates"

ORDER_PARAMS = {
    "type": "object",
    "properties": {
        "customer_email": {"type": "string", "description": "Customer email"},
        "from_date": {"type": "string", "description": "First day"},
        "to_date": {"type": "string", "description": "Last day"},
    },
}


def tool(tool_id: str, summary: str, parameters: Any = None, **kw: Any) -> LintTool:
    spec = make_spec(
        {"id": tool_id, "summary": summary, "parameters": parameters or {}, "scopes": ["s:r"], **kw}
    )
    return LintTool(spec)


def pairs(tools: list[LintTool]) -> list[tuple[str, ...]]:
    return [f.tools for f in check_duplicates(tools)]


def test_a_reworded_tool_with_the_same_inputs_is_a_duplicate() -> None:
    camel = {
        "type": "object",
        "properties": {"customerEmail": {}, "fromDate": {}, "toDate": {}},
    }
    found = pairs(
        [
            tool("o.search_orders", "Search orders by date range or customer email.", ORDER_PARAMS),
            tool("o.find_orders", "Find orders by customer email or date range.", camel),
            tool("w.forecast", "Weather forecast for a city and a date range.", ORDER_PARAMS),
        ]
    )
    assert found == [("o.find_orders", "o.search_orders")]


def test_alike_words_with_other_inputs_or_outputs_are_not_duplicates() -> None:
    other = {"type": "object", "properties": {"order_id": {}}}
    out_a = {"type": "object", "properties": {"orders": {}}}
    assert (
        pairs(
            [
                tool(
                    "o.search_orders",
                    "Search orders by date range or customer email.",
                    ORDER_PARAMS,
                ),
                tool("o.find_orders", "Find orders by customer email or date range.", other),
            ]
        )
        == []
    )
    assert pairs(
        [
            tool("o.a", "Search orders by date range or customer email.", ORDER_PARAMS),
            tool("o.b", "Find orders by customer email or date range.", ORDER_PARAMS,
                 output_schema=out_a),
        ]
    ) == []  # fmt: skip
    # same inputs, different job
    assert (
        pairs(
            [
                tool(
                    "o.refund",
                    "Refund the orders of a customer email in a date range.",
                    ORDER_PARAMS,
                ),
                tool("o.search", "Search orders by date range or customer email.", ORDER_PARAMS),
            ]
        )
        == []
    )


def test_tools_without_parameters_need_nearly_the_same_summary() -> None:
    found = pairs(
        [
            tool("o.get_order", "Get one customer order and its details."),
            tool("o.find_order", "Get the details of one customer order."),
            tool("o.count_orders", "Count one customer's open orders."),
        ]
    )
    assert found == [("o.find_order", "o.get_order")]


def write(tmp_path: Path, *cards: dict[str, Any]) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": list(cards)}))
    return path


def static(tmp_path: Path, *cards: dict[str, Any]) -> LintReport:
    return lint_paths([write(tmp_path, *cards)], measure_overlap=False)


def test_a_missing_risk_is_reported_where_it_matters(tmp_path: Path) -> None:
    base = {"summary": "Does one thing to a record.", "aliases": ["do the thing"]}
    report = static(
        tmp_path,
        {**base, "id": "s.export_everything", "scopes": ["s:admin"]},
        {**base, "id": "s.cancel_booking", "scopes": ["s:write"]},
        {**base, "id": "s.delete_record", "scopes": ["s:write"]},
        {**base, "id": "s.tidy", "scopes": ["s:write"], "annotations": {"readOnlyHint": False}},
        {**base, "id": "s.show_record", "scopes": ["s:read"]},
        {**base, "id": "s.cancel_declared", "scopes": ["s:write"], "risk": "write"},
        {**base, "id": "s.purge_all", "scopes": ["s:admin"], "risk": "destructive"},
    )
    no_risk = {f.tools[0]: f.message for f in report.of_code("risk-undeclared")}
    assert set(no_risk) == {"s.cancel_booking", "s.delete_record", "s.tidy"}
    assert "'cancel'" in no_risk["s.cancel_booking"] and "readOnlyHint" in no_risk["s.tidy"]
    assert [f.tools for f in report.of_code("admin-scope-no-risk")] == [("s.export_everything",)]


def test_the_planted_pair_is_a_finding_from_the_command_line() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    argv = fork_toolscout("lint", str(PLANTED), "--json", "--no-overlap")  # forked (fork_kit)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    data = json.loads(proc.stdout)
    found = {f["code"]: f["tools"] for f in data["findings"]}
    assert found["duplicate-tool"] == ["orders.find_orders", "orders.search_orders"]
    assert found["admin-scope-no-risk"] == ["orders.export_all_orders"]
    undeclared = {t for f in data["findings"] if f["code"] == "risk-undeclared" for t in f["tools"]}
    assert undeclared == {"orders.cancel_order", "orders.archive_order"}
