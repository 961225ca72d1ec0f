"""The product default's recall@5 and complete@5 on each dev set, query by query, for
comparing two source trees (round seventeen, h/lean11: the request's function words out
of what the query encoder reads).

    PYTHONPATH=/tmp/before/src python benchmarks/lean11_quality.py run DIR_A --sets DBS_A
    PYTHONPATH=src python benchmarks/lean11_quality.py run DIR_B --sets DBS_B
    python benchmarks/lean11_quality.py compare DIR_A DIR_B

``run`` takes each set's catalog indexed in ``--sets`` (``<set>.db``, as ``quality.py
--cache`` keeps them; re-added with ``replace_all`` as the harness does, so an unchanged
catalog writes nothing but what the tree derives), runs every query (``--limit`` a set,
seeded; default all) through the default as ``toolscout eval``'s ``hybrid`` does
(``harness.discover_once``, the shipped constants: quality.py's "default in-set") and
writes ``DIR/<set>.json``: each query's top 5, recall@5 and complete@5. ``--only`` runs
some sets (a run made in pieces). ``compare`` prints per set both trees' means, the
difference, how many shortlists' top 5 moved, and a 95% paired bootstrap interval of the
recall@5 difference (``fitting.paired_interval``'s resampling, done here on the rows).
The lean reading was measured and not shipped (docs/history/discovery-latency.md, h/lean11):
it is in this branch's commit ``0b34eb5`` only (``lexical.lean_words``,
``queryvectors.LEAN_REQUESTS``, its tests); ``tokens`` and ``--refit lean`` need that
tree (``git worktree add DIR 0b34eb5``; ``run``/``compare`` work on any tree).
``--refit whole|lean`` first fits each catalog's ranker again on its pseudo-queries read
whole or lean (a diagnostic; the DBs' stored calibration is replaced: use copies).
``tokens`` counts the model's tokens a request read whole and lean.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

SETS = ("apibench", "bfcl", "metatool", "restbench", "toolalpaca", "toolbench")
ROOT = Path(__file__).resolve().parents[1]


def run_set(
    name: str, sets_dir: Path, bench: Path, limit: int | None, out: Path, refit: str | None
) -> None:
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.errors import QueryError
    from toolscout.evaluate.evalset import read_queries, read_tools, sample
    from toolscout.evaluate.harness import (
        STRATEGIES,
        Outcome,
        _scorable,
        discover_once,
        eval_principal,
    )
    from toolscout.evaluate.metrics import complete_at, recall_at

    start = time.perf_counter()
    specs, renamed = read_tools(bench / name / "tools.jsonl")
    asked = sample(read_queries(bench / name / "queries.jsonl"), limit)
    rows: list[dict[str, Any]] = []
    with Catalog.open(sets_dir / f"{name}.db", embedder=MiniLMEmbedder(), log=False) as cat:
        cat.add(specs, replace_all=True)
        if refit is not None:
            _refit(cat, lean=refit == "lean")
        scored, _ = _scorable(cat, asked, renamed)
        who = eval_principal(cat)
        for q in scored:
            try:
                got = discover_once(cat, STRATEGIES["hybrid"], q.query, who)
            except QueryError:
                got = Outcome((), 0.0)
            rows.append(
                {
                    "id": q.id,
                    "top5": list(got.ranked[:5]),
                    "recall@5": recall_at(got.ranked, q.gold, 5),
                    "complete@5": complete_at(got.ranked, q.gold),
                }
            )
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(rows))
    r = sum(x["recall@5"] for x in rows) / len(rows)
    c = sum(x["complete@5"] for x in rows) / len(rows)
    print(f"{name:11s} n {len(rows)} recall@5 {r:.4f} complete@5 {c:.4f} "
          f"({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip


def _refit(cat: Any, lean: bool) -> None:
    """Fit the catalog's ranker again on its pseudo-queries (``--refit``), read whole or,
    ``lean``, as this branch reads a request (a diagnostic: the product reads them whole,
    so that a stored calibration is what a fresh index fits)."""
    if lean:
        from toolscout.discovery import search
        from toolscout.discovery.queryvectors import embed_keys

        search._embed_keys = lambda texts, lean=None: embed_keys(texts, lean=True)  # type: ignore[assignment]
    cat.calibrate()


def interval(diffs: list[float], rounds: int = 2000) -> tuple[float, float]:
    rng = random.Random(20261207)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def compare(a_dir: Path, b_dir: Path) -> None:
    print("| set | queries | recall@5 A → B (Δ, 95% CI) | complete@5 A → B (Δ) | top 5 moved |")
    print("|---|---|---|---|---|")
    for name in SETS:
        if not (a_dir / f"{name}.json").exists() or not (b_dir / f"{name}.json").exists():
            continue
        a = json.loads((a_dir / f"{name}.json").read_text())
        b = json.loads((b_dir / f"{name}.json").read_text())
        assert [x["id"] for x in a] == [x["id"] for x in b], f"{name}: not the same queries"
        n = len(a)
        cells = []
        for key in ("recall@5", "complete@5"):
            ma, mb = sum(x[key] for x in a) / n, sum(x[key] for x in b) / n
            cell = f"{ma:.4f} → {mb:.4f} ({mb - ma:+.4f}"
            if key == "recall@5":
                lo, hi = interval([y[key] - x[key] for x, y in zip(a, b, strict=True)])
                cell += f", [{lo:+.4f}, {hi:+.4f}]"
            cells.append(cell + ")")
        moved = sum(x["top5"] != y["top5"] for x, y in zip(a, b, strict=True))
        print(f"| {name} | {n} | {cells[0]} | {cells[1]} | {moved} |")


def tokens(bench: Path) -> None:
    """The model's tokens a request (the whole request's text the encoder reads, [CLS] and
    [SEP] counted) read whole and lean, per set: median, mean and the share saved."""
    from statistics import mean, median

    from toolscout.discovery.queryvectors import embed_keys
    from toolscout.embed.minilm import load_tokenizer
    from toolscout.evaluate.evalset import read_queries

    tok = load_tokenizer(256)
    print("| set | requests | tokens whole (median / mean) | lean (median / mean) | saved |")
    print("|---|---|---|---|---|")
    for name in SETS:
        texts = [q.query for q in read_queries(bench / name / "queries.jsonl")]
        whole = [len(tok.encode(k).ids) for k in embed_keys(texts, lean=False)]
        lean = [len(tok.encode(k).ids) for k in embed_keys(texts, lean=True)]
        print(f"| {name} | {len(texts)} | {median(whole):g} / {mean(whole):.1f} "
              f"| {median(lean):g} / {mean(lean):.1f} "
              f"| {1 - sum(lean) / sum(whole):.1%} |")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--sets", type=Path, required=True, help="the indexed <set>.db files")
    r.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    r.add_argument("--limit", type=int, default=None)
    r.add_argument("--only", default=",".join(SETS), help="comma-separated set names")
    r.add_argument(
        "--refit",
        choices=("whole", "lean"),
        default=None,
        help="fit each catalog's ranker again first, its pseudo-queries read whole or lean",
    )
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    t = sub.add_parser("tokens")
    t.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    args = ap.parse_args(argv)
    if args.cmd == "tokens":
        tokens(args.bench)
        return 0
    if args.cmd == "run":
        for name in args.only.split(","):
            run_set(name, args.sets, args.bench, args.limit, args.out, args.refit)
        return 0
    compare(args.a, args.b)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
