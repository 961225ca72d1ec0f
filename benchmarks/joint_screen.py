"""Screen for issue 23's one per-catalog decision by the evidence's own noise (h/joint18).

For each dev set's catalog, its calibration's own pseudo-queries (index time, cards only: the
held-out fifth of the single-tool ones, ``calibrate.pseudo_queries``; the 64 multi-tool ones,
``orders.multi_queries``) are run through the product's retrievers and ordered by each option of
the decision — ``ranker@32`` (the fits' blend), ``ranker@4`` (the smaller blend), ``lead@32``
(BM25 leading at the fits' blend) — and the plain ``bm25`` and the unblended ranker the shipped
lead reads. For each option the paired per-query difference against ``ranker@32`` is printed
with its standard error (``evaluate.fitting.clustered_difference``: a query's unit is its
recall@5 — a multi-gold query counts the share of its gold found, not one hit — and the
single-tool queries of one tool are one cluster, so the SE is cluster-robust), and what each z
of the grid would decide (:func:`joint_choice`). No evaluation query is read.

The decision's evidence and rule (:func:`joint_evidence`, :func:`joint_choice`,
:data:`JOINT_OPTIONS`, :data:`JOINT_ZS`) were measurement-only code in
``discovery/calibrate.py`` (``calibrate(measure_joint=True)``, ``Calibration.joint``; off,
``JOINT_Z`` None, and read by nothing in the product); h/xfit18 moved them here, with
:func:`evidence` making the calibration's own pseudo-queries, runs and fold-0 fit as
``calibrate.calibrate`` makes them (the screen's JSON is the same, byte for byte but its
date). ``clustered_difference`` is in ``evaluate/fitting.py`` (the cross-fit screen reads it too);
the runs and :data:`BLENDS` are benchmarks/catalog_evidence.py's (h/shape19, round twenty-five).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/joint_screen.py --cache SETS [--seed N]
[--json OUT]`` (``--cache``: the indexed sets, opened read-only in spirit: nothing is stored).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality
from catalog_evidence import BLENDS, catalog_runs
from toolscout.discovery import calibrate as cal
from toolscout.evaluate.fitting import clustered_difference

#: the options of the one per-catalog decision (:func:`joint_choice`) besides the base (the
#: ranker order at the larger blend of :data:`BLENDS`): the smaller blend, and BM25 leading
#: (:data:`LEAD`) at the larger blend
JOINT_OPTIONS: tuple[str, ...] = (f"ranker@{BLENDS[0]:g}", f"lead@{BLENDS[1]:g}")
#: the grid the decision's z is chosen on (leave-one-set-out; on a tie the value nearest 1.96)
JOINT_ZS: tuple[float, ...] = (0.0, 1.0, 1.64, 1.96, 2.58)


def joint_evidence(
    singles: Sequence[tuple[Any, tuple[int, ...]]],
    single_ids: Sequence[tuple[str, Sequence[str]]],
    multis: Sequence[tuple[Sequence[str], Any, Any, tuple[str, ...]]],
    fields: Any,
    idf: Callable[[str], float],
    weights: Sequence[float],
) -> dict[str, list[float]]:
    """Each option of :data:`JOINT_OPTIONS` against the base (the ranker order at the larger
    blend of :data:`BLENDS`) on the catalog's own pseudo-queries: the held-out single-tool
    ones (``singles``: the pool's features and the right row; ``single_ids``: each one's tool
    and BM25's first five) and the multi-tool ones (``multis``). A query's unit is its
    recall@5 (a multi-tool query: the share of its tools in the top five), each option's
    minus the base's on the same query; :func:`paired` gives the mean and its SE. The
    decision keys (the option's name) pool both kinds; ``single:`` and ``multi:`` keys, and
    plain ``bm25`` and the unblended ``ranker`` (what :data:`LEAD_MARGIN` reads), are
    reported beside."""
    low, high = BLENDS
    orders = {"base": ("ranker", high), f"ranker@{low:g}": ("ranker", low)}
    orders[f"lead@{high:g}"] = ("lead", high)
    got: dict[str, list[tuple[str, float]]] = {k: [] for k in ("single", "multi")}
    rows: dict[tuple[str, str], list[float]] = {}

    def add(kind: str, key: str, value: float) -> None:
        rows.setdefault((kind, key), []).append(value)

    for (x, t), (tool, bm25_top) in zip(singles, single_ids, strict=True):
        got["single"].append((tool, 0.0))
        for name, (order, blend) in orders.items():
            add(
                "single",
                name,
                float(bool(t) and t[0] in cal._top5(cal.ordered(x, weights, blend, order))),
            )
        add("single", "ranker", float(bool(t) and t[0] in cal._top5(cal.scores(x, weights))))
        add("single", "bm25", float(tool in bm25_top))
    pools = [cal.features(q, lex, dense, fields, idf) for q, lex, dense, _ in multis]
    for j, ((ids, x), (_, lex, _d, gold)) in enumerate(zip(pools, multis, strict=True)):
        got["multi"].append((f"multi-{j}", 0.0))
        for name, (order, blend) in orders.items():
            top = (
                {ids[i] for i in cal._top5(cal.ordered(x, weights, blend, order))} if ids else set()
            )
            add("multi", name, sum(g in top for g in gold) / len(gold))
        add("multi", "bm25", sum(g in set(lex.ids[:5]) for g in gold) / len(gold))
    out: dict[str, list[float]] = {}
    for name in (*JOINT_OPTIONS, "ranker", "bm25"):
        pooled_d: list[float] = []
        pooled_c: list[str] = []
        for kind in ("single", "multi"):
            if (kind, name) not in rows:
                continue
            d = [a - b for a, b in zip(rows[(kind, name)], rows[(kind, "base")], strict=True)]
            c = [key for key, _ in got[kind]]
            out[f"{kind}:{name}"] = clustered_difference(d, c)
            pooled_d += d
            pooled_c += c
        if name in JOINT_OPTIONS:
            out[name] = clustered_difference(pooled_d, pooled_c)
    # what the shipped lead reads (:data:`LEAD_MARGIN`: BM25 against the unblended ranker)
    d = [a - b for a, b in zip(rows[("single", "bm25")], rows[("single", "ranker")], strict=True)]
    out["single:bm25-ranker"] = clustered_difference(d, [key for key, _ in got["single"]])
    return out


def joint_choice(evidence: Mapping[str, Sequence[float]], z: float | None) -> str:
    """The catalog's one decision: ``"base"`` (the ranker order at the larger blend) unless
    an option of :data:`JOINT_OPTIONS` beats it on the catalog's pseudo-queries by more than
    ``z`` times the difference's standard error — then the one of those with the largest
    difference (on a tie, the earlier in :data:`JOINT_OPTIONS`). ``z`` None, or no evidence:
    ``"base"``."""
    if z is None:
        return "base"
    best, best_diff = "base", 0.0
    for name in JOINT_OPTIONS:
        got = evidence.get(name)
        if not got or got[2] <= 0:
            continue
        diff, se = float(got[0]), float(got[1])
        if diff > z * se and diff > 0 and (best == "base" or diff > best_diff):
            best, best_diff = name, diff
    return best


#: the split reading, reported beside the product's pooled one: the lead from the single-tool
#: pseudo-queries (BM25 against the unblended ranker, what ``LEAD_MARGIN`` reads), the blend
#: from the multi-tool ones (``catalog_evidence.catalog_blend``'s evidence), each scaled by its SE
SPLIT = {"lead@32": "single:bm25-ranker", "ranker@4": "multi:ranker@4"}


def split_choice(joint: dict[str, list[float]], z: float) -> str:
    """The split reading's decision: the option whose own evidence beats the base by more
    than ``z`` SEs (both: the larger difference)."""
    return joint_choice({k: joint[v] for k, v in SPLIT.items() if v in joint}, z)


def evidence(cat: Any, seed: int) -> tuple[dict[str, float], dict[str, list[float]], int]:
    """(the single-tool pseudo recall over the held-out fifth, the decision's evidence, the
    catalog's tools), made as ``calibrate.calibrate`` made them with ``measure_joint``: the
    seed's pseudo-queries and multi-tool ones through the product's retrievers, the ranker
    fitted from the shipped prior on the four other fifths (fold 0's fit)."""
    got = catalog_runs(cat, seed)
    if got is None:
        return {}, {}, len(cat.specs())
    pseudo, runs, examples = got.pseudo, got.runs, got.examples
    fields, idf = got.fields, got.idf
    ((weights, _),) = cal.fold_fits(examples, cal.PRIOR, cal.PRIOR_NONE, 1)
    rows = cal.single_hits(pseudo, runs, examples, [weights])
    recall = {
        k: round(sum(float(r[k]) for r in rows) / max(len(rows), 1), 3)
        for k in ("bm25", "dense", "ranker")
    }
    held = [
        (ex.x, (ex.target,) if ex.target >= 0 else ())
        for i, (p, ex) in enumerate(zip(pseudo, examples, strict=True))
        if i % cal.FOLDS == 0 and p.tool_id is not None
    ]
    held_ids = [
        (p.tool_id, lex.ids[:5])
        for i, (p, (_, lex, _d)) in enumerate(zip(pseudo, runs, strict=True))
        if i % cal.FOLDS == 0 and p.tool_id is not None
    ]
    return recall, joint_evidence(held, held_ids, got.multis, fields, idf, weights), got.n_tools


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--seed", type=int, default=None, help="pseudo-queries' seed")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.settings import SearchSettings

    seed = cal.SEED if args.seed is None else args.seed
    embedder = MiniLMEmbedder()
    out: dict[str, Any] = {}
    for d in quality.bench_sets(args.bench):
        db = args.cache / f"{d.name}.db"
        if not db.is_file():
            raise SystemExit(f"error: {db} is missing: index the set into --cache first")
        with Catalog.open(db, embedder=embedder, log=False, settings=SearchSettings()) as cat:
            pseudo_recall, joint, n_tools = evidence(cat, seed)
        decides = {f"{z:g}": joint_choice(joint, z) for z in JOINT_ZS}
        split = {f"{z:g}": split_choice(joint, z) for z in JOINT_ZS}
        out[d.name] = {
            "pseudo_recall": pseudo_recall,
            "joint": joint,
            "decides": decides,
            "decides_split": split,
        }
        print(f"{d.name} ({n_tools} tools): pseudo recall@5 {pseudo_recall}")
        for key, (diff, se, n) in joint.items():
            t = diff / se if se > 0 else float("inf") if diff > 0 else 0.0
            print(f"  {key:<28} diff {diff:+.3f}  SE {se:.3f}  n {int(n):<4d} t {t:+.2f}")
        print("  decides: " + ", ".join(f"z={z} {o}" for z, o in decides.items()))
        print("  split:   " + ", ".join(f"z={z} {o}" for z, o in split.items()), flush=True)
    if args.json:
        argv_list = list(sys.argv[1:] if argv is None else argv)
        quality.write_results(
            args.json, quality.command_line("benchmarks/joint_screen.py", argv_list), sets=out
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
