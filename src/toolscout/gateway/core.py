"""The execution gateway: the only way a tool runs.

:meth:`Gateway.execute` trusts nothing the model produced. In order, it checks

1. the caller's token (:class:`~toolscout.gateway.auth.TokenVerifier`),
2. the principal's rate limit,
3. the very policy function discovery uses (:func:`toolscout.policy.decide`) — the
   catalog's current policy when the lookup is a catalog (an :class:`Authority`; a
   ``PolicyConfig`` copy beside one is refused),
4. the arguments' shape and size (NaN, nesting, bytes) — only after the policy, so an
   argument refusal never names a tool the caller may not use,
5. in strict mode, a discovery grant covering the tool (:mod:`toolscout.gateway.grants`),
6. the arguments against the tool's JSON Schema (unknown parameters refused),

then takes a place among the calls in flight (per principal and per tool),
writes the audit *attempt* — and refuses to run the tool if that write fails —
runs the executor under a time-out, and completes the audit record with the
outcome. A refusal is one audit record with its reason code. Each refusal is a
typed :class:`~toolscout.errors.GatewayError` carrying that code; what went
wrong inside a tool is in the record's ``detail``, never in the caller's message.
Callers whose token does not verify are throttled per client key; over that
budget their attempts are counted, not recorded one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar, runtime_checkable

from toolscout.cards import ToolSpec
from toolscout.errors import (
    ArgumentError,
    ConfigError,
    ExecutorError,
    ExecutorTimeout,
    GatewayError,
    PolicyDenied,
    RateLimited,
    StoreError,
    TokenError,
)
from toolscout.executors.base import Executor
from toolscout.gateway.afterreply import AFTER_REPLY
from toolscout.gateway.audit import AuditLog, canonical_json
from toolscout.gateway.auth import TokenVerifier
from toolscout.gateway.grants import GrantSigner
from toolscout.gateway.limits import (
    CURRENT_TICKET,
    InFlight,
    Limits,
    RateLimiter,
    Ticket,
    check_argument_size,
)
from toolscout.gateway.result import ExecutionResult
from toolscout.gateway.validation import ArgumentValidator
from toolscout.policy import Decision, PolicyConfig, Principal, Reason, decide
from toolscout.schemas import check_arguments

UNKNOWN = Decision(False, Reason.UNKNOWN_TOOL)

#: key of the fallback executor in an executor mapping
DEFAULT_EXECUTOR = "*"
#: tool ids longer than this are refused as unknown without a lookup
MAX_TOOL_ID = 256

# reason codes raised here (the others come from auth, grants, limits and executors)
NOT_AN_OBJECT = "arguments_not_object"
NOT_JSON = "arguments_not_json"
TIMEOUT = "executor_timeout"
NO_EXECUTOR = "no_executor"
AUDIT_UNAVAILABLE = "audit_unavailable"
#: a caller whose tokens keep failing, over its budget: refused, counted, not recorded
UNAUTHENTICATED_LIMITED = "unauthenticated_rate_limited"
#: what the audit says of a call that timed out: its thread or upstream may still finish it
TIMED_OUT = "timed out; may still complete"

T = TypeVar("T")


@runtime_checkable
class ToolLookup(Protocol):
    """Resolves a tool id to its spec; the catalog implements it."""

    def spec(self, tool_id: str) -> ToolSpec | None:
        """The tool's spec, or ``None`` when there is no such tool."""
        ...


@runtime_checkable
class Authority(ToolLookup, Protocol):
    """A lookup that also owns the policy: the catalog, asked afresh on every call."""

    def decide(self, principal: Principal, tool_id: str) -> Decision:
        """May ``principal`` use ``tool_id`` now, and if not, why."""
        ...


