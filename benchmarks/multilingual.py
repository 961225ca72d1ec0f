"""Recall@5 per language: dev-set requests and their translations, default vs multilingual.

``benchmarks/multilingual/queries.jsonl`` holds 300 requests from two dev sets (metatool,
toolalpaca) in English and translated into French, German, Spanish, Portuguese,
Japanese and Chinese, gold unchanged (its README says how it was made). Each dev set's
catalog (``--bench``/<set>/tools.jsonl, as ``toolscout eval`` reads it) is indexed once
per embedder; every language's requests then run through the product default (the
``hybrid`` strategy) and through dense retrieval alone. Prints a table and writes JSON,
with each language's gap to English and a 90% interval of it (a paired bootstrap over
the original requests: one request is 0.0033 of 300).

    PYTHONPATH=src .venv/bin/python benchmarks/multilingual.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import command_line, write_results  # noqa: E402
from toolscout.embed import EMBEDDERS, make_embedder  # noqa: E402
from toolscout.evaluate.harness import run  # noqa: E402

QUERIES = ROOT / "benchmarks" / "multilingual" / "queries.jsonl"
DEFAULT_BENCH = ROOT.parent / "shared" / "bench"
LANGS = ("en", "fr", "de", "es", "pt", "ja", "zh")
STRATEGIES = ("hybrid", "dense")
#: a match cosine no pair of words reaches: the bridge carries nothing over
OFF = 2.0
#: resamples of the paired bootstrap, and its seed
BOOTSTRAP = 5000
SEED = 23


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def measure(
    bench: Path,
    embedders: Sequence[str],
    cache: Path,
    limit: int | None,
    strategies: Sequence[str] = STRATEGIES,
    langs: Sequence[str] = LANGS,
) -> dict[str, Any]:
    """recall@5 and complete@5 by embedder, strategy and language (queries pooled over sets;
    ``langs``: these languages only), with each request's recall@5 by source set
    (``per_request``: what :func:`fit` reads)."""
    rows = _rows(QUERIES)
    wanted = set(langs)
    by_set: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_set[r["source"]][r["lang"]].append(r)
    out: dict[str, Any] = {}
    for name in embedders:
        sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        per_request: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        seconds: dict[str, float] = {}
        for source, by_lang in sorted(by_set.items()):
            embedder = make_embedder(name)
            db = cache / f"{source}.{name}.db"
            for lang in (lang for lang in LANGS if lang in wanted):
                picked = by_lang[lang][:limit] if limit else by_lang[lang]
                qfile = cache / f"{source}.{lang}.jsonl"
                qfile.write_text(
                    "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in picked),
                    encoding="utf-8",
                )
                start = time.perf_counter()
                report = run(
                    bench / source / "tools.jsonl",
                    qfile,
                    strategies=strategies,
                    ks=(5,),
                    db=db,
                    embedder=embedder,
                    failures=len(picked),
                )
                seconds[f"{source}/{lang}"] = round(time.perf_counter() - start, 1)
                n = report["n_scored"]
                missed = _missed(report["failures"])
                for r in picked:
                    for strategy in strategies:
                        lost = missed.get((strategy, r["id"]), 0)
                        per_request[strategy][r["of"]][lang] = 1 - lost / len(r["gold"])
                for strategy, m in report["strategies"].items():
                    sums[strategy][lang] += [m["recall@5"] * n, m["complete@5"] * n, n]
                    print(f"{name} {source} {lang} {strategy}: {m['recall@5']:.3f}", flush=True)
        out[name] = {
            "seconds": seconds,
            "strategies": {
                strategy: {
                    lang: {
                        "n": int(sum(v[2::3])),
                        "recall@5": round(sum(v[0::3]) / sum(v[2::3]), 3),
                        "complete@5": round(sum(v[1::3]) / sum(v[2::3]), 3),
                    }
                    for lang, v in per_lang.items()
                }
                for strategy, per_lang in sums.items()
            },
            "gap_to_en": {
                strategy: gaps(by_request) for strategy, by_request in per_request.items()
            },
            "per_request": {strategy: dict(by) for strategy, by in per_request.items()},
        }
    return out


def _missed(failures: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """(strategy, request id) -> how many gold tools were not in the first five."""
    return {(f["strategy"], f["id"]): len(f["lost_at"]) for f in failures}


def gaps(by_request: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Each language's recall@5 gap to the same requests in English, with a 90% interval
    (paired bootstrap over the original requests, seeded)."""
    rng = np.random.default_rng(SEED)
    originals = sorted(r for r, langs in by_request.items() if "en" in langs)
    out: dict[str, dict[str, float]] = {}
    for lang in LANGS[1:]:
        pairs = [o for o in originals if lang in by_request[o]]
        if not pairs:
            continue
        diff = np.array([by_request[o]["en"] - by_request[o][lang] for o in pairs])
        draws = diff[rng.integers(0, len(diff), (BOOTSTRAP, len(diff)))].mean(axis=1)
        low, high = np.percentile(draws, [5, 95])
        out[lang] = {"gap": round(float(diff.mean()), 3), "low": round(float(low), 3),
                     "high": round(float(high), 3)}  # fmt: skip
    return out


