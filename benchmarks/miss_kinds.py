"""Where the default loses gold tools on the dev sets, by kind of miss (issue 23).

For every query of each set whose gold is not all in the held-out default's top 5 (the
harness's path: ``Catalog.discover(k=10, tier="progressive")`` with an all-scopes
principal, as ``benchmarks/quality.py`` runs it), each gold tool missing from the top 5
is put in one *stage* — where it was lost:

- ``refused``: the request was refused (too long, empty);
- ``abstained``: the default showed nothing (low confidence);
- ``never retrieved``: in neither the whole request's BM25 pool nor its dense pool, and
  not a candidate of any part or reformulation;
- ``dedupe``: in the top 5 with the near-duplicate rule off, not with it on;
- ``displaced``: among the retrieval's first 5 candidates but pushed out of the shortlist's
  first 5 by what selection adds in front (exact mentions, named tools, prerequisites);
- ``ranked 6-10`` / ``ranked 11+``: retrieved, ranked below the fifth.

and described by simple, general properties of the gold card and the request (the
card's summary empty/derived, short, shared word for word with another card; the
request's length against what the encoder reads; whether the gold name's words are in
the request verbatim, after stemming, or not at all; whether the terms it shares with
the card were pruned as frequent; whether the card's longest view is past the encoder's
128 tokens; whether BM25 or dense alone found it). Each property is also counted over
the gold tools the default *found*, so a property over-represented among misses stands
out. Only aggregate counts are printed and written: a diagnosis of the whole set, never
of single queries.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/miss_kinds.py --cache DIR
[--fits benchmarks/results/quality.json] [--limit N] [--json PATH]``
(``--fits``: the held-out constants per set, as ``quality.py --fits-only`` wrote them;
without a fit for a set, the shipped default runs.)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality

ROOT = Path(__file__).resolve().parents[1]
K = 5
#: where a missing gold tool was lost, in the order they are tested
STAGES = (
    "refused",
    "abstained",
    "never retrieved",
    "dedupe",
    "displaced",
    "ranked 6-10",
    "ranked 11+",
)
#: a summary of fewer words than this is "short"
SHORT_SUMMARY_WORDS = 6
#: the encoder reads this many tokens of a text (MiniLM's truncation)
ENCODER_TOKENS = 128
#: request length buckets, in words (the encoder reads the first 64: queryvectors.py)
LENGTHS = ((0, 10, "≤10 words"), (11, 30, "11-30 words"), (31, 64, "31-64 words"),
           (65, 10**9, ">64 words"))  # fmt: skip
NAME_MATCH = ("verbatim", "stemmed", "partly", "none")


@dataclass(frozen=True, slots=True)
class GoldView:
    """What one gold tool's fate reads of one query's run (no query text is kept)."""

    shown: tuple[str, ...]  # the default's shortlist (top 10)
    no_dedupe: tuple[str, ...]  # the same selection with the near-duplicate rule off
    candidates: tuple[str, ...]  # the retrieval's order before selection
    lexical: frozenset[str]  # the whole request's BM25 pool
    dense: frozenset[str]  # its dense pool
    refused: bool = False
    abstained: bool = False
    parts: int = 0  # how many parts the request was read in (0: whole)
    exact: frozenset[str] = frozenset()  # the tools it names verbatim


def stage_of(gold: str, v: GoldView) -> str | None:
    """Where ``gold`` was lost (one of :data:`STAGES`), or None when it is in the top K."""
    if gold in v.shown[:K]:
        return None
    if v.refused:
        return "refused"
    if v.abstained:
        return "abstained"
    if gold not in v.lexical and gold not in v.dense and gold not in v.candidates:
        return "never retrieved"
    if gold in v.no_dedupe[:K]:
        return "dedupe"
    if gold in v.candidates[:K]:
        return "displaced"
    if gold in v.shown[:10] or gold in v.candidates[:10]:
        return "ranked 6-10"
    return "ranked 11+"


def found_by(gold: str, v: GoldView) -> str:
    """Which whole-request pool held the gold tool: both, bm25 only, dense only, neither."""
    lx, dn = gold in v.lexical, gold in v.dense
    return "both" if lx and dn else "bm25 only" if lx else "dense only" if dn else "neither"


def length_bucket(n_words: int) -> str:
    return next(label for low, high, label in LENGTHS if low <= n_words <= high)


def name_match(name_words: Sequence[str], name_terms: Sequence[str], query_words: Iterable[str],
               query_terms: Iterable[str]) -> str:  # fmt: skip
    """How the gold name's words appear in the request: all verbatim, all after stemming,
    some, or none (stop words and one-letter pieces aside)."""
    qw, qt = set(query_words), set(query_terms)
    nt = [t for t in name_terms if t]
    if not nt:
        return "none"
    if all(w in qw for w in name_words):
        return "verbatim"
    if all(t in qt for t in nt):
        return "stemmed"
    return "partly" if any(t in qt for t in nt) else "none"


@dataclass(slots=True)
class Tally:
    """Counts of one set: stages of the missing gold, and every property over the missing
    and the found gold tools (the second is the baseline the first is read against)."""

    queries: int = 0
    missed_queries: int = 0
    gold: int = 0
    recall: float = 0.0  # the sum of the queries' recall@K (the mean is over ``queries``)
    complete: int = 0  # queries with every gold tool in the top K
    stages: Counter[str] = field(default_factory=Counter)
    missed: Counter[str] = field(default_factory=Counter)
    found: Counter[str] = field(default_factory=Counter)
    by_stage: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, stage: str | None, props: Iterable[str]) -> None:
        self.gold += 1
        props = list(props)
        if stage is None:
            self.found.update(props)
            return
        self.stages[stage] += 1
        self.missed.update(props)
        self.by_stage.setdefault(stage, Counter()).update(props)

    def to_json(self) -> dict[str, Any]:
        n_missed = sum(self.stages.values())
        return {
            "queries": self.queries,
            "queries_missing_gold": self.missed_queries,
            "gold": self.gold,
            "gold_missed": n_missed,
            f"recall@{K}": round(self.recall / max(self.queries, 1), 4),
            f"complete@{K}": round(self.complete / max(self.queries, 1), 4),
            "stages": {s: self.stages.get(s, 0) for s in STAGES},
            "properties": {
                p: {"missed": self.missed.get(p, 0), "found": self.found.get(p, 0)}
                for p in sorted(set(self.missed) | set(self.found))
            },
            "by_stage": {s: dict(sorted(c.items())) for s, c in sorted(self.by_stage.items())},
        }


def share(n: int, of: int) -> str:
    return f"{n / of:.0%}" if of else "–"


def render(tallies: Mapping[str, Mapping[str, Any]]) -> str:
    """Two markdown tables: the stages per set, and each property's share among the missed
    gold against its share among the found gold (per set: missed% / found%)."""
    names = list(tallies)
    out = [
        "| set | queries | missing gold (queries) | gold missed | "
        + " | ".join(STAGES) + " |",
        "|---|---|---|---|" + "---|" * len(STAGES),
    ]  # fmt: skip
    for n in names:
        t = tallies[n]
        m = t["gold_missed"]
        cells = [f"{t['stages'][s]} ({share(t['stages'][s], m)})" for s in STAGES]
        out.append(
            f"| {n} | {t['queries']} | {t['queries_missing_gold']} | {m} of {t['gold']} | "
            + " | ".join(cells) + " |"
        )  # fmt: skip
    props = sorted({p for n in names for p in tallies[n]["properties"]})
    out += ["", "| property (missed % / found %) | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names)]  # fmt: skip
    for p in props:
        cells = []
        for n in names:
            t = tallies[n]
            c = t["properties"].get(p, {"missed": 0, "found": 0})
            found = t["gold"] - t["gold_missed"]
            cells.append(f"{share(c['missed'], t['gold_missed'])} / {share(c['found'], found)}")
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(out)


# -- running the product ------------------------------------------------------------------


class CardFacts:
    """Per-tool facts of one catalog computed once: summary words, shared summaries, the
    name's words and terms, the card's lexical terms, the longest view's token count."""

    def __init__(self, catalog: Any) -> None:
        from toolscout.cards import WarningKind, derived_summary
        from toolscout.discovery.indexing import card_views, lexical_fields
        from toolscout.discovery.lexical import terms, words
        from toolscout.embed.minilm import load_tokenizer

        tokenizer = load_tokenizer(100_000)
        specs = catalog.specs()
        summaries = Counter(" ".join(words(s.card.summary)) for s in specs)
        self.facts: dict[str, dict[str, Any]] = {}
        for s in specs:
            card = s.card
            key = " ".join(words(card.summary))
            views = card_views(s)
            longest = max((len(tokenizer.encode(v).ids) for v in views), default=0)
            self.facts[s.id] = {
                # a stored card keeps no warnings: its summary is the derived one's text
                "derived": any(w.kind is WarningKind.EMPTY_SUMMARY for w in s.warnings)
                or card.summary == derived_summary(card.name, s.parameters),
                "summary_words": len(words(card.summary)),
                "shared_summary": summaries[key] > 1,
                "name_words": [w for w in words(card.name) if len(w) > 1],
                "name_terms": terms(card.name),
                "card_terms": frozenset(
                    t for text in lexical_fields(s).values() for t in text.split()
                ),
                "over_128": longest > ENCODER_TOKENS,
                "full_view_over_128": len(tokenizer.encode(views[-1]).ids) > ENCODER_TOKENS,
            }


