"""Where the translations lose what English finds, by round ten's and twelve's classes.

Reads a ``benchmarks/multilingual.py --json`` run (both strategies) and, for each part of
the originals (``--parts``, in queries.jsonl's order) and each language, counts the
(request, language) pairs where the default strategy's recall@5 for the translation is
below the English request's, in three classes:

- *dense*: the translation's dense reading (the dense-only strategy) finds less than the
  English request's dense reading;
- *lexical*: it does not, but it finds less than the English request's default (the English
  is found through its own words: BM25 and the ranker);
- *fusion*: the translation's dense reading alone finds as much as the English default,
  and the fused ranking loses it.

It also gives the pairs the translation finds more than English, the recall lost in each
direction (in requests), and how many lost pairs have two gold tools. No retrieval is run.

    PYTHONPATH=src .venv/bin/python benchmarks/multilingual/lost_pairs.py RUN.json --parts 150,150
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ROOT / "benchmarks" / "multilingual" / "queries.jsonl"
LANGS = ("fr", "de", "es", "pt", "ja", "zh")


def classify(en: float, tr: float, dense_en: float, dense_tr: float) -> str | None:
    """The class of a pair whose translation finds less than English (None: it does not)."""
    if tr >= en:
        return None
    if dense_tr < dense_en:
        return "dense"
    return "fusion" if dense_tr >= en else "lexical"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("run", type=Path, help="a multilingual.py --json file")
    parser.add_argument("--embedder", default="multilingual-e5-small")
    parser.add_argument(
        "--parts",
        type=lambda text: [int(v) for v in text.split(",")],
        default=None,
        metavar="N1,N2,...",
    )
    parser.add_argument("--queries", type=Path, default=QUERIES)
    args = parser.parse_args(argv)
    for path in (args.run, args.queries):
        if not path.is_file():
            raise SystemExit(f"no such file: {path}")
    results = json.loads(args.run.read_text(encoding="utf-8"))["results"]
    if args.embedder not in results:
        raise SystemExit(f"{args.run} has no run of {args.embedder!r}: {sorted(results)}")
    per = results[args.embedder]["per_request"]
    if not {"hybrid", "dense"} <= per.keys():
        raise SystemExit(f"{args.run}: both strategies are needed, it has {sorted(per)}")
    hybrid, dense = per["hybrid"], per["dense"]
    order: list[str] = []
    gold: dict[str, int] = {}
    for line in args.queries.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["of"] not in gold:
                order.append(row["of"])
            gold[row["of"]] = len(row["gold"])
    parts = args.parts or [len(order)]
    if sum(parts) != len(order):
        raise SystemExit(f"--parts add up to {sum(parts)}, the file has {len(order)} originals")
    print("| originals | lang | lost pairs | dense | lexical | fusion | two gold |"
          " recall lost | pairs found more | recall gained |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    start = 0
    for size in parts:
        part = order[start : start + size]
        for lang in LANGS:
            counts: Counter[str] = Counter()
            two = 0
            lost = gained = 0.0
            more = 0
            for o in part:
                en, tr = hybrid[o]["en"], hybrid[o][lang]
                kind = classify(en, tr, dense[o]["en"], dense[o][lang])
                if kind:
                    counts[kind] += 1
                    two += gold[o] > 1
                    lost += en - tr
                elif tr > en:
                    more += 1
                    gained += tr - en
            print(
                f"| {start + 1}-{start + size} | {lang} | {sum(counts.values())} |"
                f" {counts['dense']} | {counts['lexical']} | {counts['fusion']} | {two} |"
                f" {lost:.1f} | {more} | {gained:.1f} |"
            )
        start += size
    return 0


if __name__ == "__main__":
    sys.exit(main())
