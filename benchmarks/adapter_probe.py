"""Dense-only probe of query-side adapters and multi-view scoring, held out over the sets.

Phase ``embed`` (heavy: run under the lock) encodes, per set, every view of every card
(indexing.card_views), the pseudo-queries of the catalog (pseudo.pseudo_queries, the
catalog's own text, no evaluation query) and the set's real queries, into ``--cache``.
Phase ``probe`` (numpy only) scores dense-only recall@5 / complete@5 of the real queries
against the card vectors (the normalised mean of the views, as indexing stores them), with
and without each candidate, and chooses each family's hyper-parameters leave-one-set-out
(best mean recall@5 gain over the other sets, then the best worst gain); the chosen
setting is scored on the held-out set, with a paired bootstrap interval
(``fitting.paired_interval``). The per-catalog families use the catalog alone:

* ``ridge`` / ``contrastive``: a query-side linear map W fitted from the catalog's
  pseudo-queries (least squares towards the own card, ridge towards identity; or softmax
  over the own card and the 31 cards dense ranks highest, W = I + ΔW, full or rank 16);
* ``request``: the ridge map fitted on request-shaped pseudo-queries (:func:`request_like`),
  alone or with the others;
* ``centre``: the catalog's mean card subtracted from the query (``alpha`` of it);
* ``hubs``: each card's score lowered by ``gamma`` × its mean cosine to its ``k`` nearest
  cards (a hub penalty, as CSLS);
* ``maxview``: each view of a card scored apart, the card's score moved ``beta`` of the
  way from the mean vector's cosine to the best view's.

``--only global-ridge`` / ``global-contrastive``: one W for every catalog, fitted on the
other five sets' *real* queries (leave-one-set-out, each set weighing the same), scored on
the held-out set at each regularisation (the contrastive one takes ~5 min of CPU).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/adapter_probe.py embed --cache DIR``, then
``... adapter_probe.py probe --cache DIR [--json OUT]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import DEFAULT_BENCH, bench_sets  # noqa: E402
from toolscout.evaluate.fitting import paired_interval  # noqa: E402

Arr = Any


def embed_set(d: Path, out: Path, embedder: Any) -> None:
    from toolscout.discovery.indexing import card_views
    from toolscout.discovery.pseudo import SEED, pseudo_queries
    from toolscout.discovery.search import _embed_keys
    from toolscout.evaluate.evalset import read_queries, read_tools

    specs, renamed = read_tools(d / "tools.jsonl")
    ids = [s.id for s in specs]
    index = {t: i for i, t in enumerate(ids)}
    views: list[str] = []
    owner: list[int] = []
    kind: list[int] = []
    for i, s in enumerate(specs):
        for j, v in enumerate(card_views(s)):
            views.append(v)
            owner.append(i)
            kind.append(j)
    pseudo = [p for seed in (SEED, SEED + 1) for p in pseudo_queries(specs, seed)]
    pseudo_seed = [seed for seed in (SEED, SEED + 1) for _ in pseudo_queries(specs, seed)]
    queries = read_queries(d / "queries.jsonl")
    q_text, q_gold = [], []
    for q in queries:
        gold = [index[renamed.get(g, g)] for g in q.gold if renamed.get(g, g) in index]
        if gold:
            q_text.append(q.query)
            q_gold.append(gold)
    vv = embedder.embed(views)
    pv = embedder.embed(_embed_keys([p.text for p in pseudo]))
    qv = embedder.embed(_embed_keys(q_text))
    gold_flat = np.array([g for gs in q_gold for g in gs], dtype=np.int32)
    gold_off = np.cumsum([0] + [len(g) for g in q_gold]).astype(np.int32)
    np.savez(
        out / f"{d.name}.npz",
        views=vv, owner=np.array(owner, np.int32), kind=np.array(kind, np.int32),
        pseudo=pv, pseudo_tool=np.array(
            [index[p.tool_id] if p.tool_id is not None else -1 for p in pseudo], np.int32
        ),
        pseudo_kind=np.array([p.kind for p in pseudo]), pseudo_seed=np.array(pseudo_seed),
        queries=qv, gold=gold_flat, gold_off=gold_off, n_tools=len(ids),
    )  # fmt: skip
    sizes = f"{len(ids)} tools, {len(views)} views, {len(pseudo)} pseudo, {len(q_text)} queries"
    print(f"{d.name}: {sizes}", flush=True)


def _value(schema: Any, rng: random.Random) -> str | None:
    """A value for an argument drawn from its schema (an enum's member, a number), or None."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return str(rng.choice(schema["enum"]))
    if schema.get("type") == "integer":
        return str(rng.randint(1, 100))
    if schema.get("type") == "number":
        return f"{rng.uniform(1, 100):.1f}"
    return None


def request_like(specs: Sequence[Any], seed: int) -> list[tuple[str, str]]:
    """(text, tool id): a request-shaped pseudo-query per sampled tool, from the catalog
    alone — the summary's first sentence with the name's words masked, then up to two
    arguments written as "name value" with values drawn from the parameter schema."""
    from toolscout.discovery.lexical import words
    from toolscout.discovery.pseudo import SAMPLE_TOOLS

    rng = random.Random(seed)
    sample = list(specs)
    if len(sample) > SAMPLE_TOOLS:
        sample = rng.sample(sample, SAMPLE_TOOLS)
    out = []
    for spec in sample:
        masked = set(words(spec.card.name)) | set(words(spec.id))
        first = re.split(r"(?<=[.!?])\s+", spec.card.summary.strip())[0]
        body = [w for w in first.split() if " ".join(words(w)) not in masked]
        if len(body) < 3:
            continue
        props = spec.parameters.get("properties", {}) if isinstance(spec.parameters, dict) else {}
        args = []
        for pname, pschema in props.items():
            v = _value(pschema, rng)
            if v is not None:
                args.append(f"{' '.join(words(pname))} {v}")
        rng.shuffle(args)
        text = " ".join(body).rstrip(".")
        out.append((text + (" with " + " and ".join(args[:2]) if args else ""), spec.id))
    return out


def embed_requests(d: Path, out: Path, embedder: Any) -> None:
    """The request-like pseudo-queries of a set (``{set}.req.npz``)."""
    from toolscout.discovery.pseudo import SEED
    from toolscout.discovery.search import _embed_keys
    from toolscout.evaluate.evalset import read_tools

    specs, _ = read_tools(d / "tools.jsonl")
    index = {s.id: i for i, s in enumerate(specs)}
    made = request_like(specs, SEED)
    vectors = embedder.embed(_embed_keys([t for t, _ in made]))
    tools = np.array([index[t] for _, t in made], np.int32)
    np.savez(out / f"{d.name}.req.npz", vectors=vectors, tool=tools)
    print(f"{d.name}: {len(made)} request-like pseudo-queries", flush=True)


def norm(x: Arr) -> Arr:
    return x / np.clip(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12, None)


class Set:
    def __init__(self, path: Path) -> None:
        z = np.load(path)
        self.name = path.stem
        self.n = int(z["n_tools"])
        self.views = z["views"].astype(np.float64)
        self.owner, self.kind = z["owner"], z["kind"]
        sums = np.zeros((self.n, self.views.shape[1]))
        np.add.at(sums, self.owner, self.views)
        self.cards = norm(sums)
        self.pseudo, self.ptool = z["pseudo"].astype(np.float64), z["pseudo_tool"]
        self.pseed, self.pkind = z["pseudo_seed"], z["pseudo_kind"]
        self.q = z["queries"].astype(np.float64)
        req = path.with_name(f"{path.stem}.req.npz")
        if req.exists():
            r = np.load(req)
            self.req, self.rtool = r["vectors"].astype(np.float64), r["tool"]
        else:
            self.req, self.rtool = np.zeros((0, self.views.shape[1])), np.zeros(0, np.int32)
        off, flat = z["gold_off"], z["gold"]
        self.gold = [flat[off[i] : off[i + 1]] for i in range(len(off) - 1)]

    def recall(self, scores: Arr) -> tuple[Arr, Arr]:
        """Per query recall@5 and complete@5 of a (queries × tools) score matrix."""
        top = np.argpartition(-scores, 5, axis=1)[:, :5]
        r = np.empty(len(self.gold))
        c = np.empty(len(self.gold))
        for i, g in enumerate(self.gold):
            found = np.isin(g, top[i]).sum()
            r[i], c[i] = found / len(g), float(found == len(g))
        return r, c


# -- adapters: each returns a map of query vectors (n × d → n × d) -----------------------
def fit_ridge(s: Set, lam: float, seed_mask: Arr) -> Callable[[Arr], Arr]:
    """W = argmin ||Q Wᵀ − C_own||² + lam·n·||W − I||² (closed form), pseudo-queries only."""
    keep = (s.ptool >= 0) & seed_mask
    wt = ridge_map(s.pseudo[keep], s.cards[s.ptool[keep]], lam)  # q' = q @ wt
    return lambda x: norm(x @ wt)


def ridge_map(q: Arr, c: Arr, lam: float) -> Arr:
    """argmin_W ||q W − c||² + lam·(n/d)·||W − I||² in closed form."""
    d, n = q.shape[1], len(q)
    reg = lam * n * np.eye(d) / d
    return np.linalg.solve(q.T @ q + reg, q.T @ c + reg)


def fit_contrastive(
    s: Set, lam: float, tau: float, k: int, steps: int, rank: int, seed_mask: Arr
) -> Callable[[Arr], Arr]:
    """W = I + ΔW fitted by softmax cross-entropy over the positive and the ``k`` tools dense
    ranks highest for the pseudo-query (hard negatives), L2 ``lam`` on ΔW; ``rank`` > 0:
    ΔW = U Vᵀ."""
    keep = (s.ptool >= 0) & seed_mask
    q, pos = s.pseudo[keep], s.ptool[keep]
    base = q @ s.cards.T
    cand = np.argpartition(-base, k, axis=1)[:, :k]
    # the positive in column 0, hard negatives after it (the positive removed)
    rows = []
    for i in range(len(q)):
        neg = [t for t in cand[i] if t != pos[i]][: k - 1]
        rows.append([pos[i], *neg])
    cand = np.array(rows)
    cv = s.cards[cand]  # n × k × d
    d = q.shape[1]
    rng = np.random.default_rng(0)
    if rank:
        u = np.zeros((d, rank))
        v = rng.normal(0, 1 / np.sqrt(d), (d, rank))
    dw = np.zeros((d, d))
    lr = 0.5
    for _ in range(steps):
        w = dw if not rank else u @ v.T
        qp = q + q @ w  # rows: q' = q (I + W)
        logits = tau * np.einsum("nd,nkd->nk", qp, cv)
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        p[:, 0] -= 1.0
        gq = tau * np.einsum("nk,nkd->nd", p, cv) / len(q)  # dL/dq'
        g = q.T @ gq  # dL/dW
        if rank:
            gu = g @ v + lam * u
            gv = g.T @ u + lam * v
            u -= lr * gu
            v -= lr * gv
        else:
            dw -= lr * (g + lam * dw)
    w = dw if not rank else u @ v.T
    return lambda x: norm(x + x @ w)


def fit_centre(s: Set, alpha: float) -> Callable[[Arr], Arr]:
    mu = s.cards.mean(axis=0)
    return lambda x: norm(x - alpha * mu)


def hub_penalty(s: Set, k: int) -> Arr:
    """Each card's mean cosine to its ``k`` nearest other cards (a hub is near many)."""
    cc = s.cards @ s.cards.T
    np.fill_diagonal(cc, -1.0)
    kk = min(k, s.n - 1)
    return np.sort(cc, axis=1)[:, -kk:].mean(axis=1)


def view_scores(s: Set, q: Arr, how: str, beta: float) -> Arr:
    """Cosines per view, combined per tool: mean-vector (how='mean'), max, or
    mean-vector + beta·(max view − mean-vector)."""
    base = q @ s.cards.T
    if how == "mean":
        return base
    vs = q @ s.views.T
    mx = np.full((len(q), s.n), -np.inf)
    for j in np.unique(s.kind):
        sel = s.kind == j
        np.maximum.at(mx.T, s.owner[sel], vs[:, sel].T)
    return base + beta * (mx - base)


def variants() -> dict[str, list[dict[str, Any]]]:
    return {
        "ridge": [
            {"lam": lam, "seeds": n, "kinds": k}
            for lam, n, k in itertools.product((3, 10, 30, 100), (1, 2), ("all", "summary"))
        ],
        "contrastive": [
            {"lam": lam, "tau": 20.0, "k": 32, "steps": 30, "rank": r, "seeds": n, "kinds": k}
            for lam, r, n, k in itertools.product((0.1, 0.3), (0, 16), (1, 2), ("all", "summary"))
        ],
        "request": [
            {"lam": lam, "with_pseudo": w} for lam, w in itertools.product((3, 10, 30, 100), (0, 1))
        ],
        "centre": [{"alpha": a} for a in (0.25, 0.5, 0.75, 1.0)],
        "hubs": [{"k": k, "gamma": g} for k, g in itertools.product((5, 20), (0.1, 0.25, 0.5))],
        "maxview": [{"beta": b} for b in (0.25, 0.5, 1.0)],
    }


def score_variant(s: Set, name: str, p: dict[str, Any]) -> tuple[Arr, Arr]:
    # the calibration's own seed only, or a second seed's pseudo-queries too (a larger sample)
    mask = s.pseed == s.pseed.min() if p.get("seeds", 1) == 1 else s.pseed >= 0
    if p.get("kinds") == "summary":
        mask = mask & (s.pkind == "summary")
    if name == "ridge":
        f = fit_ridge(s, p["lam"], mask)
        return s.recall(f(s.q) @ s.cards.T)
    if name == "contrastive":
        f = fit_contrastive(s, p["lam"], p["tau"], p["k"], p["steps"], p["rank"], mask)
        return s.recall(f(s.q) @ s.cards.T)
    if name == "request":
        q, t = s.req, s.rtool
        if p["with_pseudo"]:
            keep = s.ptool >= 0
            q, t = np.vstack([q, s.pseudo[keep]]), np.concatenate([t, s.ptool[keep]])
        return s.recall(norm(s.q @ ridge_map(q, s.cards[t], p["lam"])) @ s.cards.T)
    if name == "centre":
        return s.recall(fit_centre(s, p["alpha"])(s.q) @ s.cards.T)
    if name == "hubs":
        return s.recall(s.q @ s.cards.T - p["gamma"] * hub_penalty(s, p["k"])[None, :])
    if name == "maxview":
        return s.recall(view_scores(s, s.q, "max", p["beta"]))
    raise ValueError(name)


# -- one adapter for every catalog, fitted on the other sets' real queries ------------------
def _pairs(s: Set) -> tuple[Arr, Arr, Arr]:
    """(query, gold card, weight) per gold tool of each query; a set's weights sum to 1."""
    qi = [i for i, g in enumerate(s.gold) for _ in g]
    ti = [t for g in s.gold for t in g]
    return s.q[qi], s.cards[ti], np.full(len(qi), 1.0 / len(qi))


def fit_global_ridge(train: Sequence[Set], lam: float) -> Arr:
    """W = argmin Σ_sets Σ_pairs w ||q W − c_gold||² + lam·(sets/d)·||W − I||² (each set
    weighs the same)."""
    d = train[0].q.shape[1]
    a, b = np.zeros((d, d)), np.zeros((d, d))
    for s in train:
        q, c, w = _pairs(s)
        a += (q * w[:, None]).T @ q
        b += (q * w[:, None]).T @ c
    reg = lam * len(train) * np.eye(d) / d
    return np.linalg.solve(a + reg, b + reg)


def fit_global_contrastive(train: Sequence[Set], lam: float, steps: int = 60) -> Arr:
    """ΔW (W = I + ΔW) by softmax cross-entropy over each real query's gold card and the
    31 cards of its own catalog dense ranks highest, L2 ``lam``; each set weighs the same."""
    tau, lr, k = 20.0, 0.5, 32
    batches = []
    for s in train:
        q, _, w = _pairs(s)
        gold = np.array([t for g in s.gold for t in g])
        top = np.argpartition(-(q @ s.cards.T), k, axis=1)[:, :k]
        rows = [[p, *[t for t in top[i] if t != p][: k - 1]] for i, p in enumerate(gold)]
        batches.append((q, s.cards[np.array(rows)], w))
    d = train[0].q.shape[1]
    dw = np.zeros((d, d))
    for _ in range(steps):
        g = np.zeros((d, d))
        for q, cv, w in batches:
            lg = tau * np.einsum("nd,nkd->nk", q + q @ dw, cv)
            lg -= lg.max(axis=1, keepdims=True)
            pr = np.exp(lg)
            pr /= pr.sum(axis=1, keepdims=True)
            pr[:, 0] -= 1.0
            g += q.T @ (tau * np.einsum("nk,nkd->nd", pr, cv) * w[:, None]) / len(batches)
        dw -= lr * (g + lam * dw)
    return np.eye(d) + dw


def global_probe(sets: Sequence[Set], base: dict[str, Any], how: str) -> dict[str, Any]:
    """Leave-one-set-out: for each set, W fitted on the other five sets' real queries at
    each regularisation (the held-out set's queries never enter its W)."""
    grid = (10.0, 30.0, 100.0) if how == "ridge" else (0.01, 0.03, 0.1)
    fit = fit_global_ridge if how == "ridge" else fit_global_contrastive
    out: dict[str, Any] = {}
    for lam in grid:
        row = {}
        for s in sets:
            w = fit([t for t in sets if t.name != s.name], lam)
            r, c = s.recall(norm(s.q @ w) @ s.cards.T)
            row[s.name] = [r.mean() - base[s.name][0].mean(), c.mean() - base[s.name][1].mean()]
        out[str(lam)] = row
        print(f"global {how} lam {lam}: " + ", ".join(
            f"{n} {a:+.4f}/{b:+.4f}" for n, (a, b) in row.items()), flush=True)  # fmt: skip
    return out


def diagnose(sets: Sequence[Set], lams: Sequence[float] = (10.0, 30.0)) -> dict[str, Any]:
    """Why a map fitted on pseudo-queries does or does not carry to real ones, per set: how
    close each kind of query sits to its own card, how well the mean shift from query to
    card agrees between the two kinds, and the per-catalog ridge map's recall@5 gain on
    real queries against its gain on pseudo-queries of tools it was not fitted on (the
    sampled tools split in two halves, each half's map scored on the other: what the
    catalog alone could tell at index time)."""
    out: dict[str, Any] = {}
    for s in sets:
        k = s.ptool >= 0
        own = s.cards[s.ptool[k]]
        shift_p = (own - s.pseudo[k]).mean(axis=0)
        shift_q = np.mean([s.cards[g].mean(axis=0) - s.q[i] for i, g in enumerate(s.gold)], 0)
        row: dict[str, Any] = {
            "cos_pseudo_own": float(np.einsum("nd,nd->n", s.pseudo[k], own).mean()),
            "cos_query_gold": float(np.mean([(s.q[i] @ s.cards[g].T).mean()
                                             for i, g in enumerate(s.gold)])),
            "shift_alignment": float(shift_p @ shift_q / np.linalg.norm(shift_p)
                                     / np.linalg.norm(shift_q)),
        }  # fmt: skip
        tools = np.unique(s.ptool[k])
        half = set(np.random.default_rng(0).permutation(tools)[: len(tools) // 2].tolist())
        a = np.array([t in half for t in s.ptool]) & k
        b = ~a & k
        for lam in lams:
            pseudo_gain = []
            for fit_on, score_on in ((a, b), (b, a)):
                f = fit_ridge(s, lam, fit_on)
                top0 = np.argsort(-(s.pseudo[score_on] @ s.cards.T), axis=1)[:, :5]
                top1 = np.argsort(-(f(s.pseudo[score_on]) @ s.cards.T), axis=1)[:, :5]
                gold = s.ptool[score_on]
                pseudo_gain.append(
                    np.mean([g in t for g, t in zip(gold, top1, strict=True)])
                    - np.mean([g in t for g, t in zip(gold, top0, strict=True)])
                )
            real = s.recall(fit_ridge(s, lam, k)(s.q) @ s.cards.T)[0].mean()
            row[f"ridge {lam:g}"] = {
                "real_gain": float(real - s.recall(s.q @ s.cards.T)[0].mean()),
                "pseudo_gain_unseen_tools": float(np.mean(pseudo_gain)),
            }
        # the hub penalty, as the calibration would see it (pseudo-queries) and as requests do
        pq, pt = s.pseudo[k], s.ptool[k]
        for kk, gamma in ((5, 0.1), (20, 0.25)):
            pen = gamma * hub_penalty(s, kk)[None, :]
            top0 = np.argpartition(-(pq @ s.cards.T), 5, axis=1)[:, :5]
            top1 = np.argpartition(-(pq @ s.cards.T - pen), 5, axis=1)[:, :5]
            row[f"hubs k{kk} gamma {gamma:g}"] = {
                "real_gain": float(
                    s.recall(s.q @ s.cards.T - pen)[0].mean() - s.recall(s.q @ s.cards.T)[0].mean()
                ),
                "pseudo_gain": float(
                    np.mean([t in r for t, r in zip(pt, top1, strict=True)])
                    - np.mean([t in r for t, r in zip(pt, top0, strict=True)])
                ),
            }
        out[s.name] = row
        print(f"diagnose {s.name}: {json.dumps(row)}", flush=True)
    return out


def probe(cache: Path, out: Path | None, only: str = "") -> None:
    sets = [Set(p) for p in sorted(cache.glob("*.npz")) if not p.name.endswith(".req.npz")]
    base = {s.name: s.recall(s.q @ s.cards.T) for s in sets}
    for s in sets:
        r, c = base[s.name]
        print(f"{s.name}: dense recall@5 {r.mean():.4f} complete@5 {c.mean():.4f}", flush=True)
    table: dict[str, Any] = {"base": {k: [v[0].mean(), v[1].mean()] for k, v in base.items()}}
    if only == "diagnose":
        table["diagnose"] = diagnose(sets)
        if out is not None:
            out.write_text(json.dumps(table, indent=1, default=float))
        return
    if only.startswith("global-"):
        table[only] = global_probe(sets, base, only.removeprefix("global-"))
        if out is not None:
            out.write_text(json.dumps(table, indent=1, default=float))
        return
    for name, grid in variants().items():
        if only and name != only:
            continue
        got: dict[str, dict[str, tuple[Arr, Arr]]] = {}
        for p in grid:
            key = json.dumps(p, sort_keys=True)
            got[key] = {s.name: score_variant(s, name, p) for s in sets}
            table.setdefault(f"{name} grid", {})[key] = {
                n: [v[0].mean() - base[n][0].mean(), v[1].mean() - base[n][1].mean()]
                for n, v in got[key].items()
            }
            gains = {n: got[key][n][0].mean() - base[n][0].mean() for n in got[key]}
            print(
                f"{name} {key}: " + ", ".join(f"{n} {g:+.4f}" for n, g in gains.items()), flush=True
            )
        held: dict[str, Any] = {}
        for s in sets:
            others = [t.name for t in sets if t.name != s.name]

            def crit(
                key: str, others: Sequence[str] = others, got: dict[str, Any] = got
            ) -> tuple[float, float]:
                g = [got[key][n][0].mean() - base[n][0].mean() for n in others]
                return (float(np.mean(g)), float(min(g)))

            best = max(got, key=crit)
            r, c = got[best][s.name]
            br, bc = base[s.name]
            gain, low, high = paired_interval(list(r), list(br))
            held[s.name] = {
                "chosen": json.loads(best), "recall": r.mean(), "complete": c.mean(),
                "gain": gain, "ci": [low, high], "complete_gain": (c - bc).mean(),
            }  # fmt: skip
            print(f"  held-out {name} {s.name}: {json.loads(best)} recall {r.mean():.4f} "
                  f"({gain:+.4f} [{low:+.4f}, {high:+.4f}]) "
                  f"complete {c.mean():.4f} ({(c - bc).mean():+.4f})", flush=True)  # fmt: skip
        table[name] = held
    if out is not None:
        out.write_text(json.dumps(table, indent=1, default=float))


FAMILIES = ("ridge", "contrastive", "request", "centre", "hubs", "maxview")


def render(paths: Sequence[Path]) -> str:
    """The markdown tables of docs/benchmarks.md from the probe's JSON files (merged)."""
    table: dict[str, Any] = {}
    for p in paths:
        table.update(json.loads(p.read_text(encoding="utf-8")))
    names = list(table["base"])
    lines = ["| family | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines.append("| dense, as stored (recall / complete) | " + " | ".join(
        f"{r:.3f} / {c:.3f}" for r, c in table["base"].values()) + " |")  # fmt: skip
    for fam in FAMILIES:
        if fam not in table:
            continue
        cells = []
        for n in names:
            h = table[fam][n]
            lo, hi = h["ci"]
            cells.append(f"{h['gain']:+.3f} [{lo:+.3f}, {hi:+.3f}] / {h['complete_gain']:+.3f}")
        lines.append(f"| {fam} | " + " | ".join(cells) + " |")
    for fam in ("global-ridge", "global-contrastive"):
        for lam, row in table.get(fam, {}).items():
            cells = [f"{row[n][0]:+.3f} / {row[n][1]:+.3f}" for n in names]
            lines.append(f"| {fam} (lam {float(lam):g}) | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| family | " + " | ".join(names) + " |")
    lines.append("|---" * (len(names) + 1) + "|")
    for fam in FAMILIES:
        if fam in table:
            chosen = [json.dumps(table[fam][n]["chosen"], sort_keys=True) for n in names]
            lines.append(f"| {fam} | " + " | ".join(f"`{c}`" for c in chosen) + " |")
    if "diagnose" in table:
        head = (
            "| set | cos(pseudo, own card) | cos(query, gold card) | shift alignment"
            " | ridge 10: real gain | ridge 10: pseudo gain, unseen tools"
            " | hubs k5 gamma 0.1: real / pseudo gain | hubs k20 gamma 0.25: real / pseudo gain |"
        )
        lines += ["", head, "|---" * 8 + "|"]
        for n, d in table["diagnose"].items():
            r = d["ridge 10"]
            h1, h2 = d.get("hubs k5 gamma 0.1", {}), d.get("hubs k20 gamma 0.25", {})
            hubs = [
                f"{h['real_gain']:+.4f} / {h['pseudo_gain']:+.4f}" if h else "–" for h in (h1, h2)
            ]
            lines.append(
                f"| {n} | {d['cos_pseudo_own']:.3f} | {d['cos_query_gold']:.3f} | "
                f"{d['shift_alignment']:+.3f} | {r['real_gain']:+.4f} | "
                f"{r['pseudo_gain_unseen_tools']:+.4f} | {hubs[0]} | {hubs[1]} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("phase", choices=("embed", "probe", "render"))
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("results", type=Path, nargs="*", help="render: the probe's JSON files")
    parser.add_argument("--sets", default="")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--only",
        default="",
        help="one family (ridge, contrastive, centre, hubs, maxview,"
        " request, global-ridge, global-contrastive, diagnose); default: every per-catalog family",
    )
    args = parser.parse_args(argv)
    if args.phase == "render":
        print(render(args.results))
        return 0
    if args.cache is None:
        parser.error("--cache is required to embed or probe")
    args.cache.mkdir(parents=True, exist_ok=True)
    wanted = {s for s in args.sets.split(",") if s}
    if args.phase == "embed":
        from toolscout.embed.minilm import MiniLMEmbedder

        embedder = MiniLMEmbedder()
        for d in bench_sets(args.bench):
            if wanted and d.name not in wanted:
                continue
            if not (args.cache / f"{d.name}.npz").exists():
                embed_set(d, args.cache, embedder)
            if not (args.cache / f"{d.name}.req.npz").exists():
                embed_requests(d, args.cache, embedder)
        return 0
    probe(args.cache, args.json, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
