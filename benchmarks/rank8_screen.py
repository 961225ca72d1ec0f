"""Screen new ranker columns, held out: each set's pools ordered by a prior fitted without it.

Reads the raw pools of ``benchmarks/rank8_pools.py``, builds the default feature matrix
(:func:`features.features`) and candidate columns beside it, fits the ranker prior
leave-one-set-out as ``fitting.fit_prior`` does (the same balanced sample, L2, steps), and
orders every pool by the held-out fit plus ``blend`` times the fixed fusion, the blend
chosen without the set (the largest worst margin over the pool's best part on the other
five sets, then the mean: ``fitting.choose_blend``'s rule). Only the ranker's order is
measured here (no per-catalog refit, exact hits, parts' merge, dedupe or prerequisites).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/rank8_screen.py --cache DIR --limit 200``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SETS = ("apibench", "bfcl", "metatool", "restbench", "toolalpaca", "toolbench")
BLENDS = (0.0, 2.0, 4.0, 8.0, 16.0, 32.0)


def load(cache: Path, limit: int) -> dict[str, dict[str, Any]]:
    return {s: pickle.loads((cache / f"{s}.rank8-{limit}.pkl").read_bytes()) for s in SETS}


def _share(q: Mapping[str, float], have: frozenset[str] | set[str]) -> float:
    total = sum(q.values()) or 1.0
    return sum(w for t, w in q.items() if t in have) / total


#: candidate columns: (the set's data, the row, the pool ids, the query's idf weights) → column
Column = Callable[[Mapping[str, Any], Mapping[str, Any], list[str], dict[str, float]], np.ndarray]


def col_cover(data: Mapping[str, Any], row: Any, ids: list[str], q: dict[str, float]) -> Any:
    e: frozenset[str] = frozenset()
    return np.array([_share(q, data["name"].get(t, e) | data["summary"].get(t, e)) for t in ids])


def col_name_q(data: Mapping[str, Any], row: Any, ids: list[str], q: dict[str, float]) -> Any:
    return np.array([_share(q, data["name"].get(t, frozenset())) for t in ids])


def col_params_q(data: Mapping[str, Any], row: Any, ids: list[str], q: dict[str, float]) -> Any:
    return np.array([_share(q, data["params"].get(t, frozenset())) for t in ids])


def col_card_q(data: Mapping[str, Any], row: Any, ids: list[str], q: dict[str, float]) -> Any:
    e: frozenset[str] = frozenset()
    return np.array([
        _share(q, data["name"].get(t, e) | data["summary"].get(t, e) | data["params"].get(t, e))
        for t in ids
    ])  # fmt: skip


def col_rare_miss(data: Mapping[str, Any], row: Any, ids: list[str], q: dict[str, float]) -> Any:
    """share of the query's rare-term idf (≥ half the largest) the card lacks entirely"""
    top = data["idf"]["\x00"]
    rare = {t: w for t, w in q.items() if w >= 0.5 * top}
    if not rare:
        return np.zeros(len(ids))
    e: frozenset[str] = frozenset()
    return np.array([
        1.0 - _share(rare, data["name"].get(t, e) | data["summary"].get(t, e)
                     | data["params"].get(t, e))
        for t in ids
    ])  # fmt: skip


COLUMNS: dict[str, Column] = {
    "cover": col_cover,
    "name_q": col_name_q,
    "params_q": col_params_q,
    "card_q": col_card_q,
    "rare_miss": col_rare_miss,
}