def properties(
    facts: Mapping[str, Any], v: GoldView, gold: str, text: str, kept: Sequence[str],
    dropped: Sequence[str], n_gold: int,
) -> list[str]:  # fmt: skip
    """The general properties of one (request, gold tool) pair, as labels."""
    from toolscout.discovery.lexical import terms, words

    qwords = words(text)
    named = name_match(facts["name_words"], facts["name_terms"], qwords, terms(text))
    out = [
        f"request {length_bucket(len(qwords))}",
        f"name in request: {named}",
        f"pools: {found_by(gold, v)}",
        "read in parts" if v.parts else "read whole",
    ]
    if gold in v.exact:
        out.append("gold named in the request")
    elif v.exact:
        out.append("another tool named in the request")
    if n_gold > K:
        out.append(f"more than {K} gold tools")
    if facts["derived"]:
        out.append("summary empty (derived)")
    elif facts["summary_words"] < SHORT_SUMMARY_WORDS:
        out.append(f"summary < {SHORT_SUMMARY_WORDS} words")
    if facts["shared_summary"]:
        out.append("summary shared with another card")
    if facts["over_128"]:
        out.append("a card view > 128 tokens")
    shared_kept = facts["card_terms"] & set(kept)
    shared_dropped = facts["card_terms"] & set(dropped)
    if not shared_kept and not shared_dropped:
        out.append("no term shared with the card")
    elif not shared_kept:
        out.append("shared terms all pruned as frequent")
    return out


