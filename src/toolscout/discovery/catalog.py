"""The catalog: registry and indexing over one store, and the one owner of catalog state.

``Catalog`` validates and indexes tools (embedding only texts it has never
seen), keeps the policy with them, and answers "which tools exist, may this
principal use this one" from the store's *current* state: every read first
checks the store's generation counter, so a policy change or re-index made by
this process or another is seen by the next call. Discovery itself is the
pipeline in :mod:`toolscout.discovery.pipeline`.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolscout.cards import CapabilityCard, ToolSpec, check_unique
from toolscout.discovery import inject, lexical, tokencount
from toolscout.discovery.calibrate import (
    MAX_SHIFT,
    SHIFT_META,
    Calibration,
    ConfidenceShift,
    FieldTerms,
    idf_of,
    stale,
)
from toolscout.discovery.cardtable import CardTable
from toolscout.discovery.kept import (
    KIND_FLAG,
    KIND_LIST,
    KIND_PAIRS,
    KIND_SET,
    KIND_STR,
    RowStore,
    keep_maps,
    no_gc,
    read_maps,
    row_store,
    stale_maps,
    token_blob,
    token_key,
    token_parts,
    tool_token_blob,
    tool_token_key,
    tool_tokens,
)
from toolscout.discovery.lexical import encoder_text, terms, words
from toolscout.discovery.prerequisites import FinderIndex
from toolscout.discovery.search import CALIBRATION_META, PhraseIndex, Reformulator, Retriever
from toolscout.discovery.shortlist import IndexReport, Shortlist
from toolscout.embed.base import Embedder, normalise, text_hash
from toolscout.embed.queries import query_embedder
from toolscout.errors import ConfigError, UnknownToolError
from toolscout.policy import (
    Decision,
    Entitlement,
    PolicyConfig,
    Principal,
    TenantIndex,
    decide,
    entitle,
)
from toolscout.settings import QUERY_TEXT_DAYS, SearchSettings
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
    from toolscout.discovery.pipeline import GrantIssuer
    from toolscout.telemetry.log import DiscoveryLog

#: learned phrases kept per tool
LEARNED_PER_TOOL = 64
#: up to this many entitled tools, the catalog's token figure is one exact count of its
#: whole rendered tool list; above it, an estimate from a fixed sample of them
EXACT_CATALOG_TOKENS = 300
#: tools counted for the estimate (every n-th in id order: deterministic, spread evenly)
CATALOG_TOKEN_SAMPLE = 128
#: full specs kept in memory (schemas are otherwise read from the store when needed)
SPEC_CACHE = 2048
#: entitlements (tenant, scopes) kept per catalog generation, least recently used out
ENTITLEMENT_CACHE = 512


def lexical_fields(spec: ToolSpec, learned: Sequence[str] = ()) -> dict[str, str]:
    """The pre-normalised text of each lexical field (not-for hints are never indexed).

    A lexical field is shared by every caller, so only phrases learned without a tenant
    are indexed here; a tenant's own phrases only vote, within that tenant."""
    learned = [p for t, p in map(split_learned, learned) if not t]
    card = spec.card
    props = spec.parameters.get("properties", {}) if isinstance(spec.parameters, Mapping) else {}
    param_text: list[str] = []
    if isinstance(props, Mapping):
        for pname, pschema in props.items():
            param_text.append(str(pname))
            if isinstance(pschema, Mapping) and isinstance(pschema.get("description"), str):
                param_text.append(pschema["description"])
    name_terms = terms(card.name) + terms(card.id)
    joined = "".join(words(card.name))
    return {
        "name": " ".join(dict.fromkeys([*name_terms, joined])),
        "aliases": " ".join(terms(" ; ".join(card.aliases))),
        "tags": " ".join(terms(" ".join(card.tags))),
        "summary": " ".join(terms(card.summary)),
        "params": " ".join(terms(" ".join(param_text))),
        "learned": " ".join(terms(" ; ".join(learned))),
    }