def matrices(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per query: ids, the default matrix, every candidate column, the gold, the parts' orders."""
    from toolscout.discovery.features import FieldTerms, features
    from toolscout.stores.base import Hits

    fields = FieldTerms(data["name"], data["summary"], {}, data["in_name"], data["in_summary"])
    idfs = data["idf"]

    def idf(t: str) -> float:
        return idfs.get(t, idfs["\x00"])

    out = []
    for row in data["rows"]:
        lex = Hits(list(row["lex"][0]), list(row["lex"][1]))
        dense = Hits(list(row["dense"][0]), list(row["dense"][1]))
        ids, x = features(row["qterms"], lex, dense, fields, idf, row["parts"])
        q = {t: idf(t) for t in set(row["qterms"])}
        extra = {n: f(data, row, ids, q) if ids else np.zeros(0) for n, f in COLUMNS.items()}
        out.append({"ids": ids, "x": x, "extra": extra, "gold": row["gold"],
                    "lex": row["lex"][0], "dense": row["dense"][0]})  # fmt: skip
    return out


def crosses(x: np.ndarray) -> np.ndarray:
    """Pairwise products of the default columns (upper triangle, squares included)."""
    n = x.shape[1]
    cols = [x[:, i] * x[:, j] for i in range(n) for j in range(i, n)]
    return np.stack(cols, axis=1) if cols else np.zeros((len(x), 0))


def design(p: Mapping[str, Any], variant: Sequence[str]) -> np.ndarray:
    parts = [p["x"]]
    for name in variant:
        if name == "crosses":
            parts.append(crosses(p["x"]))
        else:
            parts.append(p["extra"][name][:, None])
    return np.hstack(parts) if len(p["ids"]) else np.zeros((0, 9 + 0))


def fit_without(
    by_set: Mapping[str, list[dict[str, Any]]],
    held: str | None,
    variant: Sequence[str],
    l2: float,
    offset_blend: float = 0.0,
) -> tuple[np.ndarray, float]:
    """The prior fitted without ``held``; with ``offset_blend``, over that many times the
    fixed fusion as a fixed offset (``logit.fit(offset=)``: the order's own weights)."""
    from toolscout.discovery.logit import PRIOR, PRIOR_NONE, Example, fit
    from toolscout.discovery.ranker import FIXED_MIX
    from toolscout.evaluate.fitting import _balanced

    examples: dict[str, list[Any]] = {}
    width = 0
    for name, pools in by_set.items():
        ex = []
        for p in pools:
            x = design(p, variant)
            width = max(width, x.shape[1])
            targets = [p["ids"].index(g) for g in p["gold"] if g in p["ids"]] or [-1]
            ex += [Example(x, t) for t in targets]
        examples[name] = ex
    prior = (*PRIOR, *(0.0,) * (width - len(PRIOR)))
    offset = tuple(offset_blend * m for m in FIXED_MIX) if offset_blend else None
    w, b = fit(_balanced(examples, held), l2=l2, steps=400, prior=prior, prior_none=PRIOR_NONE,
               offset=offset)  # fmt: skip
    return np.asarray(w), b


def order_scores(p: Mapping[str, Any], variant: Sequence[str], w: np.ndarray, blend: float) -> Any:
    from toolscout.discovery.ranker import FIXED_MIX

    x = design(p, variant)
    s = x @ w
    return s + blend * (p["x"] @ np.asarray(FIXED_MIX))


def per_query(pools: Sequence[Mapping[str, Any]], order_of: Any) -> tuple[list[float], list[float]]:
    rec, com = [], []
    for p in pools:
        gold = set(p["gold"])
        top = set(order_of(p)[:5])
        rec.append(len(gold & top) / max(len(gold), 1))
        com.append(float(gold <= top))
    return rec, com


def ranked(p: Mapping[str, Any], s: Any) -> list[str]:
    return [p["ids"][i] for i in np.argsort(-s, kind="stable")] if len(p["ids"]) else []


def parts_of(pools: Sequence[Mapping[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    from toolscout.discovery.ranker import FIXED_MIX

    mix = np.asarray(FIXED_MIX)
    return {
        "bm25": per_query(pools, lambda p: p["lex"]),
        "dense": per_query(pools, lambda p: p["dense"]),
        "fixed": per_query(pools, lambda p: ranked(p, p["x"] @ mix) if len(p["ids"]) else []),
    }


def mean(v: Sequence[float]) -> float:
    return float(np.mean(v)) if len(v) else 0.0


def evaluate(
    by_set: Mapping[str, list[dict[str, Any]]], variant: Sequence[str], l2: float
) -> dict[str, Any]:
    """Held-out recall/complete per set with the blend chosen without it (``offset`` in
    ``variant``: the weights fitted over each blend's fixed fusion, one fit per blend)."""
    offset = "offset" in variant
    variant = [v for v in variant if v != "offset"]
    fits = {h: fit_without(by_set, h, variant, l2) for h in [*by_set, None]}
    parts = {n: parts_of(pools) for n, pools in by_set.items()}
    best = {n: max(mean(v[0]) for v in parts[n].values()) for n in by_set}
    best_c = {n: max(mean(v[1]) for v in parts[n].values()) for n in by_set}
    # grid[held][blend][set] = (recall list, complete list), the prior fitted without ``held``
    grid: dict[str, dict[float, tuple[list[float], list[float]]]] = {}
    for n, pools in by_set.items():
        grid[n] = {}
        for bl in BLENDS:
            w = fit_without(by_set, n, variant, l2, bl)[0] if offset and bl else fits[n][0]
            grid[n][bl] = per_query(
                pools, lambda p, bl=bl, w=w: ranked(p, order_scores(p, variant, w, bl))
            )
    out: dict[str, Any] = {"fits": {str(k): [*map(float, v[0]), v[1]] for k, v in fits.items()}}
    for n in by_set:
        others = [o for o in by_set if o != n]

        def margins(bl: float, others: list[str] = others) -> tuple[float, float]:
            m = [min(mean(grid[o][bl][0]) - best[o], mean(grid[o][bl][1]) - best_c[o])
                 for o in others]  # fmt: skip
            return min(m), mean(m)

        def key(bl: float) -> tuple[float, float, float]:
            worst, avg = margins(bl)
            return round(worst, 9), round(avg, 9), -bl

        chosen = max(BLENDS, key=key)
        rec, com = grid[n][chosen]
        out[n] = {"blend": chosen, "recall": rec, "complete": com,
                  "grid": {str(b): [mean(grid[n][b][0]), mean(grid[n][b][1])] for b in BLENDS},
                  "parts": {k: [mean(v[0]), mean(v[1])] for k, v in parts[n].items()},
                  "parts_rows": {k: v for k, v in parts[n].items()}}  # fmt: skip
    return out


def losses(by_set: Mapping[str, list[dict[str, Any]]], blend: float = 4.0) -> list[str]:
    """Where the held-out order loses a gold tool that is in its pool: how many, how many
    of those BM25 or dense did not list, how many have a higher BM25 (cosine) than every
    intruder of the top five, and the mean of each column, gold minus those intruders."""
    from toolscout.discovery.features import FEATURES

    names = [*FEATURES, *COLUMNS]
    lines = []
    for n, pools in by_set.items():
        w, _ = fit_without(by_set, n, [], 1e-3)
        diffs = []
        count = {"lost": 0, "not in bm25": 0, "not in dense 50": 0, "bm25 above": 0,
                 "cosine above": 0}  # fmt: skip
        for p in pools:
            if not p["ids"]:
                continue
            top = np.argsort(-order_scores(p, [], w, blend), kind="stable")[:5].tolist()
            above = [i for i in top if p["ids"][i] not in p["gold"]]
            x = np.hstack([p["x"]] + [p["extra"][c][:, None] for c in COLUMNS])
            for g in p["gold"]:
                if g not in p["ids"] or p["ids"].index(g) in top:
                    continue
                gi = p["ids"].index(g)
                count["lost"] += 1
                count["not in bm25"] += g not in p["lex"]
                count["not in dense 50"] += g not in p["dense"][:50]
                count["bm25 above"] += bool(x[gi, 0] > x[above, 0].max())
                count["cosine above"] += bool(x[gi, 2] > x[above, 2].max())
                diffs.append(x[gi] - x[above].mean(axis=0))
        d = np.mean(diffs, axis=0) if diffs else np.zeros(len(names))
        gaps = " ".join(f"{a} {v:+.2f}" for a, v in zip(names, d, strict=True))
        lines.append(f"{n}: {count}; gold − intruders: {gaps}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument(
        "--variants", default="base;params_q;card_q;rare_miss;name_q;card_q+rare_miss;offset"
    )
    parser.add_argument("--l2", type=float, default=1e-3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--losses", action="store_true", help="only the loss analysis")
    args = parser.parse_args(argv)
    from toolscout.evaluate.fitting import paired_interval

    kept = args.cache / f"rank8-matrices-{args.limit}.pkl"
    if kept.exists():
        by_set = pickle.loads(kept.read_bytes())
    else:
        by_set = {n: matrices(d) for n, d in load(args.cache, args.limit).items()}
        kept.write_bytes(pickle.dumps(by_set))
    if args.losses:
        print("\n".join(losses(by_set)))
        return 0
    results: dict[str, Any] = {}
    for v in args.variants.split(";"):
        cols = [c for c in v.split("+") if c and c != "base"]
        results[v] = evaluate(by_set, cols, args.l2)
        print(f"done {v}", file=sys.stderr)
    base = results["base"]
    print("| set | bm25 | dense | fixed | " + " | ".join(results) + " |")
    print("|---|---|---|---|" + "---|" * len(results))
    for n in by_set:
        pr = base[n]["parts"]
        cells = [f"{pr[k][0]:.3f} / {pr[k][1]:.3f}" for k in ("bm25", "dense", "fixed")]
        for v, res in results.items():
            r = res[n]
            cell = f"{mean(r['recall']):.3f} / {mean(r['complete']):.3f} (b{r['blend']:g})"
            if v != "base":
                d, lo, hi = paired_interval(r["recall"], base[n]["recall"])
                cell += f" {d:+.3f} [{lo:+.3f},{hi:+.3f}]"
            cells.append(cell)
        print(f"| {n} | " + " | ".join(cells) + " |")
    if args.json:
        slim = {v: {k: ({kk: vv for kk, vv in r.items() if kk != "parts_rows"}
                        if isinstance(r, dict) else r) for k, r in res.items()}
                for v, res in results.items()}  # fmt: skip
        args.json.write_text(json.dumps(slim))
    return 0


if __name__ == "__main__":
    sys.exit(main())
