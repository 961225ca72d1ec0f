"""The hub score as one more ranker feature, screened held out (issue 23, round twenty-five).

A card is a *hub* when it sits close to many other cards: whatever a request asks, its
cosine is high, so dense retrieval brings it up too often (CSLS corrects word translation
the same way). Round nine measured a hub *penalty* on the dense path alone (the card's
cosine lowered by gamma times its hub score): it helped bfcl and toolbench held out and
cost metatool (docs/history/calibration.md, "hub penalty"). Here the hub score is one more
column of the learned ranker's pool (:func:`hub_scores`, :func:`with_hub`), a per-card
constant computed from the catalog's stored card vectors alone, and its weight comes from
the ranker's prior, fitted leave-one-set-out on the other sets' real requests as
``benchmarks/quality.py`` fits the prior (``fitting._balanced``'s 600 examples a set,
``logit.fit`` with l2 1e-3 and 400 steps, the prior's start extended by 0 for the column).
A catalog's own calibration does not move the column's weight: its adjustment of the other
weights (``Calibration.weights_over``: the stored fit minus the prior it started from) is
added, the hub weight's adjustment is 0.

Phases (each resumes from ``--work``):

* ``pools``: every real query's pool of every set as ``fitting.examples`` builds it
  (``Retriever.pools``, ``features``), keeping the candidates' ids, checked equal to
  quality.py's ``examples-*`` stage (``--stages``), and each set's hub scores for every
  ``k`` of :data:`KS` (the card vectors of the store, ``store.card_vectors``).
* ``order``: the prior fitted without each set (and on all six) on the base columns and
  with the hub column for every (k, form) of the grid; each set held out ordered by its
  fold's weights plus the blend (32, as every fold chose) times the fixed fusion, recall@5
  and complete@5 of that order (no dedupe, exact hits, parts or lead: the learned order
  alone, base and variant with identical code). The (k, form) of each fold is chosen on
  the other five sets' held-out gains (the best mean recall@5 gain, then the best worst).
* ``order-weight``: a second reading, not the brief's: the hub weight chosen for the order
  (each fold's base weights, the blend, plus a weight on a grid times the centred column,
  chosen on the other five sets' recall@5), ranker order only.
* ``pipeline --arm base|hub``: the held-out default's own selection (``fitting.recall_grid``
  at each fold's blend and dedupe yield, ``quality.held_settings`` with each fold's lexical
  lead margin from ``--fits``) with each fold's prior and Platt step; ``hub`` puts the
  column into the product's ranker at query time (``ranker.features`` and
  ``Retriever.learned_ranker`` wrapped in this process only, nothing in src/ changed). Also
  the all-six fit on every set (in-set). Per-query recall@5 and complete@5 kept;
  ``--tag`` / ``--only`` keep a repeat run of some SET@FOLD apart (another hash seed).
* ``report``: the paired 95% intervals (``fitting.paired_interval``) of variant minus base,
  held out and in-set, and the ship rule's verdict; writes ``--json``.
* ``cost``: the hub scores' index-time cost, measured on a block of rows and scaled.

Run (``PY``: ``PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/hub_screen.py``; the
exact commands of round twenty-five are in docs/history/calibration.md)::

    PY pools --cache SETS --stages STAGES --work W
    PY order --work W
    PY order-weight --work W
    PY pipeline --arm base --cache SETS --work W
    PY pipeline --arm hub --cache SETS --work W
    PY report --work W --json benchmarks/results/hub_screen.json
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import (  # noqa: E402
    DEFAULT_BENCH,
    bench_sets,
    command_line,
    held_settings,
    opened_set,
    write_results,
)

Arr = npt.NDArray[np.float64]

#: the neighbourhoods the hub score is read over (round nine's 5 and 20, and around them)
KS: tuple[int, ...] = (1, 5, 10, 20, 50)
#: the column's forms: the mean cosine itself, less the catalog's mean hub score, or that
#: divided by the catalog's spread of hub scores (a catalog-wide constant cancels in the
#: order, not in the probability against the none option)
FORMS: tuple[str, ...] = ("raw", "centred", "z")
#: the blend the ranker-order phase orders with (every fold's, benchmarks/results/quality.json)
ORDER_BLEND = 32.0
RECALL_K = 5
#: rows of the card matrix multiplied at a time (at 100k cards a block's cosines: 100 MB)
BLOCK = 256


# -- the hub score -------------------------------------------------------------------------
def hub_scores(vectors: npt.ArrayLike, k: int) -> Arr:
    """Each card's mean cosine to its ``k`` nearest *other* cards (``vectors``: one row a
    card, normalised or not; fewer than ``k`` others: all of them)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError(f"hub_scores needs a 2-D matrix of card vectors, got shape {v.shape}")
    n = len(v)
    if n < 2:
        raise ValueError(f"hub_scores needs at least 2 cards, got {n}")
    if k < 1:
        raise ValueError(f"hub_scores needs k >= 1, got {k}")
    norms = np.linalg.norm(v, axis=1)
    if not np.all(norms > 0):
        raise ValueError(f"card vector {int(np.argmin(norms))} is all zeros")
    v = v / norms[:, None]
    kk = min(k, n - 1)
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, BLOCK):
        block = v[start : start + BLOCK] @ v.T
        rows = np.arange(len(block))
        block[rows, start + rows] = -np.inf  # not its own neighbour
        top = np.partition(block, n - kk, axis=1)[:, n - kk :]
        out[start : start + len(block)] = top.astype(np.float64).mean(axis=1)
    return out


