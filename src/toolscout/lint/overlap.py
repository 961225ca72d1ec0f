"""Overlapping tools, measured: which tools retrieval takes for one another.

Each card yields probe queries written about it — its aliases (users' words),
its summary with the name's words masked, its name in words, and its not-for
hints (which point at the tool that *should* win; a hint's text counts only
against the card that wrote it: if that card still matches it, the hint does not
separate the pair). Every probe runs through
the catalog's own retriever with everything entitled; when the top hit is not
the probe's tool, that tool stole it. Pairs are ranked by the share of their
probes they steal from each other. Probes are embedded in batches and sampled
(seeded) on large catalogs, so a 4k-tool catalog lints in seconds.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from toolscout.cards import ToolSpec
from toolscout.discovery.lexical import STOPWORDS, phrase_key, stem, words
from toolscout.discovery.search import Candidate, PhraseIndex, Retriever, parse_query
from toolscout.embed.base import Wrapped
from toolscout.lint.findings import Finding, OverlapPair

if TYPE_CHECKING:
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.base import Embedder, Vectors

#: a pair collides when its tools take at least this share of the pair's probes ...
COLLISION_RATE = 0.15
#: ... and at least this many probes in all
COLLISION_STEALS = 2
#: a tool ranked above the probe's own tool among this many top hits took the probe
CONFUSION_WINDOW = 5
#: probes per tool at most, and in all (sampled with a fixed seed beyond that)
PROBES_PER_TOOL = 6
MAX_PROBES = 12_000

_USE_OTHER = re.compile(
    r"^(?P<text>.*?)\s*(?:—|–|--|-|;|,|:)?\s*\buse\s+(?P<ref>\S+?)\s*\.?$", re.I
)


@dataclass(frozen=True, slots=True)
class Probe:
    text: str
    expected: str  # the tool that should come first
    about: str  # the card the probe was written from
    kind: str  # alias, masked-summary, name, not-for, summary


class _Batched(Wrapped):
    """An embedder that answers from vectors computed in one batch, the model otherwise."""

    def __init__(self, inner: Embedder, texts: Sequence[str]) -> None:
        super().__init__(inner)
        uniq = list(dict.fromkeys(texts))
        self._vecs: dict[str, Vectors] = {}
        for i in range(0, len(uniq), 256):
            chunk = uniq[i : i + 256]
            for text, vec in zip(chunk, inner.embed(chunk), strict=True):
                self._vecs[text] = vec

    def embed(self, texts: Sequence[str]) -> Vectors:
        if all(t in self._vecs for t in texts):
            return np.stack([self._vecs[t] for t in texts]).astype(np.float32)
        return self.inner.embed(texts)


def _refers(specs: Sequence[ToolSpec]) -> dict[str, str]:
    """Tool id by every way a not-for hint may name it (id, name, their word forms)."""
    out: dict[str, str] = {}
    for s in specs:
        for key in (s.id, s.card.name, phrase_key(s.id), phrase_key(s.card.name)):
            out.setdefault(key, s.id)
    return out


def _referenced(text: str, refer: Mapping[str, str]) -> tuple[str, str | None]:
    """(hint text without its "use X" tail, the tool it sends to, if one is named)."""
    m = _USE_OTHER.match(text.strip())
    if not m:
        return text, None
    ref = m.group("ref").strip(".,;:'\"`")
    target = refer.get(ref) or refer.get(phrase_key(ref))
    return (m.group("text").strip() or text), target


def _masked_summary(spec: ToolSpec) -> str:
    """The summary without the name's words, as a user who does not know the name says it."""
    name = {stem(w) for w in words(spec.card.name)}
    kept = [w for w in spec.card.summary.split() if stem(" ".join(words(w))) not in name]
    text = " ".join(kept)
    content = [w for w in words(text) if w not in STOPWORDS]
    return text if len(content) >= 2 else ""


def probes_of(spec: ToolSpec, refer: Mapping[str, str]) -> list[Probe]:
    """The probe queries one card yields, most telling first."""
    card = spec.card
    out = [Probe(a, card.id, card.id, "alias") for a in card.aliases]
    masked = _masked_summary(spec)
    if masked:
        out.append(Probe(masked, card.id, card.id, "masked-summary"))
    for hint in card.not_for:
        text, target = _referenced(hint, refer)
        if target is not None and target != card.id:
            out.append(Probe(text, target, card.id, "not-for"))
    out.append(Probe(card.summary, card.id, card.id, "summary"))
    name = " ".join(words(card.name))
    if len(name.split()) >= 2:
        out.append(Probe(name, card.id, card.id, "name"))
    return out


