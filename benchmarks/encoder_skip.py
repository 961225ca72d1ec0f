"""Skipping the query encoder: what it costs in recall, chosen leave-one-set-out.

    PYTHONPATH=src python benchmarks/encoder_skip.py [--bench DIR] [--cache DIR] [--limit N]
        [--confidence benchmarks/results/quality.json]

Every query of every dev set goes through ``Catalog.discover(k=10, tier="progressive")``
twice with the product defaults: with the encoder (``encoder_skip=False``) and lexical
only (``dense=False``, what a skipped query gets). Beside them, what the skip rule reads
(``discovery/skip.py``): whether the request names an entitled tool verbatim, and the
BM25 margin of its first tool. Any rule (exact on/off, a margin threshold) is then
scored offline: a query it skips gets the lexical-only ranking, the others the hybrid one.

The rule for each set is fitted on the *other* sets: the one that skips the most of
their queries while none of them loses more than ``--max-loss`` (0.002) recall@5; its
loss on the held-out set is the figure that judges it (complete@5, every gold tool in the
first five, is reported beside it). The shipped rule is the one the same fit picks on all
the sets. With ``--confidence`` it also records what the confidence reads (each set's
held-out constants of quality.py's result): ``benchmarks/skip_confidence.py`` fits the
skipped rankings' confidence on it. Writes ``benchmarks/results/encoder_skip.json`` and
prints the table docs/benchmarks.md shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402

#: margins tried (None: never on the margin)
MARGINS: tuple[float | None, ...] = (
    0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 1.0, None,
)  # fmt: skip
K = 5
#: the key of the no-tool requests' readings among the per-set rows
NO_TOOL = "_no_tool"


def recall(ranked: Sequence[str], gold: Sequence[str], k: int = K) -> float:
    top = set(ranked[:k])
    return sum(1 for g in gold if g in top) / len(gold)


def measure_set(
    d: Path,
    workdir: Path,
    limit: int | None,
    embedder: Any,
    fit: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Per query: recall@5 with the encoder and lexical only, and what the rule reads.

    With ``fit`` (the set's held-out constants of ``benchmarks/results/quality.json``) also
    what the confidence reads, as quality.py's held-out run makes its selections (the
    ranker's constants fitted without the set): the held-out confidence of the hybrid
    selection (``conf``) and whether its first tool is gold (``right``); and, for a query
    the shipped rule skips (``skip``: its reason), the inputs of the skipped selection's
    confidence (``xs``), whether its first tool is gold (``rs``) and the product's recall@5
    with the skip on (``skipping``). benchmarks/skip_confidence.py fits on these."""
    from toolscout.discovery import skip
    from toolscout.discovery.pipeline import exact_mentions
    from toolscout.discovery.search import parse_query
    from toolscout.errors import QueryError
    from toolscout.evaluate.harness import eval_principal
    from toolscout.settings import SearchSettings

    hybrid = SearchSettings(encoder_skip=False)
    lexical = SearchSettings(encoder_skip=False, dense=False)
    skipping = SearchSettings(encoder_skip=True)
    rows: list[dict[str, Any]] = []
    with quality.opened_set(d, workdir, limit, embedder, index=True) as (cat, queries):
        principal = eval_principal(cat)
        ent = cat.entitle(principal)
        df, n_docs = cat.store.document_frequency()
        for q in queries:
            try:
                parsed = parse_query(q.query, df, n_docs, hybrid)
            except QueryError:
                continue
            exact = exact_mentions(cat, parsed, ent, hybrid)
            # as discovery reads it: the coverage rule first (a request it reads by the
            # dense path alone is never skipped; a no-op with an English encoder)
            reader = cat.retriever(hybrid).for_request(parsed)
            lex = reader.lexical(parsed.terms, ent.ids)
            both = [
                cat.discover(q.query, principal, k=10, settings=s, tier="progressive", record=False)
                for s in (hybrid, lexical)
            ]
            row: dict[str, Any] = {
                "exact": bool(exact),
                "led": not reader.settings.lexical,
                "margin": skip.lexical_margin(lex),
                "hits": len(lex.ids),
                "hybrid": recall(both[0].ids, q.gold),
                "lexical": recall(both[1].ids, q.gold),
            }
            if fit is not None:
                row.update(confidence_readings(cat, parsed, ent, q.gold, fit))
                if row.get("skip"):
                    got = cat.discover(
                        q.query, principal, k=10, settings=skipping, tier="progressive",
                        record=False,
                    )  # fmt: skip
                    row["skipping"] = recall(got.ids, q.gold)
            rows.append(row)
    return rows


