"""Discovery as a pipeline of plain functions: entitle → retrieve → select → inject.

Each stage takes what the previous one returned. Only :func:`entitle` reads the
policy and it never reads the query; :func:`retrieve_or_skip` and :func:`select` work on
ids and scores and never touch schemas; :func:`inject` renders the schemas of
the selected ids only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from toolscout.discovery import abstain, calibrate, named, pinned, skip
from toolscout.discovery import inject as rendering
from toolscout.discovery.gates import step_on
from toolscout.discovery.groups import expand_groups
from toolscout.discovery.prerequisites import add_prerequisites
from toolscout.discovery.query import closest_first
from toolscout.discovery.search import (
    DEDUPE_YIELD,
    Candidate,
    Query,
    Retrieval,
    parse_query,
    within_budget,
)
from toolscout.discovery.search import select as select_candidates
from toolscout.discovery.shortlist import ScoredTool, Shortlist, TokenReport, Trace
from toolscout.errors import ConfigError, FormatError
from toolscout.policy import (
    AdminLevel,
    Entitlement,
    PolicyConfig,
    Principal,
    Reason,
    admin_level,
)
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits

if TYPE_CHECKING:
    from toolscout.discovery.catalog import Catalog

#: the most tools one discovery may return
MAX_K = 10


class GrantIssuer(Protocol):
    def issue(self, principal: Principal, tool_ids: Sequence[str]) -> str: ...


@dataclass(frozen=True, slots=True)
class Selection:
    """What retrieval and selection chose, before any schema is read."""

    tier: rendering.Tier
    chosen: list[Candidate]
    confidence: float
    low_confidence: bool
    retrieval: Retrieval | None
    #: why the query encoder was skipped ("exact", "margin"; "" when it ran)
    skipped: str = ""


def entitle(catalog: Catalog, principal: Principal) -> Entitlement:
    """Stage 1: the cards ``principal`` may use (the policy only; never the query)."""
    return catalog.entitle(principal)


def retrieve_or_skip(
    catalog: Catalog,
    query: Query,
    ent: Entitlement,
    settings: SearchSettings,
    tenant: str = "",
    exact: Mapping[str, str] | None = None,
) -> tuple[Retrieval, str]:
    """Stage 2: hybrid ranking over the entitled ids only (the tenant's learned usage),
    lexical only when the lexical answer is decisive (an ``exact`` mention, a clear BM25
    winner: discovery/skip.py), with the reason it skipped the encoder ("" when it ran).
    The coverage rule comes first (:meth:`Retriever.for_request`): a request it reads by
    the dense path alone, or whose words it carries over (discovery/crosslingual.py),
    never skips the encoder."""
    base = catalog.retriever(settings, tenant=tenant)
    retriever = base.for_request(query)
    if retriever is not base:  # the rule reads it: :meth:`Retriever.run` carries its words
        return base.run(query, ent.ids), ""  # over or reads it by the dense path alone
    if not skip.applies(retriever.settings):
        return retriever.run(query, ent.ids), ""
    lex = retriever.lexical(query.terms, ent.ids) if skip.needs_lexical() else None
    why = skip.reason(exact or {}, lex or Hits())
    if why:
        retriever.settings = replace(retriever.settings, dense=False)
    return retriever.run(query, ent.ids, lex=lex), why


def select(
    catalog: Catalog,
    query: Query,
    ent: Entitlement,
    *,
    k: int,
    fmt: str,
    settings: SearchSettings,
    tier: rendering.Tier | str | None,
    token_budget: int | None,
    tenant: str = "",
) -> Selection:
    """Stages 2–3: the tier rule, then retrieval and a redundancy-aware top-``k``."""
    chosen_tier = rendering.choose_tier(len(ent.ids), tier)
    if chosen_tier is rendering.Tier.ALL:
        everything = [Candidate(c.id) for c in ent.allowed]
        # every entitled tool is shown; nothing entitled is no match, not a sure one
        confidence = 1.0 if everything else 0.0
        return Selection(chosen_tier, everything, confidence, not everything, None)
    exact = exact_mentions(catalog, query, ent, settings)
    retrieval, skipped = retrieve_or_skip(catalog, query, ent, settings, tenant, exact)
    # a request that clearly asks for more tasks than k gets one tool per task (budget allowing)
    k = min(max(k, len(retrieval.intents)), MAX_K)
    chosen = top_k(
        catalog, query, ent, retrieval, exact, k, settings, fmt=fmt, token_budget=token_budget
    )
    confidence = shown_confidence(catalog, query, retrieval, chosen, exact, settings, skipped)
    if chosen_tier is rendering.Tier.GROUPS:
        chosen = expand_groups(
            chosen,
            {c.id: c.group for c in ent.allowed},
            [c.id for c in ent.allowed],
            token_cost=lambda tid: catalog.schema_tokens(tid, fmt),
            token_budget=token_budget,
        )
    low = confidence < settings.confidence_threshold
    return Selection(chosen_tier, chosen, confidence, low, retrieval, skipped)


def exact_mentions(
    catalog: Catalog, query: Query, ent: Entitlement, settings: SearchSettings
) -> Mapping[str, str]:
    """The entitled tools the request names verbatim (id, name or alias), when exact hits
    are on: they always make the shortlist."""
    if not step_on("exact_hits", query.text, settings):
        return {}
    return catalog.phrases().find(query.text, ent.ids, cards=ent.by_id)


def top_k(
    catalog: Catalog,
    query: Query,
    ent: Entitlement,
    retrieval: Retrieval,
    exact: Mapping[str, str],
    k: int,
    settings: SearchSettings,
    *,
    fmt: str = "openai",
    token_budget: int | None = None,
) -> list[Candidate]:
    """Stage 3: the exact mentions, then the ranking with near-duplicates pushed back, each
    tool followed by the entitled finders it needs (when on), within the token budget."""

    def cost(tool_id: str) -> int:
        return catalog.schema_tokens(tool_id, fmt)

    # of copies of one name the request cannot tell apart, the caller's own first
    ranked = retrieval.candidates
    order = closest_first([c.id for c in ranked], ent.by_id, query.text)
    if any(c.id != t for c, t in zip(ranked, order, strict=True)):
        by_id = {c.id: c for c in ranked}
        ranked = [by_id[t] for t in order]
    chosen = select_candidates(
        ranked,
        exact,
        k,
        dedupe=step_on("dedupe", query.text, settings),
        dedupe_yield=DEDUPE_YIELD if settings.dedupe_yield is None else settings.dedupe_yield,
        card_vectors=lambda ids: catalog.store.card_vectors(ids, catalog.embedder.model_id),
        token_cost=cost,
        token_budget=token_budget,
    )
    if not step_on("prerequisites", query.text, settings):
        return chosen
    with_finders = add_prerequisites(
        chosen,
        k,
        request=query.text,
        index=catalog.finders(),
        allowed=ent.ids,
        specs_of=catalog.specs_of,
        candidates=ranked,
    )
    return within_budget(with_finders, cost, token_budget)


def shown_confidence(
    catalog: Catalog,
    query: Query,
    retrieval: Retrieval,
    chosen: Sequence[Candidate],
    exact: Mapping[str, str],
    settings: SearchSettings,
    skipped: str = "",
) -> float:
    """The estimated chance that the shortlist's first tool is right (0 when there is none).

    With the learned ranker, a calibrated model over the ranker's probability and the
    exact mentions (:func:`calibrate.confidence`; its own model for a ranking that
    ``skipped`` the encoder), with the catalog's own correction from its log when one was
    accepted; the fixed fusions keep their heuristic, where an exact mention counts as sure.
    """
    if not chosen:
        return 0.0
    if settings.fusion != "learned":
        return 1.0 if exact else retrieval.confidence
    inputs = confidence_inputs(catalog, query, retrieval, chosen, exact)
    shift = catalog.confidence_shift.shift
    return calibrate.confidence(inputs, shift=shift, encoder_skipped=bool(skipped))


def confidence_inputs(
    catalog: Catalog,
    query: Query,
    retrieval: Retrieval,
    chosen: Sequence[Candidate],
    exact: Mapping[str, str],
) -> list[float]:
    """What :func:`calibrate.confidence` reads of one selection (benchmarks fit on these)."""
    index = catalog.phrases()
    return calibrate.confidence_inputs(
        query.text,
        query.terms,
        retrieval.candidates,
        retrieval.confidence,
        chosen,
        exact,
        index.fields,
        index.idf,
    )


def inject(
    catalog: Catalog, chosen: Sequence[Candidate], principal: Principal, fmt: str
) -> tuple[tuple[dict[str, Any], ...], dict[str, str], TokenReport]:
    """Stage 4: the selected tools' schemas in ``fmt``, their names, and the token figures."""
    specs = catalog.specs_of([c.id for c in chosen])
    names = catalog.names()
    schemas = tuple(rendering.render(specs, fmt, names))
    tokens = TokenReport(
        catalog=catalog.entitled_tokens(principal, fmt),
        # counted from the cached renderings the schemas were read from: the same texts
        # as serialising the schemas again (tests/test_hot_render.py), without doing it
        injected=rendering.schema_tokens(specs, fmt, names) if specs else 0,
    )
    return schemas, {names[s.id]: s.id for s in specs}, tokens


def discover(
    catalog: Catalog,
    query: str,
    principal: Principal,
    *,
    k: int = 3,
    fmt: str = "openai",
    settings: SearchSettings | None = None,
    tier: rendering.Tier | str | None = None,
    token_budget: int | None = None,
    grants: GrantIssuer | None = None,
    conversation: str | None = None,
    record: bool = True,
) -> Shortlist:
    """entitle → retrieve → select → inject, for one query and one trusted principal,
    over one generation of the catalog. ``record=False`` leaves the discovery log alone
    (a server's warm-up discovery is nobody's)."""
    start = time.perf_counter()
    if fmt not in rendering.FORMATS:
        raise FormatError(fmt, rendering.FORMATS)
    if not 1 <= k <= MAX_K:
        raise ConfigError(f"k must be between 1 and {MAX_K}, got {k}")
    with catalog.pinned():
        cfg = settings or catalog.settings
        ent = entitle(catalog, principal)
        df, n_docs = catalog.store.document_frequency()
        parsed = parse_query(query, df, n_docs, cfg)
        sel = select(
            catalog,
            parsed,
            ent,
            k=k,
            fmt=fmt,
            settings=cfg,
            tier=tier,
            token_budget=token_budget,
            tenant=principal.tenant,
        )
        sel, abstention = name_first_or_abstain(catalog, parsed, ent, sel, k, cfg)
        schemas, names, tokens = inject(catalog, sel.chosen, principal, fmt)
        pins = pinned.pinned_ids(catalog.policy, principal, ent)
        pin_schemas, pin_names, pin_tokens = pinned.render_pinned(catalog, pins, fmt)
        tokens = replace(tokens, pinned=pin_tokens)
        cards = ent.by_id
        tools = tuple(
            ScoredTool(c.id, cards[c.id].name, c.fused, c.lexical, c.dense, c.exact, c.needed_by)
            for c in sel.chosen
            if c.id in cards
        )
        grant = grants.issue(principal, [t.id for t in tools]) if grants is not None else None
        latency = (time.perf_counter() - start) * 1000
        did = None
        if catalog.log is not None and record:
            did = catalog.log.record_discovery(
                principal.subject,
                principal.tenant,
                parsed.text,
                [t.id for t in tools],
                sel.confidence,
                latency,
                conversation=conversation,
                low_confidence=sel.low_confidence,
            )
        # how many tools policy hid, and why, is for administrators only; a tenant
        # administrator does not learn the size of other tenants' catalogs
        hidden = _hidden_for(principal, catalog.policy, ent.denied)
        return Shortlist(
            query=parsed.text,
            tier=sel.tier,
            format=fmt,
            tools=tools,
            schemas=schemas,
            confidence=sel.confidence,
            low_confidence=sel.low_confidence,
            filtered_by_policy=None if hidden is None else sum(hidden.values()),
            policy_reasons=hidden or {},
            tokens=tokens,
            reformulations=tuple(sel.retrieval.reformulations) if sel.retrieval else (),
            grant=grant,
            discovery_id=did,
            latency_ms=latency,
            trace=_trace(sel.retrieval, parsed, sel.skipped),
            names={**pin_names, **names},
            pinned=pins,
            pinned_schemas=pin_schemas,
            abstained=abstention.reason.value if abstention else None,
        )


def _hidden_for(
    principal: Principal, policy: PolicyConfig, denied: Mapping[Reason, int]
) -> dict[str, int] | None:
    """The policy's refusals by reason, as far as this principal may know them: all of
    them for a platform administrator, its own tenant's share for a tenant administrator,
    nothing (None) for anyone else."""
    level = admin_level(principal, policy)
    if level is AdminLevel.NONE:
        return None
    return {
        r.value: n
        for r, n in denied.items()
        if level is AdminLevel.PLATFORM or r is not Reason.TENANT
    }


def name_first_or_abstain(
    catalog: Catalog, query: Query, ent: Entitlement, sel: Selection, k: int, cfg: SearchSettings
) -> tuple[Selection, abstain.Abstention | None]:
    """The tools the whole query names go first (discovery/named.py); otherwise a selection
    whose calibrated confidence is too low abstains (discovery/abstain.py)."""
    first = named.named_tools(catalog, query.text, ent.ids)
    if first:
        rest = [c for c in sel.chosen if c.id not in first]
        chosen = [Candidate(t, fused=1.0, exact="name") for t in first] + rest
        return replace(sel, chosen=chosen[: max(k, len(first))], confidence=1.0,
                       low_confidence=False), None  # fmt: skip
    gone = abstain.abstention(
        tier=sel.tier,
        n_entitled=len(ent.ids),
        confidence=sel.confidence,
        named=any(c.exact for c in sel.chosen),
        settings=cfg,
        unmatched=lambda: abstain.shown_unmatched(catalog, query, [c.id for c in sel.chosen]),
    )
    if gone is None:
        return sel, None
    return replace(sel, chosen=[], low_confidence=True), gone


def _trace(retrieval: Retrieval | None, parsed: Query, skipped: str = "") -> Trace:
    if retrieval is None:
        return Trace(dropped_terms=parsed.dropped)
    return Trace(
        tuple(retrieval.lexical_ids),
        tuple(retrieval.dense_ids),
        tuple(c.id for c in retrieval.candidates[:10]),
        retrieval.dense_weight,
        parsed.dropped,
        skipped,
    )
