"""A query encoder other than the shipped graph (the int8 one, the fused one): what it costs
in recall@5 and complete@5 on every dev set, and what it saves.

    PYTHONPATH=src python benchmarks/query_int8.py [--bench DIR] [--cache DIR] [--limit N]
        [--sets a,b] [--graph NAME=FILE | --graph int8 | --graph fused ...] [--out FILE]

Every set is indexed once with the shipped (float) graph; its cards keep those vectors.
Every query then goes through ``Catalog.discover(k=10, tier="progressive")`` with the
product defaults once with the float query encoder and once with each candidate query
graph (default: the product's int8 graph, ``embed/quantise.py``, through
:class:`~toolscout.embed.queries.QuerySide`), in an order that alternates query by query,
with the query-vector cache cleared before each. ``--graph NAME=FILE`` measures another
ONNX file of the same model (a recipe being screened) instead; ``--graph fused`` the
product's fused-attention graph (``embed/fused.py``, its own session options), ``--graph
int8`` the product's int8 one, ``--graph vnni`` the product's VNNI query graph
(``embed/vnni.py``, made whatever the CPU). "float" is always the shipped graph (fused
off). Beside recall@5 and
complete@5 of each, the cosine between the query vectors and the encoders' CPU time (one
text a call, this thread's CPU). ``--sets`` measures some sets and merges them into
``--out``, so that a full run can be made in pieces (each under the heavy lock for a while).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402
from encoder_skip import recall  # noqa: E402
from query_int8_recipes import fused_options  # noqa: E402

#: a set may lose at most this much recall@5 for the int8 query encoder to be the default
MAX_LOSS = 0.005


def _cpu_embed(embedder: Any, text: str) -> tuple[Any, float]:
    start = time.thread_time()
    vec = embedder.embed([text])[0]
    return vec, (time.thread_time() - start) * 1e3


def graph_embedder(path: Path) -> Any:
    """An embedder over a given ONNX file of the default model (a recipe being screened):
    the shipped tokenizer and pooling, one thread, no spinning; a file whose name starts
    with ``f`` (a recipe over the fused graph, ``query_int8_recipes.py``) with the fused
    graph's session options unless it ends in ``_sln``."""
    from toolscout.embed import session as embed_session
    from toolscout.embed.minilm import MiniLMEmbedder

    class _Graph(MiniLMEmbedder):
        def _make_session(self, ort: Any) -> tuple[Any, str]:
            return embed_session.plain(ort, path, self._options(ort)), "screened"

    return _Graph(
        threads=1,
        spin_wait=False,
        keep_session=False,
        fused=fused_options(path),
        vnni_queries=False,
    )


def measure_set(
    d: Path, workdir: Path, limit: int | None, cards: Any, graphs: dict[str, Any]
) -> list[Any]:
    """Per query: recall@5 and completeness with each query encoder, cosine, CPU ms."""
    from contextlib import ExitStack

    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.search import clear_query_cache
    from toolscout.embed.queries import QuerySide
    from toolscout.evaluate.harness import eval_principal

    rows: list[Any] = []
    with (
        quality.opened_set(d, workdir, limit, cards, index=True) as (plain, scored),
        ExitStack() as stack,
    ):
        cats = {"float": plain}
        for name, emb in graphs.items():
            cats[name] = stack.enter_context(
                Catalog.open(workdir / f"{d.name}.db", embedder=QuerySide(cards, emb), log=False)
            )
        principal = eval_principal(plain)
        names = list(cats)
        for i, q in enumerate(scored):
            row: dict[str, Any] = {}
            for name in names if i % 2 == 0 else names[::-1]:
                clear_query_cache()
                ids = (
                    cats[name]
                    .discover(q.query, principal, k=10, tier="progressive", record=False)
                    .ids
                )
                row[name] = recall(ids, q.gold)
            v_float, row["cpu_ms_float"] = _cpu_embed(cards, q.query)
            for name, emb in graphs.items():
                vec, row[f"cpu_ms_{name}"] = _cpu_embed(emb, q.query)
                row[f"cosine_{name}"] = float(np.dot(v_float, vec))
            rows.append(row)
    return rows