def confidence_readings(
    cat: Any, parsed: Any, ent: Any, gold: Sequence[str], fit: Mapping[str, Any]
) -> dict[str, Any]:
    """What the confidence reads of one request under the set's held-out constants: the
    hybrid selection's held-out confidence and whether its first tool is gold (None when it
    shows nothing), and, when the shipped rule skips the encoder, the skipped selection's
    confidence inputs, whether its first tool is gold and the reason."""
    from dataclasses import replace

    import numpy as np

    from toolscout.discovery import calibrate, pipeline

    held = quality.held_settings(fit)
    out: dict[str, Any] = {"conf": None, "right": None}
    for on in (False, True):
        cfg = replace(held, encoder_skip=on)
        sel = pipeline.select(
            cat, parsed, ent, k=10, fmt="openai", settings=cfg, tier="progressive",
            token_budget=None,
        )  # fmt: skip
        if on and not sel.skipped:
            break
        if not sel.chosen or sel.retrieval is None:
            continue
        exact = pipeline.exact_mentions(cat, parsed, ent, cfg)
        x = pipeline.confidence_inputs(cat, parsed, sel.retrieval, sel.chosen, exact)
        right = sel.chosen[0].id in gold
        if on:
            out.update({"skip": sel.skipped, "xs": [round(v, 4) for v in x], "rs": right})
        else:
            z = float(np.dot(x, fit["confidence"]))
            out.update({"conf": round(float(calibrate.sigmoid(np.array(z))), 4), "right": right})
    return out


def no_tool_rows(d: Path, workdir: Path, embedder: Any, fit: Mapping[str, Any]) -> dict[str, Any]:
    """A set's no-tool requests (``quality.no_tool_requests``) through the held-out selection
    with the skip on: how many there are, and the confidence inputs of those skipped."""
    from dataclasses import replace

    from toolscout.discovery import pipeline
    from toolscout.discovery.search import parse_query
    from toolscout.errors import QueryError
    from toolscout.evaluate.harness import eval_principal

    cfg = replace(quality.held_settings(fit), encoder_skip=True)
    xs: list[list[float]] = []
    n = 0
    with quality.opened_set(d, workdir, 1, embedder) as (cat, _):
        ent = cat.entitle(eval_principal(cat))
        df, n_docs = cat.store.document_frequency()
        for req in quality.no_tool_requests(cat):
            try:
                parsed = parse_query(req.query, df, n_docs, cfg)
            except QueryError:
                continue
            n += 1
            sel = pipeline.select(
                cat, parsed, ent, k=10, fmt="openai", settings=cfg, tier="progressive",
                token_budget=None,
            )  # fmt: skip
            if sel.skipped and sel.chosen and sel.retrieval is not None:
                exact = pipeline.exact_mentions(cat, parsed, ent, cfg)
                x = pipeline.confidence_inputs(cat, parsed, sel.retrieval, sel.chosen, exact)
                xs.append([round(v, 4) for v in x])
    return {"requests": n, "xs": xs}


def skips(row: Mapping[str, Any], on_exact: bool, margin: float | None) -> bool:
    if row.get("led"):
        return False
    if on_exact and row["exact"]:
        return True
    return margin is not None and row["hits"] > 0 and row["margin"] >= margin