def views(
    catalog: Any, queries: Sequence[Any], settings: Any
) -> Iterable[tuple[Any, Any, GoldView]]:
    """Each query with what :func:`stage_of` reads of the product's run of it."""
    from toolscout.discovery import pipeline
    from toolscout.discovery.search import parse_query
    from toolscout.errors import QueryError
    from toolscout.evaluate.harness import DEPTH, discover_once, eval_principal

    principal = eval_principal(catalog)
    ent = catalog.entitle(principal)
    df, n_docs = catalog.store.document_frequency()
    no_dedupe = settings.but(dedupe=False)
    for q in queries:
        try:
            parsed = parse_query(q.query, df, n_docs, settings)
        except QueryError:
            yield q, None, GoldView((), (), (), frozenset(), frozenset(), refused=True)
            continue
        out = discover_once(catalog, settings, q.query, principal)
        retrieval, _ = pipeline.retrieve_or_skip(catalog, parsed, ent, settings)
        exact = pipeline.exact_mentions(catalog, parsed, ent, settings)
        plain = pipeline.top_k(catalog, parsed, ent, retrieval, exact, DEPTH, no_dedupe)
        yield (
            q,
            parsed,
            GoldView(
                tuple(out.ranked),
                tuple(c.id for c in plain),
                tuple(c.id for c in retrieval.candidates),
                frozenset(retrieval.lexical_ids),
                frozenset(retrieval.dense_ids),
                abstained=not out.ranked,
                parts=len(retrieval.parts),
                exact=frozenset(exact),
            ),
        )


def tally_set(catalog: Any, queries: Sequence[Any], settings: Any) -> Tally:
    facts = CardFacts(catalog).facts
    t = Tally()
    for q, parsed, v in views(catalog, queries, settings):
        t.queries += 1
        kept = parsed.terms if parsed is not None else ()
        dropped = parsed.dropped if parsed is not None else ()
        stages = [stage_of(g, v) for g in q.gold]
        t.missed_queries += any(s is not None for s in stages)
        t.recall += sum(s is None for s in stages) / len(stages)
        t.complete += all(s is None for s in stages)
        for g, stage in zip(q.gold, stages, strict=True):
            t.add(stage, properties(facts[g], v, g, q.query, kept, dropped, len(q.gold)))
    return t


