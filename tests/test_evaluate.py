"""Tests for toolscout.evaluate.harness, end to end with the real model over tests/fixtures/eval.

Regenerate the golden files with ``TOOLSCOUT_UPDATE_GOLDEN=1 pytest tests/test_evaluate.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import FIXTURES, embedder
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.shortlist import Trace
from toolscout.errors import ConfigError
from toolscout.evaluate.evalset import EvalQuery, read_queries, read_tools, split_history
from toolscout.evaluate.harness import (
    DEFAULT_STRATEGIES,
    STRATEGIES,
    Outcome,
    discover_and_score,
    evaluate_strategy,
    lost_at,
    parse_ks,
    resolve_strategies,
    run,
    run_warm,
)
from toolscout.evaluate.table import describe_strategy, markdown_table
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.sqlite import LearnedAliases, SQLiteStore

EVAL = FIXTURES / "eval"
GOLDEN = Path(__file__).parent / "golden" / "eval"
UPDATE = os.environ.get("TOOLSCOUT_UPDATE_GOLDEN") == "1"
METRICS = ("recall@1", "recall@3", "recall@5", "recall@10", "complete@5", "ndcg@10", "mrr@10")


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; see the module docstring"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    db = tmp_path_factory.mktemp("eval") / "eval.db"
    return run(
        EVAL / "tools.jsonl",
        EVAL / "queries.jsonl",
        strategies=["all"],
        warm=True,
        failures=10,
        db=db,
        embedder=embedder(),
    )


@pytest.fixture()
def catalog(tmp_path: Path) -> Iterator[Catalog]:
    specs, _ = read_tools(EVAL / "tools.jsonl")
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(specs)
        yield cat


# -- the registry -------------------------------------------------------------------------
def test_registry() -> None:
    assert STRATEGIES["naive"] is None
    assert STRATEGIES["hybrid"] == SearchSettings()
    bm25 = STRATEGIES["bm25"]
    assert bm25 is not None and not bm25.dense and not bm25.reformulate and not bm25.exact_hits
    ablations = [n for n in STRATEGIES if n.startswith("hybrid-no-")]
    for name in ablations:  # each ablation switches exactly one feature off
        assert describe_strategy(name).count("=") == 1
    assert set(DEFAULT_STRATEGIES) == {"naive", "bm25", "dense", "hybrid"}
    assert resolve_strategies(["all"]) == (list(STRATEGIES), False)
    assert resolve_strategies(["hybrid", "hybrid-warm", "hybrid"]) == (["hybrid"], True)
    with pytest.raises(ConfigError, match="unknown strategy 'fast'"):
        resolve_strategies(["fast"])
    assert parse_ks("10, 1,3") == (1, 3, 10)
    for bad in ("0", "11", "a", ""):
        with pytest.raises(ConfigError):
            parse_ks(bad)


# -- end to end ------------------------------------------------------------------------------
def test_report_shape(report: dict[str, Any]) -> None:
    assert report["n_tools"] == 8 and report["n_queries"] == 5 and report["n_scored"] == 5
    assert report["k"] == [1, 3, 5, 10]
    assert report["index"]["seconds"] > 0 and report["index"]["tools_per_s"] > 0
    assert list(report["strategies"]) == [*STRATEGIES, "hybrid-cold", "hybrid-warm"]
    for name, m in report["strategies"].items():
        assert all(0.0 <= m[key] <= 1.0 for key in METRICS), name
        assert m["recall@1"] <= m["recall@3"] <= m["recall@5"] <= m["recall@10"]
        assert set(m["latency_ms"]) == {"p50", "p95", "p99"}
        assert m["latency_ms"]["p50"] <= m["latency_ms"]["p95"] <= m["latency_ms"]["p99"]
        assert 0 < m["tokens"]["injected@5"] < m["tokens"]["catalog"]
        assert m["peak_rss_mb"] > 0
    assert report["strategies"]["naive"]["low_confidence_rate"] is None
    assert report["warm"]["history"] + report["warm"]["test"] <= 5
    assert report["strategies"]["hybrid-warm"]["n_queries"] == report["warm"]["test"]
    json.dumps(report)  # the whole report is plain JSON


def test_quality_on_the_fixture(report: dict[str, Any]) -> None:
    s = report["strategies"]
    # q5's gold tool is offered to tenant acme only: lost at policy by every strategy
    assert all(s[name]["lost_at"].get("policy") == 1 for name in STRATEGIES)
    # the other four queries are found by the product default within its shortlist
    assert s["hybrid"]["recall@5"] == pytest.approx(0.8)
    assert s["hybrid"]["recall@10"] >= s["bm25"]["recall@10"]


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without timings and memory, which differ run to run."""
    strategies = {
        name: {k: v for k, v in m.items() if k not in ("latency_ms", "peak_rss_mb", "reliability")}
        for name, m in report["strategies"].items()
    }
    warm = {k: v for k, v in report["warm"].items() if k != "learn_seconds"}
    keep = ("n_tools", "n_queries", "n_scored", "k", "missing_gold", "renamed_ids", "failures")
    return {**{k: report[k] for k in keep}, "warm": warm, "strategies": strategies}