def score(
    rows: Sequence[Mapping[str, Any]], on_exact: bool, margin: float | None
) -> dict[str, float]:
    """recall@5 (and complete@5: every gold tool in the first five) with the encoder always
    run and with the rule's skips, the losses, and the share of queries skipped."""
    n = max(len(rows), 1)
    mixed_rows = [r["lexical"] if skips(r, on_exact, margin) else r["hybrid"] for r in rows]
    base = sum(r["hybrid"] for r in rows) / n
    mixed = sum(mixed_rows) / n
    whole = sum(r["hybrid"] >= 1.0 for r in rows) / n
    whole_mixed = sum(v >= 1.0 for v in mixed_rows) / n
    share = sum(skips(r, on_exact, margin) for r in rows) / n
    return {
        "recall_hybrid": base, "recall_with_skip": mixed, "loss": base - mixed, "share": share,
        "complete_hybrid": whole, "complete_with_skip": whole_mixed,
        "complete_loss": whole - whole_mixed,
    }  # fmt: skip


def fit(
    sets: Mapping[str, Sequence[Mapping[str, Any]]], max_loss: float
) -> tuple[bool, float | None]:
    """The rule that skips the most queries (mean share over ``sets``) with no set losing
    more than ``max_loss`` recall@5; on a tie the stricter one (no exact rule, higher margin)."""
    best: tuple[float, int, float, tuple[bool, float | None]] | None = None
    for on_exact in (False, True):
        for margin in MARGINS:
            scored = [score(rows, on_exact, margin) for rows in sets.values()]
            if any(s["loss"] > max_loss + 1e-12 for s in scored):
                continue
            share = sum(s["share"] for s in scored) / len(scored)
            key = (share, -int(on_exact), margin if margin is not None else 2.0, (on_exact, margin))
            if best is None or key[:3] > best[:3]:
                best = key
    return best[3] if best is not None else (False, None)