def non_english_mean(by_request: Mapping[str, Mapping[str, float]], source: str) -> float:
    """The mean recall@5 of the translated requests (every language but English) of one
    source set."""
    got = [v for o, langs in by_request.items() if o.split(":", 1)[0] == source
           for lang, v in langs.items() if lang != "en"]  # fmt: skip
    return float(np.mean(got)) if got else 0.0


#: the bridge's constants a grid sets (discovery/crosslingual.py), in a grid key's order
KNOBS = (
    "MATCH_COSINE",
    "MERGE",
    "STOP_MARGIN",
    "MIN_CSLS",
    "MIN_CSLS_UNSPACED",
    "MIN_WORD_LETTERS",
    "REENCODE",
    "MERGE_AGREE",
    "REMOVE",
)
#: the knobs of discovery/languagespace.py (the others are discovery/crosslingual.py's)
SPACE_KNOBS = frozenset({"REMOVE"})
#: MIN_CSLS in a grid key when the hubness test is off (no CSLS score is this low)
NO_CSLS = -9.0
Key = tuple[float, ...]


def _label(key: Key) -> str:
    return "/".join(f"{v:g}" for v in key)


def _fewest_changes(v: Key) -> tuple[float, ...]:
    """A tie-break: the highest cosine, no merge, the widest stop margin, the highest CSLS
    floors, the longest shortest word, no second encoding (the fewest words carried over,
    the fewest retrievals and encoder runs), the plain merge (the better reading alone),
    the least of the language's component taken out."""
    return v[0], -v[1], v[2], v[3], v[4], v[5], -v[6], -v[7], -v[8]


def fit(grid: Mapping[Key, Mapping[str, Mapping[str, float]]], base: Key) -> dict[str, Any]:
    """Two folds over the source sets: the constants (:data:`KNOBS`) with the best
    translated mean on one set's requests (ties: :func:`_fewest_changes`), and what they
    give on the other's, against ``base`` (the constants shipped before the grid)."""
    sources = sorted({o.split(":", 1)[0] for by in grid.values() for o in by})
    folds: dict[str, Any] = {}
    for fitted in sources:
        scores = {value: non_english_mean(by, fitted) for value, by in grid.items()}
        chosen = max(scores, key=lambda v: (round(scores[v], 6), *_fewest_changes(v)))
        for held in sources:
            if held == fitted:
                continue
            folds[f"fit {fitted}, report {held}"] = {
                "chosen": _label(chosen),
                "fit_scores": {_label(v): round(x, 4) for v, x in sorted(scores.items())},
                "held_base": round(non_english_mean(grid[base], held), 4),
                "held_chosen": round(non_english_mean(grid[chosen], held), 4),
            }
    return folds


def _value(shipped: Any) -> float:
    """A shipped constant as a grid key holds it."""
    return NO_CSLS if shipped is None else float(shipped)