def summary(rows: Sequence[Any], names: Sequence[str]) -> dict[str, Any]:
    n = max(len(rows), 1)
    out: dict[str, Any] = {"queries": len(rows)}
    for name in ["float", *names]:
        out[f"recall_{name}"] = sum(r[name] for r in rows) / n
        out[f"complete_{name}"] = sum(r[name] == 1.0 for r in rows) / n
        out[f"cpu_ms_{name}"] = float(np.median([r[f"cpu_ms_{name}"] for r in rows]))
    for name in names:
        out[f"loss_{name}"] = out["recall_float"] - out[f"recall_{name}"]
        out[f"cosine_min_{name}"] = min(r[f"cosine_{name}"] for r in rows)
        out[f"cosine_mean_{name}"] = sum(r[f"cosine_{name}"] for r in rows) / n
    return out


def table(sums: dict[str, dict[str, Any]], name: str) -> list[str]:
    lines = [
        f"| set | queries | recall@5 float → {name} | loss | complete@5 float → {name} "
        "| query cosine min / mean | encoder CPU ms p50, float → " + name + " |",
        "|---|---|---|---|---|---|---|",
    ]
    for set_name, s in sums.items():
        if f"loss_{name}" not in s:
            continue
        lines.append(
            f"| {set_name} | {s['queries']} | {s['recall_float']:.4f} → "
            f"{s[f'recall_{name}']:.4f} | {s[f'loss_{name}']:+.4f} | "
            f"{s['complete_float']:.4f} → {s[f'complete_{name}']:.4f} | "
            f"{s[f'cosine_min_{name}']:.4f} / {s[f'cosine_mean_{name}']:.4f} | "
            f"{s['cpu_ms_float']:.2f} → {s[f'cpu_ms_{name}']:.2f} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    ap.add_argument("--cache", type=Path, default=None, help="keep the indexed sets here")
    ap.add_argument("--limit", type=int, default=None, help="queries per set (default: all)")
    ap.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    ap.add_argument("--graph", action="append", default=[], metavar="NAME=FILE")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "query_int8.json")
    args = ap.parse_args(argv)
    from toolscout.embed.minilm import MiniLMEmbedder

    # one thread each, as a `serve --workers 2` worker runs them on 2 cores
    # (no query side of its own: "float" is the shipped graph for cards and requests alike)
    cards = MiniLMEmbedder(threads=1, spin_wait=False, fused=False, vnni_queries=False)
    product = {
        "int8": lambda: MiniLMEmbedder(threads=1, spin_wait=False, quantised=True),
        "fused": lambda: MiniLMEmbedder(threads=1, spin_wait=False, fused=True, vnni_queries=False),
        "vnni": lambda: MiniLMEmbedder(threads=1, spin_wait=False, vnni=True),
    }
    graphs: dict[str, Any] = {}
    for spec in args.graph:
        name, _, file = spec.partition("=")
        if not file and name not in product:
            ap.error(f"--graph {spec}: give NAME=FILE, or one of {', '.join(product)}")
        graphs[name] = graph_embedder(Path(file)) if file else product[name]()
    if not graphs:
        graphs["int8"] = MiniLMEmbedder(threads=1, spin_wait=False, quantised=True)
    wanted = {s for s in args.sets.split(",") if s}
    previous = json.loads(args.out.read_text()) if args.out.is_file() and wanted else {}
    per_set: dict[str, list[Any]] = dict(previous.get("rows", {}))
    commands: list[str] = list(previous.get("commands", []))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.cache or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for d in quality.bench_sets(args.bench):
            if wanted and d.name not in wanted:
                continue
            per_set[d.name] = measure_set(d, work, args.limit, cards, graphs)
            print(f"{d.name}: {json.dumps(summary(per_set[d.name], list(graphs)))}", flush=True)
    names = sorted({k for rows in per_set.values() for k in rows[0] if k.startswith("cosine_")})
    names = [n.removeprefix("cosine_") for n in names]
    sums = {s: summary(r, [n for n in names if f"cosine_{n}" in r[0]]) for s, r in per_set.items()}
    for name in names:
        print("\n".join(table(sums, name)))
        losses = [s[f"loss_{name}"] for s in sums.values() if f"loss_{name}" in s]
        verdict = "passes" if max(losses) <= MAX_LOSS else "FAILS"
        worst = max(losses)
        print(f"{name}: largest loss {worst:+.4f} over {len(losses)} sets: {verdict}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    shown = sys.argv[1:] if argv is None else argv
    commands.append(quality.command_line("benchmarks/query_int8.py", shown))
    args.out.write_text(json.dumps({
        "commands": commands,
        "max_loss": MAX_LOSS,
        "sets": sums,
        "rows": per_set,
    }, indent=1) + "\n")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