def hub_form(raw: Arr, form: str) -> Arr:
    """The column's values from the raw hub scores of a catalog (:data:`FORMS`)."""
    v: Arr = np.asarray(raw, dtype=np.float64)
    centred: Arr = v - v.mean()
    if form == "raw":
        return v
    if form == "centred":
        return centred
    if form == "z":
        sd = float(v.std())
        return centred / sd if sd > 0 else centred
    raise ValueError(f"unknown hub form {form!r}; expected one of {', '.join(FORMS)}")


def with_hub(ids: Sequence[str], x: Arr, hub: Mapping[str, float]) -> Arr:
    """The pool's feature matrix with each candidate's hub score appended as a last column."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"with_hub needs a 2-D feature matrix, got shape {x.shape}")
    if len(ids) != len(x):
        raise ValueError(f"{len(ids)} candidate ids for a feature matrix of {len(x)} rows")
    missing = [t for t in ids if t not in hub]
    if missing:
        raise ValueError(f"no hub score for tool {missing[0]!r} ({len(missing)} missing)")
    col = np.fromiter((hub[t] for t in ids), dtype=np.float64, count=len(ids))
    return np.column_stack([x, col])


def catalog_hubs(cat: Any, ks: Sequence[int] = KS) -> dict[int, dict[str, float]]:
    """A catalog's raw hub scores for every ``k``: {k: {tool id: score}} from its stored
    card vectors."""
    ids = sorted(s.id for s in cat.specs())
    got = cat.store.card_vectors(ids, cat.embedder.model_id)
    missing = [t for t in ids if t not in got]
    if missing:
        raise ValueError(f"no card vector for tool {missing[0]!r} ({len(missing)} missing)")
    m = np.vstack([np.asarray(got[t], dtype=np.float32) for t in ids])
    return {k: dict(zip(ids, hub_scores(m, k).tolist(), strict=True)) for k in ks}


# -- phase pools ---------------------------------------------------------------------------
def set_pools(cat: Any, scored: Sequence[Any]) -> list[dict[str, Any]]:
    """Each query's pool as ``fitting.examples`` builds it, with the candidates' ids."""
    from toolscout.discovery.calibrate import features
    from toolscout.evaluate.harness import eval_principal
    from toolscout.settings import SearchSettings

    retriever = cat.retriever(SearchSettings())
    allowed = cat.entitle(eval_principal(cat)).ids
    fields = retriever.phrases.fields
    texts = [q.query for q in scored]
    vectors = [retriever._embed(t) for t in texts]
    out = []
    for q, (qterms, lex, dense) in zip(
        scored, retriever.pools(texts, vectors, allowed), strict=True
    ):
        ids, x = features(qterms, lex, dense, fields, retriever.phrases.idf)
        out.append({"ids": ids, "x": x, "gold": list(q.gold)})
    return out


def examples_of(rows: Sequence[Mapping[str, Any]], hub: Mapping[str, float] | None) -> list[Any]:
    """``fitting.examples``' list from the pools (one per query and gold tool in the pool,
    or one with target -1), the hub column appended when ``hub`` is given."""
    from toolscout.discovery.logit import Example

    out: list[Any] = []
    for r in rows:
        x = r["x"] if hub is None else with_hub(r["ids"], r["x"], hub)
        targets = [r["ids"].index(g) for g in r["gold"] if g in r["ids"]] or [-1]
        out += [Example(x, t) for t in targets]
    return out


def check_against_stage(name: str, rows: Sequence[dict[str, Any]], stages: Path) -> None:
    """The pools give quality.py's ``examples-NAME`` stage (same targets, the same x up to
    the last bit of a float sum's order: the "name" and "summary" columns add idf over a set
    of terms, whose order changes between processes); each pool then takes the stage's own
    matrix, so the fits read exactly quality.py's data."""
    found = sorted(stages.glob(f"examples-{name}-None-*.pkl"))
    if not found:
        raise SystemExit(f"error: no examples-{name}-None-*.pkl stage under {stages}")
    stage = pickle.loads(found[0].read_bytes())
    mine = examples_of(rows, None)
    if len(stage) != len(mine):
        raise SystemExit(f"error: {name}: {len(mine)} examples, the stage holds {len(stage)}")
    for i, (a, b) in enumerate(zip(stage, mine, strict=True)):
        if (
            a.target != b.target
            or a.x.shape != b.x.shape
            or not np.allclose(a.x, b.x, rtol=0, atol=1e-12)
        ):
            raise SystemExit(f"error: {name}: example {i} differs from the stage's")
    at = 0
    for r in rows:
        r["x"] = stage[at].x
        at += max(1, sum(g in r["ids"] for g in r["gold"]))


