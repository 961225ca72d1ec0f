"""Discovery latency on this machine, side by side with a plain BM25 call.

    PYTHONPATH=src python benchmarks/latency.py [--queries 500] [--cache DIR] [--scale]
        [--no-spin-wait] [--processes N]

1. End to end: ``pipeline.discover`` (entitle, parse, embed the query beside BM25,
   dense, the learned ranker, select, render, count tokens) over the bfcl dev catalog
   (1,853 tools), product defaults, k=5; interleaved query by query with a plain FTS5
   BM25 call in the same process, so the ratio of the two is stable on a noisy machine;
   and the same discovery with the encoder never skipped (``encoder_skip=False``), the
   query-vector cache cleared before each, with the share of queries the default answered
   without the encoder (discovery/skip.py) and the times of those and of the others; and
   the encoder-run discovery's times split by whether the request is read in parts.
2. The query embedding alone (texts new to the process: no cache hits); and what a
   request read in parts has encoded (the request and its parts, in the retriever's one
   call), and its parts alone.
3. With ``--processes N``: N processes discovering at once on the same catalog, each
   over its own new queries (a loaded server). ``--no-spin-wait`` runs everything with
   the encoder as ``toolscout serve`` configures it (no ONNX Runtime spin-waiting).
4. With ``--scale``: BM25 over 10k and 100k synthetic tool documents with and without
   frequent-term pruning, and dense brute-force cosine over 10k/100k vectors.

Prints a table and writes ``benchmarks/results/latency.json`` (with the machine and load).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from toolscout.cards import make_spec
from toolscout.discovery.catalog import Catalog, lexical_fields
from toolscout.discovery.gates import step_on
from toolscout.discovery.lexical import terms, words
from toolscout.discovery.parts import request_parts
from toolscout.discovery.pipeline import discover
from toolscout.discovery.queryvectors import embed_keys
from toolscout.discovery.search import (
    FIELD_WEIGHTS,
    QUERY_EMBED_WORDS,
    clear_query_cache,
    parse_query,
)
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.evaluate.evalset import read_tools
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.base import IndexedTool
from toolscout.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import quality  # noqa: E402  (the printed command, as the quality-side scripts print it)

#: the product default's row (the encoder always runs: ``encoder_skip`` is off by default)
DEFAULT = "discover (product default, k=5)"


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


def bfcl_queries(bench: Path) -> list[str]:
    """bfcl's distinct queries in a seeded order (the first 20 only warm up)."""
    queries = [json.loads(line)["query"] for line in (bench / "bfcl" / "queries.jsonl").open()]
    queries = list(dict.fromkeys(queries))
    random.Random(5).shuffle(queries)
    return queries


def open_bfcl(bench: Path, db: Path, spin_wait: bool) -> Catalog:
    cat = Catalog.open(db, embedder=MiniLMEmbedder(spin_wait=spin_wait), log=False)
    specs, _ = read_tools(bench / "bfcl" / "tools.jsonl")
    cat.add(specs)
    return cat


