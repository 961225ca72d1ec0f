"""The false-negative report, shown to work: replay a dev set's queries with a simulated user.

1. Index one evaluation set (``tools.jsonl``) into a fresh catalog whose discovery log
   keeps query text.
2. Split its queries in two seeded halves (``evaluate.evalset.split_history``, the same
   split the warm evaluation uses). Replay the first half: each query is one
   conversation; a deterministic user runs discovery (top 5, progressive tier, every
   tool entitled) and then executes each gold tool, shown or not — logged as
   ``Toolscout.execute`` logs an execution linked to its discovery.
3. Build the report (``toolscout report``): per-tool misses and alias suggestions.
4. Compare the miss list with per-tool recall@5 measured by the evaluation harness's
   own discovery call on the *held-out* half (different queries): the tools that top the
   miss list should be the ones with the lowest held-out recall.
5. Accept every suggestion (``toolscout report --accept``, batched) and measure
   recall@5 on the held-out half again. Nothing from the held-out half is logged or
   accepted.

Writes ``benchmarks/results/replay_<set>.json`` and prints a markdown summary.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/replay.py [--set metatool] [--bench DIR]``
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BENCH = ROOT.parent / "shared" / "bench"
K = 5
TOP = 10
MIN_QUERIES = 3  # a tool's held-out recall counts when it is gold for at least this many


def recall_by_tool(catalog: Any, queries: Sequence[Any], renamed: dict[str, str]) -> Any:
    """(mean recall@K, {tool: [hits, total]}) over ``queries`` via the harness's discover."""
    from toolscout.evaluate.harness import discover_once, eval_principal

    principal = eval_principal(catalog)
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    total = 0.0
    for q in queries:
        gold = [renamed.get(g, g) for g in q.gold]
        top = set(discover_once(catalog, catalog.settings, q.query, principal).ranked[:K])
        total += sum(g in top for g in gold) / len(gold)
        for g in gold:
            per[g][0] += g in top
            per[g][1] += 1
    return total / max(len(queries), 1), per


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    def ranks(v: Sequence[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for m in range(i, j + 1):
                r[order[m]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy) if vx and vy else 0.0


def replay(bench: Path, name: str) -> dict[str, Any]:
    from toolscout.discovery.catalog import Catalog
    from toolscout.evaluate.evalset import read_queries, read_tools, split_history
    from toolscout.evaluate.harness import eval_principal
    from toolscout.telemetry.report import accept_aliases, report_for

    specs, renamed = read_tools(bench / name / "tools.jsonl")
    queries = read_queries(bench / name / "queries.jsonl")
    history, held_out = split_history(queries)
    out: dict[str, Any] = {"set": name, "tools": len(specs), "replayed": len(history),
                           "held_out": len(held_out), "k": K}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog.open(Path(tmp) / f"{name}.db", query_log="text")
        start = time.perf_counter()
        catalog.add(specs)
        out["index_s"] = round(time.perf_counter() - start, 1)
        before, held_per = recall_by_tool(catalog, held_out, renamed)
        # the replay: one conversation per query, the user executes every gold tool
        principal = eval_principal(catalog)
        assert catalog.log is not None
        start = time.perf_counter()
        for i, q in enumerate(history):
            conv = f"replay-{i}"
            shortlist = catalog.discover(q.query, principal, k=K, tier="progressive",
                                         conversation=conv)  # fmt: skip
            for g in q.gold:
                catalog.log.record_call(renamed.get(g, g), discovery_id=shortlist.discovery_id,
                                        ok=True, subject=f"user-{i % 7}", tenant="",
                                        conversation=conv)  # fmt: skip
        out["replay_s"] = round(time.perf_counter() - start, 1)
        # every replayed query is one discovery, so one miss is its whole evidence here
        # (the report's default asks for two); relatedness is checked as in use
        report = report_for(catalog, min_evidence=1)
        out["report"] = {
            "needed": report.needed,
            "misses": report.misses,
            "miss_rate": round(report.miss_rate, 4),
            "suggestions": len(report.suggestions),
            "never_surfaced": len(report.never_surfaced),
            "top_missed": [
                {"tool": t.tool_id, "misses": t.misses, "needed": t.needed}
                for t in report.tools[:TOP]
            ],
        }
        # the eval's worst tools on the held-out half (enough queries to say)
        scored = {t: h / n for t, (h, n) in held_per.items() if n >= MIN_QUERIES}
        worst = sorted(scored, key=lambda t: (scored[t], -held_per[t][1], t))[:TOP]
        missed_top = [t.tool_id for t in report.tools if t.misses][:TOP]  # the report's order
        common = [t for t in scored if t in {x.tool_id for x in report.tools}]
        miss_rate = {x.tool_id: x.miss_rate for x in report.tools}
        out["agreement"] = {
            "eval_worst": [{"tool": t, "recall": round(scored[t], 3)} for t in worst],
            "overlap_at_10": len(set(worst) & set(missed_top)),
            "report_top_in_eval_bottom_quartile": sum(
                scored.get(t, 1.0) <= sorted(scored.values())[len(scored) // 4] for t in missed_top
            ),
            "spearman_miss_rate_vs_1_minus_recall": round(
                spearman([miss_rate[t] for t in common], [1 - scored[t] for t in common]), 3
            ),
            "tools_compared": len(common),
        }
        start = time.perf_counter()
        accepted = accept_aliases(catalog, [s.id for s in report.suggestions])
        out["accept_s"] = round(time.perf_counter() - start, 1)
        out["accepted"] = len(accepted)
        out["embedded_on_accept"] = accepted[0].embedded if accepted else 0
        after, _ = recall_by_tool(catalog, held_out, renamed)
        out["held_out_recall_at_5"] = {"before": round(before, 4), "after": round(after, 4)}
        catalog.close()
    return out


def markdown(r: dict[str, Any]) -> str:
    a, rep, rec = r["agreement"], r["report"], r["held_out_recall_at_5"]
    lines = [
        f"**{r['set']}** ({r['tools']} tools; {r['replayed']} queries replayed, "
        f"{r['held_out']} held out):",
        "",
        f"- the report: {rep['misses']} misses of {rep['needed']} needed tools "
        f"({rep['miss_rate']:.1%}), {rep['suggestions']} alias suggestions, "
        f"{rep['never_surfaced']} tools never surfaced;",
        f"- the report's 10 most-missed tools vs the 10 with the lowest held-out recall@5 "
        f"(>= {MIN_QUERIES} held-out queries): {a['overlap_at_10']} in common; "
        f"{a['report_top_in_eval_bottom_quartile']} of the 10 are in the bottom quartile of "
        f"held-out recall; Spearman(miss rate, 1 - held-out recall) over "
        f"{a['tools_compared']} tools = {a['spearman_miss_rate_vs_1_minus_recall']};",
        f"- accepting all {r['accepted']} suggestions ({r['embedded_on_accept']} texts "
        f"embedded, {r['accept_s']} s): held-out recall@5 {rec['before']:.3f} -> "
        f"{rec['after']:.3f}.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--set", dest="sets", action="append", default=None)
    args = parser.parse_args(argv)
    results = []
    for name in args.sets or ["metatool"]:
        r = replay(args.bench, name)
        r["machine"] = f"{platform.machine()}, {platform.python_version()}"
        results.append(r)
        out = ROOT / "benchmarks" / "results" / f"replay_{name}.json"
        out.write_text(json.dumps(r, indent=2) + "\n")
        print(markdown(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