def test_golden_report(report: dict[str, Any]) -> None:
    _golden("fixture_report.json", json.dumps(_stable(report), indent=2, sort_keys=True) + "\n")


def test_golden_markdown(report: dict[str, Any]) -> None:
    fixed = json.loads(json.dumps(report))
    for m in fixed["strategies"].values():  # pin the volatile columns
        m["latency_ms"] = {"p50": 1.0, "p95": 2.0, "p99": 3.0}
        m["peak_rss_mb"] = 100.0
    _golden("fixture_table.md", markdown_table(fixed))


def test_reliability_is_reported_for_strategies_with_confidence(report: dict[str, Any]) -> None:
    strategies = report["strategies"]
    assert strategies["naive"]["reliability"] is None
    rel = strategies["hybrid"]["reliability"]
    assert sum(row["n"] for row in rel["deciles"]) == strategies["hybrid"]["n_queries"]
    assert 0.0 <= rel["ece"] <= 1.0 and 0.0 <= rel["max_gap"] <= 1.0
    for row in rel["deciles"]:
        assert row["decile"] / 10 <= row["confidence"] <= (row["decile"] + 1) / 10 + 1e-9


def test_failures_list_query_gold_returned_and_stage(report: dict[str, Any]) -> None:
    failures = report["failures"]
    assert failures, "the fixture has failing queries"
    for f in failures:
        assert set(f) == {"strategy", "id", "query", "gold", "returned", "lost_at"}
        assert len(f["returned"]) <= 5
        assert set(f["lost_at"]) <= set(f["gold"])
        assert not set(f["lost_at"]) & set(f["returned"])
    q5 = [f for f in failures if f["id"] == "fx:q5"]
    assert {f["strategy"] for f in q5} >= {"naive", "bm25", "dense", "hybrid"}
    assert all(f["lost_at"] == {"fx:hr.view_salary": "policy"} for f in q5)


def test_missing_gold_is_counted_not_fatal(tmp_path: Path) -> None:
    lines = [
        {"id": "m1", "query": "where is my package", "gold": ["fx:orders.track_shipment"]},
        {"id": "m2", "query": "book a flight", "gold": ["fx:travel.book_flight"]},
        {"id": "m3", "query": "refund and invoice", "gold": ["fx:billing.refund_payment", "fx:x"]},
    ]
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    out = run(EVAL / "tools.jsonl", queries, strategies=["bm25"], embedder=embedder())
    assert out["n_queries"] == 3 and out["n_scored"] == 2
    assert out["missing_gold"] == {
        "count": 2,
        "queries": [
            {"id": "m2", "missing": ["fx:travel.book_flight"]},
            {"id": "m3", "missing": ["fx:x"]},
        ],
    }
    assert out["strategies"]["bm25"]["n_queries"] == 2


