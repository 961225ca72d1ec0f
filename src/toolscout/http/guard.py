"""Who reaches a route of the HTTP API, and how often.

:class:`Guard` verifies the bearer token of every ``/v1`` call. A caller whose token
does not verify (missing, forged, expired) is

* throttled per client address (the gateway's ``unauthenticated_rate_per_second`` /
  ``unauthenticated_burst``): over that budget it gets 429, counted and not recorded
  one by one, so a flood of bad tokens costs little and writes few audit rows;
* audited: each refusal within the budget is one audit row (no subject, the token's
  reason code, the route and client in ``detail``), the first after a throttled spell
  saying how many went unrecorded.

Discovery has a budget per principal (the gateway's ``rate_per_second`` / ``burst``,
its own bucket: discovering does not spend execution calls).

:func:`bearer_token` and :meth:`Guard.verifies` let the body-size middleware decide,
before a byte of the body is read, whether the large limit of an authenticated
request applies.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from typing import Any

from toolscout.errors import RateLimited, StoreError, TokenError
from toolscout.gateway.limits import Limits, RateLimiter
from toolscout.http.errors import APIError
from toolscout.policy import Principal

__all__ = ["Guard", "bearer_token"]

#: reason code of a call refused because its token did not verify and its client is over
#: the unauthenticated budget
UNAUTHENTICATED_LIMITED = "unauthenticated_rate_limited"


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The token of an ``Authorization: Bearer`` header among raw ASGI headers."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


class Guard:
    """Authenticates ``/v1`` calls; throttles and audits callers whose token fails."""

    def __init__(self, service: Any, limits: Limits | None = None) -> None:
        gateway = getattr(service, "gateway", None)
        limits = limits or getattr(gateway, "limits", None) or Limits()
        self._service = service
        self._anonymous = RateLimiter.for_unauthenticated(limits)
        self._discover = RateLimiter.from_limits(limits)
        self._unrecorded: dict[str, int] = {}
        self._lock = threading.Lock()

    def verifies(self, token: str | None) -> bool:
        """Whether ``token`` verifies (nothing recorded; for the body-size decision)."""
        return token is not None and token != "" and self.principal(token) is not None

    def principal(self, token: str) -> Principal | None:
        """``token``'s principal when it verifies, else None (nothing recorded: a caller
        whose token fails goes through :meth:`authenticate`)."""
        try:
            principal: Principal = self._service.verify(token)
        except TokenError:
            return None
        return principal

    def authenticate(self, token: str | None, *, client: str, route: str) -> Principal:
        """The token's principal, or a 401 (recorded) / 429 (over the client's budget)."""
        try:
            if not token:
                raise TokenError("a bearer token is required", reason="token_missing")
            principal: Principal = self._service.verify(token)
            return principal
        except TokenError as exc:
            who = client or "unauthenticated callers"
            try:
                self._anonymous.check_key(("", client), who)
            except RateLimited as limited:
                with self._lock:
                    self._unrecorded[client] = self._unrecorded.get(client, 0) + 1
                raise APIError(429, "rate_limited", str(limited)) from None
            self._record(exc.reason or "invalid_token", client, route)
            raise APIError(401, "unauthorized", str(exc) or "invalid token") from None

    def discovery_budget(self, principal: Principal) -> None:
        """Take one discovery from the principal's budget, or 429."""
        try:
            self._discover.check(principal)
        except RateLimited as exc:
            raise APIError(429, "rate_limited", str(exc)) from None

    def _record(self, reason: str, client: str, route: str) -> None:
        with self._lock:
            skipped = self._unrecorded.pop(client, 0)
        detail = f"{route} from {client or 'unknown client'}"
        if skipped:
            detail += f"; {skipped} earlier unauthenticated attempts were refused unrecorded"
        audit = getattr(self._service, "audit", None)
        if audit is None:
            return
        # the refusal stands either way; an audit that cannot be written never lets a call in
        with contextlib.suppress(StoreError):
            audit.append(
                subject="",
                tenant="",
                tool_id="",
                args_digest="",
                decision="denied",
                reason=reason,
                latency_ms=0.0,
                status="refused",
                detail=detail,
            )