def load_mix_share(n: int) -> dict[str, Any]:
    """The share of ``load.py``'s new-text requests the skip rule skips: its first ``n``
    dev-set texts, from its 64 discovering principals in turn, on the demo catalog
    ``toolscout serve`` serves in it, with ``encoder_skip=True``."""
    import load
    from toolscout import Settings, Toolscout
    from toolscout.discovery.search import clear_query_cache
    from toolscout.settings import SearchSettings

    skipping = SearchSettings(encoder_skip=True)
    texts = load.dev_queries(load.DEFAULT_BENCH)[:n]
    reasons: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        target = str(Path(tmp) / "demo.db")
        load.build_catalog(target, str(Path(tmp) / "audit.db"))
        settings = Settings(db=target, jwt_key=load.KEY, audit_path=str(Path(tmp) / "a2.db"))
        with Toolscout.open(settings) as ts:
            askers = [ts.verify(load.discover_agent(i)) for i in range(load.DISCOVER_PRINCIPALS)]
            for i, text in enumerate(texts):
                clear_query_cache()
                got = ts.catalog.discover(
                    text, askers[i % len(askers)], k=3, settings=skipping, record=False
                )
                why = got.trace.encoder_skipped or "ran"
                reasons[why] = reasons.get(why, 0) + 1
    skipped = sum(c for why, c in reasons.items() if why != "ran")
    return {"requests": len(texts), "skipped": skipped, "share": skipped / max(len(texts), 1),
            "by_reason": reasons}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    ap.add_argument("--cache", type=Path, default=None, help="keep the indexed sets here")
    ap.add_argument("--limit", type=int, default=None, help="queries per set (default: all)")
    ap.add_argument("--max-loss", type=float, default=0.002)
    ap.add_argument("--rows", type=Path, help="fit on the per-query rows of an earlier run")
    ap.add_argument(
        "--confidence",
        type=Path,
        default=None,
        metavar="QUALITY_JSON",
        help="also record what the confidence reads, with each set's held-out constants "
        "from this quality.py result (benchmarks/skip_confidence.py fits on it)",
    )
    ap.add_argument(
        "--resume", action="store_true", help="keep the sets an interrupted run measured"
    )
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "encoder_skip.json"
    )
    ap.add_argument(
        "--load-mix",
        type=int,
        default=0,
        metavar="N",
        help="only report the share of load.py's first N new-text requests the rule skips",
    )
    args = ap.parse_args(argv)
    if args.load_mix:
        share = load_mix_share(args.load_mix)
        print(json.dumps(share))
        out = args.out.with_name("encoder_skip_load_mix.json")
        shown = sys.argv[1:] if argv is None else argv
        cmd = quality.command_line("benchmarks/encoder_skip.py", shown)
        out.write_text(json.dumps({"command": cmd, **share}, indent=1) + "\n")
        return 0
    from toolscout.embed import default_embedder

    per_set: dict[str, list[dict[str, Any]]] = {}
    no_tool: dict[str, Any] = {}
    partial = args.out.with_suffix(".rows.json")
    if args.rows is not None:
        earlier: dict[str, Any] = json.loads(args.rows.read_text())
        earlier = earlier.get("rows", earlier)  # an earlier run's result or its rows
        no_tool = earlier.pop(NO_TOOL, {})
        per_set = earlier
    else:
        if args.resume and partial.is_file():
            kept: dict[str, Any] = json.loads(partial.read_text())
            no_tool = kept.pop(NO_TOOL, {})
            per_set = kept
        embedder = default_embedder()
        fits = json.loads(args.confidence.read_text())["fits"] if args.confidence else None
        with tempfile.TemporaryDirectory() as tmp:
            work = args.cache or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            for d in quality.bench_sets(args.bench):
                if d.name in per_set:
                    continue
                held_fit = fits[d.name] if fits is not None else None
                per_set[d.name] = measure_set(d, work, args.limit, embedder, held_fit)
                if held_fit is not None:
                    no_tool[d.name] = no_tool_rows(d, work, embedder, held_fit)
                print(f"{d.name}: {len(per_set[d.name])} queries measured", flush=True)
                partial.parent.mkdir(parents=True, exist_ok=True)
                partial.write_text(json.dumps({**per_set, NO_TOOL: no_tool}))
    held: dict[str, Any] = {}
    for name, rows in per_set.items():
        others = {n: r for n, r in per_set.items() if n != name}
        on_exact, margin = fit(others, args.max_loss)
        held[name] = {"exact": on_exact, "margin": margin, **score(rows, on_exact, margin)}
    shipped = fit(per_set, args.max_loss)
    in_set = {n: score(r, *shipped) for n, r in per_set.items()}
    print(f"shipped rule (fitted on all sets): exact={shipped[0]}, margin={shipped[1]}")
    print(
        "| set | queries | rule fitted without it | recall@5 hybrid | with skip (held-out) "
        "| loss | complete@5 loss | skipped (held-out) | skipped, shipped rule "
        "| loss, shipped rule |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, h in held.items():
        rule = f"exact={'on' if h['exact'] else 'off'}, margin={h['margin']}"
        s = in_set[name]
        print(
            f"| {name} | {len(per_set[name])} | {rule} | {h['recall_hybrid']:.4f} | "
            f"{h['recall_with_skip']:.4f} | {h['loss']:+.4f} | {h['complete_loss']:+.4f} | "
            f"{h['share']:.1%} | "
            f"{s['share']:.1%} | {s['loss']:+.4f} |"
        )
    grid = {
        f"exact={e},margin={m}": {n: score(r, e, m) for n, r in per_set.items()}
        for e in (False, True)
        for m in MARGINS
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    shown = sys.argv[1:] if argv is None else argv
    args.out.write_text(json.dumps({
        "command": quality.command_line("benchmarks/encoder_skip.py", shown),
        "max_loss": args.max_loss,
        "shipped": {"exact": shipped[0], "margin": shipped[1]},
        "held_out": held,
        "in_set": in_set,
        "grid": grid,
        "rows": per_set,
        **({"no_tool": no_tool} if no_tool else {}),
    }, indent=1) + "\n")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
