"""The ranker's "the request names this tool's group" column, A/B, held out.

A tool's group (``CapabilityCard.group``: the RapidAPI service in toolbench, the server in
an MCP catalog, the API's brand in toolalpaca, a task category in apibench, a class in
bfcl) is read at query time only: ``features(group=True)`` appends :data:`GROUP_FEATURES`,
the idf share of the tool's group terms (:attr:`FieldTerms.group`, none when every group
term is already a name term) found in the request. Card text, lexical fields and vectors
do not change, so a request that names no group is ordered as before unless the fit moves
the other weights.

As ``benchmarks/ranker_features.py`` measures the shape columns, fast and offline: every
query of every set goes once through the product's own BM25 and dense retrieval
(``Retriever.pools``); the ranker prior is fitted leave-one-set-out on the other sets'
queries (``fitting.fit_prior``'s data and settings), once on :data:`calibrate.FEATURES`
and once with the group column; each set is ordered by its held-out fit with the blend of
the fixed fusion added and scored at recall@5 and complete@5. No per-catalog refit, exact
hits, dedupe, parts or prerequisites: the full default is ``benchmarks/quality.py``'s. It
also times the feature matrix with and without the column on the same pools, and counts
how many queries have some pool tool with the column set.

Round twenty-one adds three general variants of the column (:data:`VARIANTS`), each fitted
and scored as the column is: ``prior-only`` (the prior fitted with the group column on the
other sets, the column then dropped: the held-out set is ordered by the first
:data:`FEATURES` weights alone, as a product that reads no group column would order it with
that prior), ``own-term`` (the column counted only for a tool whose own name or summary
shares a term with the request: its "name" or "summary" column is above 0) and
``size`` (the column divided by the number of the catalog's tools in the tool's group,
:meth:`FieldTerms.group_size`: a named group spreads its evidence over all its tools) and
``size-sqrt`` (divided by that number's square root). Each is derived from the cached
pools and the set's ``tools.jsonl``, nothing read of the requests.

Round twenty-two adds the request's shape and the pool's separation (:func:`shapes`,
:func:`separating`): ``parts`` (the plain column only for a request the default reads in
several parts, :func:`parts.request_parts`), ``long`` (only for a request of at least
:data:`parts.MIN_TERMS` distinct content terms), ``long-read`` (the same count over the
terms the ranker's features read, after frequent-term pruning: what ``features()`` can
see), ``sep-top`` (each named group's column kept on its best pool tool by the fixed
fusion only), ``sep-lead`` (kept on all of a named group's tools only when its best tool
is the pool's best by the fixed fusion), and the gated forms ``parts-size``,
``parts-sep-lead``, ``long-size`` and ``long-sep-lead`` (the gate of ``parts`` or
``long-read``, then the form). ``long-sep-lead`` is what the default's "group_lead"
column computes (round twenty-two, docs/history/calibration.md).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/group_feature.py [--limit N]
[--cache DIR] [--blends 4,32] [--variants a,b]``; writes
``benchmarks/results/group_feature.json``.
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
from ranker_features import fit_variants, fixed_order, scores_at, variant_scores  # noqa: E402


def pools(d: Path, workdir: Path, limit: int | None, embedder: Any) -> list[dict[str, Any]]:
    """Each query's pool: ids, the feature matrix with the group column last, the gold ids,
    BM25's and dense's orders (cached in ``workdir`` by set and limit)."""
    from toolscout.discovery.features import FieldTerms, features
    from toolscout.evaluate.harness import eval_principal
    from toolscout.settings import SearchSettings

    cache = workdir / f"{d.name}.group-{limit}.pkl"
    if cache.exists():
        out: list[dict[str, Any]] = pickle.loads(cache.read_bytes())
        return out
    out = []
    fresh = not (workdir / f"{d.name}.db").exists()
    with opened_set(d, workdir, limit, embedder, index=fresh) as (cat, scored):
        retriever = cat.retriever(SearchSettings())
        idf = retriever.phrases.idf
        # the cards' own field terms with their group terms (FieldTerms.of(group=True)): the
        # product's phrase index (discovery/query.py, or a kept one: discovery/derived.py)
        # holds none, since its ranker does not read the column
        fields = FieldTerms.of((spec.card for spec in cat.specs()), group=True)
        kept = retriever.phrases.fields
        if fields.name != kept.name or fields.summary != kept.summary:
            raise SystemExit(f"{d.name}: the cards' name/summary terms differ from the index's")
        allowed = cat.entitle(eval_principal(cat)).ids
        texts = [q.query for q in scored]
        vectors = [retriever._embed(t) for t in texts]
        for q, (qterms, lex, dense) in zip(
            scored, retriever.pools(texts, vectors, allowed), strict=True
        ):
            ids, x = features(qterms, lex, dense, fields, idf, group=True)
            out.append({
                "ids": ids, "x": x, "gold": list(q.gold),
                "lex": list(lex.ids), "dense": list(dense.ids), "args": (qterms, lex, dense),
            })  # fmt: skip
        timing = time_features(out, fields, idf)
        timing["tools with group terms"] = len(fields.group)
        timing["tools"] = len(fields.name)
    for row in out:
        row.pop("args")
    out[0]["timing"] = timing
    cache.write_bytes(pickle.dumps(out))
    return out


def time_features(rows: Sequence[Mapping[str, Any]], fields: Any, idf: Any) -> dict[str, Any]:
    """Mean µs of the feature matrix as the default builds it and with the group column, on
    the same pools, A/B then B/A per pool, 3 rounds."""
    from toolscout.discovery.features import features

    spent: dict[bool, list[float]] = {True: [], False: []}
    for round_ in range(3):
        for i, row in enumerate(rows):
            qterms, lex, dense = row["args"]
            for grouped in (True, False) if (i + round_) % 2 else (False, True):
                t0 = time.perf_counter()
                features(qterms, lex, dense, fields, idf, group=grouped)
                spent[grouped].append(time.perf_counter() - t0)
    return {
        "features_us": round(1e6 * float(np.mean(spent[False])), 1),
        "features_group_us": round(1e6 * float(np.mean(spent[True])), 1),
    }


#: the column's variants derived from the cached pools ("group": the plain share; besides
#: "before" and "prior-only"): see the module's docstring
DERIVED: tuple[str, ...] = (
    "group", "own-term", "size", "size-sqrt",
    "parts", "parts-size", "long", "long-read", "sep-top", "sep-lead", "parts-sep-lead",
    "long-size", "long-sep-lead",
)  # fmt: skip


def shapes(d: Path, workdir: Path, limit: int | None, embedder: Any) -> list[tuple[int, int, int]]:
    """Each query's shape as the product reads it, in the cached pools' order: how many
    parts the default reads it in (:func:`parts.request_parts`; the default reads no
    intents), its distinct content terms, and its distinct terms the ranker's features
    read (the query's terms after frequent-term pruning, :func:`query.parse_query`);
    cached in ``workdir``."""
    from toolscout.discovery.lexical import terms
    from toolscout.discovery.parts import request_parts
    from toolscout.discovery.query import parse_query
    from toolscout.errors import QueryError
    from toolscout.settings import SearchSettings

    cache = workdir / f"{d.name}.shape-{limit}.pkl"
    if cache.exists():
        kept: list[tuple[int, int, int]] = pickle.loads(cache.read_bytes())
        return kept
    settings = SearchSettings()
    out: list[tuple[int, int, int]] = []
    with opened_set(d, workdir, limit, embedder) as (cat, scored):
        df, n_docs = cat.retriever(settings).store.document_frequency()
        for q in scored:
            text = q.query[: settings.max_query_chars]
            try:
                read = len(set(parse_query(text, df, n_docs, settings).terms))
            except QueryError:
                read = 0
            out.append((len(request_parts(q.query)), len(set(terms(q.query))), read))
    cache.write_bytes(pickle.dumps(out))
    return out


def group_keys(d: Path) -> dict[str, frozenset[str]]:
    """Each tool's group terms (:attr:`FieldTerms.group`; tools without none)."""
    from toolscout.discovery.features import FieldTerms
    from toolscout.evaluate.evalset import read_tools

    specs, _ = read_tools(d / "tools.jsonl")
    return dict(FieldTerms.of((spec.card for spec in specs), group=True).group)


def separating(
    row: Mapping[str, Any], group: Any, keys: Mapping[str, frozenset[str]], lead: bool
) -> Any:
    """The group column kept, per named group (the pool tools with the column set that
    share group terms), on its best tool by the fixed fusion only (``lead`` False:
    "sep-top"), or on all its tools only when that best tool is the pool's best by the
    fixed fusion against every tool outside the group (``lead`` True: "sep-lead")."""
    from toolscout.discovery.calibrate import FIXED_MIX

    fixed = row["x"][:, : len(FIXED_MIX)] @ np.asarray(FIXED_MIX)
    ids = row["ids"]
    members: dict[frozenset[str], list[int]] = {}
    for i in np.flatnonzero(group > 0).tolist():
        members.setdefault(keys[ids[i]], []).append(i)
    out = np.zeros_like(group)
    for g, at in members.items():
        best = max(at, key=lambda i: fixed[i])
        if not lead:
            out[best] = group[best]
            continue
        outside = [fixed[i] for i in range(len(ids)) if keys.get(ids[i]) != g]
        if not outside or fixed[best] >= max(outside):
            out[at] = group[at]
    return out


def group_sizes(d: Path) -> dict[str, int]:
    """Each tool's group's size as the product counts it (:meth:`FieldTerms.group_size`):
    how many of the set's tools have the same group terms (tools without: 1)."""
    from toolscout.discovery.features import FieldTerms
    from toolscout.evaluate.evalset import read_tools

    specs, _ = read_tools(d / "tools.jsonl")
    fields = FieldTerms.of((spec.card for spec in specs), group=True)
    return {t: fields.group_size(t) for t in fields.name}


def derive(
    rows: Sequence[Mapping[str, Any]],
    variant: str,
    sizes: Mapping[str, int],
    base: int,
    shape: Sequence[tuple[int, int, int]] = (),
    keys: Mapping[str, frozenset[str]] | None = None,
) -> list[dict[str, Any]]:
    """The rows with the first ``base`` columns and the group column as ``variant`` reads
    it (the cached pools keep the plain group column last)."""
    from toolscout.discovery.features import FEATURES
    from toolscout.discovery.parts import MIN_TERMS

    if variant not in DERIVED:
        raise ValueError(f"unknown group variant {variant!r}; known: {', '.join(DERIVED)}")
    # a "parts-" ("long-") variant: the form after the prefix, read only for a request in
    # parts (of at least parts.MIN_TERMS distinct terms read, as "long-read")
    gate = "parts" if variant.startswith("parts") else None
    if variant in ("long-size", "long-sep-lead"):
        gate = "long"
    form = "group" if variant == "parts" else variant.removeprefix(f"{gate}-")
    out: list[dict[str, Any]] = []
    for n, row in enumerate(rows):
        x = row["x"]
        group = x[:, -1].copy()
        if gate == "parts":
            group *= float(shape[n][0] > 1)
        elif gate == "long":
            group *= float(shape[n][2] >= MIN_TERMS)
        if form == "long":
            group *= float(shape[n][1] >= MIN_TERMS)
        elif form == "long-read":
            group *= float(shape[n][2] >= MIN_TERMS)
        elif form == "own-term":
            group *= (x[:, FEATURES.index("name")] > 0) | (x[:, FEATURES.index("summary")] > 0)
        elif form == "size":
            group /= np.array([sizes[t] for t in row["ids"]], dtype=np.float64)
        elif form == "size-sqrt":
            group /= np.sqrt(np.array([sizes[t] for t in row["ids"]], dtype=np.float64))
        elif form in ("sep-top", "sep-lead"):
            group = separating(row, group, keys or {}, lead=form == "sep-lead")
        out.append({**row, "x": np.column_stack([x[:, :base], group])})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--limit", type=int, default=None, help="N queries per set (seeded)")
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "group-feature")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/group_feature.json")
    parser.add_argument(
        "--blends", type=lambda v: tuple(float(x) for x in v.split(",")), default=(4.0, 32.0)
    )
    parser.add_argument(
        "--variants",
        type=lambda v: tuple(v.split(",")),
        default=DERIVED,
        help=f"the derived variants to fit and score (default all: {','.join(DERIVED)}); "
        '"group" is always one (prior-only reads its fit)',
    )
    parser.add_argument(
        "--time-only",
        action="store_true",
        help="build the pools and time the feature matrix (a new --cache), no fit",
    )
    args = parser.parse_args(args_list)
    unknown = sorted(set(args.variants) - set(DERIVED))
    if unknown:
        parser.error(f"unknown --variants {unknown}; known: {', '.join(DERIVED)}")
    chosen = ("group", *(v for v in DERIVED if v in args.variants and v != "group"))

    from toolscout.discovery.features import FEATURES, GROUP_FEATURES
    from toolscout.embed.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    args.cache.mkdir(parents=True, exist_ok=True)
    by_set: dict[str, list[dict[str, Any]]] = {}
    for d in bench_sets(args.bench):
        start = time.perf_counter()
        by_set[d.name] = pools(d, args.cache, args.limit, embedder)
        print(f"{d.name}: {len(by_set[d.name])} queries ({time.perf_counter() - start:.0f}s)",
              file=sys.stderr)  # fmt: skip
    timing = {n: rows[0].get("timing", {}) for n, rows in by_set.items()}
    if args.time_only:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "command": command_line("benchmarks/group_feature.py", args_list), "timing": timing,
        }, indent=1))  # fmt: skip
        print("timing (µs, feature matrix without / with the group column):", timing)
        return 0
    # the columns of the ranker without any group column (the cached pools: these, then
    # the plain group column last; built anew by a tree whose FEATURES end in
    # "group_per_tool" or "group_lead": these, that, then the plain one)
    base = next(
        (FEATURES.index(c) for c in ("group_per_tool", "group_lead") if c in FEATURES),
        len(FEATURES),
    )
    variants = {"before": base}
    fits = fit_variants(by_set, variants)
    sizes = {d.name: group_sizes(d) for d in bench_sets(args.bench) if d.name in by_set}
    # each variant's rows, derived once for its fit and its scores
    shape = {d.name: shapes(d, args.cache, args.limit, embedder)
             for d in bench_sets(args.bench) if d.name in by_set}  # fmt: skip
    group_of = {d.name: group_keys(d) for d in bench_sets(args.bench) if d.name in by_set}
    for n, rows in by_set.items():
        if len(shape[n]) != len(rows):
            raise SystemExit(f"{n}: {len(shape[n])} query shapes for {len(rows)} pools")
    derived = {
        v: {n: derive(rows, v, sizes[n], base, shape[n], group_of[n]) for n, rows in by_set.items()}
        for v in chosen
    }
    for v in chosen:
        fits.update(fit_variants(derived[v], {v: base + 1}))
    results: dict[str, Any] = {}
    for name, rows in by_set.items():
        fired = [bool(r["x"][:, -1].any()) for r in rows]
        gold_fired = [
            any(r["x"][r["ids"].index(g), -1] > 0 for g in r["gold"] if g in r["ids"]) for r in rows
        ]
        res: dict[str, Any] = {
            "queries": len(rows),
            "pool group named": float(np.mean(fired)),
            "gold group named": float(np.mean(gold_fired)),
            "bm25": scores_at(rows, lambda r: r["lex"]),
            "dense": scores_at(rows, lambda r: r["dense"]),
            "fixed": scores_at(rows, fixed_order),
        }
        res.update(variant_scores(rows, name, fits, variants, args.blends))
        res.update(variant_scores(derived["group"][name], name, fits,
                                  {"group": base + 1}, args.blends))  # fmt: skip
        # the prior fitted with the column, ordered without it
        res.update(variant_scores(rows, name, {"prior-only": fits["group"]},
                                  {"prior-only": base}, args.blends))  # fmt: skip
        for v in chosen[1:]:
            res.update(variant_scores(derived[v][name], name, fits,
                                      {v: base + 1}, args.blends))  # fmt: skip
        results[name] = res
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "command": command_line("benchmarks/group_feature.py", args_list),
        "features": [*FEATURES[:base], *GROUP_FEATURES], "fits": fits, "sets": results,
        "timing": timing,
    }, indent=1))  # fmt: skip
    keys = list(next(iter(results.values())))[3:]
    print("| set | queries | group named (pool / gold) | " + " | ".join(keys) + " |")
    print("|---|---|---|" + "---|" * len(keys))
    for name, res in results.items():
        cells = [f"{res[k]['recall@5']:.3f} / {res[k]['complete@5']:.3f}" for k in keys]
        named = f"{res['pool group named']:.2f} / {res['gold group named']:.2f}"
        print(f"| {name} | {res['queries']} | {named} | " + " | ".join(cells) + " |")
    print("timing (µs, feature matrix without / with the group column):", timing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
