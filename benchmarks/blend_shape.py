"""A blend by the request's shape, screened on the product's own held-out grid.

Lead (b) of issue 23's blend brief (h/blend17). ``quality.py --fits-only --stages DIR``
keeps each set's blend grid (``fitting.recall_grid``: recall@5 and complete@5 of every
query under the held-out default at every (blend, yield) pair, with the prior fitted
without the set) and its parts' per-query figures. A blend chosen per request shape is a
choice per query among those columns, so the held-out default with two blends — one for
long requests, one for short — is read off the grid exactly, no retrieval run again.

The rule, fixed before any held-out figure was read:

- a request is *long* when it has at least ``parts.MIN_TERMS`` (12) distinct content terms
  (``gates.feature("terms", text)``: the request's text alone, as the shipped gates and
  the parts step read it), else *short* (``--shape parts``: long = read in parts,
  ``parts.request_parts`` not empty — reported beside, not the rule);
- for each fit (every set but one, and all six), each shape's (blend, yield) is chosen by
  ``fitting.choose_blend``'s rule (the largest worst margin over the best part, then the
  larger mean margin, then the smaller blend and yield) over the fit's sets' requests of
  that shape only: a set's margin is its shape's requests' mean recall@5 at the pair minus
  the same requests' mean under the set's best part (the part best over the whole set);
- a set counts for a shape only with at least :data:`MIN_SHAPE_REQUESTS` requests of it; a
  shape counted in fewer than :data:`MIN_SHAPE_SETS` of the fit's sets takes the fit's
  one-blend choice (``choose_blend`` over every request);
- the yield the product would use is the short shape's (the shipped dedupe gate,
  ``dedupe:terms<10``, never dedupes a long request, so a long request's yield is moot).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/blend_shape.py --stages DIR --cache SETS
[--shape terms|parts] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality

#: a set's requests of one shape count towards that shape's choice from this many on
MIN_SHAPE_REQUESTS = 30
#: a shape counted in fewer of the fit's sets than this takes the one-blend choice
MIN_SHAPE_SETS = 2
SHAPES = ("short", "long")

Pair = tuple[float, float]


def is_long(text: str, shape: str) -> bool:
    from toolscout.discovery import gates, parts

    if shape == "terms":
        return gates.feature("terms", text) >= parts.MIN_TERMS
    if shape == "parts":
        return bool(parts.request_parts(text))
    raise SystemExit(f"error: unknown shape {shape!r}; expected terms or parts")


def load_grids(stages: Path, names: Sequence[str]) -> dict[str, Any]:
    """Each set's (parts' scores, recall grid, complete grid) from ``quality.py``'s stages."""
    out: dict[str, Any] = {}
    for name in names:
        found = sorted(stages.glob(f"grid-{name}-None-*.pkl"))
        if len(found) != 1:
            raise SystemExit(
                f"error: expected one grid stage for {name} in {stages}, found {len(found)}"
            )
        out[name] = pickle.loads(found[0].read_bytes())
    return out


def restricted(values: Sequence[float], keep: Sequence[int]) -> list[float]:
    return [values[i] for i in keep]


def choose_by_shape(
    grids: Mapping[str, dict[Pair, list[float]]],
    parts: Mapping[str, Sequence[float]],
    longs: Mapping[str, Sequence[bool]],
    held_out: str | None,
) -> dict[str, Any]:
    """Each shape's (blend, yield) for the fit without ``held_out`` (see the module doc)."""
    from toolscout.evaluate.fitting import choose_blend

    one = choose_blend(grids, parts, held_out)
    out: dict[str, Any] = {"one": one}
    for shape in SHAPES:
        want = shape == "long"
        sub_g: dict[str, dict[Pair, list[float]]] = {}
        sub_p: dict[str, list[float]] = {}
        for n in grids:
            if n == held_out:
                continue
            keep = [i for i, lg in enumerate(longs[n]) if lg == want]
            if len(keep) < MIN_SHAPE_REQUESTS:
                continue
            sub_g[n] = {pair: restricted(v, keep) for pair, v in grids[n].items()}
            sub_p[n] = restricted(parts[n], keep)
        if len(sub_g) < MIN_SHAPE_SETS:
            out[shape], out[f"{shape}_sets"] = one, []
        else:
            out[shape], out[f"{shape}_sets"] = choose_blend(sub_g, sub_p, None), sorted(sub_g)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--stages", type=Path, required=True, help="quality.py's --stages")
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--shape", default="terms", choices=("terms", "parts"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.fitting import mean

    embedder = MiniLMEmbedder()
    sets = quality.bench_sets(args.bench)
    names = [d.name for d in sets]
    raw = load_grids(args.stages, names)
    grids: dict[str, Any] = {}
    completes: dict[str, Any] = {}
    parts: dict[str, list[float]] = {}
    parts_complete: dict[str, float] = {}
    longs: dict[str, list[bool]] = {}
    for d in sets:
        every_part, grids[d.name], completes[d.name] = raw[d.name]
        parts[d.name] = max((v[0] for v in every_part.values()), key=mean)
        parts_complete[d.name] = max(mean(v[1]) for v in every_part.values())
        with quality.opened_set(d, args.cache, None, embedder) as (_, scored):
            longs[d.name] = [is_long(q.query, args.shape) for q in scored]
        n = len(longs[d.name])
        if any(len(v) != n for v in grids[d.name].values()):
            raise SystemExit(f"error: {d.name}'s grid does not match its {n} scored queries")
    out: dict[str, Any] = {"shape": args.shape, "fits": {}, "sets": {}}
    for name in [*names, None]:
        chosen = choose_by_shape(grids, parts, longs, name)
        out["fits"][name or "all"] = {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in chosen.items()
        }
        if name is None:
            continue
        lg = longs[name]
        by_shape = [chosen["long" if x else "short"] for x in lg]
        rec = [grids[name][p][i] for i, p in enumerate(by_shape)]
        com = [completes[name][p][i] for i, p in enumerate(by_shape)]
        one = chosen["one"]
        out["sets"][name] = {
            "n": len(lg),
            "long": sum(lg),
            "best_part": [round(mean(parts[name]), 4), round(parts_complete[name], 4)],
            "one_blend": [round(mean(grids[name][one]), 4), round(mean(completes[name][one]), 4)],
            "by_shape": [round(mean(rec), 4), round(mean(com), 4)],
            "by_shape_exact": [mean(rec), mean(com)],
        }
        s = out["sets"][name]
        print(
            f"{name}: long {s['long']}/{s['n']}; best part {s['best_part']}; one blend "
            f"{one} {s['one_blend']}; by shape short {chosen['short']} long {chosen['long']} "
            f"{s['by_shape']} (long chosen over {chosen['long_sets']}, short over "
            f"{chosen['short_sets']})",
            flush=True,
        )
    a = out["fits"]["all"]
    print(f"all six: one {a['one']}, short {a['short']}, long {a['long']}")
    if args.json:
        argv_list = list(sys.argv[1:] if argv is None else argv)
        quality.write_results(
            args.json, quality.command_line("benchmarks/blend_shape.py", argv_list), **out
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
