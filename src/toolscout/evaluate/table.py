"""The evaluation report as a table: what ``toolscout eval`` prints and the benchmark docs show.

Plain functions over the report dict :func:`toolscout.evaluate.harness.run` returns (or
one read back from JSON): :func:`table_rows` (one row per strategy), :func:`markdown_table`
and :func:`summary_line` (sizes, index speed, catalog tokens, missing gold, warm split);
:func:`describe_strategy` says in words what each strategy changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from toolscout.evaluate.harness import DEFAULT_KS, STRATEGIES
from toolscout.settings import SearchSettings

__all__ = ["describe_strategy", "markdown_table", "summary_line", "table_rows"]


def describe_strategy(name: str) -> str:
    """What a strategy changes from the product default, in words."""
    if name == "hybrid-cold":
        return "product default on the held-out test half, no usage history"
    if name == "hybrid-warm":
        return "product default on the same test half, after learning from the history half"
    settings = STRATEGIES.get(name)
    if name not in STRATEGIES:
        return (
            "product default with the ranker prior, the blend, the dedupe yield and the "
            "confidence fitted without this set"
        )
    if settings is None:
        return "keyword counter: +3 per tag in the query, +1 per query word in the summary"
    base = SearchSettings()
    changed = [
        f"{f}={getattr(settings, f)}"
        for f in (fd.name for fd in fields(base))
        if getattr(settings, f) != getattr(base, f)
    ]
    if changed:
        return ", ".join(changed)
    switches = (
        "adaptive_fusion", "exact_hits", "reformulate", "dedupe", "prerequisites",
        "learned_aliases", "multi_intent",
    )  # fmt: skip
    on = [f for f in switches if getattr(base, f)]
    off = [f for f in switches if not getattr(base, f)]
    return "product default: " + ", ".join(on) + " on" + (f"; {', '.join(off)} off" if off else "")


def _cell(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table_rows(report: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the per-strategy table, shared by the CLI and the benchmark docs."""
    ks = report.get("k", list(DEFAULT_KS))
    header = [
        "strategy", "queries", *[f"R@{k}" for k in ks], "complete@5", "nDCG@10", "MRR@10",
        "low conf", "p50 ms", "p95 ms", "p99 ms", "tokens@5", "RSS MB", "lost at",
    ]  # fmt: skip
    rows = []
    for name, m in report["strategies"].items():
        lat = m["latency_ms"]
        lost = ", ".join(f"{stage} {n}" for stage, n in m.get("lost_at", {}).items())
        rows.append([
            name, str(m["n_queries"]), *[_cell(m[f"recall@{k}"]) for k in ks],
            _cell(m["complete@5"]), _cell(m["ndcg@10"]), _cell(m["mrr@10"]),
            _cell(m["low_confidence_rate"]), _cell(lat["p50"], 1), _cell(lat["p95"], 1),
            _cell(lat["p99"], 1), _cell(m["tokens"]["injected@5"], 0), _cell(m["peak_rss_mb"], 0),
            lost or "–",
        ])  # fmt: skip
    return header, rows


def summary_line(report: Mapping[str, Any]) -> str:
    """One line: sizes, index speed, catalog tokens, missing gold, warm split."""
    idx = report["index"]
    first = next(iter(report["strategies"].values()), None)
    parts = [
        f"{report['n_tools']} tools, {report['n_scored']} of {report['n_queries']} queries scored",
        f"index {idx['seconds']:.1f}s ({idx['tools_per_s']:.0f} tools/s)",
    ]
    if first is not None:
        parts.append(f"whole catalog {first['tokens']['catalog']} tokens")
    if report["missing_gold"]["count"]:
        parts.append(f"{report['missing_gold']['count']} queries with gold ids not in the catalog")
    if report.get("renamed_ids"):
        parts.append(f"{len(report['renamed_ids'])} tool ids renamed")
    if "warm" in report:
        w = report["warm"]
        parts.append(f"warm split: {w['history']} history / {w['test']} test queries")
    if report.get("calibration"):
        parts.append(report["calibration"]["summary"])
    return "; ".join(parts)


def markdown_table(report: Mapping[str, Any]) -> str:
    header, rows = table_rows(report)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