def end_to_end(
    bench: Path, n: int, workdir: Path, cache: Path | None, spin_wait: bool = True
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """discover (product default, k=5) and a plain BM25 call, interleaved query by query.

    Both run in this process on the same queries, one after the other, so machine noise
    hits both alike and their ratio is stable. Every timed query is new to the process
    (the query-vector cache never hits); the first 20 queries only warm up.
    """
    queries = bfcl_queries(bench)
    warm, queries = queries[:20], queries[20 : 20 + n]
    cat = open_bfcl(bench, (cache or workdir) / "bfcl-latency.db", spin_wait)
    p = Principal.of("bench", scopes=["*"])
    for q in warm:  # model load, caches, the entitlement
        discover(cat, q, p, k=5)
    allowed = cat.entitle(p).ids
    df, nd = cat.store.document_frequency()
    s = SearchSettings()
    always = SearchSettings(encoder_skip=False)
    skipping = SearchSettings(encoder_skip=True)
    t_disc: list[float] = []
    t_bm25: list[float] = []
    t_always: list[float] = []
    skipped: list[bool] = []
    for q in queries:
        clear_query_cache()  # each variant encodes the query anew (when it encodes it)
        t = time.perf_counter()
        shown = discover(cat, q, p, k=5, settings=skipping)
        t_disc.append(time.perf_counter() - t)
        skipped.append(bool(shown.trace.encoder_skipped))
        clear_query_cache()
        t = time.perf_counter()
        discover(cat, q, p, k=5, settings=always)
        t_always.append(time.perf_counter() - t)
        t = time.perf_counter()
        cat.store.lexical(parse_query(q, df, nd, s).terms, allowed, 50, weights=FIELD_WEIGHTS)
        t_bm25.append(time.perf_counter() - t)
    # the requests the retriever reads in parts (discovery/parts.py: a second encoder run
    # for their parts, and a retrieval per part), as Retriever.run decides it
    in_parts = [bool(request_parts(q)) and step_on("parts", q, always) for q in queries]
    emb = cat.embedder
    fresh = [f"{q} ({i})" for i, q in enumerate(queries[:200])]  # not in the vector cache
    t_emb = timed(lambda q: emb.embed([" ".join(words(q)[:QUERY_EMBED_WORDS])]), fresh)
    # what a request read in parts encodes, as the retriever asks for it (one call: the
    # request and its parts), and its parts alone (the encoder work reading it in parts adds)
    texts = [embed_keys([q, *request_parts(q)]) for q, pt in zip(queries, in_parts, strict=True)]
    texts = [ts for ts, pt in zip(texts, in_parts, strict=True) if pt]
    t_parts_all = timed(emb.embed, texts)
    t_parts_only = timed(lambda ts: emb.embed(ts[1:]), texts)
    disc, bm25 = summary(t_disc), summary(t_bm25)
    out = {
        "discover, encoder_skip=True (k=5)": disc,
        "  its queries that skipped the encoder": summary(
            [t for t, sk in zip(t_disc, skipped, strict=True) if sk] or [0.0]
        ),
        "  its queries that ran the encoder": summary(
            [t for t, sk in zip(t_disc, skipped, strict=True) if not sk] or [0.0]
        ),
        DEFAULT: summary(t_always),
        f"  its requests read in parts ({sum(in_parts)})": summary(
            [t for t, pt in zip(t_always, in_parts, strict=True) if pt] or [0.0]
        ),
        f"  its requests read whole ({len(in_parts) - sum(in_parts)})": summary(
            [t for t, pt in zip(t_always, in_parts, strict=True) if not pt] or [0.0]
        ),
        "  BM25 (FTS5), interleaved with it": bm25,
        "  query embedding alone": summary(t_emb),
        f"  a parts request's texts encoded ({len(texts)})": summary(t_parts_all or [0.0]),
        "    its parts' texts alone": summary(t_parts_only or [0.0]),
    }
    ratio = {
        "p50": round(out[DEFAULT]["p50"] / max(bm25["p50"], 1e-9), 2),
        "p99": round(out[DEFAULT]["p99"] / max(bm25["p99"], 1e-9), 2),
    }
    cat.close()
    share = round(sum(skipped) / max(len(skipped), 1), 4)
    return out, {"queries": len(queries), "discover_over_bm25": ratio, "encoder_skipped": share}


def _discover_times(job: tuple[Path, Path, list[str], bool]) -> list[float]:
    """One process of ``concurrent``: warm up on 20 queries, then time the rest."""
    bench, db, queries, spin_wait = job
    cat = open_bfcl(bench, db, spin_wait)
    p = Principal.of("bench", scopes=["*"])
    for q in queries[:20]:
        discover(cat, f"{q} (warm-up)", p, k=5)
    out = timed(lambda q: discover(cat, q, p, k=5), queries[20:])
    cat.close()
    return out


def concurrent(
    bench: Path, n: int, workdir: Path, cache: Path | None, processes: int, spin_wait: bool
) -> dict[str, dict[str, float]]:
    """``processes`` processes discovering at once on the same catalog (as ``serve
    --workers N`` under load), each over its own ``n`` new queries."""
    import multiprocessing

    db = (cache or workdir) / "bfcl-latency.db"
    open_bfcl(bench, db, spin_wait).close()  # indexed once, before the processes start
    queries = bfcl_queries(bench)
    jobs = [
        (bench, db, queries[i * (n + 20) : (i + 1) * (n + 20)], spin_wait) for i in range(processes)
    ]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        times = [t for one in pool.map(_discover_times, jobs) for t in one]
    return {f"discover, {processes} processes at once (each call)": summary(times)}


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
            timed(lambda t: store.lexical(t, allowed, 50, weights=FIELD_WEIGHTS), pruned)
        ),
        f"BM25 {n_docs:,} docs, all terms": summary(
            timed(lambda t: store.lexical(t, allowed, 50, weights=FIELD_WEIGHTS), full)
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
    ap.add_argument("--cache", type=Path, default=None, help="keep the indexed bfcl here")
    ap.add_argument("--scale", action="store_true", help="also BM25/dense at 10k and 100k docs")
    ap.add_argument(
        "--no-spin-wait",
        action="store_true",
        help="encode without ONNX Runtime's spin-waiting, as `toolscout serve` does",
    )
    ap.add_argument(
        "--processes", type=int, default=1, help="also time N processes discovering at once"
    )
    args = ap.parse_args(argv)
    if args.processes < 1:
        ap.error(f"--processes must be at least 1, got {args.processes}")
    spin_wait = not args.no_spin_wait
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        e2e, info = end_to_end(args.bench, args.queries, work, args.cache, spin_wait)
        results.update(e2e)
        if args.processes > 1:
            results.update(
                concurrent(args.bench, args.queries, work, args.cache, args.processes, spin_wait)
            )
        if args.scale:
            for n in (10_000, 100_000):
                results.update(lexical_scale(n, work, args.bench))
            for n in (10_000, 100_000):
                results.update(dense_scale(n))
    print(f"{'what':48s} {'p50 ms':>8s} {'p95 ms':>8s} {'p99 ms':>8s}")
    for name, r in results.items():
        print(f"{name:48s} {r['p50']:8.2f} {r['p95']:8.2f} {r['p99']:8.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"discover / BM25: p50 x{info['discover_over_bm25']['p50']}, "
        f"p99 x{info['discover_over_bm25']['p99']} ({info['queries']} queries); "
        f"encoder skipped on {info['encoder_skipped']:.1%} of them"
    )
    meta = {
        "sqlite": sqlite3.sqlite_version,
        "python": sys.version.split()[0],
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "load_average": os.getloadavg(),
        "spin_wait": spin_wait,
        "command": quality.command_line(
            "benchmarks/latency.py", sys.argv[1:] if argv is None else argv
        ),
        **info,
    }
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