class Gateway:
    """Verifies, authorises, validates, runs and audits tool calls."""

    def __init__(
        self,
        tools: ToolLookup,
        policy: PolicyConfig | None,
        verifier: TokenVerifier,
        executors: Executor | Mapping[str, Executor],
        audit: AuditLog,
        *,
        limits: Limits | None = None,
        grants: GrantSigner | None = None,
        strict: bool = False,
        allow_unknown_params: bool = False,
        timeout_s: float = 30.0,
    ) -> None:
        if strict and grants is None:
            raise ConfigError("strict mode needs a GrantSigner to check discovery grants")
        if timeout_s <= 0:
            raise ConfigError(f"timeout_s must be positive, got {timeout_s}")
        if policy is None and not isinstance(tools, Authority):
            raise ConfigError(
                "the gateway needs a policy: pass a PolicyConfig, or a catalog that decides"
            )
        if policy is not None and isinstance(tools, Authority):
            raise ConfigError(
                "the catalog owns the policy and decides every call with its current one:"
                " pass policy=None (a PolicyConfig here would be a copy that goes stale;"
                " change the catalog's with catalog.set_policy)"
            )
        self.tools = tools
        self.policy = policy
        self.verifier = verifier
        self.executors: dict[str, Executor] = (
            dict(executors) if isinstance(executors, Mapping) else {DEFAULT_EXECUTOR: executors}
        )
        self.audit = audit
        self.limits = limits or Limits()
        self.grants = grants
        self.strict = strict
        self.allow_unknown_params = allow_unknown_params
        self.timeout_s = timeout_s
        self._rate = RateLimiter.from_limits(self.limits)
        self._anonymous = RateLimiter.for_unauthenticated(self.limits)
        self._in_flight = InFlight.from_limits(self.limits)
        # client key -> unauthenticated attempts refused without an audit row of their own
        self._unrecorded: dict[str, int] = {}
        self._unrecorded_lock = threading.Lock()
        self.validator = ArgumentValidator(allow_unknown=allow_unknown_params)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()
        #: (the lookup, whether it is an Authority): a protocol check once per lookup object
        self._authority: tuple[object, bool] = (tools, isinstance(tools, Authority))

    # ------------------------------------------------------------------ checks

    def validate(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
        """Raise :class:`ArgumentError` unless ``arguments`` fit the tool's schema."""
        self.validator.validate(spec, arguments)

    def bind(self, tool_ids: Iterable[str], executor: Executor) -> None:
        """Make ``executor`` run ``tool_ids`` (replacing the executor each had before).

        Binding decides nothing about who may call: every call is still verified,
        authorised, validated and audited by :meth:`execute`."""
        ids = list(tool_ids)
        for tool_id in ids:
            if not isinstance(tool_id, str) or not tool_id:
                raise ConfigError(f"bind needs tool ids as non-empty strings, got {tool_id!r}")
        for tool_id in ids:
            self.executors[tool_id] = executor

    def _executor(self, tool_id: str) -> Executor:
        executor = self.executors.get(tool_id) or self.executors.get(DEFAULT_EXECUTOR)
        if executor is None:
            raise ExecutorError(
                f"no executor is bound to {tool_id!r}", tool_id=tool_id, reason=NO_EXECUTOR
            )
        return executor

    def _decider(self) -> Authority | None:
        """The lookup when it is an :class:`Authority` (asked once per lookup object)."""
        tools = self.tools
        if self._authority[0] is not tools:
            self._authority = (tools, isinstance(tools, Authority))
        return tools if self._authority[1] else None  # type: ignore[return-value]

    def authorize(
        self, token: str | Principal, tool_id: str, arguments: Any, *, grant: str | None = None
    ) -> tuple[Principal, ToolSpec, str]:
        """Every check before execution, in order; returns (principal, spec, args digest).

        Raises the first refusal. Writes no audit record (:meth:`execute` does).
        """
        principal, spec, digest, _ = self._authorize(token, tool_id, arguments, grant, [None], "")
        return principal, spec, digest

    def _authorize(
        self,
        token: str | Principal,
        tool_id: str,
        arguments: Any,
        grant: str | None,
        who: list[Principal | None],
        client: str,
    ) -> tuple[Principal, ToolSpec, str, Mapping[str, Any]]:
        tool_id = tool_id if isinstance(tool_id, str) else repr(tool_id)
        # the token and the policy come first: an argument refusal names the tool, so it
        # is only ever given for a tool the caller may use (for any other, the refusal is
        # the policy's, which never tells another tenant's tool from an unknown one)
        # a Principal is a trusted in-process caller; anything else is a token to verify
        principal = token if isinstance(token, Principal) else self._verify(token, tool_id, client)
        who[0] = principal
        self._rate.check(principal, tool_id=tool_id)
        # the spec and the decision from one catalog state (one freshness read, not two)
        pinned = getattr(self.tools, "pinned", None)
        with pinned() if callable(pinned) else contextlib.nullcontext():
            spec = self.tools.spec(tool_id) if len(tool_id) <= MAX_TOOL_ID else None
            authority = self._decider()
            if authority is not None:
                # the catalog's current policy and state: never a copy taken at start-up
                decision = authority.decide(principal, tool_id) if spec is not None else UNKNOWN
            else:
                policy = self.policy or PolicyConfig()
                decision = decide(principal, spec.card if spec is not None else None, policy)
        if not decision.allowed or spec is None:
            reason = decision.reason.value if decision.reason is not None else "unknown_tool"
            raise PolicyDenied(
                f"{tool_id[:MAX_TOOL_ID]}: not permitted ({reason})", tool_id=tool_id, reason=reason
            )
        if not isinstance(arguments, Mapping):
            raise ArgumentError(
                f"arguments must be a JSON object, got {type(arguments).__name__}",
                tool_id=tool_id,
                reason=NOT_AN_OBJECT,
            )
        check_arguments(arguments, tool_id=tool_id)  # NaN, runaway nesting: named refusals
        try:
            text = canonical_json(arguments, checked=True)  # check_arguments ran just above
        except (TypeError, ValueError):
            raise ArgumentError(
                "arguments are not JSON", tool_id=tool_id, reason=NOT_JSON
            ) from None
        check_argument_size(
            len(text.encode("utf-8", "surrogatepass")),
            self.limits.max_argument_bytes,
            tool_id=tool_id,
        )
        digest = self.audit.digest(text)
        if self.strict and self.grants is not None:
            self.grants.check(grant, principal, tool_id)
        self.validator.validate(spec, arguments, checked=True)
        return principal, spec, digest, arguments

    # ------------------------------------------------------------------ execution

    def _verify(self, token: str, tool_id: str, client: str) -> Principal:
        """Verify the token; a caller whose tokens keep failing is throttled per client key."""
        try:
            return self.verifier.verify(token)
        except TokenError:
            try:
                self._anonymous.check_key(("", client), client or "unauthenticated callers")
            except RateLimited as limited:
                raise RateLimited(
                    str(limited), tool_id=tool_id, reason=UNAUTHENTICATED_LIMITED
                ) from None
            raise

    def _unrecorded_note(self, client: str) -> str:
        """Detail for the next recorded unauthenticated attempt: how many were not recorded."""
        with self._unrecorded_lock:
            skipped = self._unrecorded.pop(client, 0)
        return (
            f"{skipped} earlier unauthenticated attempts were refused unrecorded" if skipped else ""
        )

    async def execute(
        self,
        token: str | Principal,
        tool_id: str,
        arguments: Any,
        *,
        grant: str | None = None,
        client: str = "",
    ) -> ExecutionResult:
        """Run ``tool_id`` for the token's principal, or raise the typed refusal.

        ``client`` identifies the connection (an address, a session) for throttling
        callers whose token does not verify.
        """
        start = time.perf_counter()
        who: list[Principal | None] = [None]
        digest, detail = "", ""
        decision, reason, status = "denied", "", "refused"
        exec_ms = 0.0
        failure: GatewayError | None = None
        attempt: int | None = None
        ticket: Ticket | None = None
        tool_text = tool_id if isinstance(tool_id, str) else repr(tool_id)
        try:
            principal, spec, digest, args = self._authorize(
                token, tool_id, arguments, grant, who, client
            )
            ticket = self._in_flight.enter(principal, spec.id)
            decision = "error"  # from here on, a failure is the gateway's or the executor's
            executor = self._executor(spec.id)
            try:
                attempt = self.audit.begin(
                    subject=principal.subject,
                    tenant=principal.tenant,
                    tool_id=spec.id,
                    args_digest=digest,
                )
            except StoreError as exc:
                decision = "denied"  # nothing ran: a refusal
                raise GatewayError(
                    f"{spec.id}: the audit log cannot be written, so the call was not run",
                    tool_id=spec.id,
                    reason=AUDIT_UNAVAILABLE,
                    detail=str(exc),
                ) from None
            t0 = time.perf_counter()
            context = CURRENT_TICKET.set(ticket)
            try:
                async with asyncio.timeout(self.timeout_s) as scope:
                    value = await executor.call(spec, args)
            except TimeoutError:
                if scope.expired():
                    raise ExecutorTimeout(
                        f"{spec.id} did not answer within {self.timeout_s:g}s; it may still "
                        "complete",
                        tool_id=spec.id,
                        reason=TIMEOUT,
                        detail=TIMED_OUT,
                    ) from None
                raise
            finally:
                CURRENT_TICKET.reset(context)
                exec_ms = (time.perf_counter() - t0) * 1000
            decision, reason, status = "allowed", "ok", "ok"
        except GatewayError as exc:
            failure = exc
            reason, detail = exc.reason, exc.detail
            status = "timeout" if isinstance(exc, ExecutorTimeout) else (
                "error" if decision == "error" else "refused"
            )  # fmt: skip
            raise
        except asyncio.CancelledError:
            reason, status = "cancelled", "cancelled"
            raise
        except Exception as exc:
            status = "error"
            detail = f"{type(exc).__name__}: {exc}"
            if decision != "error":  # a lookup or verifier fault: refused, and re-raised as is
                reason = "internal_error"
                raise
            reason = "executor_exception"
            failure = ExecutorError(
                f"{tool_text[:MAX_TOOL_ID]}: the tool failed",
                tool_id=tool_text,
                reason=reason,
                detail=detail,
            )
            raise failure from exc
        finally:
            if ticket is not None:
                ticket.release()
            latency = (time.perf_counter() - start) * 1000
            record = (
                attempt, who[0], tool_text, digest, decision, reason, status, latency, detail,
                failure, client,
            )  # fmt: skip
            after = AFTER_REPLY.get() if attempt is not None else None
            if after is not None:  # the outcome row once the answer went (gateway/afterreply.py)
                after.defer(lambda: self._record(*record))
                record_id: int | None = attempt
            else:
                record_id = self._record(*record)
            if failure is not None:
                failure.audit_id = record_id
        return ExecutionResult(
            spec.id, value, principal, latency, max(0.0, latency - exec_ms), record_id or 0
        )

    def _record(
        self,
        attempt: int | None,
        principal: Principal | None,
        tool_id: str,
        digest: str,
        decision: str,
        reason: str,
        status: str,
        latency: float,
        detail: str,
        failure: GatewayError | None,
        client: str,
    ) -> int | None:
        """Complete the attempt, or write the refusal; the record's id (``None`` if none)."""
        if attempt is not None:
            try:
                return self.audit.complete(
                    attempt,
                    status=status,
                    reason=reason,
                    latency_ms=latency,
                    decision=decision if decision != "denied" else "error",
                    detail=detail,
                ).id
            except StoreError:
                return attempt  # the attempt row stays: a call that ran, outcome unrecorded
        if failure is not None and failure.reason == UNAUTHENTICATED_LIMITED:
            with self._unrecorded_lock:
                self._unrecorded[client] = self._unrecorded.get(client, 0) + 1
            return None
        if isinstance(failure, TokenError):
            detail = "; ".join(d for d in (detail, self._unrecorded_note(client)) if d)
        try:
            return self.audit.append(
                subject=principal.subject if principal else "",
                tenant=principal.tenant if principal else "",
                tool_id=tool_id,
                args_digest=digest,
                decision=decision,
                reason=reason,
                latency_ms=latency,
                status=status,
                detail=detail,
            ).id
        except StoreError:
            if failure is None:
                raise
            return None  # the refusal stands; nothing ran

    # ------------------------------------------------------------------ sync wrapper

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="toolscout-gateway", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._background_loop())
        return future.result()

    def warm_up(self) -> None:
        """Start the background loop and compile a schema validator, so the first real
        call pays for neither (a server is ready only once warm)."""
        from toolscout.schemas import make_validator

        self._run(asyncio.sleep(0))
        probe = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a$"}}}
        make_validator(probe).is_valid({"a": "a"})

    def execute_sync(
        self,
        token: str | Principal,
        tool_id: str,
        arguments: Any,
        *,
        grant: str | None = None,
        client: str = "",
    ) -> ExecutionResult:
        """:meth:`execute` for synchronous callers, on one background event loop."""
        return self._run(self.execute(token, tool_id, arguments, grant=grant, client=client))

    async def aclose(self) -> None:
        """Close every executor's connections (on the running loop)."""
        for executor in {id(e): e for e in self.executors.values()}.values():
            await executor.aclose()

    def close(self) -> None:
        """Close executors and stop the background loop, if :meth:`execute_sync` started one."""
        with self._loop_lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.aclose(), loop).result()
            asyncio.run_coroutine_threadsafe(_cancel_others(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join()
            loop.close()


async def _cancel_others() -> None:
    """Cancel the loop's remaining tasks (connection holders) and let them finish."""
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