def run_pools(args: argparse.Namespace) -> int:
    from toolscout.embed.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    args.work.mkdir(parents=True, exist_ok=True)
    for d in bench_sets(args.bench):
        path = args.work / f"{d.name}.pools.pkl"
        if path.exists():
            continue
        start = time.perf_counter()
        with opened_set(d, args.cache, None, embedder) as (cat, scored):
            rows = set_pools(cat, scored)
            hubs = catalog_hubs(cat)
        if args.stages is not None:
            check_against_stage(d.name, rows, args.stages)
        path.write_bytes(pickle.dumps({"rows": rows, "hubs": hubs}))
        print(f"{d.name}: {len(rows)} pools ({time.perf_counter() - start:.0f}s)", file=sys.stderr)
    return 0


def load_pools(work: Path, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for n in names:
        path = work / f"{n}.pools.pkl"
        if not path.exists():
            raise SystemExit(f"error: {path} is missing: run the pools phase first")
        out[n] = pickle.loads(path.read_bytes())
    return out


# -- phase order ---------------------------------------------------------------------------
def hub_of(pools: Mapping[str, Any], k: int, form: str) -> dict[str, float]:
    """A set's hub column by tool id for ``k`` and ``form``."""
    raw = pools["hubs"][k]
    ids = list(raw)
    vals = hub_form(np.array([raw[t] for t in ids]), form)
    return dict(zip(ids, vals.tolist(), strict=True))


def fit_prior_with(by_set: Mapping[str, Sequence[Any]], held_out: str | None, cols: int) -> Any:
    """``fitting.fit_prior`` on ``cols`` columns: the same balanced sample and fit, the
    start and shrinkage centre the shipped prior extended by 0 for each extra column."""
    from toolscout.discovery.logit import PRIOR, fit
    from toolscout.evaluate.fitting import _balanced, fit_prior

    if cols == len(PRIOR):
        return fit_prior(by_set, held_out)
    return fit(
        _balanced(by_set, held_out),
        l2=1e-3,
        steps=400,
        prior=(*PRIOR, *(0.0,) * (cols - len(PRIOR))),
    )


def order_scores(
    rows: Sequence[Mapping[str, Any]], weights: Sequence[float], hub: Mapping[str, float] | None
) -> tuple[list[float], list[float]]:
    """recall@5 and complete@5 of each query's learned order (weights plus the blend)."""
    from toolscout.discovery.ranker import blended, scores
    from toolscout.evaluate.metrics import complete_at, recall_at

    w = blended(weights, ORDER_BLEND)
    rec, com = [], []
    for r in rows:
        x = r["x"] if hub is None else with_hub(r["ids"], r["x"], hub)
        top = [r["ids"][i] for i in np.argsort(-scores(x, w), kind="stable")[:RECALL_K].tolist()]
        rec.append(recall_at(top, r["gold"], RECALL_K))
        com.append(complete_at(top, r["gold"], RECALL_K))
    return rec, com


def mean(v: Sequence[float]) -> float:
    return float(sum(v) / max(len(v), 1))


def choose(gains: Mapping[str, Mapping[str, float]], held_out: str | None) -> str:
    """The grid point with the best mean recall@5 gain over the sets other than
    ``held_out`` (each read by its own held-out fit), then the best worst gain."""

    def key(point: str) -> tuple[float, float]:
        g = [v for n, v in gains[point].items() if n != held_out]
        return round(mean(g), 6), round(min(g), 6)

    return max(gains, key=key)


def run_order(args: argparse.Namespace) -> int:
    names = [d.name for d in bench_sets(args.bench)]
    pools = load_pools(args.work, names)
    base_ex = {n: examples_of(pools[n]["rows"], None) for n in names}
    fits: dict[str, Any] = {"base": {}}
    scores_: dict[str, Any] = {"base": {}}
    for held in [*names, None]:
        w, b = fit_prior_with(base_ex, held, 9)
        fits["base"][held or "all"] = [*w, b]
    for n in names:
        scores_["base"][n] = order_scores(pools[n]["rows"], fits["base"][n][:-1], None)
    points = [f"k{k}-{f}" for k in KS for f in FORMS]
    for p in points:
        k, form = int(p.split("-")[0][1:]), p.split("-")[1]
        hubs = {n: hub_of(pools[n], k, form) for n in names}
        ex = {n: examples_of(pools[n]["rows"], hubs[n]) for n in names}
        fits[p], scores_[p] = {}, {}
        for held in [*names, None]:
            w, b = fit_prior_with(ex, held, 10)
            fits[p][held or "all"] = [*w, b]
        for n in names:
            scores_[p][n] = order_scores(pools[n]["rows"], fits[p][n][:-1], hubs[n])
        print(p, " ".join(f"{n} {mean(scores_[p][n][0]) - mean(scores_['base'][n][0]):+.4f}"
                          for n in names), file=sys.stderr)  # fmt: skip
    gains = {p: {n: mean(scores_[p][n][0]) - mean(scores_["base"][n][0]) for n in names}
             for p in points}  # fmt: skip
    chosen = {n: choose(gains, n) for n in names}
    chosen["all"] = choose(gains, None)
    (args.work / "order.pkl").write_bytes(
        pickle.dumps({"fits": fits, "scores": scores_, "gains": gains, "chosen": chosen})
    )
    for n in names:
        print(f"{n}: chose {chosen[n]}", file=sys.stderr)
    print(f"all: {chosen['all']}", file=sys.stderr)
    return 0


# -- phase order-weight --------------------------------------------------------------------
#: the hub weights the order-weight phase reads (the column centred: a catalog's constant
#: cancels in an order); the fitted prior's centred weights are within [-0.8, +0.6]
ORDER_WEIGHTS: tuple[float, ...] = (-32.0, -16.0, -8.0, -4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0, 8.0)


def top_scores(
    rows: Sequence[Mapping[str, Any]], base: Sequence[Arr], col: Sequence[Arr], weight: float
) -> tuple[list[float], list[float]]:
    """recall@5 and complete@5 of each query ordered by its base score plus ``weight``
    times its hub column."""
    from toolscout.evaluate.metrics import complete_at, recall_at

    rec, com = [], []
    for r, s, h in zip(rows, base, col, strict=True):
        top = [r["ids"][i] for i in np.argsort(-(s + weight * h), kind="stable")[:RECALL_K]]
        rec.append(recall_at(top, r["gold"], RECALL_K))
        com.append(complete_at(top, r["gold"], RECALL_K))
    return rec, com


def run_order_weight(args: argparse.Namespace) -> int:
    """A second reading, not the brief's: the hub weight chosen for the *order* rather than
    fitted in the prior. Each fold's base prior (the 9 weights quality.py fits) orders with
    the blend (32), plus ``weight`` times the centred hub column; the (k, weight) of a fold
    is the one with the best mean recall@5 over the other five sets (each ordered by the
    fold's weights), then the best worst; the held-out set is read at it. Ranker order only
    (no dedupe, exact hits, parts or lead)."""
    from toolscout.discovery.ranker import blended, scores

    names = [d.name for d in bench_sets(args.bench)]
    pools = load_pools(args.work, names)
    order = pickle.loads((args.work / "order.pkl").read_bytes())
    cols = {
        (n, k): [with_hub(r["ids"], r["x"], hub_of(pools[n], k, "centred"))[:, -1]
                 for r in pools[n]["rows"]]
        for n in names for k in KS
    }  # fmt: skip
    out: dict[str, Any] = {"weights": list(ORDER_WEIGHTS), "ks": list(KS), "folds": {}}
    for fold in [*names, "all"]:
        w = [round(float(v), 4) for v in order["fits"]["base"][fold][:-1]]
        mix = blended(w, ORDER_BLEND)
        base = {n: [scores(r["x"], mix) for r in pools[n]["rows"]] for n in names}
        table: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
        for k in KS:
            for wt in ORDER_WEIGHTS:
                table[f"k{k}/{wt:g}"] = {
                    n: top_scores(pools[n]["rows"], base[n], cols[(n, k)], wt) for n in names
                }
        zero = f"k{KS[0]}/0"
        others = [n for n in names if n != fold]

        def key(
            p: str, others: list[str] = others, table: Any = table, zero: str = zero
        ) -> tuple[float, float]:
            g = [mean(table[p][n][0]) - mean(table[zero][n][0]) for n in others]
            return round(mean(g), 6), round(min(g), 6)

        best = max(table, key=key)
        row: dict[str, Any] = {"chosen": best, "other_sets_gain": list(key(best))}
        if fold != "all":
            from toolscout.evaluate.fitting import paired_interval

            a, b = table[best][fold], table[zero][fold]
            row.update(
                base=[round(mean(b[0]), 4), round(mean(b[1]), 4)],
                hub=[round(mean(a[0]), 4), round(mean(a[1]), 4)],
                recall_diff=[round(v, 4) for v in paired_interval(a[0], b[0])],
                complete_diff=[round(v, 4) for v in paired_interval(a[1], b[1])],
            )
        else:
            row["in_set"] = {
                n: [round(mean(table[best][n][i]) - mean(table[zero][n][i]), 4) for i in (0, 1)]
                for n in names
            }
        row["grid_recall_gain"] = {
            p: {n: round(mean(table[p][n][0]) - mean(table[zero][n][0]), 4) for n in names}
            for p in table
        }
        out["folds"][fold] = row
        print(fold, {k: v for k, v in row.items() if k != "grid_recall_gain"}, file=sys.stderr)
    (args.work / "order_weight.json").write_text(json.dumps(out, indent=1))
    return 0


# -- phase pipeline ------------------------------------------------------------------------
class _Hub:
    """What the wrapped product code reads in this process: the column by id, its weight."""

    column: dict[str, float] | None = None
    weight: float = 0.0


@contextmanager
def hub_in_product(column: Mapping[str, float], weight: float) -> Iterator[None]:
    """The product's ranker reads the hub column at query time, with ``weight`` added after
    the catalog's adjusted weights (the column's own adjustment: 0). Only this process."""
    from toolscout.discovery import ranker as ranker_mod
    from toolscout.discovery import search as search_mod
    from toolscout.discovery.features import FEATURES

    original_features = ranker_mod.features  # type: ignore[attr-defined]
    original_learned = search_mod.Retriever.learned_ranker

    def features(*a: Any, **kw: Any) -> Any:
        ids, x = original_features(*a, **kw)
        return ids, with_hub(ids, x, _Hub.column or {})

    def learned_ranker(self: Any) -> Any:
        from dataclasses import replace

        r = original_learned(self)
        if r is not None and len(r.weights) == len(FEATURES):
            r = replace(r, weights=(*r.weights, _Hub.weight))
            self.ranker = r
        return r

    _Hub.column, _Hub.weight = dict(column), float(weight)
    setattr(ranker_mod, "features", features)  # noqa: B010 (not an attribute mypy knows)
    search_mod.Retriever.learned_ranker = learned_ranker  # type: ignore[method-assign]
    try:
        yield
    finally:
        setattr(ranker_mod, "features", original_features)  # noqa: B010
        search_mod.Retriever.learned_ranker = original_learned  # type: ignore[method-assign]
        _Hub.column, _Hub.weight = None, 0.0


def run_pipeline(args: argparse.Namespace) -> int:
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.fitting import fit_platt, recall_grid

    names = [d.name for d in bench_sets(args.bench)]
    pools = load_pools(args.work, names)
    shipped_fits = json.loads(args.fits.read_text())["fits"]
    # the base arm is quality.py's held-out default itself (its fits' prior and Platt step,
    # --fits); the hub arm takes each fold's point and prior from the order phase
    order = pickle.loads((args.work / "order.pkl").read_bytes()) if args.arm == "hub" else None
    embedder = MiniLMEmbedder()
    out_path = args.work / f"pipeline-{args.arm}{args.tag}.pkl"
    done: dict[str, Any] = pickle.loads(out_path.read_bytes()) if out_path.exists() else {}
    for d in bench_sets(args.bench):
        for fold in (d.name, "all"):
            key = f"{d.name}@{fold}"
            if key in done or (args.only and key not in args.only):
                continue
            sf = shipped_fits[fold]
            pair = (float(sf["blend"]), float(sf["dedupe_yield"]))
            hubs = None
            if order is None:
                point, prior, platt = "base", list(sf["prior"]), tuple(sf["platt"])
                w, b = prior[:-1], prior[-1]
            else:
                point = order["chosen"][fold]
                # rounded as quality.py stores and applies a fit's prior
                prior = [round(float(v), 4) for v in order["fits"][point][fold]]
                w, b = prior[:-1], prior[-1]
                k, form = int(point.split("-")[0][1:]), point.split("-")[1]
                hubs = {n: hub_of(pools[n], k, form) for n in names}
                ex = {n: examples_of(pools[n]["rows"], hubs[n]) for n in names}
                platt = fit_platt(ex, None if fold == "all" else fold, w, b, pair[0])
            fit = {**sf, "prior": [*w[:9], b], "platt": list(platt)}
            settings = held_settings(fit)
            start = time.perf_counter()
            complete: dict[Any, list[float]] = {}
            with opened_set(d, args.cache, None, embedder) as (cat, scored):
                if hubs is not None:
                    with hub_in_product(hubs[d.name], w[9]):
                        got = recall_grid(cat, scored, settings, [pair[0]], [pair[1]],
                                          complete=complete)  # fmt: skip
                else:
                    got = recall_grid(
                        cat, scored, settings, [pair[0]], [pair[1]], complete=complete
                    )
            done[key] = {"point": point, "prior": prior, "platt": list(platt), "pair": pair,
                         "lead_margin": sf.get("lead_margin"),
                         "recall": got[pair], "complete": complete[pair]}  # fmt: skip
            out_path.write_bytes(pickle.dumps(done))
            print(f"{args.arm} {key}: {mean(got[pair]):.4f} / {mean(complete[pair]):.4f} "
                  f"({time.perf_counter() - start:.0f}s)", file=sys.stderr)  # fmt: skip
    return 0


# -- phase report --------------------------------------------------------------------------
def run_report(args: argparse.Namespace) -> int:
    from toolscout.evaluate.fitting import paired_interval

    names = [d.name for d in bench_sets(args.bench)]
    order = pickle.loads((args.work / "order.pkl").read_bytes())
    quality = json.loads(args.fits.read_text())
    result: dict[str, Any] = {
        "grid": {"ks": list(KS), "forms": list(FORMS), "order_blend": ORDER_BLEND},
        "chosen": order["chosen"],
        "order": {},
        "fits": {
            p: {f: [round(v, 4) for v in w] for f, w in fs.items()}
            for p, fs in order["fits"].items()
        },
    }
    # the ranker-order screen: every grid point's held-out gain, and each fold's choice
    result["order"]["gains"] = {p: {n: round(g, 4) for n, g in gs.items()}
                                for p, gs in order["gains"].items()}  # fmt: skip
    chosen_rows = {}
    for n in names:
        p = order["chosen"][n]
        base, hub = order["scores"]["base"][n], order["scores"][p][n]
        chosen_rows[n] = {
            "point": p,
            "base": [round(mean(base[0]), 4), round(mean(base[1]), 4)],
            "hub": [round(mean(hub[0]), 4), round(mean(hub[1]), 4)],
            "recall_diff": [round(v, 4) for v in paired_interval(hub[0], base[0])],
            "complete_diff": [round(v, 4) for v in paired_interval(hub[1], base[1])],
        }
    result["order"]["held_out"] = chosen_rows
    weight_path = args.work / "order_weight.json"
    if weight_path.exists():
        result["order_weight"] = json.loads(weight_path.read_text())
    arms = {}
    for arm in ("base", "hub"):
        path = args.work / f"pipeline-{arm}.pkl"
        if path.exists():
            arms[arm] = pickle.loads(path.read_bytes())
    if len(arms) == 2:
        pipe: dict[str, Any] = {}
        ok = True
        reasons = []
        for n in names:
            row: dict[str, Any] = {}
            for fold, label in ((n, "held_out"), ("all", "in_set")):
                key = f"{n}@{fold}"
                if key not in arms["base"] or key not in arms["hub"]:
                    continue
                a, b = arms["hub"][key], arms["base"][key]
                row[label] = {
                    "point": a["point"],
                    "base": [round(mean(b["recall"]), 4), round(mean(b["complete"]), 4)],
                    "hub": [round(mean(a["recall"]), 4), round(mean(a["complete"]), 4)],
                    "recall_diff": [round(v, 4) for v in paired_interval(a["recall"], b["recall"])],
                    "complete_diff": [
                        round(v, 4) for v in paired_interval(a["complete"], b["complete"])
                    ],
                    "hub_weight": round(a["prior"][9], 4),
                }
            parts = quality["grid"][n]["parts"]
            best = [max(v[0] for v in parts.values()), max(v[1] for v in parts.values())]
            row["best_part"] = best
            ho = row.get("held_out")
            if ho is not None:
                for i, m in enumerate(("recall@5", "complete@5")):
                    if ho["hub"][i] < best[i]:
                        ok = False
                        reasons.append(
                            f"{n} held out {m} {ho['hub'][i]:.4f} < best part {best[i]:.4f}"
                        )
            ins = row.get("in_set")
            if ins is not None:
                shipped = quality["in_set"]["sets"][n]
                row["in_set"]["shipped"] = shipped
                for i, m in enumerate(("recall@5", "complete@5")):
                    loss = ins["hub"][i] - shipped[i]
                    if loss < -0.005:
                        ok = False
                        reasons.append(
                            f"{n} in-set {m} {loss:+.4f} against the shipped {shipped[i]:.4f}"
                        )
            pipe[n] = row
        result["pipeline"] = pipe
        result["ships"] = ok
        result["breaks"] = reasons
    write_results(args.json, command_line("benchmarks/hub_screen.py", sys.argv[1:]), **result)
    print(json.dumps({k: result[k] for k in result if k not in ("fits", "order")}, indent=1))
    print(json.dumps(result["order"]["held_out"], indent=1))
    return 0


# -- phase cost ----------------------------------------------------------------------------
def run_cost(args: argparse.Namespace) -> int:
    """The hub scores of ``--tools`` cards (seeded random unit vectors of the encoder's
    width, as the score reads only the matrix), timed on the first ``--rows`` rows (k = 50)
    and scaled to every row; the whole pass when ``--rows`` covers them."""
    rng = np.random.default_rng(20261207)
    v = rng.standard_normal((args.tools, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1)[:, None]
    rows = min(args.rows, args.tools)
    start = time.perf_counter()
    done = 0
    for s in range(0, rows, BLOCK):
        block = v[s : min(s + BLOCK, rows)] @ v.T
        np.partition(block, args.tools - 50, axis=1)
        done += len(block)
    spent = time.perf_counter() - start
    scaled = spent * args.tools / done
    print(json.dumps({"tools": args.tools, "rows_timed": done, "seconds": round(spent, 2),
                      "seconds_all_rows": round(scaled, 1)}))  # fmt: skip
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "phase", choices=("pools", "order", "order-weight", "pipeline", "report", "cost")
    )
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, help="the indexed dev sets (a copy: runs write)")
    parser.add_argument("--stages", type=Path, help="quality.py's stages, to check the pools")
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "hub-screen")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--arm", choices=("base", "hub"), default="base")
    parser.add_argument(
        "--tag", default="", help="pipeline: a suffix of the arm's results (a repeat run)"
    )
    parser.add_argument(
        "--only",
        type=lambda v: tuple(v.split(",")),
        default=(),
        help="pipeline: only these SET@FOLD runs (e.g. toolbench@toolbench)",
    )
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/hub_screen.json")
    parser.add_argument("--tools", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=4096)
    args = parser.parse_args(argv)
    if args.phase in ("pools", "pipeline") and args.cache is None:
        parser.error(f"the {args.phase} phase needs --cache (the indexed dev sets)")
    return {"pools": run_pools, "order": run_order, "order-weight": run_order_weight,
            "pipeline": run_pipeline,
            "report": run_report, "cost": run_cost}[args.phase](args)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
