"""The learned ranker's per-query features, A/B, held out: its order with and without them.

The ranker (``discovery/calibrate.py``) scores each candidate of a query's pool on
:data:`calibrate.FEATURES`; the optional columns ``features(shape=True)`` adds read the
request's shape (its length, its rare terms, whether BM25 and dense agree, whether it
reads in parts: :data:`calibrate.SHAPE_FEATURES`). This script measures what they add
on their own, fast and offline: every query of every set goes once through the
product's own BM25 and dense retrieval (``Retriever.pools``); the ranker prior is
fitted leave-one-set-out on the other sets' queries (``fitting.fit_prior``'s data and
settings), once on :data:`calibrate.FEATURES` (the default ranker) and once with the
shape columns too; each set is ordered by its held-out fit, with the blend of the fixed
fusion added, and scored at recall@5 and complete@5 beside the same pools ordered by BM25 alone, by
the cosine alone and by the fixed fusion. Nothing else of the default runs here (no
per-catalog refit, exact hits, dedupe, parts, prerequisites): the full default is
``benchmarks/quality.py``'s. It also times the feature matrix with and without the
shape columns on the same pools.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/ranker_features.py --limit 200
[--cache DIR] [--blends 4,32]``; writes ``benchmarks/results/ranker_features.json``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import DEFAULT_BENCH, bench_sets, command_line, opened_set  # noqa: E402


def pools(d: Path, workdir: Path, limit: int | None, embedder: Any) -> list[dict[str, Any]]:
    """Each query's pool: ids, the full feature matrix, the gold ids, BM25's and dense's
    orders (cached in ``workdir`` by set and limit)."""
    from toolscout.discovery.calibrate import features
    from toolscout.discovery.parts import request_parts
    from toolscout.evaluate.harness import eval_principal
    from toolscout.settings import SearchSettings

    cache = workdir / f"{d.name}.features-{limit}.pkl"
    if cache.exists():
        out: list[dict[str, Any]] = pickle.loads(cache.read_bytes())
        return out
    out = []
    fresh = not (workdir / f"{d.name}.db").exists()
    with opened_set(d, workdir, limit, embedder, index=fresh) as (cat, scored):
        retriever = cat.retriever(SearchSettings())
        allowed = cat.entitle(eval_principal(cat)).ids
        texts = [q.query for q in scored]
        vectors = [retriever._embed(t) for t in texts]
        for q, (qterms, lex, dense) in zip(
            scored, retriever.pools(texts, vectors, allowed), strict=True
        ):
            n_parts = len(request_parts(q.query))
            ids, x = features(qterms, lex, dense, retriever.phrases.fields,
                              retriever.phrases.idf, n_parts, shape=True)  # fmt: skip
            out.append({
                "ids": ids, "x": x, "gold": list(q.gold), "parts": n_parts,
                "lex": list(lex.ids), "dense": list(dense.ids),
                "args": (qterms, lex, dense, n_parts),
            })  # fmt: skip
        timing = time_features(out, retriever.phrases.fields, retriever.phrases.idf)
    for row in out:
        row.pop("args")
    out[0]["timing"] = timing
    cache.write_bytes(pickle.dumps(out))
    return out


def pools_by_set(
    bench: Path, workdir: Path, limit: int | None, embedder: Any
) -> dict[str, list[dict[str, Any]]]:
    """:func:`pools` of every dev set under ``bench``, by set name (timed on stderr)."""
    by_set: dict[str, list[dict[str, Any]]] = {}
    for d in bench_sets(bench):
        start = time.perf_counter()
        by_set[d.name] = pools(d, workdir, limit, embedder)
        print(f"{d.name}: {len(by_set[d.name])} queries ({time.perf_counter() - start:.0f}s)",
              file=sys.stderr)  # fmt: skip
    return by_set


def time_features(rows: Sequence[Mapping[str, Any]], fields: Any, idf: Any) -> dict[str, float]:
    """Mean µs of the feature matrix as the default builds it and of the shape columns
    alone (``calibrate._shape``) on the same pools, interleaved, 3 rounds."""
    from toolscout.discovery import calibrate

    full: list[float] = []
    shape: list[float] = []
    for _ in range(3):
        for row in rows:
            qterms, lex, dense, n_parts = row["args"]
            t0 = time.perf_counter()
            calibrate.features(qterms, lex, dense, fields, idf, n_parts)
            t1 = time.perf_counter()
            ids, x = calibrate.features(qterms, lex, dense, fields, idf, n_parts, shape=True)
            q = set(qterms)
            pool = set(ids)
            index = {t: i for i, t in enumerate(ids)}
            weights = {t: idf(t) for t in q}
            t2 = time.perf_counter()
            calibrate._shape(x, q, weights, lex, dense, fields, idf, pool, index, n_parts)
            t3 = time.perf_counter()
            full.append(t1 - t0)
            shape.append(t3 - t2)
    return {
        "features_us": round(1e6 * float(np.mean(full)), 1),
        "shape_columns_us": round(1e6 * float(np.mean(shape)), 1),
    }


def scores_at(rows: Sequence[Mapping[str, Any]], order_of: Any, k: int = 5) -> dict[str, float]:
    """recall@k and complete@k of each query's pool ordered by ``order_of(row)``."""
    recall: list[float] = []
    complete: list[float] = []
    for row in rows:
        gold = set(row["gold"])
        top = set(order_of(row)[:k])
        recall.append(len(gold & top) / max(len(gold), 1))
        complete.append(float(gold <= top))
    return {"recall@5": float(np.mean(recall)), "complete@5": float(np.mean(complete))}


