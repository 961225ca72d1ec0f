"""Does a catalog's own pseudo-query evidence predict its confidence bias, held out?

Issue 23 item 3: the shared confidence model (``confidence.CONFIDENCE``) cannot know a
catalog's base rate; the only per-catalog correction (``ConfidenceShift``) is learned
from the discovery log after use. At index time the calibration already runs the
catalog's own pseudo-queries (discovery/pseudo.py). This measures whether that evidence,
mapped to a logit shift, would correct the held-out confidence of a catalog never seen:

1. per dev set, the held-out selections of its real queries (the ``confidence`` stage of
   ``quality.py``: ranker prior, Platt step and confidence model fitted without the set)
   and their real shift ``fit_shift(confidence, top right)`` — what the log would teach;
2. per set and pseudo-query kind (:data:`KINDS`), the same selection run on pseudo-queries
   made from the catalog alone (a seed the calibration did not fit on), and their pseudo
   shift ``fit_shift`` on whether the source tool was shown first;
3. the mapping pseudo → real shift (``a·pseudo + b``, ``a·pseudo``, or the pseudo shift
   itself) fitted on the five other sets, applied to the held-out set's confidence: its ECE
   and max decile gap before and after.

Every step's result is kept in ``--stages`` (the same directory a ``quality.py --stages``
run fills; its steps are read from there, not recomputed, when present).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/confidence_prior.py --blends 4,32
--cache DIR --stages DIR [--json PATH]``
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality

#: the pseudo-query kinds measured: the calibration's own (summary, parameters, aliases;
#: the "none" kind has no source tool), and the summary cut to words other tools share
#: (in at least 3 tools' text; or in at least 3 and 1% of them): requests about a need
#: rather than about one tool's wording
KINDS = ("card", "shared", "common")
#: the seed of the pseudo-queries measured (the calibration fits on pseudo.SEED's)
SEED_OFFSET = 1
FORMS = ("a*p+b", "a*p", "p")
#: the other evidence measured (an input of the confidence model, not a shift): the card
#: cosines of the shown first tool to the ranker's other first ten, read as their largest,
#: the log of 1 + how many reach 0.9 or 0.8, or the mean of the three largest
TWINS = ("max", "n90", "n80", "mean3")


def pseudo_requests(cat: Any, kind: str) -> list[Any]:
    """The catalog's pseudo-queries of ``kind`` as evaluation queries (gold: the source)."""
    from toolscout.discovery.lexical import terms, words
    from toolscout.discovery.pseudo import SAMPLE_TOOLS, SEED, pseudo_queries
    from toolscout.evaluate.evalset import EvalQuery

    specs = cat.specs()
    seed = SEED + SEED_OFFSET
    if kind == "card":
        made = [(p.text, p.tool_id) for p in pseudo_queries(specs, seed) if p.tool_id]
    else:
        df, n_docs = cat.store.document_frequency()
        least = 3.0 if kind == "shared" else max(3.0, 0.01 * n_docs)
        rng = random.Random(seed)
        made = []
        for s in rng.sample(list(specs), min(SAMPLE_TOOLS, len(specs))):
            masked = set(words(s.card.name)) | set(words(s.id))
            kept = [
                w
                for w in s.card.summary.split()
                if terms(w)
                and not set(words(w)) & masked
                and all(df.get(t, 0) >= least for t in terms(w))
            ]
            if len(kept) >= 3:
                keep = sorted(rng.sample(range(len(kept)), max(3, len(kept) // 2)))
                made.append((" ".join(kept[i] for i in keep), s.id))
    return [EvalQuery(str(i), text, (tid,), kind) for i, (text, tid) in enumerate(made)]


def shift_of(z: Any, right: Any) -> float:
    """``fit_shift`` of confidences σ(z) against outcomes."""
    from toolscout.discovery.confidence import fit_shift, sigmoid

    return fit_shift(sigmoid(z).tolist(), (right > 0.5).tolist())


def mapped(form: str, pseudo: Sequence[float], real: Sequence[float], p: float) -> float:
    """The shift ``form`` predicts from pseudo shift ``p``, fitted on the other sets'
    (``pseudo``, ``real``) pairs by least squares; within ±MAX_SHIFT."""
    import numpy as np

    from toolscout.discovery.confidence import MAX_SHIFT

    x, y = np.asarray(pseudo), np.asarray(real)
    if form == "a*p+b":
        a, b = (float(v) for v in np.polyfit(x, y, 1))
    elif form == "a*p":
        a, b = float(x @ y / max(float(x @ x), 1e-9)), 0.0
    else:
        a, b = 1.0, 0.0
    return float(np.clip(a * p + b, -MAX_SHIFT, MAX_SHIFT))


def measure(
    rows: Mapping[str, tuple[Any, Any]],
    pseudo: Mapping[str, Mapping[str, tuple[Any, Any]]],
    models: Mapping[str, Sequence[float]],
) -> dict[str, Any]:
    """Per set: real and pseudo shifts, and each kind and form's held-out ECE and max gap."""
    import numpy as np

    from toolscout.discovery.confidence import sigmoid
    from toolscout.evaluate.metrics import reliability

    def rel(z: Any, y: Any) -> tuple[float, float]:
        r = reliability(list(zip(sigmoid(z).tolist(), (y > 0.5).tolist(), strict=True)))
        return r["ece"], r["max_gap"]

    names = sorted(rows)
    z = {n: rows[n][0] @ np.asarray(models[n]) for n in names}
    real = {n: shift_of(z[n], rows[n][1]) for n in names}
    out: dict[str, Any] = {
        n: {
            "real_shift": real[n],
            "before": rel(z[n], rows[n][1]),
            # the set's own shift on its own queries: what its log would teach (not held out)
            "own_log": rel(z[n] + real[n], rows[n][1]),
        }
        for n in names
    }
    for kind, by_set in pseudo.items():
        p = {n: shift_of(by_set[n][0] @ np.asarray(models[n]), by_set[n][1]) for n in names}
        corr = float(np.corrcoef([p[n] for n in names], [real[n] for n in names])[0, 1])
        for n in names:
            y = by_set[n][1]
            out[n].setdefault("pseudo", {})[kind] = {
                "n": len(y), "right": round(float(y.mean()), 3),
                "confidence": round(float(sigmoid(by_set[n][0] @ np.asarray(models[n])).mean()), 3),
                "shift": p[n], "corr_over_sets": round(corr, 3),
            }  # fmt: skip
            others = [o for o in names if o != n]
            for form in FORMS:
                s = mapped(form, [p[o] for o in others], [real[o] for o in others], p[n])
                ece, gap = rel(z[n] + s, rows[n][1])
                out[n].setdefault("after", {})[f"{kind} {form}"] = [round(s, 3), ece, gap]
    return out


def twin_cosines(cat: Any, queries: Sequence[Any], settings: Any) -> list[list[float]]:
    """Per query shown a tool (``quality.shown_selections``: the rows of
    ``quality.confidence_rows``), the card cosines of the shown first tool to the ranker's
    other first ten, largest first."""
    import numpy as np

    out: list[list[float]] = []
    for _, _, _, sel in quality.shown_selections(cat, queries, settings):
        top = sel.chosen[0].id
        others = [c.id for c in sel.retrieval.candidates[:10] if c.id != top]
        vec = cat.store.card_vectors([top, *others], cat.embedder.model_id)
        t = vec.get(top)
        if t is None:
            out.append([])
            continue
        cos = [
            float(np.dot(t, vec[o]) / (np.linalg.norm(t) * np.linalg.norm(vec[o]) + 1e-12))
            for o in others
            if o in vec
        ]
        out.append(sorted(cos, reverse=True))
    return out


def twin_column(cosines: Sequence[Sequence[float]], how: str) -> Any:
    """One :data:`TWINS` reading of each row's cosines, as a column."""
    import numpy as np

    def one(c: Sequence[float]) -> float:
        if how == "max":
            return max(c, default=0.0)
        if how in ("n90", "n80"):
            return float(np.log1p(sum(v >= int(how[1:]) / 100 for v in c)))
        return float(np.mean([*c, 0.0, 0.0, 0.0][:3]))

    return np.array([one(c) for c in cosines], dtype=np.float64)[:, None]


def measure_twins(
    rows: Mapping[str, tuple[Any, Any]],
    negatives: Mapping[str, Any],
    cosines: Mapping[str, tuple[Any, Any]],
) -> dict[str, Any]:
    """Each :data:`TWINS` reading added to the confidence inputs, the model refitted
    leave-one-set-out (``quality.fit_confidence_without``): each set's held-out ECE and max
    gap, and the new input's weight, against the model without it."""
    import numpy as np

    out: dict[str, Any] = {}
    for how in (None, *TWINS):
        r, neg = {}, {}
        for n in rows:
            pos, nos = cosines[n]
            x, y = rows[n]
            r[n] = (x if how is None else np.hstack([x, twin_column(pos, how)]), y)
            neg[n] = (
                negatives[n] if how is None else np.hstack([negatives[n], twin_column(nos, how)])
            )
        for n in sorted(rows):
            model = quality.fit_confidence_without(r, neg, n)
            rel = quality.rows_reliability(r[n], model)
            weight = None if how is None else round(float(model[-1]), 3)
            out.setdefault(n, {})[how or "none"] = [rel["ece"], rel["max_gap"], weight]
    return out


def table(result: Mapping[str, Any]) -> list[str]:
    """The markdown table of :func:`measure`'s result."""
    names = sorted(result)
    lines = [
        "| set | real shift | "
        + " | ".join(f"{k} pseudo shift (right/conf)" for k in KINDS)
        + " |",
        "|---|---|" + "---|" * len(KINDS),
    ]
    for n in names:
        r = result[n]
        cells = [
            f"{r['pseudo'][k]['shift']:+.2f} ({r['pseudo'][k]['right']:.2f}/"
            f"{r['pseudo'][k]['confidence']:.2f})"
            for k in KINDS
        ]
        lines.append(f"| {n} | {r['real_shift']:+.2f} | " + " | ".join(cells) + " |")
    lines += ["", "| mapping | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    before = " | ".join(
        f"{result[n]['before'][0]:.3f} / {result[n]['before'][1]:.2f}" for n in names
    )
    lines.append(f"| none (shipped) | {before} |")
    own = " | ".join(
        f"{result[n]['own_log'][0]:.3f} / {result[n]['own_log'][1]:.2f}" for n in names
    )
    lines.append(f"| the set's own log shift (in-set, not at index time) | {own} |")
    for key in result[names[0]]["after"]:
        cells = []
        for n in names:
            s, ece, gap = result[n]["after"][key]
            cells.append(f"{ece:.3f} / {gap:.2f} ({s:+.2f})")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--limit", type=int, default=None, help="N queries per set (seeded)")
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--stages", type=Path, required=True, help="quality.py's stages")
    parser.add_argument(
        "--blends", type=lambda v: tuple(float(x) for x in v.split(",")), default=None
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(args_list)

    from rich.console import Console

    from toolscout.embed.minilm import MiniLMEmbedder

    console = Console(stderr=True)
    embedder = MiniLMEmbedder()
    sets = quality.bench_sets(args.bench)
    stages = quality.Stages(args.stages, args.limit)
    fits, _ = quality.fit_constants(
        sets, args.cache, args.limit, embedder, console, args.blends, stages
    )
    rows: dict[str, tuple[Any, Any]] = {}
    negatives: dict[str, Any] = {}
    pseudo: dict[str, dict[str, tuple[Any, Any]]] = {k: {} for k in KINDS}
    for d in sets:
        held = quality.held_settings(fits[d.name])

        def real(d: Path = d, held: Any = held) -> Any:  # quality.py's own step, as it keys it
            with quality.opened_set(d, args.cache, args.limit, embedder) as (cat, scored):
                return (
                    quality.confidence_rows(cat, scored, held),
                    quality.confidence_rows(cat, quality.no_tool_requests(cat), held)[0],
                )

        rows[d.name], negatives[d.name] = stages.get("confidence", d.name, fits[d.name], real)
        for kind in KINDS:

            def run(d: Path = d, held: Any = held, kind: str = kind) -> Any:
                with quality.opened_set(d, args.cache, args.limit, embedder) as (cat, _):
                    return quality.confidence_rows(cat, pseudo_requests(cat, kind), held)

            key = [fits[d.name], SEED_OFFSET]
            pseudo[kind][d.name] = stages.get(f"pseudo-{kind}", d.name, key, run)
            console.print(f"{d.name}: {kind} pseudo-queries {len(pseudo[kind][d.name][1])}")
    models = {n: fits[n]["confidence"] for n in rows}
    result = measure(rows, pseudo, models)
    print("\n".join(table(result)))
    cosines: dict[str, tuple[Any, Any]] = {}
    for d in sets:
        held = quality.held_settings(fits[d.name])

        def twins(d: Path = d, held: Any = held) -> Any:
            with quality.opened_set(d, args.cache, args.limit, embedder) as (cat, scored):
                return (
                    twin_cosines(cat, scored, held),
                    twin_cosines(cat, quality.no_tool_requests(cat), held),
                )

        cosines[d.name] = stages.get("twins", d.name, fits[d.name], twins)
        console.print(f"{d.name}: twins read")
    twin = measure_twins(rows, negatives, cosines)
    print("\n| input added | " + " | ".join(sorted(twin)) + " |")
    print("|---|" + "---|" * len(twin))
    for how in ("none", *TWINS):
        cells = []
        for n in sorted(twin):
            ece, gap, w = twin[n][how]
            cells.append(f"{ece:.3f} / {gap:.2f}" + ("" if w is None else f" (w {w:+.2f})"))
        print(f"| {how} | " + " | ".join(cells) + " |")
    split = []
    for n in sorted(twin):
        y = rows[n][1]
        near = twin_column(cosines[n][0], "max")[:, 0] >= 0.9
        twin[n]["right_with_twin_0.9"] = [
            round(float(y[near].mean()), 3) if near.any() else None,
            round(float(y[~near].mean()), 3) if (~near).any() else None,
            int(near.sum()),
        ]
        a, b, k = twin[n]["right_with_twin_0.9"]
        split.append(f"{n}: {a} with ({k} rows) / {b} without")
    print(
        "\nfirst tool right, with a twin >= 0.9 among the ranker's first ten / without: "
        + "; ".join(split)
    )
    corr = {k: result[sorted(result)[0]]["pseudo"][k]["corr_over_sets"] for k in KINDS}
    print(
        "pseudo / real shift correlation over the sets: "
        + ", ".join(f"{k} {v:+.2f}" for k, v in corr.items())
    )
    if args.json is not None:
        command = quality.command_line("benchmarks/confidence_prior.py", args_list)
        quality.write_results(args.json, command, sets=result, twins=twin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
