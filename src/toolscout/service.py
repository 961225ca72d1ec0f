"""``Toolscout``: the one object that holds the loop discover → the model's call → execute.

Built from one :class:`~toolscout.settings.Settings`, it owns the catalog (the
single owner of tools and policy), the token verifier, the executors, the audit
log and the discovery log. Every surface — CLI, MCP gateway, HTTP API, SDK
adapters — is a thin layer over it.

A ``caller`` is either a bearer token (verified on every call) or, for trusted
in-process use, a :class:`~toolscout.policy.Principal`.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscout.administration import Administration, local_operator
from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.inject import Tier
from toolscout.discovery.search import Reformulator
from toolscout.discovery.shortlist import IndexReport, Shortlist
from toolscout.embed.base import Embedder
from toolscout.errors import (
    ConfigError,
    GatewayError,
    TokenError,
    UnknownDiscoveryError,
    UnknownToolError,
)
from toolscout.executors.base import Executor
from toolscout.gateway.afterreply import AFTER_REPLY
from toolscout.gateway.audit import AuditLog
from toolscout.gateway.audit_pg import PostgresAuditLog
from toolscout.gateway.auth import TokenVerifier
from toolscout.gateway.core import Gateway
from toolscout.gateway.grants import GrantSigner
from toolscout.gateway.limits import Limits
from toolscout.gateway.result import ExecutionResult
from toolscout.policy import PolicyConfig, Principal, Reason
from toolscout.settings import Settings
from toolscout.stores.base import Store
from toolscout.stores.dsn import is_dsn

Caller = str | Principal

#: discoveries remembered in memory to link executions to them
REMEMBERED_DISCOVERIES = 10_000
#: refusal reasons a caller sees as ``unknown_tool``: it may not learn that the tool exists
HIDDEN_REASONS = frozenset({Reason.TENANT.value, Reason.UNKNOWN_TOOL.value})


@dataclass(frozen=True, slots=True)
class _Seen:
    #: (subject, tenant, conversation): where this discovery is the latest one
    key: tuple[str, str, str]
    names: Mapping[str, str]


class _NoVerifier:
    """Stands in when no token verification is configured: every token is refused."""

    def verify(self, token: str) -> Principal:
        raise TokenError(
            "this toolscout has no token verifier configured (Settings.jwt_key or jwt_jwks)",
            reason="token_verifier_missing",
        )


class Toolscout:
    """Discovery and execution over one catalog, for verified or trusted callers."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        settings: Settings | None = None,
        verifier: TokenVerifier | None = None,
        executors: Executor | Mapping[str, Executor] | None = None,
        audit: AuditLog | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.catalog = catalog
        self.verifier: TokenVerifier = verifier or _NoVerifier()
        self.grants = (
            GrantSigner(self.settings.grants_secret.encode())
            if self.settings.grants_secret
            else None
        )
        self.audit = audit or AuditLog(":memory:")
        self.gateway = Gateway(
            catalog,
            None,
            self.verifier,
            executors if executors is not None else {},
            self.audit,
            limits=limits,
            grants=self.grants,
            strict=self.settings.strict,
            allow_unknown_params=self.settings.allow_unknown_params,
            timeout_s=self.settings.timeout_s,
        )
        #: catalog administration for a principal: decided by policy, audited
        self.admin = Administration(catalog, self.audit)
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._last: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        target: str | Path | Settings | None = None,
        *,
        store: Store | None = None,
        embedder: Embedder | None = None,
        verifier: TokenVerifier | None = None,
        executors: Executor | Mapping[str, Executor] | None = None,
        audit: AuditLog | None = None,
        limits: Limits | None = None,
        policy: PolicyConfig | None = None,
        reformulator: Reformulator | None = None,
    ) -> Toolscout:
        """Everything from one ``Settings`` (or a catalog path); keywords override its parts."""
        settings = target if isinstance(target, Settings) else Settings(db=target)
        catalog = _open_catalog(settings, store, embedder, policy, reformulator)
        if verifier is None and (settings.jwt_key or settings.jwt_jwks):
            from toolscout.gateway.auth import JWTVerifier

            verifier = JWTVerifier(
                key=settings.jwt_key,
                jwks=settings.jwt_jwks,
                algorithms=settings.jwt_algorithms,
                issuer=settings.jwt_issuer,
                audience=settings.jwt_audience,
            )
        if audit is None:
            audit = _open_audit(settings)
        return cls(
            catalog,
            settings=settings,
            verifier=verifier,
            executors=executors,
            audit=audit,
            limits=limits,
        )

    # -- lifecycle ---------------------------------------------------------------
    def close(self) -> None:
        self.gateway.close()
        self.audit.close()
        self.catalog.close()

    async def aclose(self) -> None:
        await self.gateway.aclose()
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Toolscout:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- callers -----------------------------------------------------------------
    def verify(self, token: str) -> Principal:
        """The principal a bearer token proves (raises :class:`TokenError`)."""
        return self.verifier.verify(token)

    def principal(self, caller: Caller) -> Principal:
        if isinstance(caller, Principal):
            return caller
        if isinstance(caller, str):
            return self.verify(caller)
        raise ConfigError(f"a caller is a bearer token or a Principal, not {type(caller).__name__}")

    def entitled(self, caller: Caller) -> list[CapabilityCard]:
        """The cards the caller may use, in catalog order."""
        return list(self.catalog.entitle(self.principal(caller)).allowed)

    def schema(self, caller: Caller, tool_id: str, fmt: str = "openai") -> dict[str, Any]:
        """One tool's schema for a caller entitled to it; unknown and forbidden look the same."""
        principal = self.principal(caller)
        resolved = self.catalog.resolve(tool_id)
        if resolved is None:
            raise UnknownToolError(tool_id)
        return self.catalog.schema(resolved, principal, fmt)

    # -- indexing ----------------------------------------------------------------
    def add(
        self, specs: Iterable[ToolSpec], *, replace_all: bool = False, force: bool = False
    ) -> IndexReport:
        """Index tools as the local operator (trusted in-process use; audited).

        Changes that widen a stored tool's tenants, scopes or risk, or touch another
        source's tool, are refused unless ``force``. A surface acting for a caller uses
        :meth:`import_tools` instead."""
        return self.admin.import_tools(
            local_operator(self.catalog.policy), specs, replace_all=replace_all, force=force
        )

    def import_tools(
        self,
        caller: Caller,
        specs: Iterable[ToolSpec],
        *,
        replace_all: bool = False,
        force: bool = False,
        warnings: Sequence[str] | None = None,
    ) -> IndexReport:
        """Index tools for ``caller``: a tenant administrator changes only its own tenant's
        tools; ``replace_all``, ``force`` and untenanted or multi-tenant tools need a
        platform administrator (:func:`toolscout.policy.may_administer`). Raises
        :class:`~toolscout.errors.AdminDenied`; every change and refusal is audited."""
        return self.admin.import_tools(
            self.principal(caller), specs, replace_all=replace_all, force=force, warnings=warnings
        )

    def delete_tools(self, caller: Caller, ids: Sequence[str]) -> int:
        """Delete tools for ``caller`` (same rules as :meth:`import_tools`); audited."""
        return self.admin.delete_tools(self.principal(caller), ids)

    def replace_policy(self, caller: Caller, policy: PolicyConfig) -> None:
        """Store a new policy (platform administrators only); audited."""
        self.admin.replace_policy(self.principal(caller), policy)

    # -- discovery ---------------------------------------------------------------
    def discover(
        self,
        caller: Caller,
        query: str,
        *,
        k: int = 3,
        fmt: str = "openai",
        tier: Tier | str | None = None,
        token_budget: int | None = None,
        conversation: str | None = None,
    ) -> Shortlist:
        """The shortlist for ``query``: entitled tools only, schemas rendered in ``fmt``."""
        principal = self.principal(caller)
        shortlist = self.catalog.discover(
            query,
            principal,
            k=k,
            fmt=fmt,
            tier=tier,
            token_budget=token_budget,
            grants=self.grants,
            conversation=conversation,
        )
        if shortlist.discovery_id is not None:
            self._remember(principal, shortlist, conversation or "")
        return shortlist

    async def adiscover(self, caller: Caller, query: str, **options: Any) -> Shortlist:
        """:meth:`discover` off the event loop (it is CPU-bound: the query embedding)."""
        return await asyncio.to_thread(self.discover, caller, query, **options)

    def _remember(self, principal: Principal, shortlist: Shortlist, conversation: str) -> None:
        did = shortlist.discovery_id
        assert did is not None
        key = (principal.subject, principal.tenant, conversation)
        with self._lock:
            self._seen[did] = _Seen(key, dict(shortlist.names))
            self._last[key] = did
            while len(self._seen) > REMEMBERED_DISCOVERIES:
                old, gone = self._seen.popitem(last=False)
                if self._last.get(gone.key) == old:  # forgotten: no longer linkable
                    del self._last[gone.key]

    def feedback(self, caller: Caller, discovery_id: str, tool_id: str) -> None:
        """Record which tool was finally the right one after the caller's own discovery.

        Only the caller who made the discovery may speak for it, and only of a tool it
        may use: another caller's discovery id, or an unknown one, raises
        :class:`~toolscout.errors.UnknownDiscoveryError`; a tool the caller may not use,
        :class:`~toolscout.errors.UnknownToolError` (the same as an unknown one). Feedback
        feeds learned aliases and the false-negative report, so a stranger's word must
        never reach another tenant's."""
        principal = self.principal(caller)
        resolved = self.catalog.resolve(tool_id) if isinstance(tool_id, str) else None
        if resolved is None or not self.catalog.decide(principal, resolved).allowed:
            raise UnknownToolError(str(tool_id))
        log = self.catalog.log
        # without a discovery log (an in-memory catalog) no discovery is known to speak for
        if log is None or not self._made_by(principal, discovery_id):
            raise UnknownDiscoveryError(str(discovery_id))
        log.record_feedback(
            discovery_id, resolved, subject=principal.subject, tenant=principal.tenant
        )

    # -- execution ---------------------------------------------------------------
    def _tool_id(self, name: str, discovery_id: str | None) -> str:
        if not isinstance(name, str):
            return repr(name)
        if discovery_id is not None:
            seen = self._seen.get(discovery_id)
            if seen is not None and name in seen.names:
                return seen.names[name]
        return self.catalog.resolve(name) or name

    async def aexecute(
        self,
        caller: Caller,
        name: str,
        arguments: Any,
        *,
        discovery_id: str | None = None,
        grant: str | None = None,
        conversation: str | None = None,
        client: str = "",
    ) -> ExecutionResult:
        """Run the tool the model called ``name`` (any rendering of it, or its id).

        ``client`` names where the call came from (a remote address): callers whose
        tokens fail are throttled per client.

        Every check of the gateway runs and every attempt is audited; a refusal or a
        failure comes back as a result with ``status`` and ``reason``, not an exception.
        """
        if discovery_id is not None and not await self._owns_discovery(caller, discovery_id):
            # another caller's discovery (or an unknown one) names nothing for this call and
            # is never recorded against (the HTTP API answers it with 404, as feedback does)
            discovery_id = None
        tool_id = self._tool_id(name, discovery_id)
        try:
            result = await self.gateway.execute(
                caller, tool_id, arguments, grant=grant, client=client
            )
        except GatewayError as exc:
            result = self._failed(exc, name, tool_id, caller)
        did = discovery_id or self._last_discovery(result.principal, conversation)
        result = _with(result, name=name if isinstance(name, str) else repr(name),
                       discovery_id=did)  # fmt: skip
        ran = result.ok or result.status == "error"  # executed (refusals never reached a tool)
        log = self.catalog.log
        if log is not None and result.tool_id is not None and ran:
            who = result.principal
            record = functools.partial(
                log.record_call,
                result.tool_id,
                discovery_id=did,
                ok=result.ok,
                subject=who.subject if who else None,
                tenant=who.tenant if who else None,
                conversation=conversation,
            )
            after = AFTER_REPLY.get()
            if after is not None:  # a front end answering first: logged once the answer went
                after.defer(record)
            else:
                record()
        return result

    async def _owns_discovery(self, caller: Caller, discovery_id: str) -> bool:
        """Was ``discovery_id`` made by this caller? (A caller whose token fails is left to
        the gateway, which refuses and audits it.)

        A discovery this process made is answered from memory: no read of the log, which
        would also write what the log holds. Any other id is looked up in the log off the
        event loop: on a shared log an unknown id is asked again for up to a second
        (``LogReads.owner``), and the MCP gateway's other requests must not wait for it."""
        try:
            principal = self.principal(caller)
        except GatewayError:
            return True
        mine = self._remembered_owner(discovery_id)
        if mine is not None:
            return mine == (principal.subject, principal.tenant)
        if self.catalog.log is None:
            return False
        return await asyncio.to_thread(self._made_by, principal, discovery_id)

    def _remembered_owner(self, discovery_id: str) -> tuple[str, str] | None:
        """(subject, tenant) of a discovery this process made and still remembers."""
        with self._lock:
            seen = self._seen.get(discovery_id)
        return None if seen is None else (seen.key[0], seen.key[1])

    def _made_by(self, principal: Principal, discovery_id: str) -> bool:
        """Was ``discovery_id`` made by ``principal``: from memory, else from the log."""
        owner = self._remembered_owner(discovery_id)
        if owner is None and self.catalog.log is not None:
            owner = self.catalog.log.owner(discovery_id)
        return owner == (principal.subject, principal.tenant)

    def bind(self, tool_ids: Iterable[str], executor: Executor) -> None:
        """Make ``executor`` run ``tool_ids`` in this service's gateway.

        For a surface that brings its own way of running tools (the FastMCP transform
        binds the server's tools). Calls still go through :meth:`execute`: the caller's
        token, the policy, the schema and the audit decide, whatever is bound."""
        self.gateway.bind(tool_ids, executor)

    def execute(
        self,
        caller: Caller,
        name: str,
        arguments: Any,
        *,
        discovery_id: str | None = None,
        grant: str | None = None,
        conversation: str | None = None,
        client: str = "",
    ) -> ExecutionResult:
        """:meth:`aexecute` for synchronous callers (on the gateway's background loop)."""
        return self.gateway._run(
            self.aexecute(
                caller,
                name,
                arguments,
                discovery_id=discovery_id,
                grant=grant,
                conversation=conversation,
                client=client,
            )
        )

    def _failed(
        self, exc: GatewayError, name: str, tool_id: str, caller: Caller
    ) -> ExecutionResult:
        from toolscout.errors import PolicyDenied

        refused = not _is_execution_failure(exc)
        reason, message = exc.reason, str(exc)
        known = isinstance(exc, PolicyDenied) and reason not in HIDDEN_REASONS
        if isinstance(exc, PolicyDenied) and not known:
            reason, message = Reason.UNKNOWN_TOOL.value, f"{str(name)[:256]}: no such tool"
        principal = caller if isinstance(caller, Principal) else None
        if principal is None and isinstance(caller, str) and not isinstance(exc, TokenError):
            try:
                principal = self.verifier.verify(caller)
            except GatewayError:
                principal = None
        return ExecutionResult(
            tool_id=tool_id if known or not isinstance(exc, PolicyDenied) else None,
            value=None,
            principal=principal,
            latency_ms=0.0,
            overhead_ms=0.0,
            audit_id=exc.audit_id or 0,
            status="refused" if refused else "error",
            reason=reason,
            message=message,
        )

    def _last_discovery(self, principal: Principal | None, conversation: str | None) -> str | None:
        if principal is None:
            return None
        return self._last.get((principal.subject, principal.tenant, conversation or ""))


