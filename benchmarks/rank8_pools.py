"""Each dev set's retrieval pools, kept raw so that ranker columns can be screened offline.

Every (seeded) query of every set goes once through the product's own BM25 and dense
retrieval (``Retriever.pools``, the shipped settings); what is kept per query is what any
feature of a (request, candidate) pair can be computed from: the request's terms, the
lexical and dense hits with their scores, how many parts the request reads in, the gold
ids. Per set it keeps the catalog's field terms (:class:`FieldTerms`' maps), each tool's
parameter terms (names and descriptions of the schema's properties, stemmed as the
lexical index stems them) and the idf of every term a query holds. Nothing is fitted here.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/rank8_pools.py --limit 200 --cache DIR``
(``--limit 0``: every query). Writes ``DIR/<set>.rank8-<limit>.pkl``.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import DEFAULT_BENCH, bench_sets, opened_set  # noqa: E402


def param_terms(parameters: Any) -> frozenset[str]:
    """The stemmed terms of a schema's property names and descriptions (one level)."""
    from toolscout.discovery.lexical import terms

    out: set[str] = set()
    props = parameters.get("properties", {}) if isinstance(parameters, Mapping) else {}
    if isinstance(props, Mapping):
        for name, prop in props.items():
            out.update(terms(str(name)))
            if isinstance(prop, Mapping):
                out.update(terms(str(prop.get("description", ""))))
    return frozenset(out)


def set_pools(d: Path, workdir: Path, limit: int | None, embedder: Any) -> dict[str, Any]:
    from toolscout.discovery.parts import request_parts
    from toolscout.evaluate.evalset import read_tools
    from toolscout.evaluate.harness import eval_principal
    from toolscout.settings import SearchSettings

    cache = workdir / f"{d.name}.rank8-{limit or 0}.pkl"
    if cache.exists():
        got: dict[str, Any] = pickle.loads(cache.read_bytes())
        return got
    specs, _ = read_tools(d / "tools.jsonl")
    params = {s.id: param_terms(s.parameters) for s in specs}
    fresh = not (workdir / f"{d.name}.db").exists()
    rows: list[dict[str, Any]] = []
    with opened_set(d, workdir, limit, embedder, index=fresh) as (cat, scored):
        retriever = cat.retriever(SearchSettings())
        allowed = cat.entitle(eval_principal(cat)).ids
        texts = [q.query for q in scored]
        vectors = [retriever._embed(t) for t in texts]
        fields = retriever.phrases.fields
        idf = retriever.phrases.idf
        idfs: dict[str, float] = {"\x00": idf("\x00")}
        for q, (qterms, lex, dense) in zip(
            scored, retriever.pools(texts, vectors, allowed), strict=True
        ):
            for t in qterms:
                idfs.setdefault(t, idf(t))
            rows.append({
                "qterms": tuple(qterms), "lex": (list(lex.ids), list(lex.scores)),
                "dense": (list(dense.ids), list(dense.scores)),
                "parts": len(request_parts(q.query)), "gold": list(q.gold),
            })  # fmt: skip
        name_idf = {tid: sum(idf(t) for t in ts) for tid, ts in fields.name.items()}
        out = {
            "rows": rows, "idf": idfs, "params": params, "name_idf": name_idf,
            "name": dict(fields.name), "summary": dict(fields.summary),
            "in_name": dict(fields.in_name), "in_summary": dict(fields.in_summary),
        }  # fmt: skip
    cache.write_bytes(pickle.dumps(out))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--limit", type=int, default=200, help="N queries per set; 0: all")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--sets", default="", help="comma-separated (default: every set)")
    args = parser.parse_args(argv)
    from toolscout.embed import make_embedder

    embedder = make_embedder()
    wanted = {s for s in args.sets.split(",") if s}
    for d in bench_sets(args.bench):
        if wanted and d.name not in wanted:
            continue
        start = time.perf_counter()
        got = set_pools(d, args.cache, args.limit or None, embedder)
        took = time.perf_counter() - start
        print(f"{d.name}: {len(got['rows'])} queries ({took:.0f}s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
