"""The catalog's write path: validating, deriving and writing tools, and learning from use.

What a tool's index entry is derived from (its lexical fields, the texts embedded for it)
and the digest of those inputs (:func:`source_hash`): a tool whose digest equals the
stored one is left alone, so an unchanged re-index derives, embeds and writes nothing and
does not move the store's generation. :class:`Indexing` is the part of
:class:`~toolscout.discovery.catalog.Catalog` that adds, re-indexes and removes tools,
fits the ranker's calibration after a write, and folds usage-learned phrases into the index.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from toolscout.cards import ToolSpec, check_unique, param_texts
from toolscout.discovery import crosslingual
from toolscout.discovery.calibrate import Calibration, stale
from toolscout.discovery.lexical import encoder_text, terms, words
from toolscout.discovery.search import CALIBRATION_META, PhraseIndex, Retriever
from toolscout.discovery.shortlist import IndexReport
from toolscout.embed.base import Embedder, normalise, text_hash
from toolscout.settings import SearchSettings
from toolscout.stores.base import (
    KIND_ALIAS,
    KIND_CARD,
    IndexedTool,
    Store,
    Vector,
    learned_entry,
    learned_kind,
    split_learned,
)

if TYPE_CHECKING:
    from toolscout.discovery.derived import _State
    from toolscout.telemetry.log import DiscoveryLog

#: learned phrases kept per tool
LEARNED_PER_TOOL = 64


def lexical_fields(spec: ToolSpec, learned: Sequence[str] = ()) -> dict[str, str]:
    """The pre-normalised text of each lexical field (not-for hints are never indexed).

    A lexical field is shared by every caller, so only phrases learned without a tenant
    are indexed here; a tenant's own phrases only vote, within that tenant."""
    learned = [p for t, p in map(split_learned, learned) if not t]
    card = spec.card
    name_terms = terms(card.name) + terms(card.id)
    joined = "".join(words(card.name))
    return {
        "name": " ".join(dict.fromkeys([*name_terms, joined])),
        "aliases": " ".join(terms(" ; ".join(card.aliases))),
        "tags": " ".join(terms(" ".join(card.tags))),
        "summary": " ".join(terms(card.summary)),
        "params": " ".join(terms(" ".join(param_texts(spec)))),
        "learned": " ".join(terms(" ; ".join(learned))),
    }


def card_views(spec: ToolSpec) -> tuple[str, ...]:
    """The texts whose normalised mean is a tool's card vector.

    Several views of one card (its name in words, its summary, both together, and
    with its parameters) average into a vector that matches paraphrases, bare
    identifiers and argument-heavy requests better than any single view did on
    the dev sets when the views were chosen (round one; that comparison was not
    recorded in docs/benchmarks.md, only what the views cost to encode:
    docs/history/calibration.md, h/rank).
    """
    card = spec.card
    head = encoder_text(card.name)
    views = [head, card.summary, f"{head}: {card.summary}"]
    props = spec.parameters.get("properties", {}) if isinstance(spec.parameters, Mapping) else {}
    if isinstance(props, Mapping) and props:
        params = "; ".join(
            f"{name}: {p['description']}"
            if isinstance(p, Mapping) and isinstance(p.get("description"), str)
            else str(name)
            for name, p in props.items()
        )
        views.append(f"{head}: {card.summary} Parameters: {params}")
    return tuple(v for v in views if v.strip())


def embedding_texts(
    spec: ToolSpec, learned: Sequence[str] = ()
) -> list[tuple[str, tuple[str, ...]]]:
    """(kind, views) embedded for a tool: the card (several views, averaged), each alias,
    each learned query."""
    texts: list[tuple[str, tuple[str, ...]]] = [(KIND_CARD, card_views(spec))]
    texts += [(KIND_ALIAS, (a,)) for a in spec.card.aliases]
    texts += [(learned_kind(t), (q,)) for t, q in map(split_learned, learned)]
    return texts