def sample_probes(
    specs: Sequence[ToolSpec],
    *,
    per_tool: int = PROBES_PER_TOOL,
    max_probes: int = MAX_PROBES,
    seed: int = 0,
) -> list[Probe]:
    """Up to ``per_tool`` probes per card, thinned evenly (seeded) to ``max_probes``."""
    refer = _refers(specs)
    per = [probes_of(s, refer)[:per_tool] for s in specs]
    total = sum(len(p) for p in per)
    if total > max_probes:
        keep = max(1, max_probes // max(len(specs), 1))
        rng = random.Random(seed)
        per = [p if len(p) <= keep else p[:1] + rng.sample(p[1:], keep - 1) for p in per]
    return [p for ps in per for p in ps]


def _hint_sides(a: ToolSpec, b: ToolSpec) -> int:
    def names(x: ToolSpec, y: ToolSpec) -> bool:
        keys = {phrase_key(y.id), phrase_key(y.card.name)}
        return any(any(k and k in phrase_key(h) for k in keys) for h in x.card.not_for)

    return int(names(a, b)) + int(names(b, a))


def measure(
    specs: Sequence[ToolSpec],
    catalog: Catalog,
    *,
    per_tool: int = PROBES_PER_TOOL,
    max_probes: int = MAX_PROBES,
) -> tuple[list[OverlapPair], int]:
    """Every pair of tools that took one another's probes, by rate; and the probe count.

    Retrieval is the catalog's own (its store, model and search settings), without
    usage-learned aliases: lint measures the catalog as written.
    """
    probes = sample_probes(specs, per_tool=per_tool, max_probes=max_probes)
    texts = [" ".join(words(p.text)) or p.text for p in probes]
    settings = catalog.settings.but(learned_aliases=False)
    model = catalog.embedder.model_id
    fast = Retriever(
        catalog.store,
        _Batched(catalog.embedder, texts),
        PhraseIndex([], {}),  # exact hits are not retrieval: a user rarely types the alias
        settings,
        None,
        lambda ids: catalog.store.card_vectors(ids, model),
    )
    df, n_docs = catalog.store.document_frequency()
    allowed = frozenset(s.id for s in specs)
    count: Counter[str] = Counter()
    steals: Counter[tuple[str, str]] = Counter()
    examples: dict[frozenset[str], list[str]] = defaultdict(list)
    for probe in probes:
        count[probe.about] += 1
        query = parse_query(probe.text, df, n_docs, settings)
        ranked = fast.run(query, allowed).candidates
        for thief in confusers(ranked, probe.expected):
            if probe.kind == "not-for" and thief != probe.about:
                continue  # a hint's text is evidence about its own pair only
            steals[(probe.expected, thief)] += 1
            pair = frozenset((probe.expected, thief))
            if len(examples[pair]) < 3:
                examples[pair].append(f"{probe.text!r} ({probe.kind} of {probe.about}) -> {thief}")
    by_id = {s.id: s for s in specs}
    pairs = []
    for key in {frozenset(k) for k in steals}:
        a, b = sorted(key)
        if a not in by_id or b not in by_id:
            continue
        pairs.append(
            OverlapPair(
                a,
                b,
                steals[(a, b)],
                steals[(b, a)],
                count[a] + count[b],
                _hint_sides(by_id[a], by_id[b]),
                tuple(examples[key]),
            )
        )
    pairs.sort(key=lambda p: (-p.rate, -p.steals, p.a, p.b))
    return pairs, len(probes)


def confusers(ranked: Sequence[Candidate], expected: str) -> list[str]:
    """The tools that took a probe for ``expected``: ranked above it within the top
    ``CONFUSION_WINDOW`` (a shortlist), or the top hit when it was not retrieved at all.

    Ranks, not scores: fused scores are on no fixed scale, so a margin on them would
    mean different things for different retrievers and catalogs.
    """
    ids = [c.id for c in ranked]
    if expected not in ids:
        return ids[:1]
    return [t for t in ids[: min(ids.index(expected), CONFUSION_WINDOW)]]


def collides(pair: OverlapPair) -> bool:
    return pair.steals >= COLLISION_STEALS and pair.rate >= COLLISION_RATE


def findings(pairs: Sequence[OverlapPair]) -> list[Finding]:
    out = []
    for p in pairs:
        if not collides(p):
            continue
        share = f"{p.steals:.1f} of {p.probes} probes ({p.rate:.0%})"
        if p.hinted == 0:
            out.append(
                Finding.of(
                    "overlap-unhinted",
                    [p.a, p.b],
                    f"{p.a} and {p.b} take each other's queries: {share}, and neither "
                    "card's not_for hint tells them apart",
                    f"add to each card a not_for hint naming the other (e.g. on {p.a}: "
                    f"'<requests for the other one> — use {p.b}'), or merge them",
                    rate=round(p.rate, 3),
                    examples=list(p.examples),
                )
            )
        else:
            one_sided = p.hinted == 1
            out.append(
                Finding.of(
                    "overlap",
                    [p.a, p.b],
                    f"{p.a} and {p.b} take each other's queries: {share}"
                    + (" (a not_for hint on one side only)" if one_sided else ""),
                    ("add the reverse not_for hint, and " if one_sided else "")
                    + "make their summaries and aliases name what differs (input, scope, "
                    "the object acted on)",
                    rate=round(p.rate, 3),
                    examples=list(p.examples),
                )
            )
    return out