def _module(knob: str) -> Any:
    """The module that holds ``knob``."""
    from toolscout.discovery import crosslingual, languagespace

    return languagespace if knob in SPACE_KNOBS else crosslingual


def _set(module: Any, knob: str, value: float) -> None:
    if knob == "MERGE":
        setattr(module, knob, bool(value))
    elif knob in ("MIN_WORD_LETTERS", "REENCODE"):
        setattr(module, knob, int(value))
    elif knob.startswith("MIN_CSLS"):
        setattr(module, knob, None if value <= NO_CSLS else float(value))
    else:
        setattr(module, knob, float(value))


def run_grid(
    bench: Path,
    cache: Path,
    limit: int | None,
    axes: Sequence[Sequence[float]],
    done: Any = None,
    langs: Sequence[str] = LANGS,
) -> dict[str, Any]:
    """The default (hybrid) strategy with the multilingual option at each combination of
    the bridge's constants (``axes``, in :data:`KNOBS` order; first the shipped ones), per
    language and per request, and the fit; ``done(partial)`` after each combination (a run
    cut short keeps what it measured)."""
    import itertools

    shipped = tuple(getattr(_module(k), k) for k in KNOBS)
    base: Key = tuple(_value(v) for v in shipped)
    out: dict[str, Any] = {}
    grid: dict[Key, Any] = {}
    values = [base, *(v for v in itertools.product(*axes) if tuple(v) != base)]
    try:
        for value in values:
            for knob, v in zip(KNOBS, value, strict=True):
                _set(_module(knob), knob, v)
            got = measure(bench, ["multilingual-e5-small"], cache, limit, ("hybrid",), langs)
            res = got["multilingual-e5-small"]
            grid[tuple(value)] = res["per_request"]["hybrid"]
            out[_label(value)] = {k: res[k] for k in ("strategies", "gap_to_en", "seconds")}
            out[_label(value)]["per_request"] = res["per_request"]["hybrid"]
            if done is not None:
                done(_fitted(out, grid, base))
    finally:
        for knob, v in zip(KNOBS, shipped, strict=True):
            setattr(_module(knob), knob, v)
    return _fitted(out, grid, base)


def _fitted(out: dict[str, Any], grid: Mapping[Key, Any], base: Key) -> dict[str, Any]:
    return {
        "knobs": list(KNOBS),
        "values": out,
        "folds": fit(grid, base),
        "language_folds": fit_languages(grid, base),
    }


def language_mean(by_request: Mapping[str, Mapping[str, float]], langs: Set[str]) -> float:
    """The mean recall@5 of the requests in ``langs``, over every source set."""
    got = [v for by in by_request.values() for lang, v in by.items() if lang in langs]
    return float(np.mean(got)) if got else 0.0


def fit_languages(
    grid: Mapping[Key, Mapping[str, Mapping[str, float]]], base: Key
) -> dict[str, Any]:
    """Leave one language out: for each translated language, the constants with the best
    mean recall@5 over the other translated languages measured (ties:
    :func:`_fewest_changes`), and what they give on the held-out one against ``base``."""
    measured = {lang for by in grid.values() for langs in by.values() for lang in langs}
    translated = [lang for lang in LANGS[1:] if lang in measured]
    folds: dict[str, Any] = {}
    for held in translated:
        others = set(translated) - {held}
        if not others:
            continue
        scores = {value: language_mean(by, others) for value, by in grid.items()}
        chosen = max(scores, key=lambda v: (round(scores[v], 6), *_fewest_changes(v)))
        folds[held] = {
            "chosen": _label(chosen),
            "others": round(scores[chosen], 4),
            "held_base": round(language_mean(grid[base], {held}), 4),
            "held_chosen": round(language_mean(grid[chosen], {held}), 4),
        }
    return folds


