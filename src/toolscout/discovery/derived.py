"""The state a catalog derives from one store generation, and keeping it between processes.

:class:`_State` is what one generation derives (replaced whole when the generation
moves). :class:`DerivedState` is the part of :class:`~toolscout.discovery.catalog.Catalog`
that builds the expensive structures in it — the phrase index, the name table, the finder
index — or reads them per key from the rows an earlier process kept for the generation
(:mod:`toolscout.discovery.kept`), keeps what it built on a background connection, and
serves the rows another toolscout version kept while it derives its own behind (an
upgrade). And the token figures: per-tool and per-entitlement counts, cached per
generation, and the token parts and per-tool counts kept for the next process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.discovery import inject, rederiving, tokencount
from toolscout.discovery.calibrate import ConfidenceShift, FieldTerms, idf_of
from toolscout.discovery.cardtable import CardTable
from toolscout.discovery.kept import (
    RowStore,
    built_once,
    differing,
    keep_maps,
    no_gc,
    read_maps,
    row_store,
    stale_maps,
)
from toolscout.discovery.keptparts import (
    FINDER_KINDS,
    NAME_KINDS,
    PHRASE_KINDS,
    finder_parts,
    kept_key,
    name_parts,
    phrase_parts,
)
from toolscout.discovery.kepttokens import (
    token_blob,
    token_key,
    token_parts,
    tool_token_blob,
    tool_token_key,
    tool_tokens,
)
from toolscout.discovery.opening import _quietly
from toolscout.discovery.prerequisites import FinderIndex
from toolscout.discovery.query import PhraseIndex
from toolscout.policy import Entitlement, PolicyConfig, Principal, TenantIndex
from toolscout.stores.base import Store

#: up to this many entitled tools, the catalog's token figure is one exact count of its
#: whole rendered tool list; above it, an estimate from a fixed sample of them
EXACT_CATALOG_TOKENS = 300
#: tools counted for the estimate (every n-th in id order: deterministic, spread evenly)
CATALOG_TOKEN_SAMPLE = 128


#: the builders as this module calls them, only from :meth:`DerivedState._built` (a test
#: patches a builder here)
_phrase_parts, _name_parts, _finder_parts = phrase_parts, name_parts, finder_parts
#: the kept parts in the order they are derived again (the finder index from the phrase
#: index's name terms), with their kinds
_PARTS = {"phrase-index": PHRASE_KINDS, "name-table": NAME_KINDS, "finder-index": FINDER_KINDS}
#: derived maps as :func:`~toolscout.discovery.kept.keep_maps` takes them
_Maps = Mapping[str, tuple[str, Mapping[str, Any] | AbstractSet[str]]]
#: a version that serves another version's rows derives its own after the process's first
#: discovery has answered (beside it, its pure-Python build held the interpreter for 5 ms
#: at a time while the request's SQLite reads took it back row by row: 9-11 s instead of
#: ~1 s at 100k tools), or after this many seconds when no discovery comes first
REDERIVE_WAIT_S = 5.0


def _kept_key(name: str) -> str:
    """The key the derived part ``name`` is kept under: its name and a digest of the code
    that builds it (:func:`toolscout.discovery.keptparts.kept_key`), so a changed toolscout
    never reads old state as its own, and a change elsewhere keeps what it kept."""
    return kept_key(name)


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
        #: rendered names the stale name table gave another tool than this version's does:
        #: a model may have been shown either meaning, so neither is resolved
        self.ambiguous: frozenset[str] = frozenset()
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


class DerivedState:
    """The derived structures and token figures of the catalog's current generation (a part
    of :class:`~toolscout.discovery.catalog.Catalog`)."""

    if TYPE_CHECKING:  # the catalog's, used here
        store: Store
        _state: _State | None
        _tokens_kept: int
        _keeping: list[threading.Thread]
        _keeping_lock: threading.Lock
        _answered: threading.Event  # set when a discovery has answered, and on close

        def refresh(self) -> _State: ...
        def get(self, tool_id: str) -> ToolSpec: ...
        def specs_of(self, ids: Sequence[str]) -> list[ToolSpec]: ...
        def entitle(self, principal: Principal) -> Entitlement: ...

    @property
    def counts_kept(self) -> bool:
        """Whether token counts an earlier process made over this store were read, of as
        many renderings as the catalog has tools: then a shortlist is likely counted
        without the tokenizer (the texts it counted are; any other loads it)."""
        return 0 < self.refresh().size <= self._tokens_kept

    def phrases(self) -> PhraseIndex:
        """The phrase index: read per key from the rows kept for this generation, else
        built from the cards (every card's words tokenised) and kept."""
        return self._phrases_of(self.refresh())

    def _phrases_of(self, state: _State) -> PhraseIndex:
        with state.lock:
            if state.phrases is None:
                parts = self._derived(state, "phrase-index")
                state.phrases = _phrase_index(state, parts)
            return state.phrases

    def _derived(self, state: _State, name: str) -> Mapping[str, Any]:
        """The parts ``name`` derives from ``state``: the rows a process kept in the store
        for this generation (and this code: the key names a digest of the modules that
        build them), read per key; else built here (:meth:`_built`), kept for the next
        process. A damaged part is built again whole
        (:class:`~toolscout.discovery.kept.KeptMap`)."""
        store = row_store(self.store)
        kinds = _PARTS[name]
        whole = built_once(lambda: self._built(state, name))
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
        written (a thread deriving again starts the writes of what it derived; one still
        waiting for a first answer starts now)."""
        self._answered.set()
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
        ones: the same catalog generation, derived by the code of another version. The
        thread starts deriving once a discovery has answered (or on close, or after
        :data:`REDERIVE_WAIT_S`): not beside the request that found the rows stale."""

        def later() -> None:
            self._answered.wait(REDERIVE_WAIT_S)
            self._rederive_all(state)
            self._drop_served(state)

        with self._keeping_lock:
            if state.rederiving:
                return
            state.rederiving = True
            thread = threading.Thread(
                target=_quietly, args=(later,), name="toolscout-rederive", daemon=False
            )
            self._keeping.append(thread)
            thread.start()

    def _rederive_all(self, state: _State) -> None:
        store = row_store(self.store)
        if store is None:
            return
        path = getattr(self.store, "path", None)
        keys = {name: _kept_key(name) for name in _PARTS}
        if (
            state.size >= rederiving.CHILD_FROM
            and path is not None
            and str(path) != ":memory:"
            and rederiving.derive_in_child(path, state.generation, keys)
        ):  # kept by the child: read per key, as a later process reads them
            for name, kinds in _PARTS.items():
                if name in state.stale:
                    rebuild = self._rebuilder(state, name)  # a damaged row: built here
                    found = read_maps(store, keys[name], state.generation, kinds, rebuild)
                    if found is not None:
                        self._put(state, name, found[0])
            if not state.stale:
                return

        for name, kinds in _PARTS.items():  # the finder index last: from the phrase index
            if read_maps(store, keys[name], state.generation, kinds, _nothing) is not None:
                continue  # kept for this version already: what it serves is not stale
            parts = self._built(state, name)
            self._keep(store, keys[name], state.generation,
                       {p: (kinds[p], parts[p]) for p in kinds})  # fmt: skip
            self._put(state, name, parts)

    def _drop_served(self, state: _State) -> None:
        """Once this version's parts are in place of the ones another version kept, remove
        what that version kept for the generation if no process reads it any more (its
        readers hold it: the older version's running processes, and this one until the
        last request that read the stale parts is done; a version before those holds
        keeps its rows until the generation moves). On a second connection: the rows go
        in short transactions that requests on this one do not wait behind."""
        second = getattr(self.store, "second_connection", None)
        other = None
        with suppress(Exception):  # a cache: removed by a later write instead
            other = second() if callable(second) else None
        if other is None:
            return
        try:
            drop = getattr(other, "drop_superseded", None)
            if callable(drop):
                for name in _PARTS:
                    drop(_kept_key(name), state.generation)
        finally:
            other.close()

    def _rebuilder(self, state: _State, name: str) -> Callable[[str], Mapping[str, Any]]:
        """What a kept part of ``name`` found damaged is replaced with: the part built here
        (once for all its parts)."""
        whole = built_once(lambda: self._built(state, name))
        return lambda p: whole()[p]

    def _built(self, state: _State, name: str) -> Mapping[str, Any]:
        """The part ``name`` of ``state`` built from its cards, here: the one place a part's
        builder is named (the finder index from the phrase index's name terms, read
        without its lock when it is in place already: :meth:`finders` holds that lock)."""
        with no_gc():
            if name == "phrase-index":
                return _phrase_parts(state)
            if name == "name-table":
                return _name_parts(state)
            phrases = state.phrases or self._phrases_of(state)
            return _finder_parts(phrases.fields.name)

    def _put(self, state: _State, name: str, parts: Mapping[str, Any]) -> None:
        """This version's part ``name`` in place of the one ``state`` serves (whole)."""
        if name == "phrase-index":
            index = _phrase_index(state, parts)
            with state.lock:
                state.phrases = index
                state.stale.discard(name)
        elif name == "name-table":
            rendered = parts["rendered"]
            side = getattr(self.store, "second_connection", None)
            moved = None  # the served names compared, outside the lock when they can be
            if name in state.stale and state.rendered is not None:
                moved = differing(state.rendered, rendered, side)
            with state.lock:
                if moved is None and name in state.stale and state.rendered is not None:
                    moved = differing(state.rendered, rendered, side)  # served since
                state.names, state.rendered = parts["names"], rendered
                state.ambiguous = state.ambiguous | (moved or frozenset())
                if name in state.stale:  # counted with the stale names: count again
                    state.stale.discard(name)
                    state.tool_tokens.clear()
                    state.catalog_tokens.clear()
        else:
            with state.lock:
                state.finders = _finder_index(parts)
                state.stale.discard(name)

    def finders(self) -> FinderIndex:
        """The tools named as finders (search, find, lookup, list), by their name words."""
        state = self.refresh()
        self._phrases_of(state)  # outside the lock: it takes it (and _built reads it then)
        with state.lock:
            if state.finders is None:
                state.finders = _finder_index(self._derived(state, "finder-index"))
            return state.finders

    def names(self) -> Mapping[str, str]:
        """Tool id → the function name every rendering uses (unique over the catalog)."""
        state = self.refresh()
        with state.lock:
            if state.names is None:
                parts = self._derived(state, "name-table")
                state.names, state.rendered = parts["names"], parts["rendered"]
            return state.names

    def resolve(self, name: str) -> str | None:
        """The tool id a model-facing name stands for: an id, or a rendered name (None for
        a name another version's names, served before this version's, gave another tool:
        refused rather than run as a tool the model was not shown)."""
        state = self.refresh()
        if name in state.by_id:
            return name
        self.names()
        return None if name in state.ambiguous else (state.rendered or {}).get(name)

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


def _nothing(part: str) -> Mapping[str, Any]:
    return {}