def card_views(spec: ToolSpec) -> tuple[str, ...]:
    """The texts whose normalised mean is a tool's card vector.

    Several views of one card (its name in words, its summary, both together, and
    with its parameters) average into a vector that matches paraphrases, bare
    identifiers and argument-heavy requests better than any single view did on
    the dev sets (docs/benchmarks.md).
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


def stored_embedder(store: Store, *, spin_wait: bool = True) -> Embedder:
    """The embedder the catalog in ``store`` was indexed with (one toolscout knows by
    its model id), else the default: queries must be embedded by the model that
    embedded the cards."""
    from toolscout.embed import EMBEDDERS, make_embedder

    model = store.meta(EMBEDDER_META)
    known = model if model in EMBEDDERS.values() else None
    return make_embedder(known, spin_wait=spin_wait)


def prefetch_models(
    embedder: Embedder | None, *, tokens: bool = True, stemmer: bool = False
) -> list[threading.Thread]:
    """Load ``embedder``'s model (when it can be loaded ahead: a ``load`` method), the
    token counter (unless ``tokens`` is false) and the query stemmer (when ``stemmer``) on
    background threads, so a new process's first discovery does not wait for them in turn
    (each is loaded once: a later call finds it loaded). A failure is left for the first
    use to report. The threads are not daemons: a process that ends while ONNX Runtime is
    still building its session would abort ("terminate called without an active
    exception"), so the interpreter waits for them."""
    load = getattr(embedder, "load", None)
    jobs: list[Callable[[], object]] = [tokencount.encoding] if tokens else []
    if callable(load):
        jobs.insert(0, load)
    if stemmer:  # importing snowballstemmer's 30 languages: ~0.1 s, before any query's terms
        jobs.append(lexical._stemmer)  # not stem(): its cache may hold the word already
    threads = [
        threading.Thread(target=_quietly, args=(job,), name="toolscout-prefetch", daemon=False)
        for job in jobs
    ]
    for thread in threads:
        thread.start()
    return threads


def _read_ahead(job: object) -> None:
    """Run ``job`` (an optional store method, e.g. ``prepare_lexical``: reading what a new
    process's first search needs) on a prefetch thread, when the store has it."""
    if callable(job):
        name = "toolscout-prefetch"
        threading.Thread(target=_quietly, args=(job,), name=name, daemon=False).start()


def _quietly(job: Callable[[], object]) -> None:
    with suppress(Exception):  # reported by the first use, which loads it again
        job()


#: the parts of the kept phrase index (its ranker fields, phrase tables and first words),
#: of the name table, and of the finder index, with the kind each part's values are
_PHRASE_KINDS = {"name": KIND_SET, "summary": KIND_SET, "keys": KIND_SET, "in_name": KIND_SET,
                 "in_summary": KIND_SET, "phrases": KIND_PAIRS, "identifiers": KIND_PAIRS,
                 "starts": KIND_FLAG}  # fmt: skip
_NAME_KINDS = {"names": KIND_STR, "rendered": KIND_STR}
_FINDER_KINDS = {"name_terms": KIND_SET, "by_term": KIND_LIST}
_CODE_DIGEST: str | None = None
#: derived maps as :func:`~toolscout.discovery.kept.keep_maps` takes them
_Maps = Mapping[str, tuple[str, Mapping[str, Any] | AbstractSet[str]]]


def _kept_key(name: str) -> str:
    """The key derived state is kept under: its name, the index version and a digest of
    the source of the modules that build it, so a changed toolscout never reads old state."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        from toolscout.discovery import calibrate, kept, lexical, prerequisites, search

        digest = hashlib.sha256(str(INDEX_VERSION).encode())
        for module in (search, lexical, calibrate, inject, prerequisites, kept):
            digest.update(Path(str(module.__file__)).read_bytes())
        _CODE_DIGEST = digest.hexdigest()[:16]
    return f"{name}:{_CODE_DIGEST}"


class _State:
    """What the catalog derives from one store generation; replaced whole, never patched."""

    def __init__(self, generation: int, table: CardTable, policy: PolicyConfig,
                 df: Mapping[str, int], shift: ConfidenceShift | None = None) -> None:  # fmt: skip
        self.generation = generation
        self.table = table
        self.by_id = table.by_id  # id -> card, each read when first asked for
        self.policy = policy
        self.shift = shift or ConfidenceShift()
        self.phrases: PhraseIndex | None = None
        self.finders: FinderIndex | None = None
        self.df = df
        self.names: Mapping[str, str] | None = None  # id -> rendered name
        self.rendered: Mapping[str, str] | None = None  # rendered name -> id
        self.tenants: TenantIndex | None = None  # built on the first entitlement
        self.entitlements: OrderedDict[tuple[str, frozenset[str]], Entitlement] = OrderedDict()
        self.catalog_tokens: dict[tuple[str, frozenset[str], str], int] = {}
        self.tool_tokens: dict[tuple[str, str], int] = {}  # (id, format) -> tokens
        #: derived state served from another toolscout version's kept rows, being derived again
        self.stale: set[str] = set()
        self.rederiving = False
        self.tool_tokens_read = False  # the per-tool counts an earlier process kept, read
        self.tool_tokens_kept = 0  # how many of them there were
        self.lock = threading.Lock()

    @property
    def cards(self) -> tuple[CapabilityCard, ...]:
        """Every card, in catalog order (read whole only when first needed)."""
        return self.table.all()

    @property
    def size(self) -> int:
        return len(self.table)


class Catalog:
    """Tools and their index over one store; the state discovery and the gateway share."""

    def __init__(
        self,
        store: Store,
        *,
        embedder: Embedder,
        policy: PolicyConfig | None = None,
        settings: SearchSettings | None = None,
        log: DiscoveryLog | None = None,
        reformulator: Reformulator | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings or SearchSettings()
        self.log = log
        self.reformulator = reformulator
        self._specs: OrderedDict[str, ToolSpec] = OrderedDict()
        self._lock = threading.RLock()
        self._state: _State | None = None
        self._pin = threading.local()
        self._tokens_kept = -1  # texts whose token parts the store holds (-1: not read yet)
        self._keeping: list[threading.Thread] = []  # derived state written in the background
        self._keeping_lock = threading.Lock()
        if policy is not None and self._stored_policy() != policy:
            self.set_policy(policy)
        self.refresh()

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        embedder: Embedder | None = None,
        policy: PolicyConfig | None = None,
        settings: SearchSettings | None = None,
        log: bool = True,
        reformulator: Reformulator | None = None,
        query_log: str = "text",
        query_text_days: float | None = QUERY_TEXT_DAYS,
        prefetch: bool = True,
    ) -> Catalog:
        """A catalog over the store at ``path`` (a SQLite file, ``:memory:``, or a DSN).

        ``query_log`` says what the discovery log keeps of each query: its ``text``, a
        ``hash``, or ``none``; text is reduced to its hash after ``query_text_days``
        (``None``: kept until the row is pruned). ``prefetch``: a store that holds a
        catalog starts loading the query encoder, the stemmer and its dense index in the
        background while its state is read. The token counter is not loaded ahead: building
        it holds the interpreter for a few tenths of a second, which stalled whichever
        request ran beside it; a discovery whose counts are not kept (per tool or per text)
        builds it when it needs it."""
        from toolscout.stores import open_store

        store = open_store(path)
        chosen = embedder or stored_embedder(store)
        prefetch = prefetch and store.generation() > 0
        if prefetch:  # the encoder and the stemmer first: the first discovery needs both
            prefetch_models(chosen, tokens=False, stemmer=True)
        dlog = None
        if log and isinstance(path, str | Path):
            from toolscout.telemetry.log import open_log

            dlog = open_log(path, query_log=query_log, query_text_days=query_text_days)
        catalog = cls(
            store,
            embedder=chosen,
            policy=policy,
            settings=settings,
            log=dlog,
            reformulator=reformulator,
        )
        prepare = getattr(store, "prepare_dense", None)
        if prefetch:  # the lexical scope tokens (a thread of its own: not beside the ids)
            _read_ahead(getattr(store, "prepare_lexical", None))
        if prefetch and callable(prepare):  # the dense index, mapped while the encoder loads
            _read_ahead(lambda: prepare(chosen.model_id))
        return catalog

    @property
    def counts_kept(self) -> bool:
        """Whether token counts an earlier process made over this store were read, of as
        many renderings as the catalog has tools: then a shortlist is likely counted
        without the tokenizer (the texts it counted are; any other loads it)."""
        return 0 < self.refresh().size <= self._tokens_kept

    def close(self) -> None:
        self.wait_kept()
        with suppress(Exception):  # a cache: a store that cannot keep it is no error
            self.keep_token_counts()
        if self.log is not None:
            self.log.close()
        self.store.close()

    def snapshot(self, dest: str | Path) -> Path:
        """A consistent copy of the store (for stores that can make one)."""
        make = getattr(self.store, "snapshot", None)
        if make is None:
            from toolscout.errors import StoreError

            raise StoreError(f"{type(self.store).__name__} cannot make a snapshot")
        return Path(make(dest))

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- state -------------------------------------------------------------------
    def _stored_policy(self) -> PolicyConfig | None:
        raw = self.store.meta("policy")
        return PolicyConfig.from_dict(json.loads(raw)) if raw else None

    def refresh(self) -> _State:
        """The state of the store's current generation (re-read only when it moved).

        Inside :meth:`pinned`, the state the block started with."""
        pinned: _State | None = getattr(self._pin, "state", None)
        if pinned is not None:
            return pinned
        gen = self.store.generation()
        state = self._state
        if state is not None and state.generation == gen:
            return state
        with self._lock:
            state = self._state
            if state is not None and state.generation == self.store.generation():
                return state
            gen = self.store.generation()
            with no_gc():
                df, _ = self.store.document_frequency()
                state = _State(
                    gen,
                    CardTable(self.store),
                    self._stored_policy() or PolicyConfig(),
                    df,
                    ConfidenceShift.from_json(self.store.meta(SHIFT_META)),
                )
            self._specs.clear()
            self._state = state
            if self._tokens_kept < 0:
                self._preload_tokens()
            return state

    @contextmanager
    def pinned(self) -> Iterator[_State]:
        """One generation for a whole block on this thread: a discovery reads the store's
        generation once, not once per card, spec and token count it looks at, and sees
        one consistent catalog even if a write lands meanwhile (the next call sees it)."""
        outer: _State | None = getattr(self._pin, "state", None)
        if outer is not None:
            yield outer
            return
        self._pin.state = state = self.refresh()
        try:
            yield state
        finally:
            self._pin.state = None

    @property
    def generation(self) -> int:
        return self.refresh().generation

    @property
    def policy(self) -> PolicyConfig:
        """The stored policy, as of now."""
        return self.refresh().policy

    def set_policy(self, policy: PolicyConfig) -> None:
        """Store ``policy`` with the catalog: every user of this store applies it from now on."""
        self.store.set_meta("policy", json.dumps(policy.to_dict()))
        self.refresh()

    @property
    def confidence_shift(self) -> ConfidenceShift:
        """The correction of the reported confidence learned from this catalog's own log
        (``toolscout report --accept-confidence``); 0 until one is accepted."""
        return self.refresh().shift

    def set_confidence_shift(self, shift: float, outcomes: int = 0) -> ConfidenceShift:
        """Store the confidence correction (in logits): every user of this store applies it."""
        if not math.isfinite(shift) or abs(shift) > MAX_SHIFT:
            raise ConfigError(
                f"confidence shift {shift!r} is not a number within ±{MAX_SHIFT:g} logits"
            )
        if outcomes < 0:
            raise ConfigError(f"outcomes must be at least 0, not {outcomes}")
        value = ConfidenceShift(round(shift, 4), outcomes, time.time())
        self.store.set_meta(SHIFT_META, value.to_json())
        self.refresh()
        return value

    def __len__(self) -> int:
        return self.refresh().size

    def cards(self) -> tuple[CapabilityCard, ...]:
        return self.refresh().cards

    def card(self, tool_id: str) -> CapabilityCard | None:
        return self.refresh().by_id.get(tool_id)

    def specs(self) -> list[ToolSpec]:
        """Every tool with its schema (reads them all: for indexing and lint, not per request)."""
        ids = self.refresh().table.ids
        found = self.store.specs(list(ids))
        return [found[t] for t in ids if t in found]

    def spec(self, tool_id: str) -> ToolSpec | None:
        """The tool's full spec, read from the store on first use (then cached)."""
        state = self.refresh()
        if tool_id not in state.by_id:
            return None
        with self._lock:
            hit = self._specs.get(tool_id)
            if hit is not None:
                self._specs.move_to_end(tool_id)
                return hit
        spec = self.store.specs([tool_id]).get(tool_id)
        if spec is not None:
            with self._lock:
                if self._state is state:
                    self._specs[tool_id] = spec
                    while len(self._specs) > SPEC_CACHE:
                        self._specs.popitem(last=False)
        return spec

    def specs_of(self, ids: Sequence[str]) -> list[ToolSpec]:
        """Specs of ``ids`` in that order (unknown ids are left out); one store read for misses."""
        state = self.refresh()
        with self._lock:
            have = {t: s for t in ids if (s := self._specs.get(t)) is not None}
        missing = [t for t in ids if t not in have and t in state.by_id]
        if missing:
            fetched = self.store.specs(missing)
            have.update(fetched)
            if len(missing) <= SPEC_CACHE // 2:
                with self._lock:
                    if self._state is state:
                        self._specs.update(fetched)
                        while len(self._specs) > SPEC_CACHE:
                            self._specs.popitem(last=False)
        return [have[t] for t in ids if t in have]

    def get(self, tool_id: str) -> ToolSpec:
        spec = self.spec(tool_id)
        if spec is None:
            raise UnknownToolError(tool_id)
        return spec

    def schema(self, tool_id: str, principal: Principal, fmt: str = "openai") -> dict[str, Any]:
        """The tool's schema in ``fmt``, for a principal entitled to it.

        Unknown and forbidden tools raise the same :class:`UnknownToolError`."""
        if not self.decide(principal, tool_id).allowed:
            raise UnknownToolError(tool_id)
        return inject.render([self.get(tool_id)], fmt, self.names())[0]

    def phrases(self) -> PhraseIndex:
        """The phrase index: read per key from the rows kept for this generation, else
        built from the cards (every card's words tokenised) and kept."""
        return self._phrases_of(self.refresh())

    def _phrases_of(self, state: _State) -> PhraseIndex:
        with state.lock:
            if state.phrases is None:
                parts = self._derived(state, "phrase-index", _PHRASE_KINDS, _phrase_parts)
                state.phrases = _phrase_index(state, parts)
            return state.phrases

    def _derived(self, state: _State, name: str, kinds: Mapping[str, str],
                 build: Callable[[_State], Mapping[str, Any]]) -> Mapping[str, Any]:  # fmt: skip
        """The parts ``name`` derives from ``state``: the rows a process kept in the store
        for this generation (and this code: the key names a digest of the modules that
        build them), read per key; else ``build(state)``, kept for the next process. A
        damaged part is built again whole (:class:`~toolscout.discovery.kept.KeptMap`)."""
        store = row_store(self.store)
        built: list[Mapping[str, Any]] = []
        lock = threading.Lock()

        def whole() -> Mapping[str, Any]:
            with lock:
                if not built:
                    with no_gc():
                        built.append(build(state))
                return built[0]

        key = _kept_key(name)
        if store is not None:
            found = read_maps(store, key, state.generation, kinds, lambda p: whole()[p])
            if found is not None:
                return found[0]
            # kept by another toolscout (an upgrade): served while derived again behind
            stale = stale_maps(store, name, key, state.generation, kinds, lambda p: whole()[p])
            if stale is not None:
                state.stale.add(name)
                self._rederive(state)
                return stale
        parts = whole()
        if store is not None:
            self._keep(store, key, state.generation, {p: (kinds[p], parts[p]) for p in kinds})
        return parts

    def _keep(self, store: RowStore, key: str, generation: int, maps: _Maps) -> None:
        """Keep derived maps for the next process: on a background thread with a connection
        of its own when the store can open one (a 100k catalog's phrase index is ~1M rows,
        seconds of writing the request that built them need not wait for), in short
        transactions, one such write after another; else here, in one. :meth:`close`
        (and :meth:`wait_kept`) waits for them."""
        second = getattr(self.store, "second_connection", None)
        other = None
        with suppress(Exception):  # a file another connection cannot open: kept here
            other = second() if callable(second) else None
        if other is None:
            keep_maps(store, key, generation, maps)
            return
        with self._keeping_lock:
            before = self._keeping[-1] if self._keeping else None

            def job() -> None:
                if before is not None:
                    before.join()
                try:
                    with suppress(Exception):  # a cache: the next process derives again
                        keep_maps(other, key, generation, maps, in_steps=True)
                finally:
                    other.close()

            thread = threading.Thread(target=job, name="toolscout-keep", daemon=False)
            self._keeping.append(thread)
            thread.start()

    def wait_kept(self) -> None:
        """Wait until the derived state being derived again or kept in the background is
        written (a thread deriving again starts the writes of what it derived)."""
        while True:
            with self._keeping_lock:
                pending, self._keeping = self._keeping, []
            if not pending:
                return
            for thread in pending:
                thread.join()

    def _rederive(self, state: _State) -> None:
        """Derive ``state``'s structures served from another version's kept rows again, on
        a background thread (once per state), each replacing the stale one when built and
        kept under this version's key. Requests meanwhile are answered from the stale
        ones: the same catalog generation, derived by the code of another version."""
        with self._keeping_lock:
            if state.rederiving:
                return
            state.rederiving = True
            thread = threading.Thread(
                target=_quietly, args=(lambda: self._rederive_all(state),),
                name="toolscout-rederive", daemon=False,
            )  # fmt: skip
            self._keeping.append(thread)
            thread.start()

    def _rederive_all(self, state: _State) -> None:
        store = row_store(self.store)
        if store is None:
            return

        def fresh(
            name: str, kinds: Mapping[str, str], build: Callable[[_State], Mapping[str, Any]]
        ) -> Mapping[str, Any] | None:
            key = _kept_key(name)
            if read_maps(store, key, state.generation, kinds, lambda p: {}) is not None:
                return None  # kept for this version already: what it serves is not stale
            with no_gc():
                parts = build(state)
            self._keep(store, key, state.generation, {p: (kinds[p], parts[p]) for p in kinds})
            return parts

        phrases = fresh("phrase-index", _PHRASE_KINDS, _phrase_parts)
        if phrases is not None:
            index = _phrase_index(state, phrases)
            with state.lock:
                state.phrases = index
                state.stale.discard("phrase-index")
        names = fresh("name-table", _NAME_KINDS, _name_parts)
        if names is not None:
            with state.lock:
                state.names, state.rendered = names["names"], names["rendered"]
                if "name-table" in state.stale:  # counted with the stale names: count again
                    state.stale.discard("name-table")
                    state.tool_tokens.clear()
                    state.catalog_tokens.clear()
        name_terms = self._phrases_of(state).fields.name
        finders = fresh("finder-index", _FINDER_KINDS, lambda _: _finder_parts(name_terms))
        if finders is not None:
            with state.lock:
                state.finders = _finder_index(finders)
                state.stale.discard("finder-index")

    def finders(self) -> FinderIndex:
        """The tools named as finders (search, find, lookup, list), by their name words."""
        state = self.refresh()
        fields = self._phrases_of(state).fields  # outside the lock: phrases() takes it
        with state.lock:
            if state.finders is None:
                parts = self._derived(
                    state, "finder-index", _FINDER_KINDS, lambda _: _finder_parts(fields.name)
                )
                state.finders = _finder_index(parts)
            return state.finders

    def names(self) -> Mapping[str, str]:
        """Tool id → the function name every rendering uses (unique over the catalog)."""
        state = self.refresh()
        with state.lock:
            if state.names is None:
                parts = self._derived(state, "name-table", _NAME_KINDS, _name_parts)
                state.names, state.rendered = parts["names"], parts["rendered"]
            return state.names

    def resolve(self, name: str) -> str | None:
        """The tool id a model-facing name stands for: an id, or a rendered name."""
        state = self.refresh()
        if name in state.by_id:
            return name
        self.names()
        return (state.rendered or {}).get(name)

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

    @staticmethod
    def _size_warnings(batch: Sequence[ToolSpec]) -> Iterable[str]:
        from toolscout.cards import CARD_TOKEN_WARN, card_tokens

        for spec in batch:
            n = card_tokens(spec.card)
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

    # -- policy ------------------------------------------------------------------
    def decide(self, principal: Principal, tool_id: str) -> Decision:
        """May ``principal`` use ``tool_id`` now, and if not, why (for audit, never for a model)."""
        state = self.refresh()
        return decide(principal, state.by_id.get(tool_id), state.policy)

    def entitle(self, principal: Principal) -> Entitlement:
        state = self.refresh()
        key = (principal.tenant, state.policy.effective_scopes(principal))
        with state.lock:
            ent = state.entitlements.get(key)
            if ent is not None:
                state.entitlements.move_to_end(key)
                return ent
            if state.tenants is None:
                share = state.table.share()
                if share is None:
                    with no_gc():
                        state.tenants = TenantIndex(state.cards)
                else:  # a tenant's share read when first asked: the other cards never
                    state.tenants = TenantIndex(share=share, total=state.size)
        ent = entitle(state.tenants, principal, state.policy)
        with state.lock:
            state.entitlements[key] = ent
            while len(state.entitlements) > ENTITLEMENT_CACHE:
                state.entitlements.popitem(last=False)
        return ent

    # -- token figures -----------------------------------------------------------
    def _preload_tokens(self) -> None:
        """The token parts an earlier process counted over this store (a pure function of
        each rendered text: kept whatever the generation), so this process's first
        discovery counts its shortlist without loading the tokenizer when they cover it."""
        self._tokens_kept = 0
        read = getattr(self.store, "derived", None)
        kept = read(token_key()) if read is not None else None
        found = token_parts(kept[1]) if kept is not None else None
        if found is not None:
            tokencount.preload(*found)
            self._tokens_kept = len(found[0])

    def keep_token_counts(self) -> bool:
        """Keep the token parts this process counted for the next one (with what the store
        held), and the per-tool counts of the current generation, when there are new ones;
        True if either was written. Called on close and by servers after warming up:
        never on the request path."""
        write = getattr(self.store, "set_derived", None)
        state = self._state
        if write is None or state is None:
            return False
        wrote = False
        parts, joins = tokencount.known_parts()
        if len(parts) > max(self._tokens_kept, 0) and write(
            token_key(), self.store.generation(), token_blob(parts, joins)
        ):
            self._tokens_kept = len(parts)
            wrote = True
        self._read_tool_tokens(state)  # what the store holds is kept with the new ones
        with state.lock:
            counts = dict(state.tool_tokens) if "name-table" not in state.stale else {}
        if len(counts) > state.tool_tokens_kept and write(
            tool_token_key(), state.generation, tool_token_blob(counts)
        ):
            state.tool_tokens_kept = len(counts)
            wrote = True
        return wrote

    def _read_tool_tokens(self, state: _State) -> None:
        """The per-tool counts an earlier process kept for ``state``'s generation (read once
        per state): a new process's catalog figure for a tenant an earlier one counted then
        needs neither the sample's schemas nor the tokenizer."""
        if state.tool_tokens_read:
            return
        read = getattr(self.store, "derived", None)
        kept = read(tool_token_key()) if callable(read) else None
        counts = tool_tokens(kept[1]) if kept is not None and kept[0] == state.generation else None
        with state.lock:
            if not state.tool_tokens_read:
                state.tool_tokens_read = True
                for key, n in (counts or {}).items():
                    state.tool_tokens.setdefault(key, n)
                state.tool_tokens_kept = len(counts or {})

    def schema_tokens(self, tool_id: str, fmt: str) -> int:
        """o200k tokens of one tool's rendering (cached per catalog generation, as the
        rendered name can change with the rest of the catalog: never stale)."""
        state = self.refresh()
        n = state.tool_tokens.get((tool_id, fmt))
        if n is None and not state.tool_tokens_read:
            self._read_tool_tokens(state)
            n = state.tool_tokens.get((tool_id, fmt))
        return n if n is not None else self._count_tokens(state, self.get(tool_id), fmt)

    def _count_tokens(self, state: _State, spec: ToolSpec, fmt: str) -> int:
        n = state.tool_tokens.get((spec.id, fmt))
        if n is None:
            n = inject.schema_tokens([spec], fmt, self.names())
            with state.lock:
                state.tool_tokens[(spec.id, fmt)] = n
        return n

    def entitled_tokens(self, principal: Principal, fmt: str) -> int:
        """Tokens of every schema ``principal`` is entitled to, rendered as one tool list."""
        state = self.refresh()
        ent = self.entitle(principal)
        key = (principal.tenant, state.policy.effective_scopes(principal), fmt)
        n = state.catalog_tokens.get(key)
        if n is None:
            ids = [c.id for c in ent.allowed]
            if len(ids) <= EXACT_CATALOG_TOKENS:
                specs = self.specs_of(ids)
                n = inject.schema_tokens(specs, fmt, self.names()) if specs else 0
            else:
                # a large catalog: its size times the mean per-tool count of an even, fixed
                # sample (reading and rendering every schema of a tenant's 1,500 tools took
                # a fifth of a second on its first request at 100k tools)
                ordered = sorted(ids)
                step = len(ordered) / CATALOG_TOKEN_SAMPLE
                sample = [ordered[int(i * step)] for i in range(CATALOG_TOKEN_SAMPLE)]
                self._read_tool_tokens(state)
                known = [state.tool_tokens.get((t, fmt)) for t in sample]
                missing = [t for t, c in zip(sample, known, strict=True) if c is None]
                counts = [c for c in known if c is not None]  # kept: no schema read for them
                counts += [self._count_tokens(state, s, fmt) for s in self.specs_of(missing)]
                n = round(len(ids) * sum(counts) / max(len(counts), 1))
            with state.lock:
                state.catalog_tokens[key] = n
        return n

    # -- discovery ---------------------------------------------------------------
    def retriever(self, settings: SearchSettings | None = None, *, tenant: str = "") -> Retriever:
        """The hybrid retriever over this catalog's current state (ids and scores only);
        usage learned from ``tenant`` (and from untenanted use) votes, no other tenant's."""
        return Retriever(
            self.store,
            query_embedder(self.embedder),  # requests may have their own graph (embed/queries.py)
            self.phrases(),
            settings or self.settings,
            self.reformulator,
            lambda ids: self.store.card_vectors(ids, self.embedder.model_id),
            tenant=tenant,
        )

    def discover(
        self,
        query: str,
        principal: Principal,
        *,
        k: int = 3,
        fmt: str = "openai",
        settings: SearchSettings | None = None,
        tier: inject.Tier | str | None = None,
        token_budget: int | None = None,
        grants: GrantIssuer | None = None,
        conversation: str | None = None,
        record: bool = True,
    ) -> Shortlist:
        """entitle → retrieve → select → inject, for one query and one trusted principal
        (``record=False``: not written to the discovery log)."""
        from toolscout.discovery.pipeline import discover

        shortlist = discover(
            self,
            query,
            principal,
            k=k,
            fmt=fmt,
            settings=settings,
            tier=tier,
            token_budget=token_budget,
            grants=grants,
            conversation=conversation,
            record=record,
        )
        return shortlist

    def record_call(self, shortlist: Shortlist | None, tool_id: str, *, ok: bool = True) -> None:
        """Tell the discovery log which tool was called after a discovery."""
        if self.log is not None:
            did = shortlist.discovery_id if shortlist is not None else None
            self.log.record_call(tool_id, discovery_id=did, ok=ok)


def _phrase_parts(state: _State) -> dict[str, Any]:
    """The kept parts of a phrase index built from ``state``'s cards (cards only: no schema
    is read or parsed for it; at 100k tools that was most of a first discovery)."""
    index = PhraseIndex([ToolSpec(c) for c in state.cards], state.df)
    fields = index.fields
    return {
        "name": fields.name,
        "summary": fields.summary,
        "keys": fields.keys,
        "in_name": fields.in_name,
        "in_summary": fields.in_summary,
        "phrases": index.phrases,
        "identifiers": index.identifiers,
        "starts": index.starts,
    }


def _phrase_index(state: _State, parts: Mapping[str, Any]) -> PhraseIndex:
    """A phrase index over kept (or just built) parts."""
    index = PhraseIndex.__new__(PhraseIndex)
    fields = FieldTerms(
        name=parts["name"],
        summary=parts["summary"],
        keys=parts["keys"],
        in_name=parts["in_name"],
        in_summary=parts["in_summary"],
    )
    vars(index).update(fields=fields, calibration=None, calibration_read=False,
                       phrases=parts["phrases"], identifiers=parts["identifiers"],
                       starts=parts["starts"])  # fmt: skip
    index.idf = idf_of(state.df, state.size)  # a function: derived, not kept
    return index


def _finder_index(parts: Mapping[str, Any]) -> FinderIndex:
    index = FinderIndex.__new__(FinderIndex)
    vars(index).update(name_terms=parts["name_terms"], _by_term=parts["by_term"])
    return index


def _name_parts(state: _State) -> dict[str, Any]:
    names = inject.name_table(state.cards)
    return {"names": names, "rendered": {n: t for t, n in names.items()}}


def _finder_parts(name_terms: Mapping[str, frozenset[str]]) -> dict[str, Any]:
    index = FinderIndex(name_terms)
    return {"name_terms": index.name_terms, "by_term": vars(index)["_by_term"]}
