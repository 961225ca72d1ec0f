"""Discovery latency on this machine: the whole pipeline and its parts.

    python benchmarks/latency.py [--bench ../shared/bench] [--queries 500]

1. End to end: ``Catalog.discover`` (entitle, parse, embed the query, BM25, dense,
   fuse, select, render, count tokens) over the bfcl dev catalog (1,853 tools)
   with the product default settings, p50/p95/p99.
2. Parts: query embedding alone, FTS5 BM25 alone, dense brute force alone.
3. Scale: BM25 over 10k and 100k synthetic tool documents with and without
   frequent-term pruning, and dense brute-force cosine over 10k/100k vectors.

Prints a table and writes ``benchmarks/results/latency.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from toolscout.cards import make_spec
from toolscout.discovery.catalog import Catalog, lexical_fields
from toolscout.discovery.lexical import terms, words
from toolscout.discovery.search import parse_query
from toolscout.loader import read_catalog
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.base import IndexedTool
from toolscout.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * len(xs)) - 1))]


def summary(xs: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in xs]
    return {
        "p50": pct(ms, 50),
        "p95": pct(ms, 95),
        "p99": pct(ms, 99),
        "mean": statistics.fmean(ms),
    }


def timed(fn, items) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for it in items:
        t = time.perf_counter()
        fn(it)
        out.append(time.perf_counter() - t)
    return out


def end_to_end(bench: Path, n: int, workdir: Path) -> dict[str, dict[str, float]]:
    tools = bench / "bfcl" / "tools.jsonl"
    queries = [json.loads(line)["query"] for line in (bench / "bfcl" / "queries.jsonl").open()]
    random.Random(5).shuffle(queries)
    queries = queries[:n]
    cat = Catalog.open(workdir / "bfcl.db", log=False)
    cat.add(read_catalog([tools]))
    p = Principal.of("bench", scopes=["*"])
    for q in queries[:20]:  # warm-up: model load, caches
        cat.discover(q, p, k=5)
    out = {
        "discover (product default, k=5)": summary(
            timed(lambda q: cat.discover(q, p, k=5), queries)
        )
    }
    emb = cat.embedder
    out["  query embedding"] = summary(timed(lambda q: emb.embed([" ".join(words(q))]), queries))
    allowed = cat.entitle(p).ids
    df, nd = cat.store.document_frequency()
    s = SearchSettings()
    out["  BM25 (FTS5)"] = summary(
        timed(lambda q: cat.store.lexical(parse_query(q, df, nd, s).terms, allowed, 50), queries)
    )
    vecs = emb.embed([" ".join(words(q)) for q in queries[:200]])
    out["  dense brute force"] = summary(
        timed(
            lambda v: cat.store.dense(
                v, allowed, 50, kinds={"card", "alias"}, model_id=emb.model_id
            ),
            list(vecs),
        )
    )
    cat.close()
    return out


def lexical_scale(n_docs: int, workdir: Path, bench: Path) -> dict[str, dict[str, float]]:
    """BM25 over synthetic documents drawn from the bfcl vocabulary."""
    rng = random.Random(n_docs)
    base = [json.loads(line) for line in (bench / "bfcl" / "tools.jsonl").open()]
    vocab = [w for r in base for w in words(r["description"])]
    store = SQLiteStore(workdir / f"scale{n_docs}.db")
    tools = []
    for i in range(n_docs):
        desc = " ".join(rng.choice(vocab) for _ in range(16)) + "."
        spec = make_spec({"id": f"syn:{i}", "name": f"tool_{i}", "summary": desc})
        tools.append(IndexedTool(spec, lexical_fields(spec), []))
    store.upsert(tools, {}, model_id="none")
    queries = [json.loads(line)["query"] for line in (bench / "bfcl" / "queries.jsonl").open()][
        :300
    ]
    df, nd = store.document_frequency()
    allowed = frozenset(f"syn:{i}" for i in range(n_docs))
    s = SearchSettings()
    pruned = [parse_query(q, df, nd, s).terms for q in queries]
    full = [tuple(dict.fromkeys(terms(q))) for q in queries]
    out = {
        f"BM25 {n_docs:,} docs, pruned terms": summary(
            timed(lambda t: store.lexical(t, allowed, 50), pruned)
        ),
        f"BM25 {n_docs:,} docs, all terms": summary(
            timed(lambda t: store.lexical(t, allowed, 50), full)
        ),
    }
    store.close()
    return out


def dense_scale(n: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(n)
    m = rng.standard_normal((n, 384)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    qs = [m[i] + 0.1 for i in range(200)]

    def search(q: np.ndarray) -> None:
        sims = m @ q
        top = np.argpartition(-sims, 50)[:50]
        top[np.argsort(-sims[top])]

    return {f"dense brute force {n:,} vectors": summary(timed(search, qs))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "latency.json")
    args = ap.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        results.update(end_to_end(args.bench, args.queries, work))
        for n in (10_000, 100_000):
            results.update(lexical_scale(n, work, args.bench))
        for n in (10_000, 100_000):
            results.update(dense_scale(n))
    print(f"{'what':48s} {'p50 ms':>8s} {'p95 ms':>8s} {'p99 ms':>8s}")
    for name, r in results.items():
        print(f"{name:48s} {r['p50']:8.2f} {r['p95']:8.2f} {r['p99']:8.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"sqlite": sqlite3.sqlite_version, "python": sys.version.split()[0]}
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