def _is_execution_failure(exc: GatewayError) -> bool:
    from toolscout.errors import ExecutorError

    return isinstance(exc, ExecutorError)


def _with(result: ExecutionResult, **changes: Any) -> ExecutionResult:
    from dataclasses import replace

    return replace(result, **changes)


def _open_catalog(
    settings: Settings,
    store: Store | None,
    embedder: Embedder | None,
    policy: PolicyConfig | None,
    reformulator: Reformulator | None,
) -> Catalog:
    if embedder is None and settings.embedder is not None:
        from toolscout.embed import make_embedder

        embedder = make_embedder(settings.embedder)
    if store is None:
        return Catalog.open(
            settings.catalog_target(),
            embedder=embedder,
            policy=policy,
            settings=settings.search,
            log=settings.log,
            reformulator=reformulator,
            query_log=settings.query_log,
            query_text_days=settings.query_text_days,
            prefetch=settings.prefetch_models,
        )
    from toolscout.discovery.catalog import stored_embedder

    return Catalog(
        store,
        embedder=embedder or stored_embedder(store),
        policy=policy,
        settings=settings.search,
        reformulator=reformulator,
    )


def _open_audit(settings: Settings) -> AuditLog:
    target = settings.audit_target()
    if is_dsn(target):
        return PostgresAuditLog(str(target), key=settings.audit_key, timeout_s=settings.timeout_s)
    return AuditLog(target, key=settings.audit_key)


__all__ = ["Caller", "Toolscout"]
