"""A multilingual.py run read in parts: the originals of earlier rounds and the new ones.

``benchmarks/multilingual.py --json FILE`` keeps each original request's recall@5 per
language (``per_request``). This reads that file and prints, for each part of the
originals (by their place in queries.jsonl: ``--parts 150,150`` is the first 150 originals,
then the next 150), each language's recall@5 and complete@5 (every gold tool in the top 5)
and its gap to English with the same 90% paired bootstrap interval as multilingual.py
(``gaps``, same seed), for every embedder and strategy in the file. With ``--compare
OLD.json`` it also says, for the first part, whether each request's recall@5 equals the
earlier run's (one that covered exactly those originals) and whether the intervals match.

    PYTHONPATH=src .venv/bin/python benchmarks/multilingual/by_part.py RUN.json
        --parts 150,150 --compare benchmarks/results/multilingual_r20_option.json

(RUN.json: e.g. benchmarks/results/multilingual_r24_option.json; one command line.)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from multilingual import LANGS, QUERIES, gaps  # noqa: E402

Scores = Mapping[str, Mapping[str, float]]


def originals(path: Path) -> list[str]:
    """The original requests' ids in the file's order."""
    seen: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            of = json.loads(line)["of"]
            if of not in seen:
                seen.append(of)
    return seen


def summary(by_request: Scores) -> dict[str, Any]:
    """recall@5 and complete@5 per language, and each language's gap to English."""
    out: dict[str, Any] = {"n": len(by_request), "recall@5": {}, "complete@5": {}}
    for lang in LANGS:
        got = [langs[lang] for langs in by_request.values() if lang in langs]
        if got:
            out["recall@5"][lang] = round(sum(got) / len(got), 3)
            out["complete@5"][lang] = round(sum(v == 1.0 for v in got) / len(got), 3)
    out["gap_to_en"] = gaps(by_request)
    return out


def split(run: Mapping[str, Any], order: Sequence[str], parts: Sequence[int]) -> dict[str, Any]:
    """Each embedder's and strategy's summary, per part of ``order`` and for all of it."""
    if sum(parts) != len(order):
        raise SystemExit(f"--parts add up to {sum(parts)}, the file has {len(order)} originals")
    bounds, start = [], 0
    for size in parts:
        bounds.append((start, start + size))
        start += size
    out: dict[str, Any] = {}
    for name, result in run["results"].items():
        for strategy, by_request in result["per_request"].items():
            missing = [o for o in order if o not in by_request]
            if missing:
                raise SystemExit(f"{name}/{strategy}: no scores for {len(missing)} originals")
            key = f"{name}/{strategy}"
            out[key] = {"all": summary({o: by_request[o] for o in order})}
            for lo, hi in bounds:
                out[key][f"{lo + 1}-{hi}"] = summary({o: by_request[o] for o in order[lo:hi]})
    return out


def compare(run: Mapping[str, Any], old: Mapping[str, Any], first: Sequence[str]) -> list[str]:
    """Where the run's first originals differ from an earlier run over just those."""
    lines: list[str] = []
    for name, result in old["results"].items():
        if name not in run["results"]:
            continue
        for strategy, before in result["per_request"].items():
            now = run["results"][name]["per_request"].get(strategy, {})
            if set(before) != set(first):
                lines.append(f"{name}/{strategy}: the earlier run holds other originals")
                continue
            differ = [
                (o, lang)
                for o in first
                for lang in LANGS
                if before[o].get(lang) != now.get(o, {}).get(lang)
            ]
            again = gaps({o: now[o] for o in first})
            same = again == result["gap_to_en"][strategy]
            lines.append(
                f"{name}/{strategy}: {len(differ)} of {len(first) * len(LANGS)} request scores"
                f" differ{': ' + str(differ[:5]) if differ else ''}; intervals"
                f" {'identical' if same else 'differ'}"
            )
    return lines


def table(parts: Mapping[str, Any]) -> str:
    lines = [
        "| embedder/strategy | originals | measure | " + " | ".join(LANGS) + " |",
        "|---|---|---|" + "---|" * len(LANGS),
    ]
    for key, by_part in parts.items():
        for part, s in by_part.items():
            for measure in ("recall@5", "complete@5"):
                cells = " | ".join(f"{s[measure].get(lang, 0):.3f}" for lang in LANGS)
                lines.append(f"| {key} | {part} ({s['n']}) | {measure} | {cells} |")
            cells = " | ".join(
                f"{g['gap']:+.3f} [{g['low']:+.3f}, {g['high']:+.3f}]"
                for lang in LANGS[1:]
                if (g := s["gap_to_en"].get(lang))
            )
            lines.append(f"| {key} | {part} ({s['n']}) | gap to en, 90% | – | {cells} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("run", type=Path, help="a multilingual.py --json file")
    parser.add_argument(
        "--parts",
        type=lambda text: [int(v) for v in text.split(",")],
        default=None,
        metavar="N1,N2,...",
        help="originals per part, in the file's order (default: all in one)",
    )
    parser.add_argument("--queries", type=Path, default=QUERIES, help="the run's queries.jsonl")
    parser.add_argument("--compare", type=Path, default=None, help="an earlier run's --json")
    parser.add_argument("--json", type=Path, default=None, help="write the parts here")
    args = parser.parse_args(argv)
    for path in (args.run, args.queries, args.compare):
        if path is not None and not path.is_file():
            raise SystemExit(f"no such file: {path}")
    run = json.loads(args.run.read_text(encoding="utf-8"))
    order = originals(args.queries)
    parts = split(run, order, args.parts or [len(order)])
    print(table(parts))
    if args.compare:
        old = json.loads(args.compare.read_text(encoding="utf-8"))
        first = order[: (args.parts or [len(order)])[0]]
        for line in compare(run, old, first):
            print(line)
    if args.json:
        args.json.write_text(json.dumps(parts, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
