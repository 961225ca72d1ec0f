"""Check queries.jsonl against the draw its README describes.

The originals are the seed's draw, in order, over each dev set's ``queries.jsonl`` (rows in
file order, requests of at most 220 characters, ``random.Random(23).shuffle``): the first
``PLACES[set]`` places of metatool and toolalpaca. For each original, seven rows follow one
another (``LANGS``, English first), whose ``id`` is ``<original id>#<lang>``, whose ``of`` is
the original's id, whose English ``query`` is the original's text, and whose ``gold`` and
``source`` are the original's. Exits 1 naming every row that breaks this.

    python benchmarks/multilingual/check_draw.py [--bench DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ROOT / "benchmarks" / "multilingual" / "queries.jsonl"
DEFAULT_BENCH = ROOT.parent / "shared" / "bench"
LANGS = ("en", "fr", "de", "es", "pt", "ja", "zh")
#: how many places of each set's draw the file holds (rounds one to twenty-four)
PLACES = {"metatool": 180, "toolalpaca": 120}
#: the rounds' boundaries, in places of (metatool, toolalpaca): the file holds them in turn
ROUNDS = ((0, 30, 0, 20), (30, 45, 20, 30), (45, 90, 30, 60), (90, 180, 60, 120))
MAX_CHARS = 220
SEED = 23


def _rows(path: Path) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{n}: not a JSON object: {exc}") from None
    return out


def draw(bench: Path, name: str) -> list[dict[str, Any]]:
    """The seed's order of ``name``'s requests of at most ``MAX_CHARS`` characters."""
    path = bench / name / "queries.jsonl"
    if not path.is_file():
        raise SystemExit(f"no dev set {name!r}: {path} does not exist (pass --bench DIR)")
    q = [r for r in _rows(path) if len(r["query"]) <= MAX_CHARS]
    random.Random(SEED).shuffle(q)
    if len(q) < PLACES[name]:
        raise SystemExit(f"{name}: the draw has {len(q)} places, the file expects {PLACES[name]}")
    return q


def expected(bench: Path) -> list[dict[str, Any]]:
    """The originals in the file's order: each round's metatool places, then toolalpaca's."""
    drawn = {name: draw(bench, name) for name in PLACES}
    out: list[dict[str, Any]] = []
    for m0, m1, t0, t1 in ROUNDS:
        out += drawn["metatool"][m0:m1] + drawn["toolalpaca"][t0:t1]
    return out


def problems(rows: list[dict[str, Any]], originals: list[dict[str, Any]]) -> list[str]:
    """Every way ``rows`` differs from seven rows per original (empty: none)."""
    found: list[str] = []
    if len(rows) != len(LANGS) * len(originals):
        found.append(f"{len(rows)} rows, expected {len(LANGS)} x {len(originals)} originals")
    ids = [r.get("id") for r in rows]
    dupes = sorted({i for i in ids if ids.count(i) > 1}, key=str)
    if dupes:
        found.append(f"ids repeated: {dupes[:5]}")
    for k, orig in enumerate(originals):
        for j, lang in enumerate(LANGS):
            n = k * len(LANGS) + j
            if n >= len(rows):
                found.append(f"row {n + 1}: missing ({orig['id']}#{lang})")
                continue
            row = rows[n]
            want = {
                "id": f"{orig['id']}#{lang}",
                "of": orig["id"],
                "lang": lang,
                "gold": orig["gold"],
                "source": orig["source"],
            }
            if lang == "en":
                want["query"] = orig["query"]
            for key, value in want.items():
                if row.get(key) != value:
                    found.append(f"row {n + 1}: {key} is {row.get(key)!r}, expected {value!r}")
            text = row.get("query")
            if not isinstance(text, str) or not text.strip():
                found.append(f"row {n + 1}: query is empty or not text")
            elif lang != "en" and text == orig["query"]:
                found.append(f"row {n + 1}: the {lang} query is the English text untranslated")
            if set(row) != {"id", "of", "lang", "query", "gold", "source"}:
                found.append(f"row {n + 1}: fields {sorted(row)}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH, help="directory of sets")
    parser.add_argument("--queries", type=Path, default=QUERIES, help="the file to check")
    args = parser.parse_args(argv)
    rows = _rows(args.queries)
    originals = expected(args.bench)
    found = problems(rows, originals)
    for line in found:
        print(line)
    per_set = {name: sum(o["source"] == name for o in originals) for name in PLACES}
    print(
        f"{len(rows)} rows, {len(originals)} originals {per_set}, {len(LANGS)} languages:"
        f" {'OK' if not found else f'{len(found)} problems'}"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