# -- failure attribution on a crafted case ------------------------------------------------------
def test_lost_at_each_stage() -> None:
    entitled = frozenset("abcdefgqr")
    trace = Trace(
        lexical=("a", "b", "x"),
        dense=("c", "y"),
        fused=("a", "c", "d", "e", "r", "b"),
    )
    out = Outcome(("a", "e", "f", "g", "c"), 1.0, False, trace)
    assert lost_at("a", out, entitled) is None  # in the shortlist
    assert lost_at("z", out, entitled) == "policy"  # not entitled
    assert lost_at("d", out, entitled) == "selection"  # fused top 5, not selected
    assert lost_at("r", out, entitled) == "selection"  # fused in by reformulation, no pool
    assert lost_at("b", out, entitled) == "fusion"  # lexical pool, fused 6th
    assert lost_at("q", out, entitled) == "retrieval"  # in no pool at all
    assert lost_at("c", out, entitled, k=3) == "selection"  # cut-off is a parameter
    naive = Outcome(("a",), 0.1, matched=frozenset({"a", "b"}))
    assert lost_at("b", naive, entitled) == "ranking"
    assert lost_at("c", naive, entitled) == "retrieval"
    assert lost_at("z", naive, entitled) == "policy"


def test_strategy_failures_are_capped(catalog: Catalog) -> None:
    queries = read_queries(EVAL / "queries.jsonl")
    result = evaluate_strategy(catalog, "bm25", STRATEGIES["bm25"], queries, failures=1)
    assert len(result.failures) == 1
    assert sum(result.metrics["lost_at"].values()) >= 2


# -- warm: nothing of the test half reaches the index --------------------------------------------
def test_warm_split_leaks_nothing(catalog: Catalog, tmp_path: Path) -> None:
    base = read_queries(EVAL / "queries.jsonl")
    queries = [
        *base,
        EvalQuery("w1", "get my cash back for a double charge", ("fx:billing.refund_payment",)),
        EvalQuery("w2", "is my parcel on its way", ("fx:orders.track_shipment",)),
        EvalQuery("w3", "do I need an umbrella in Oslo", ("fx:weather.get_forecast",)),
        EvalQuery("w4", "ping the team channel", ("fx:chat.send_message",)),
        EvalQuery("w5", "bill Acme for March", ("fx:billing.create_invoice",)),
        EvalQuery("w6", "is my parcel on its way", ("fx:orders.track_shipment",)),
    ]
    workdir = tmp_path / "warm"
    workdir.mkdir()
    results, info = run_warm(catalog, queries, workdir)
    assert [r.name for r in results] == ["hybrid-cold", "hybrid-warm"]
    assert info["test"] == results[1].metrics["n_queries"] == len(queries) - len(queries) // 2
    store = SQLiteStore(workdir / "warm.db")
    try:
        learned = LearnedAliases(store).of(10_000)
    finally:
        store.close()
    phrases = {p for ps in learned.values() for p in ps}
    history, test = split_history(queries)
    assert phrases and len(history) == info["history"]
    assert phrases == {" ".join(q.query.split()) for q in history}
    assert not phrases & {" ".join(q.query.split()) for q in test}
    # the catalog under evaluation itself learned nothing
    assert LearnedAliases(catalog.store).of(10_000) == {}


def test_discover_and_score_appends_a_querys_figures(catalog: Catalog) -> None:
    row: dict[str, list[float]] = {"recall": [], "complete": [], "confidence": [], "right": []}
    who = Principal.of("eval", scopes=["*"])
    gold = ["fx:orders.track_shipment"]
    out = discover_and_score(
        catalog, SearchSettings(), "where is my package right now?", gold, who, row
    )
    assert out.ranked[0] == gold[0]
    assert row["recall"] == [1.0] and row["complete"] == [1.0] and row["right"] == [1.0]
    assert 0.0 <= row["confidence"][0] <= 1.0
    # a query discovery refuses (empty) counts as nothing found, not an error
    refused = discover_and_score(catalog, SearchSettings(), "   ", gold, who, row)
    assert refused.ranked == ()
    assert row["recall"][1] == row["complete"][1] == row["right"][1] == 0.0
    assert row["confidence"][1] == -1.0