def part_figures(catalog: Any, queries: Sequence[Any]) -> dict[str, list[float]]:
    """recall@K and complete@K of the lexical parts (``bm25``, ``hybrid-fixed``) on the
    same queries: the parts a change of the lexical path moves (``dense`` reads none of it)."""
    from toolscout.evaluate.harness import STRATEGIES, discover_once, eval_principal
    from toolscout.evaluate.metrics import complete_at, recall_at

    principal = eval_principal(catalog)
    out: dict[str, list[float]] = {}
    for name in ("bm25", "hybrid-fixed"):
        ranked = [discover_once(catalog, STRATEGIES[name], q.query, principal).ranked
                  for q in queries]  # fmt: skip
        n = max(len(queries), 1)
        out[name] = [
            round(
                sum(recall_at(r, q.gold, K) for r, q in zip(ranked, queries, strict=True)) / n, 4
            ),
            round(
                sum(complete_at(r, q.gold, K) for r, q in zip(ranked, queries, strict=True)) / n, 4
            ),
        ]
    return out


def grid_figures(
    catalog: Any, queries: Sequence[Any], settings: Any, blends: Sequence[float]
) -> dict[str, list[float]]:
    """``"blend/yield"`` → [recall@5, complete@5] of the default on ``queries``
    (``fitting.recall_grid``: the selection quality.py's held-out figures come from)."""
    from toolscout.evaluate.fitting import mean, recall_grid

    complete: dict[Any, list[float]] = {}
    got = recall_grid(catalog, queries, settings, blends, complete=complete)
    return {f"{b:g}/{y:g}": [round(mean(r), 4), round(mean(complete[(b, y)]), 4)]
            for (b, y), r in got.items()}  # fmt: skip


def settings_for(fits: Mapping[str, Any], name: str) -> Any:
    """The held-out default of ``name`` (its fit without the set), else the shipped one."""
    from toolscout.settings import SearchSettings

    return quality.held_settings(fits[name]) if name in fits else SearchSettings()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="indexed sets (kept)")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--limit", type=int, default=None, help="N queries per set (seeded)")
    parser.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--grid",
        default="",
        help="blends (e.g. 4,32): also the held-out default's recall@5 and "
        "complete@5 over fitting.YIELDS on the same queries, as quality.py's grid computes them",
    )
    parser.add_argument(
        "--reindex", action="store_true", help="index each set again (its tools re-derived)"
    )
    parser.add_argument(
        "--parts", action="store_true", help="also recall@5 / complete@5 of bm25, hybrid-fixed"
    )
    parser.add_argument(
        "--ids", type=Path, default=None, help="JSON {set: [query ids]}: only those queries"
    )
    args = parser.parse_args(argv)
    from toolscout.embed.minilm import MiniLMEmbedder

    fits = json.loads(args.fits.read_text())["fits"] if args.fits.is_file() else {}
    embedder = MiniLMEmbedder()
    wanted = {s for s in args.sets.split(",") if s}
    only = json.loads(args.ids.read_text()) if args.ids is not None else None
    args.cache.mkdir(parents=True, exist_ok=True)
    tallies: dict[str, dict[str, Any]] = {}
    for d in quality.bench_sets(args.bench):
        if wanted and d.name not in wanted:
            continue
        fresh = args.reindex or not (args.cache / f"{d.name}.db").exists()
        if only is not None and not only.get(d.name):
            continue
        with quality.opened_set(d, args.cache, args.limit, embedder, index=fresh) as (cat, qs):
            if only is not None:
                qs = [q for q in qs if q.id in set(only[d.name])]
            tallies[d.name] = tally_set(cat, qs, settings_for(fits, d.name)).to_json()
            if args.parts:
                tallies[d.name]["parts"] = part_figures(cat, qs)
            if args.grid:
                blends = [float(b) for b in args.grid.split(",")]
                tallies[d.name]["grid"] = grid_figures(cat, qs, settings_for(fits, d.name), blends)
        print(f"{d.name}: {tallies[d.name]['gold_missed']} gold missed", file=sys.stderr)
    print(render(tallies))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"k": K, "sets": tallies}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
