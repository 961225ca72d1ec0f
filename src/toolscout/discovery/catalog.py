"""The catalog: the one object the surfaces talk to.

``Catalog.open(path)`` gives the embedded SQLite store; ``add`` validates and
indexes tools (embedding only texts it has never seen); ``discover`` runs the
pipeline entitle → retrieve → select → inject and returns a :class:`Shortlist`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from toolscout.cards import ToolSpec, check_unique
from toolscout.discovery import inject
from toolscout.discovery.lexical import terms, words
from toolscout.discovery.search import (
    Candidate,
    PhraseIndex,
    Reformulator,
    Retrieval,
    Retriever,
    parse_query,
    select,
)
from toolscout.discovery.shortlist import IndexReport, ScoredTool, Shortlist, TokenReport, Trace
from toolscout.embed.minilm import Embedder, MiniLMEmbedder, normalise, text_hash
from toolscout.errors import ConfigError, FormatError, UnknownToolError
from toolscout.policy import Decision, Entitlement, PolicyConfig, Principal, decide, entitle
from toolscout.settings import SearchSettings
from toolscout.stores.base import KIND_ALIAS, KIND_CARD, KIND_LEARNED, IndexedTool, Vector
from toolscout.stores.sqlite import LearnedAliases, SQLiteStore
from toolscout.telemetry.log import DiscoveryLog

#: learned phrases kept per tool
LEARNED_PER_TOOL = 64


class GrantIssuer(Protocol):
    def issue(self, principal: Principal, tool_ids: Sequence[str]) -> str: ...


def lexical_fields(spec: ToolSpec, learned: Sequence[str] = ()) -> dict[str, str]:
    """The pre-normalised text of each lexical field (not-for hints are never indexed)."""
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
    head = " ".join(words(card.name))
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
    texts += [(KIND_LEARNED, (q,)) for q in learned]
    return texts


class Catalog:
    """Tools, their index and the discovery pipeline over one store."""

    def __init__(
        self,
        store: SQLiteStore,
        *,
        embedder: Embedder | None = None,
        policy: PolicyConfig | None = None,
        settings: SearchSettings | None = None,
        log: DiscoveryLog | None = None,
        reformulator: Reformulator | None = None,
    ) -> None:
        self.store = store
        self.embedder: Embedder = embedder or MiniLMEmbedder()
        self.policy = policy or self._stored_policy() or PolicyConfig()
        self.settings = settings or SearchSettings()
        self.log = log
        self.reformulator = reformulator
        self._learned = LearnedAliases(store)
        self._reload()

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
    ) -> Catalog:
        store = SQLiteStore(path)
        dlog = DiscoveryLog(path) if log and str(path) != ":memory:" else None
        return cls(
            store,
            embedder=embedder,
            policy=policy,
            settings=settings,
            log=dlog,
            reformulator=reformulator,
        )

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
        self.store.close()

    def snapshot(self, dest: str | Path) -> Path:
        """A consistent copy of the store file (SQLite backup API); this catalog stays open."""
        import sqlite3

        target = Path(dest)
        src = sqlite3.connect(str(self.store.path))
        dst = sqlite3.connect(str(target))
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
        return target

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stored_policy(self) -> PolicyConfig | None:
        raw = self.store.meta("policy")
        return PolicyConfig.from_dict(json.loads(raw)) if raw else None

    def set_policy(self, policy: PolicyConfig) -> None:
        """Use ``policy`` and store it with the catalog, for every later ``Catalog.open``."""
        self.policy = policy
        self.store.set_meta("policy", json.dumps(policy.to_dict()))
        self._entitlements.clear()

    # -- state -------------------------------------------------------------------
    def _reload(self) -> None:
        self._specs = self.store.load()
        self._by_id = {s.id: s for s in self._specs}
        self._cards = tuple(s.card for s in self._specs)
        df, _ = self.store.document_frequency()
        self._phrases = PhraseIndex(self._specs, df)
        self._entitlements: dict[tuple[str, frozenset[str]], Entitlement] = {}
        self._token_cache: dict[tuple[str, str], int] = {}

    def __len__(self) -> int:
        return len(self._specs)

    def specs(self) -> list[ToolSpec]:
        return list(self._specs)

    def spec(self, tool_id: str) -> ToolSpec | None:
        return self._by_id.get(tool_id)

    def get(self, tool_id: str) -> ToolSpec:
        spec = self._by_id.get(tool_id)
        if spec is None:
            raise UnknownToolError(tool_id)
        return spec

    def schema(self, tool_id: str, fmt: str = "openai") -> dict[str, Any]:
        return inject.render([self.get(tool_id)], fmt)[0]

    # -- indexing ----------------------------------------------------------------
    def add(
        self,
        specs: Iterable[ToolSpec],
        *,
        replace_all: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> IndexReport:
        """Validate and index tools in one transaction; unchanged texts are not re-embedded."""
        start = time.perf_counter()
        batch = check_unique(specs)
        learned = self._learned.of(LEARNED_PER_TOOL)
        tools, texts = self._indexed(batch, learned)
        vectors = self._embed_missing(texts, progress)
        stats = self.store.upsert(
            tools, vectors, model_id=self.embedder.model_id, replace_all=replace_all
        )
        self._reload()
        warnings = tuple(self._size_warnings(batch))
        return IndexReport(stats, time.perf_counter() - start, warnings)

    def _indexed(
        self, batch: Sequence[ToolSpec], learned: Mapping[str, Sequence[str]]
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
            tools.append(IndexedTool(spec, lexical_fields(spec, mine), owned))
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
        self._reload()
        return n

    # -- learning from usage -----------------------------------------------------
    def record_usage(self, query: str, tool_id: str, uses: int = 1) -> None:
        """Remember that ``query`` led to a successful call of ``tool_id`` (applied by learn)."""
        self.get(tool_id)
        self._learned.add([(tool_id, " ".join(query.split())[:500], uses)])

    def learn(self, *, from_log: bool = True) -> IndexReport:
        """Fold learned (query → tool) pairs into the index: as aliases, lexical and dense."""
        if from_log and self.log is not None:
            pairs = [(t, q, n) for t, q, n in self.log.learned_pairs() if t in self._by_id]
            self._learned.clear()
            self._learned.add(pairs)
        return self.add(self._specs)

    # -- discovery ---------------------------------------------------------------
    def decide(self, principal: Principal, tool_id: str) -> Decision:
        """May ``principal`` use ``tool_id``, and if not, why (for audit, never for a model)."""
        spec = self._by_id.get(tool_id)
        return decide(principal, spec.card if spec else None, self.policy)

    def entitle(self, principal: Principal) -> Entitlement:
        key = (principal.tenant, self.policy.effective_scopes(principal))
        ent = self._entitlements.get(key)
        if ent is None:
            ent = entitle(self._cards, principal, self.policy)
            if len(self._entitlements) > 256:
                self._entitlements.clear()
            self._entitlements[key] = ent
        return ent

    def _tokens(self, tool_id: str, fmt: str) -> int:
        key = (tool_id, fmt)
        n = self._token_cache.get(key)
        if n is None:
            n = self._token_cache[key] = inject.schema_tokens([self._by_id[tool_id]], fmt)
        return n

    def _catalog_tokens(self, ent: Entitlement, fmt: str) -> int:
        key = (f"\x00catalog:{id(ent)}", fmt)
        n = self._token_cache.get(key)
        if n is None:
            n = self._token_cache[key] = sum(self._tokens(c.id, fmt) for c in ent.allowed)
        return n

    def retriever(self, settings: SearchSettings | None = None) -> Retriever:
        return Retriever(
            self.store,
            self.embedder,
            self._phrases,
            settings or self.settings,
            self.reformulator,
            lambda ids: self.store.card_vectors(ids, self.embedder.model_id),
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
    ) -> Shortlist:
        """entitle → retrieve → select → inject, for one query and one principal."""
        start = time.perf_counter()
        if fmt not in inject.FORMATS:
            raise FormatError(fmt, inject.FORMATS)
        if not 1 <= k <= 10:
            raise ConfigError(f"k must be between 1 and 10, got {k}")
        cfg = settings or self.settings
        ent = self.entitle(principal)
        allowed = ent.ids
        df, n_docs = self.store.document_frequency()
        parsed = parse_query(query, df, n_docs, cfg)
        chosen_tier = inject.choose_tier(len(allowed), tier)
        retrieval: Retrieval | None = None
        if chosen_tier is inject.Tier.ALL:
            chosen = [Candidate(c.id) for c in ent.allowed]
            confidence = 1.0
        else:
            retrieval = self.retriever(cfg).run(parsed, allowed)
            exact = self._phrases.find(parsed.text, allowed) if cfg.exact_hits else {}
            confidence = 1.0 if exact else retrieval.confidence
            chosen = select(
                retrieval.candidates,
                exact,
                k,
                dedupe=cfg.dedupe,
                card_vectors=lambda ids: self.store.card_vectors(ids, self.embedder.model_id),
                token_cost=lambda tid: self._tokens(tid, fmt),
                token_budget=token_budget,
            )
            if chosen_tier is inject.Tier.GROUPS:
                chosen = self._group_expand(chosen, ent)
        specs = [self._by_id[c.id] for c in chosen]
        tools = tuple(
            ScoredTool(c.id, self._by_id[c.id].card.name, c.fused, c.lexical, c.dense, c.exact)
            for c in chosen
        )
        schemas = tuple(inject.render(specs, fmt))
        tokens = TokenReport(
            catalog=self._catalog_tokens(ent, fmt),
            injected=inject.schema_tokens(specs, fmt) if specs else 0,
        )
        low = retrieval.low_confidence if retrieval is not None and confidence < 1.0 else False
        grant = grants.issue(principal, [t.id for t in tools]) if grants is not None else None
        latency = (time.perf_counter() - start) * 1000
        did = None
        if self.log is not None:
            did = self.log.record_discovery(
                principal.subject,
                principal.tenant,
                parsed.text,
                [t.id for t in tools],
                confidence,
                latency,
            )
        trace = Trace()
        if retrieval is not None:
            trace = Trace(
                tuple(retrieval.lexical_ids),
                tuple(retrieval.dense_ids),
                tuple(c.id for c in retrieval.candidates[:10]),
                retrieval.dense_weight,
                parsed.dropped,
            )
        return Shortlist(
            query=parsed.text,
            tier=chosen_tier,
            format=fmt,
            tools=tools,
            schemas=schemas,
            confidence=confidence,
            low_confidence=low,
            filtered_by_policy=ent.filtered,
            policy_reasons={r.value: n for r, n in ent.denied.items()},
            tokens=tokens,
            reformulations=tuple(retrieval.reformulations) if retrieval else (),
            grant=grant,
            discovery_id=did,
            latency_ms=latency,
            trace=trace,
        )

    def _group_expand(self, chosen: Sequence[Candidate], ent: Entitlement) -> list[Candidate]:
        """GROUPS tier: every entitled tool of the groups the best candidates belong to."""
        groups = [self._by_id[c.id].card.group for c in chosen if self._by_id[c.id].card.group]
        if not groups:
            return list(chosen)
        wanted = set(groups)
        members = inject.group_members([self._by_id[c.id] for c in ent.allowed], wanted)
        scored = {c.id: c for c in chosen}
        rank = {c.id: i for i, c in enumerate(chosen)}
        expanded = [scored.get(s.id) or Candidate(s.id) for s in members]
        # the shortlisted tools first, in their order; the rest of their groups after
        return sorted(expanded, key=lambda c: rank.get(c.id, len(rank)))

    def record_call(self, shortlist: Shortlist | None, tool_id: str, *, ok: bool = True) -> None:
        """Tell the discovery log which tool was called after a discovery."""
        if self.log is not None:
            did = shortlist.discovery_id if shortlist is not None else None
            self.log.record_call(tool_id, discovery_id=did, ok=ok)