#: bump when lexical_fields or embedding_texts change: every stored tool is derived again
#: (2: Unicode words, folded accents and CJK bigrams in the lexical fields)
INDEX_VERSION = 2


def source_hash(spec: ToolSpec, learned: Sequence[str], model_id: str) -> str:
    """A digest of everything a tool's index entry is derived from: if it equals the stored
    one, the tool's fields, texts and vectors are already what indexing would produce."""
    blob = json.dumps([INDEX_VERSION, model_id, spec.content_hash(), list(learned)])
    return hashlib.sha256(blob.encode()).hexdigest()


#: the store meta key naming the model the catalog was indexed with
EMBEDDER_META = "embedder"


class Indexing:
    """Adding, re-indexing and removing tools, over the catalog's store (a part of
    :class:`~toolscout.discovery.catalog.Catalog`)."""

    if TYPE_CHECKING:  # the catalog's, used here
        store: Store
        embedder: Embedder
        settings: SearchSettings
        log: DiscoveryLog | None

        def refresh(self) -> _State: ...
        def __len__(self) -> int: ...
        def specs(self) -> list[ToolSpec]: ...
        def get(self, tool_id: str) -> ToolSpec: ...
        def phrases(self) -> PhraseIndex: ...
        def retriever(
            self, settings: SearchSettings | None = None, *, tenant: str = ""
        ) -> Retriever: ...

    # -- indexing ----------------------------------------------------------------
    def add(
        self,
        specs: Iterable[ToolSpec],
        *,
        replace_all: bool = False,
        progress: Callable[[int, int], None] | None = None,
        warnings: Sequence[str] | None = None,
        force: bool = False,
    ) -> IndexReport:
        """Validate and index tools in one transaction; unchanged texts are not re-embedded.

        A change to another source's tool, or one that widens a tool's tenants, scopes
        or risk, is refused (:class:`~toolscout.errors.ImportRefused`) unless ``force``.
        The specs' quality warnings are reported unless ``warnings`` replaces them."""
        from toolscout.imports import import_warnings, plan_import

        start = time.perf_counter()
        batch = check_unique(specs)
        learned = self.store.learned(LEARNED_PER_TOOL)
        model = self.embedder.model_id
        sources = {s.id: source_hash(s, learned.get(s.id, ()), model) for s in batch}
        # a tool whose spec, learned phrases and model are as stored is left alone: nothing
        # is derived, checked, embedded or written for it (an unchanged 100k catalog
        # re-indexes in the time it takes to hash it)
        stored = self.store.content_hashes(list(sources))
        same = [tid for tid, h in sources.items() if stored.get(tid) == h]
        todo = [s for s in batch if stored.get(s.id) != sources[s.id]]
        plan_import(self.store.specs([s.id for s in todo]), todo, force=force)
        if warnings is None:
            warnings = [str(w) for w in import_warnings(batch)]
        tools, texts = self._indexed(todo, learned, sources)
        vectors = self._embed_missing(texts, progress)
        stats = self.store.upsert(
            tools, vectors, model_id=model, replace_all=replace_all, unchanged=same
        )
        if self.store.meta(EMBEDDER_META) != model:
            self.store.set_meta(EMBEDDER_META, model)  # what a later open embeds queries with
        self.refresh()
        calibration = self.calibrate(stats.added + stats.updated + stats.removed)
        if stats.added + stats.updated + stats.removed:  # the new generation's word list
            crosslingual.prepare(self)  # built in the background (multilingual encoders)
        found = (*warnings, *self._size_warnings(batch))
        return IndexReport(stats, time.perf_counter() - start, tuple(found), calibration.describe())

    def calibrate(self, changed: int | None = None) -> Calibration:
        """The ranker's calibration for this catalog, fitted again when it is missing, of
        another version, or ``changed`` tools (None: always) are enough to make it stale."""
        raw = self.store.meta(CALIBRATION_META)
        old = Calibration.from_json(raw) if raw else None
        pending = int(self.store.meta(CALIBRATION_META + ".changed") or 0) + (changed or 0)
        if old is not None and changed is not None and not stale(old, len(self), pending):
            if changed:
                self.store.set_meta(CALIBRATION_META + ".changed", str(pending))
            return old
        cal = self.retriever(self.settings).calibrate(self.specs())
        self.store.set_meta(CALIBRATION_META, cal.to_json())
        self.store.set_meta(CALIBRATION_META + ".changed", "0")
        index = self.phrases()
        index.calibration, index.calibration_read = cal, True
        return cal

    def _indexed(
        self,
        batch: Sequence[ToolSpec],
        learned: Mapping[str, Sequence[str]],
        sources: Mapping[str, str],
    ) -> tuple[list[IndexedTool], dict[str, tuple[str, ...]]]:
        model = self.embedder.model_id
        tools: list[IndexedTool] = []
        texts: dict[str, tuple[str, ...]] = {}
        for spec in batch:
            mine = learned.get(spec.id, ())
            owned = []
            for kind, views in embedding_texts(spec, mine):
                h = text_hash(model, "\x1f".join(views))
                texts[h] = views
                owned.append((kind, h))
            tools.append(IndexedTool(spec, lexical_fields(spec, mine), owned, sources[spec.id]))
        return tools, texts

    def _embed_missing(
        self, texts: Mapping[str, tuple[str, ...]], progress: Callable[[int, int], None] | None
    ) -> dict[str, Vector]:
        """Embed every text not cached yet; a multi-view text becomes its views' mean."""
        hashes = list(texts)
        have = self.store.cached(hashes, self.embedder.model_id)
        todo = [h for h in hashes if h not in have]
        out: dict[str, Vector] = {}
        step = 128
        for i in range(0, len(todo), step):
            chunk = todo[i : i + step]
            flat = [v for h in chunk for v in texts[h]]
            vecs = self.embedder.embed(flat)
            at = 0
            for h in chunk:
                n = len(texts[h])
                out[h] = normalise(vecs[at : at + n].mean(axis=0, keepdims=True))[0]
                at += n
            if progress is not None:
                progress(min(i + step, len(todo)), len(todo))
        if progress is not None and not todo:
            progress(0, 0)
        return out

    def _size_warnings(self, batch: Sequence[ToolSpec]) -> Iterable[str]:
        """Every oversized card of the batch, unchanged ones included (their sizes kept in
        the store: a re-index of unchanged cards builds no token counter)."""
        from toolscout.cards import CARD_TOKEN_WARN
        from toolscout.discovery.cardsize import card_sizes

        sizes = card_sizes(self.store, [spec.card for spec in batch])
        for spec in batch:
            n = sizes[spec.id]
            if n > CARD_TOKEN_WARN:
                yield f"card {spec.id} is {n} tokens (over {CARD_TOKEN_WARN}); shorten it"

    def remove(self, ids: Sequence[str]) -> int:
        n = self.store.delete(ids)
        self.refresh()
        return n

    # -- learning from usage -----------------------------------------------------
    def record_usage(self, query: str, tool_id: str, uses: int = 1, *, tenant: str = "") -> None:
        """Remember that ``query`` led to a successful call of ``tool_id`` (applied by learn).

        With a ``tenant``, the phrase steers only that tenant's shortlists."""
        self.get(tool_id)
        phrase = " ".join(query.split())[:500]
        self.store.learned_add([(tool_id, learned_entry(tenant, phrase), uses)])

    def learn(self, *, from_log: bool = True) -> IndexReport:
        """Fold learned (query → tool) pairs into the index: as aliases, lexical and dense."""
        if from_log and self.log is not None:
            known = self.refresh().by_id
            pairs = [
                (t, learned_entry(tenant, q), n)
                for tenant in self.log.tenants()
                for t, q, n in self.log.learned_pairs(tenant=tenant)
                if t in known
            ]
            self.store.learned_clear()
            self.store.learned_add(pairs)
        return self.add(self.specs())