def latency(bench: Path, cache: Path, limit: int) -> dict[str, Any]:
    """ms per discovery with the option on each translated request (``limit`` per set and
    language, the first ones), the bridge off and on in turn: on with the word vectors of
    the requests before it kept ("warm") and with none ("cold"). No query vector is kept
    between discoveries; the catalog's lexicon is built once, timed apart."""
    from toolscout.discovery import crosslingual
    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.search import clear_query_cache
    from toolscout.evaluate.harness import eval_principal

    by_set: dict[str, list[str]] = defaultdict(list)
    taken: dict[tuple[str, str], int] = defaultdict(int)
    for r in _rows(QUERIES):
        if r["lang"] != "en" and taken[(r["source"], r["lang"])] < limit:
            taken[(r["source"], r["lang"])] += 1
            by_set[r["source"]].append(r["query"])
    shipped = crosslingual.MATCH_COSINE
    times: dict[str, list[float]] = {"off": [], "cold": [], "warm": []}
    built: dict[str, float] = {}
    try:
        for source, queries in sorted(by_set.items()):
            # the catalog as measure() indexed it (the same file)
            name = "multilingual-e5-small"
            with Catalog.open(cache / f"{source}.{name}.db", log=False) as cat:
                principal = eval_principal(cat)
                df, _ = cat.store.document_frequency()
                start = time.perf_counter()
                crosslingual._LEXICONS.get(cat.retriever(), df)
                built[source] = round(time.perf_counter() - start, 2)
                words = crosslingual._WORD_VECTORS
                for i, query in enumerate(queries):
                    # "warm": the word vectors of the requests before it kept (a process
                    # that has served them); "cold": none kept
                    order = ("warm", "off", "cold") if i % 2 else ("cold", "off", "warm")
                    for which in order:
                        crosslingual.MATCH_COSINE = OFF if which == "off" else shipped
                        clear_query_cache()
                        kept = words.snapshot()
                        if which == "cold":
                            words.clear()
                        start = time.perf_counter()
                        cat.discover(query, principal, k=5, tier="progressive", record=False)
                        times[which].append((time.perf_counter() - start) * 1000)
                        if which == "cold":
                            words.restore(kept)
    finally:
        crosslingual.MATCH_COSINE = shipped
    return {
        "lexicon_seconds": built,
        "ms": {
            which: {f"p{p}": round(float(np.percentile(v, p)), 1) for p in (50, 90, 99)}
            | {"n": len(v)}
            for which, v in times.items()
        },
    }


