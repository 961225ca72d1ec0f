"""A long request's parts pooled from its own encoder run, against each part encoded alone
and against no parts, on the full dev sets, held out; and the gates that would read some
requests' parts alone and the others pooled or whole, chosen leave-one-set-out.

Every query of every set (no ``--limit``: the full sets) goes through the product's own
path (``harness.discover_once``) with the constants ``benchmarks/quality.py`` fitted
without the set (``--fits``). A request read in parts (``discovery/parts.py``) runs three
ways: its parts' vectors pooled from the whole request's run (``parts.AGREEING =
"pooled"`` for every request), each part encoded alone (the shipped reading), and whole
(``parts=False``); any other request reads the same every way, so it runs once, and
``--check N`` of them per set run every way to show the shortlists are the same. Per
request in parts it also keeps what a gate reads: the pooled parts' best ranker
probability, the farthest rank in the whole request's ranking of a sure pooled part's
first tool, and the lexical disagreement (``parts.disagreement``). Per gate and set, the
threshold chosen on the other five sets (the one reading the fewest requests' parts alone
with no set losing more than :data:`TOLERANCE` recall@5 or complete@5 to the parts read
alone) and the set's figure with it.

Run: ``PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/parts_pooled.py --cache DIR
[--sets bfcl,toolbench]`` (adds to ``--json``), then ``... --report``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import (  # noqa: E402
    DEFAULT_BENCH,
    bench_sets,
    confidence_model,
    held_settings,
    opened_set,
)
from toolscout.embed.base import Wrapped  # noqa: E402

#: how a request in parts is read: its parts pooled from its run, each part encoded alone
#: (the earlier reading), and whole (no parts)
WAYS = ("pooled", "alone", "whole")
#: a rank past every list
NOWHERE = 10**6


class CountingEmbedder(Wrapped):
    """The embedder's encoder runs counted (one ``embed`` or ``embed_spans`` call: one run
    per :func:`~toolscout.embed.minilm.runs` group)."""

    inner: Any  # the MiniLM embedder: its tokenizer and batch size are read

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.runs = 0

    def load(self) -> None:
        self.inner.load()

    def embed(self, texts: Sequence[str]) -> Any:
        from toolscout.embed.minilm import runs

        self.inner.load()
        lengths = [len(e.ids) for e in self.inner._tokenize(texts)] if texts else []
        self.runs += len(runs(lengths, self.inner._batch_size))
        return self.inner.embed(texts)

    def embed_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Any:
        self.runs += 1
        return self.inner.embed_spans(text, spans)


def lexical_rank(retriever: Any, text: str, allowed: Any, settings: Any) -> int:
    """The request's lexical disagreement (``parts.disagreement``): over its parts, the
    largest rank of a part's first BM25 tool in the whole request's BM25 list, read as
    ``Retriever.run`` reads it."""
    from toolscout.discovery.parts import disagreement, part_terms, request_parts
    from toolscout.discovery.search import parse_query

    df, n_docs = retriever.store.document_frequency()
    q = parse_query(text, df, n_docs, settings)
    whole = list(retriever.lexical(q.terms, allowed).ids)
    firsts = [
        hits.ids[0]
        for piece in request_parts(q.text)
        if (hits := retriever.lexical(part_terms(piece, q.terms), allowed)).ids
    ]
    return disagreement(whole, firsts)


def run_set(d: Path, workdir: Path, fit: Mapping[str, Any], check: int) -> dict[str, Any]:
    """Per-query recall@5 and complete@5 each way (the same row for a request read whole),
    and per request in parts what a gate could read of it."""
    from toolscout.discovery import parts as parts_gate
    from toolscout.discovery import pipeline, queryvectors, search
    from toolscout.discovery.gates import step_on
    from toolscout.discovery.parts import COVER_CONFIDENCE, joint_order, request_parts
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.errors import QueryError
    from toolscout.evaluate.harness import Outcome, discover_once, eval_principal
    from toolscout.evaluate.metrics import complete_at, recall_at

    settings = held_settings(fit)
    shipped = (parts_gate.DISAGREE_RANK, parts_gate.AGREEING)
    embedder = CountingEmbedder(MiniLMEmbedder())
    rows: dict[str, dict[str, list[float]]] = {w: {"recall": [], "complete": []} for w in WAYS}
    in_parts: list[bool] = []
    confidences: list[float] = []
    lex_ranks: list[int] = []
    pooled_ranks: list[int] = []
    stats = {"parts": 0, "pooled": 0, "runs_pooled": 0, "runs_alone": 0, "checked": 0}
    differ = 0
    start = time.perf_counter()
    with (
        confidence_model(fit["confidence"]),
        opened_set(d, workdir, None, embedder, index=True) as (cat, qs),
    ):
        principal = eval_principal(cat)
        allowed = pipeline.entitle(cat, principal).ids
        retriever = cat.retriever(settings)
        seen: list[tuple[list[str], list[Any]]] = []

        def recorded(*args: Any, **kw: Any) -> Any:
            seen.append((list(args[0]), list(args[2])))
            return joint_order(*args, **kw)

        def once(text: str, way: str) -> tuple[Outcome, int]:
            # pooled: no part disagrees, every request in parts pooled; alone: no gate
            parts_gate.DISAGREE_RANK = math.inf if way == "pooled" else None
            parts_gate.AGREEING = "pooled"
            queryvectors.clear_query_cache()
            before = embedder.runs
            chosen = settings.but(parts=False) if way == "whole" else settings
            try:
                return discover_once(cat, chosen, text, principal), embedder.runs - before
            except QueryError:
                return Outcome((), 0.0), embedder.runs - before
            finally:
                parts_gate.DISAGREE_RANK, parts_gate.AGREEING = shipped

        search.joint_order = recorded
        for q in qs:
            pieces = request_parts(q.query) if step_on("parts", q.query, settings) else []
            parts = bool(pieces)
            in_parts.append(parts)
            outs = {}
            if parts or stats["checked"] < check:
                for way in WAYS:
                    seen.clear()
                    outs[way], n_runs = once(q.query, way)
                    if way != "whole":
                        stats[f"runs_{way}"] += n_runs if parts else 0
                    if parts and way == "pooled":
                        # what a recheck reads of the pooled parts: their best probability,
                        # and the largest rank in the whole request's ranking of a sure
                        # part's first tool
                        whole_ids, rankings = seen[-1] if seen else ([], [])
                        confidences.append(max((r.confidence for r in rankings), default=0.0))
                        pooled_ranks.append(
                            max(
                                (
                                    whole_ids.index(r.ids[0]) if r.ids[0] in whole_ids else NOWHERE
                                    for r in rankings
                                    if r.ids and r.confidence >= COVER_CONFIDENCE
                                ),
                                default=-1,
                            )
                        )
                if parts:
                    lex_ranks.append(lexical_rank(retriever, q.query, allowed, settings))
                else:
                    stats["checked"] += 1
                    differ += len({outs[w].ranked for w in WAYS}) > 1
            else:
                outs["pooled"] = outs["alone"] = outs["whole"] = once(q.query, "pooled")[0]
            if parts:
                stats["parts"] += 1
                keys = queryvectors.embed_keys([q.query, *pieces])
                spans = queryvectors.piece_spans(keys[0], keys[1:])
                stats["pooled"] += all(s is not None for s in spans)
            for way in WAYS:
                rows[way]["recall"].append(recall_at(outs[way].ranked, q.gold, 5))
                rows[way]["complete"].append(complete_at(outs[way].ranked, q.gold))
        search.joint_order = joint_order
    return {
        "queries": len(in_parts),
        "confidences": confidences,
        "lex_ranks": lex_ranks,
        "pooled_ranks": pooled_ranks,
        "seconds": round(time.perf_counter() - start),
        "in_parts": in_parts,
        "stats": stats,
        "whole_read_differ": differ,
        "rows": rows,
    }


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / max(len(xs), 1)


def report(sets: Mapping[str, Any]) -> list[str]:
    from toolscout.evaluate.fitting import paired_interval

    out = [
        "| set | queries | read in parts | all parts pooled | encoder runs a request in parts,"
        " pooled / alone | recall@5 pooled / alone | complete@5 pooled / alone | pooled −"
        " alone, recall@5 [95% CI] | complete@5 | no parts − alone, recall@5 / complete@5 |"
        " read whole: shortlists checked, differing |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(sets):
        d = sets[name]
        r, s = d["rows"], d["stats"]
        n = max(s["parts"], 1)
        diff = paired_interval(r["pooled"]["recall"], r["alone"]["recall"])
        dc = mean(r["pooled"]["complete"]) - mean(r["alone"]["complete"])
        out.append(
            f"| {name} | {d['queries']} | {s['parts']} | {s['pooled']} | "
            f"{s['runs_pooled'] / n:.2f} / {s['runs_alone'] / n:.2f} | "
            f"{mean(r['pooled']['recall']):.4f} / {mean(r['alone']['recall']):.4f} | "
            f"{mean(r['pooled']['complete']):.4f} / {mean(r['alone']['complete']):.4f} | "
            f"{diff[0]:+.4f} [{diff[1]:+.4f}, {diff[2]:+.4f}] | {dc:+.4f} | "
            f"{mean(r['whole']['recall']) - mean(r['alone']['recall']):+.4f} / "
            f"{mean(r['whole']['complete']) - mean(r['alone']['complete']):+.4f} | "
            f"{s['checked']}, {d['whole_read_differ']} |"
        )
    return out


#: the most a set may lose to the parts encoded alone, recall@5 and complete@5
TOLERANCE = 0.002
#: rank thresholds tried (a gate fires at or past the rank; None: never fires)
RANKS: tuple[float | None, ...] = (0, 1, 2, 3, 5, 10, 20, 50, NOWHERE, None)
#: the gates: (label, what it reads per request in parts, the thresholds tried, the way a
#: request is read when the gate does not fire); a firing gate reads the parts alone
GATES: tuple[tuple[str, str, tuple[float | None, ...], str], ...] = (
    ("recheck: pooled parts' best probability >= t, else pooled", "confidences",
     (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, None), "pooled"),
    ("lexical: a part's first BM25 tool at or past rank t of the whole's, else whole",
     "lex_ranks", RANKS, "whole"),
    ("lexical: a part's first BM25 tool at or past rank t of the whole's, else pooled",
     "lex_ranks", RANKS, "pooled"),
    ("pooled: a sure pooled part's first tool at or past rank t of the whole's, else pooled",
     "pooled_ranks", RANKS, "pooled"),
)  # fmt: skip


def gated(
    d: Mapping[str, Any], feature: str, t: float | None, other: str, metric: str
) -> tuple[list[float], int]:
    """Per query, the row with the gate at ``t`` (a request in parts whose ``feature`` is at
    least ``t`` is read with its parts alone, any other as ``other``), and how many
    requests read their parts alone."""
    out: list[float] = []
    alone = 0
    values = iter(d[feature])
    rows = d["rows"]
    for i, parts in enumerate(d["in_parts"]):
        fire = parts and (v := next(values)) is not None and t is not None and v >= t
        alone += fire
        out.append(rows["alone" if fire else (other if parts else "alone")][metric][i])
    return out, alone


def loss(d: Mapping[str, Any], feature: str, t: float | None, other: str) -> float:
    """The larger of the recall@5 and complete@5 losses to the parts encoded alone."""
    return max(
        mean(d["rows"]["alone"][m]) - mean(gated(d, feature, t, other, m)[0])
        for m in ("recall", "complete")
    )


def choose(
    sets: Mapping[str, Any], names: Sequence[str], gate: tuple[str, str, Any, str]
) -> float | None:
    """The threshold reading the fewest requests' parts alone on ``names`` while none of
    them loses more than :data:`TOLERANCE`; the lowest (most alone) when none holds."""
    _, feature, grid, other = gate
    ok = [
        t for t in grid if all(loss(sets[n], feature, t, other) <= TOLERANCE + 1e-9 for n in names)
    ]
    return min(
        ok or [grid[0]],
        key=lambda t: (
            sum(gated(sets[n], feature, t, other, "recall")[1] for n in names),
            -list(grid).index(t),
        ),
    )


def gate_report(sets: Mapping[str, Any]) -> list[str]:
    names = sorted(sets)
    out: list[str] = []
    for gate in GATES:
        label, feature, _, other = gate
        out += [
            "",
            f"gate: {label}",
            "",
            "| set | t chosen without the set | parts read alone (of those in parts) |"
            " recall@5 gated − alone | complete@5 gated − alone |",
            "|---|---|---|---|---|",
        ]
        for name in names:
            d = sets[name]
            t = choose(sets, [n for n in names if n != name], gate)
            r, alone = gated(d, feature, t, other, "recall")
            c, _ = gated(d, feature, t, other, "complete")
            out.append(
                f"| {name} | {'never' if t is None else t} | {alone} of {sum(d['in_parts'])} | "
                f"{mean(r) - mean(d['rows']['alone']['recall']):+.4f} | "
                f"{mean(c) - mean(d['rows']['alone']['complete']):+.4f} |"
            )
        t = choose(sets, names, gate)
        out += ["", f"chosen on all {len(names)} sets: {'never' if t is None else t}"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=False, help="the indexed sets")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/parts_pooled.json")
    parser.add_argument("--check", type=int, default=50, help="requests read whole run both ways")
    parser.add_argument("--report", action="store_true", help="only the table, from --json")
    args = parser.parse_args(argv)
    done: dict[str, Any] = json.loads(args.json.read_text()) if args.json.is_file() else {}
    if not args.report:
        fits = json.loads(args.fits.read_text())["fits"]
        wanted = {s for s in args.sets.split(",") if s}
        workdir = args.cache or Path("/tmp/parts_pooled")
        workdir.mkdir(parents=True, exist_ok=True)
        for d in bench_sets(args.bench):
            if wanted and d.name not in wanted:
                continue
            done[d.name] = run_set(d, workdir, fits[d.name], args.check)
            print(f"{d.name}: {done[d.name]['seconds']} s", flush=True)
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(done) + "\n")
    print("\n".join(report(done)))
    print()
    print("\n".join(gate_report(done)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