def learned_order(weights: Sequence[float], blend: float, cols: int) -> Any:
    from toolscout.discovery.calibrate import blended

    w = np.asarray(blended(weights[:cols], blend), dtype=np.float64)

    def order(row: Mapping[str, Any]) -> list[str]:
        s = row["x"][:, :cols] @ w
        return [row["ids"][i] for i in np.argsort(-s, kind="stable")]

    return order


def fixed_order(row: Mapping[str, Any]) -> list[str]:
    from toolscout.discovery.calibrate import FIXED_MIX

    s = row["x"][:, : len(FIXED_MIX)] @ np.asarray(FIXED_MIX)
    return [row["ids"][i] for i in np.argsort(-s, kind="stable")]


def fit_without(
    by_set: Mapping[str, Sequence[Mapping[str, Any]]], held_out: str | None, cols: int
) -> tuple[tuple[float, ...], float]:
    """The prior fitted as ``fitting.fit_prior`` does, on the first ``cols`` columns."""
    from toolscout.discovery.calibrate import PRIOR, PRIOR_NONE, Example, fit
    from toolscout.evaluate.fitting import _balanced

    examples: dict[str, list[Example]] = {}
    for name, rows in by_set.items():
        out: list[Example] = []
        for row in rows:
            x = row["x"][:, :cols]
            targets = [row["ids"].index(g) for g in row["gold"] if g in row["ids"]] or [-1]
            out += [Example(x, t) for t in targets]
        examples[name] = out
    prior = (*PRIOR, *(0.0,) * (cols - len(PRIOR)))[:cols]
    return fit(_balanced(examples, held_out), l2=1e-3, steps=400,
               prior=prior, prior_none=PRIOR_NONE)  # fmt: skip


def fit_variants(
    by_set: Mapping[str, Sequence[Mapping[str, Any]]], variants: Mapping[str, int]
) -> dict[str, dict[str, list[float]]]:
    """Per variant (a name and its first ``cols`` columns): the prior fitted without each
    set, and on all of them ("all"), each weight and then the none bias, rounded."""
    fits: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    for v, cols in variants.items():
        for name in [*by_set, None]:
            w, b = fit_without(by_set, name, cols)
            fits[v][name or "all"] = [round(x, 4) for x in (*w, b)]
    return fits


def variant_scores(
    rows: Sequence[Mapping[str, Any]],
    name: str,
    fits: Mapping[str, Mapping[str, Sequence[float]]],
    variants: Mapping[str, int],
    blends: Sequence[float],
) -> dict[str, dict[str, float]]:
    """Set ``name``'s scores ordered by each variant's fit without it at each blend, then,
    the ceiling and not a result, by the fit on all sets, this one included ("in-set")."""
    res: dict[str, dict[str, float]] = {}
    for fit_of, label in ((name, ""), ("all", " in-set")):
        for v, cols in variants.items():
            for blend in blends:
                order = learned_order(fits[v][fit_of], blend, cols)
                res[f"{v}{label} blend {blend:g}"] = scores_at(rows, order)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--limit", type=int, default=200, help="N queries per set (seeded)")
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "ranker-features")
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/results/ranker_features.json"
    )
    parser.add_argument(
        "--blends", type=lambda v: tuple(float(x) for x in v.split(",")), default=(4.0, 32.0)
    )
    args = parser.parse_args(args_list)

    from toolscout.discovery.calibrate import FEATURES, SHAPE_FEATURES
    from toolscout.embed.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    args.cache.mkdir(parents=True, exist_ok=True)
    by_set = pools_by_set(args.bench, args.cache, args.limit, embedder)
    variants = {"before": len(FEATURES), "shape": len(FEATURES) + len(SHAPE_FEATURES)}
    fits = fit_variants(by_set, variants)
    results: dict[str, Any] = {}
    for name, rows in by_set.items():
        res: dict[str, Any] = {
            "queries": len(rows),
            "read in parts": float(np.mean([r["parts"] > 1 for r in rows])),
            "bm25": scores_at(rows, lambda r: r["lex"]),
            "dense": scores_at(rows, lambda r: r["dense"]),
            "fixed": scores_at(rows, fixed_order),
        }
        res.update(variant_scores(rows, name, fits, variants, args.blends))
        results[name] = res
    timing = {n: rows[0].get("timing", {}) for n, rows in by_set.items()}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "command": command_line("benchmarks/ranker_features.py", args_list),
        "features": [*FEATURES, *SHAPE_FEATURES], "fits": fits, "sets": results, "timing": timing,
    }, indent=1))  # fmt: skip
    keys = list(next(iter(results.values())))[2:]
    print("| set | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, res in results.items():
        cells = [f"{res[k]['recall@5']:.3f} / {res[k]['complete@5']:.3f}" for k in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("timing (µs, the default's feature matrix / the shape columns):", timing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