def table(results: dict[str, Any]) -> str:
    """One row per embedder and strategy, recall@5 per language, and the largest gap to en."""
    head = "| embedder | strategy | " + " | ".join(LANGS) + " | worst gap to en |"
    lines = [head, "|" + "---|" * (len(LANGS) + 3)]
    for name, res in results.items():
        for strategy, per_lang in res["strategies"].items():
            en = per_lang["en"]["recall@5"]
            gap = max(en - per_lang[lang]["recall@5"] for lang in LANGS[1:])
            cells = " | ".join(f"{per_lang[lang]['recall@5']:.3f}" for lang in LANGS)
            label = "default (hybrid)" if strategy == "hybrid" else "dense only"
            lines.append(f"| {name} | {label} | {cells} | {gap:+.3f} |")
    lines += ["", "gap to en, 90% interval (paired bootstrap over the original requests):", ""]
    lines.append("| embedder | strategy | " + " | ".join(LANGS[1:]) + " |")
    lines.append("|" + "---|" * (len(LANGS) + 1))
    for name, res in results.items():
        for strategy, per_lang in res.get("gap_to_en", {}).items():
            label = "default (hybrid)" if strategy == "hybrid" else "dense only"
            cells = " | ".join(
                f"{g['gap']:+.2f} [{g['low']:+.2f}, {g['high']:+.2f}]"
                for lang in LANGS[1:]
                if (g := per_lang.get(lang))
            )
            lines.append(f"| {name} | {label} | {cells} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH, help="directory of sets")
    parser.add_argument(
        "--embedder", action="append", choices=list(EMBEDDERS), help="repeatable (default: all)"
    )
    parser.add_argument("--limit", type=int, default=None, help="N requests per set and language")
    parser.add_argument(
        "--langs",
        type=lambda text: text.split(","),
        default=None,
        metavar="L1,L2,...",
        help="these languages only (default: all)",
    )
    parser.add_argument("--cache", type=Path, default=None, help="keep indexed sets here")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/multilingual.json")
    parser.add_argument(
        "--strategy", action="append", choices=STRATEGIES, help="repeatable (default: both)"
    )
    parser.add_argument(
        "--fit-bridge",
        type=lambda text: [float(v) for v in text.split(",")],
        default=None,
        metavar="C1,C2,...",
        help="fit the cross-lingual bridge's constants (two folds over the sets) instead",
    )
    for flag, what in (
        ("merge", "merge flags (0, 1)"),
        ("stop-margin", "stop-word margins"),
        ("csls", f"CSLS floors, other scripts ({NO_CSLS:g}: none)"),
        ("csls-unspaced", f"CSLS floors, Han and Kana ({NO_CSLS:g}: none)"),
        ("min-letters", "shortest words carried over, spaced scripts"),
        ("reencode", "re-encoding modes (0, 1, 2)"),
        ("agree", "shares of the other reading added in the merge"),
        ("remove", "shares of the language's component taken out of the vector"),
    ):
        parser.add_argument(
            f"--bridge-{flag}",
            type=lambda text: [float(v) for v in text.split(",")],
            default=None,
            metavar="V1,V2,...",
            help=f"with --fit-bridge: the {what} to try (default: the shipped one)",
        )
    parser.add_argument(
        "--latency",
        type=int,
        default=None,
        metavar="N",
        help="time N translated requests per set and language, bridge on and off, instead"
        " (reads the catalogs --cache kept)",
    )
    args = parser.parse_args(args_in)
    if args.latency:
        if args.cache is None:
            parser.error("--latency reads the catalogs a run with --cache kept")
        timed = latency(args.bench, args.cache, args.latency)
        print(json.dumps(timed, indent=2))
        command = command_line("benchmarks/multilingual.py", args_in)
        write_results(args.json, command, **timed)
        return 0
    embedders = args.embedder or list(EMBEDDERS)
    with tempfile.TemporaryDirectory(prefix="toolscout-ml-") as tmp:
        cache = args.cache or Path(tmp)
        cache.mkdir(parents=True, exist_ok=True)
        if args.fit_bridge:
            from toolscout.discovery import crosslingual as cl
            from toolscout.discovery import languagespace

            axes = [
                args.fit_bridge,
                args.bridge_merge or [float(cl.MERGE)],
                args.bridge_stop_margin or [cl.STOP_MARGIN],
                args.bridge_csls or [NO_CSLS if cl.MIN_CSLS is None else cl.MIN_CSLS],
                args.bridge_csls_unspaced
                or [NO_CSLS if cl.MIN_CSLS_UNSPACED is None else cl.MIN_CSLS_UNSPACED],
                args.bridge_min_letters or [float(cl.MIN_WORD_LETTERS)],
                args.bridge_reencode or [float(cl.REENCODE)],
                args.bridge_agree or [cl.MERGE_AGREE],
                args.bridge_remove or [_value(languagespace.REMOVE)],
            ]
            command = command_line("benchmarks/multilingual.py", args_in)

            def done(partial: dict[str, Any]) -> None:
                where = str(QUERIES.relative_to(ROOT))
                write_results(args.json, command, queries=where, **partial)

            langs = args.langs or list(LANGS)
            fitted = run_grid(args.bench, cache, args.limit, axes, done, langs)
            print(json.dumps(fitted["folds"], indent=2))
            print(json.dumps(fitted["language_folds"], indent=2))
            for label, got in fitted["values"].items():
                cells = got["strategies"]["hybrid"]
                print(label, " ".join(f"{k} {v['recall@5']:.3f}" for k, v in cells.items()))
            print(f"wrote {args.json}")
            return 0
        results = measure(
            args.bench, embedders, cache, args.limit, args.strategy or STRATEGIES,
            args.langs or LANGS,
        )  # fmt: skip
    text = table(results)
    print(text)
    write_results(
        args.json,
        command_line("benchmarks/multilingual.py", args_in),
        queries=str(QUERIES.relative_to(ROOT)),
        results=results,
        table=text,
    )
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
