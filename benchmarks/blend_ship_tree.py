"""A copy of a source tree with one fit's constants written in: the ship candidate.

The ship rule of round twenty-three: what ships is exactly one fit's output — its "all"
row of ``quality.py --fits-only --json`` — with no constant mixed from another fit. This
writes every constant of that row into a copy of ``src`` (``logit.PRIOR``,
``PRIOR_NONE``; ``ranker.PLATT``, ``LEAD_MARGIN``, ``BLEND``; ``fusion.DEDUPE_YIELD``;
``confidence.CONFIDENCE``), so the in-set check (``quality_ship.py --shipped-only``, after
each set's copy is calibrated again from the new prior, ``blend_recal.py --allow-changed``)
measures what would ship. A ``--blend-by catalog`` fit is refused: since round twenty-five
the product has no blend per catalog to write (its evidence and choice are
benchmarks/catalog_evidence.py's; round twenty-three wrote ``ranker.BLEND_MARGIN``).

Run: ``.venv/bin/python benchmarks/blend_ship_tree.py --fits FITS --src src --out DIR``
(DIR/src is written; DIR must not exist).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _sub(path: Path, pattern: str, value: str) -> None:
    text = path.read_text(encoding="utf-8")
    new, n = re.subn(pattern, value, text, count=1, flags=re.MULTILINE)
    if n != 1:
        raise SystemExit(f"error: {path}: no line matches {pattern!r}")
    path.write_text(new, encoding="utf-8")


def write_constants(src: Path, fit: dict[str, Any]) -> list[str]:
    """Every constant of ``fit`` written into the tree at ``src``; what was written."""
    if fit.get("blend_margin") is not None:
        raise SystemExit(
            f"error: the fit chooses a blend per catalog (blend margin {fit['blend_margin']}, "
            "--blend-by catalog); the product has no such choice since round twenty-five "
            "(benchmarks/catalog_evidence.py), so it cannot be written into a tree"
        )
    d = src / "toolscout" / "discovery"
    prior, none = fit["prior"][:-1], fit["prior"][-1]
    a, b = fit["platt"]
    done = [
        f"logit.PRIOR = {tuple(prior)}, PRIOR_NONE = {none}",
        f"ranker.PLATT = {(a, b)}",
        f"ranker.LEAD_MARGIN = {fit['lead_margin']}",
        f"fusion.DEDUPE_YIELD = {fit['dedupe_yield']}",
        f"confidence.CONFIDENCE = {tuple(fit['confidence'])}",
    ]
    _sub(d / "logit.py", r"^PRIOR: tuple\[float, \.\.\.\] = \(.*?\)$",
         f"PRIOR: tuple[float, ...] = {tuple(float(x) for x in prior)}")  # fmt: skip
    _sub(d / "logit.py", r"^PRIOR_NONE = .*$", f"PRIOR_NONE = {float(none)}")
    _sub(d / "ranker.py", r"^PLATT: tuple\[float, float\] = .*$",
         f"PLATT: tuple[float, float] = ({float(a)}, {float(b)})")  # fmt: skip
    _sub(d / "ranker.py", r"^LEAD_MARGIN = .*$", f"LEAD_MARGIN = {float(fit['lead_margin'])}")
    _sub(d / "fusion.py", r"^DEDUPE_YIELD = .*$", f"DEDUPE_YIELD = {float(fit['dedupe_yield'])}")
    confidence = tuple(float(x) for x in fit["confidence"])
    _sub(d / "confidence.py", r"^CONFIDENCE: tuple\[float, \.\.\.\] = \((?s:.*?)\)  # fmt: skip$",
         f"CONFIDENCE: tuple[float, ...] = {confidence}")  # fmt: skip
    _sub(d / "ranker.py", r"^BLEND = .*$", f"BLEND = {float(fit['blend'])}")
    done.append(f"ranker.BLEND = {fit['blend']}")
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fits", type=Path, required=True)
    parser.add_argument("--fit", default="all")
    parser.add_argument("--src", type=Path, required=True, help="the tree's src directory")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        fit = json.loads(args.fits.read_text(encoding="utf-8"))["fits"][args.fit]
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"error: {args.fits} holds no fit {args.fit!r} ({exc})") from exc
    if args.out.exists():
        raise SystemExit(f"error: {args.out} exists")
    shutil.copytree(args.src, args.out / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for line in write_constants(args.out / "src", fit):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
