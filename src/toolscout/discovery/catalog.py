"""The catalog: registry and indexing over one store, and the one owner of catalog state.

``Catalog`` validates and indexes tools (embedding only texts it has never
seen), keeps the policy with them, and answers "which tools exist, may this
principal use this one" from the store's *current* state: every read first
checks the store's generation counter, so a policy change or re-index made by
this process or another is seen by the next call. Discovery itself is the
pipeline in :mod:`toolscout.discovery.pipeline`.

This module holds the catalog's state and reads (cards, specs, policy, entitlement);
the class takes three parts from their own modules: :mod:`~toolscout.discovery.opening`
(opening a path, what a new process loads first), :mod:`~toolscout.discovery.indexing`
(the write path) and :mod:`~toolscout.discovery.derived` (the derived structures, their
kept rows and the token figures). Their public names are importable from here too.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.discovery import inject
from toolscout.discovery.calibrate import MAX_SHIFT, SHIFT_META, ConfidenceShift
from toolscout.discovery.cardtable import CardTable
from toolscout.discovery.derived import (
    CATALOG_TOKEN_SAMPLE,
    EXACT_CATALOG_TOKENS,
    DerivedState,
    _kept_key,
    _State,
)
from toolscout.discovery.indexing import (
    EMBEDDER_META,
    INDEX_VERSION,
    LEARNED_PER_TOOL,
    Indexing,
    card_views,
    embedding_texts,
    lexical_fields,
    source_hash,
)
from toolscout.discovery.kept import no_gc
from toolscout.discovery.opening import Opening, prefetch_models, stored_embedder
from toolscout.discovery.search import Reformulator, Retriever
from toolscout.discovery.shortlist import Shortlist
from toolscout.embed.base import Embedder
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
from toolscout.settings import SearchSettings
from toolscout.stores.base import Store

if TYPE_CHECKING:
    from toolscout.discovery.pipeline import GrantIssuer
    from toolscout.telemetry.log import DiscoveryLog

__all__ = [
    "CATALOG_TOKEN_SAMPLE",
    "EMBEDDER_META",
    "ENTITLEMENT_CACHE",
    "EXACT_CATALOG_TOKENS",
    "INDEX_VERSION",
    "LEARNED_PER_TOOL",
    "SPEC_CACHE",
    "Catalog",
    "_kept_key",
    "card_views",
    "embedding_texts",
    "lexical_fields",
    "prefetch_models",
    "source_hash",
    "stored_embedder",
]

#: full specs kept in memory (schemas are otherwise read from the store when needed)
SPEC_CACHE = 2048
#: entitlements (tenant, scopes) kept per catalog generation, least recently used out
ENTITLEMENT_CACHE = 512


class _Turn:
    """A generation read on an event loop's thread, good until the loop's next turn."""

    __slots__ = ("counter", "live", "loop", "state", "writes")

    def __init__(
        self, state: _State, counter: Callable[[], int], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.state, self.counter, self.loop, self.live = state, counter, loop, True
        self.writes = counter()

    def end(self) -> None:
        self.live = False


class Catalog(Opening, Indexing, DerivedState):
    """Tools and their index over one store; the state discovery and the gateway share."""

    #: Whether reads on an event loop's thread share one generation read until the loop's
    #: next turn (a forwarded MCP call asks three times: the name, the id, the decision).
    #: A change another process commits reaches this one through I/O — a request, a
    #: thread's result — which the loop handles on a later turn, so no read made for it
    #: sees the older state; a write through this store's own connection (any thread) is
    #: told by the store's write counter (``local_writes``). Only a write through another
    #: connection *in this process, on this thread, within the same turn* would go unseen
    #: until the next turn: why it is off unless the one owner of the process (the MCP
    #: gateway) turns it on. Stores without a write counter are asked every time.
    reuse_within_turn = False

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
        self._answered = threading.Event()  # a discovery answered (derive stale rows again)
        if policy is not None and self._stored_policy() != policy:
            self.set_policy(policy)
        self.refresh()

    def close(self) -> None:
        self.wait_kept()  # stale rows are derived again now, not after a wait
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

        Inside :meth:`pinned`, the state the block started with; with
        :attr:`reuse_within_turn`, the state read earlier in this turn of the loop."""
        pinned: _State | None = getattr(self._pin, "state", None)
        if pinned is not None:
            return pinned
        turn: _Turn | None = getattr(self._pin, "turn", None)
        if (
            turn is not None
            and turn.live
            and turn.state is self._state
            and turn.loop is asyncio._get_running_loop()
            and turn.writes == turn.counter()
        ):
            return turn.state
        state = self._read_generation()
        if self.reuse_within_turn:
            self._hold_for_turn(state)
        return state

    def _hold_for_turn(self, state: _State) -> None:
        """Let this thread's next reads, until its event loop's next turn, take ``state``
        without asking the store (see :attr:`reuse_within_turn`)."""
        loop = asyncio._get_running_loop()
        counter = getattr(self.store, "local_writes", None)
        if loop is None or counter is None:
            return
        self._pin.turn = turn = _Turn(state, counter, loop)
        loop.call_soon(turn.end)

    def _read_generation(self) -> _State:
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

        try:
            return discover(
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
        finally:
            if not self._answered.is_set():  # what was found stale is derived again now
                self._answered.set()

    def record_call(self, shortlist: Shortlist | None, tool_id: str, *, ok: bool = True) -> None:
        """Tell the discovery log which tool was called after a discovery."""
        if self.log is not None:
            did = shortlist.discovery_id if shortlist is not None else None
            self.log.record_call(tool_id, discovery_id=did, ok=ok)
