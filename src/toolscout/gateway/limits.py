"""Execution limits: call budgets, calls in flight, and a maximum argument size.

The rate limiter is an in-process token bucket per (tenant, subject): each
principal may make ``burst`` calls at once and then ``rate_per_second`` calls
per second on average. Callers whose token does not verify are throttled too,
per client key (``unauthenticated_rate_per_second``), so a flood of bad tokens
costs little and writes few audit rows. Over a budget is a :class:`RateLimited`
refusal, never a silent delay. Arguments larger than ``max_argument_bytes`` (as
canonical JSON) are refused before the token is even verified.

:class:`InFlight` bounds the calls running at once per principal and per tool within
a tenant (one tenant cannot starve another of a tool).
A call keeps its place until its work has really ended: a synchronous tool that
timed out still runs in its thread, and still counts (see :class:`Ticket`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from toolscout.errors import ArgumentError, ConfigError, RateLimited
from toolscout.policy import Principal

#: reason codes carried by the errors this module raises
REASON_RATE_LIMITED = "rate_limited"
REASON_ARGUMENTS_TOO_LARGE = "arguments_too_large"
REASON_TOO_MANY_IN_FLIGHT = "too_many_in_flight"
REASON_TOOL_BUSY = "tool_busy"


@dataclass(frozen=True, slots=True)
class Limits:
    """The gateway's limits. ``rate_per_second=0`` switches rate limiting off."""

    rate_per_second: float = 10.0
    burst: int = 50
    max_argument_bytes: int = 64 * 1024
    #: buckets kept in memory; idle (full) buckets are dropped beyond this
    max_principals: int = 100_000
    #: calls one principal may have running at once (timed-out ones included)
    max_in_flight_per_principal: int = 8
    #: calls of one tool running at once for one tenant, over its principals (keep it
    #: below an executor's worker count, so one slow tool cannot hold every worker);
    #: per tenant, so one tenant's calls never take another tenant's places
    max_in_flight_per_tool: int = 16
    #: call budget per client key for callers whose token did not verify (0: off)
    unauthenticated_rate_per_second: float = 1.0
    unauthenticated_burst: int = 10

    def __post_init__(self) -> None:
        if self.rate_per_second < 0 or not math.isfinite(self.rate_per_second):
            raise ConfigError(f"rate_per_second must be >= 0, got {self.rate_per_second}")
        if self.burst < 1:
            raise ConfigError(f"burst must be at least 1, got {self.burst}")
        if self.max_argument_bytes < 2:
            raise ConfigError(
                f"max_argument_bytes must be at least 2, got {self.max_argument_bytes}"
            )
        if self.max_principals < 1:
            raise ConfigError(f"max_principals must be at least 1, got {self.max_principals}")
        for name in ("max_in_flight_per_principal", "max_in_flight_per_tool"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        rate = self.unauthenticated_rate_per_second
        if rate < 0 or not math.isfinite(rate):
            raise ConfigError(f"unauthenticated_rate_per_second must be >= 0, got {rate}")
        if self.unauthenticated_burst < 1:
            raise ConfigError(
                f"unauthenticated_burst must be at least 1, got {self.unauthenticated_burst}"
            )


class RateLimiter:
    """Thread-safe token buckets keyed by (tenant, subject)."""

    def __init__(
        self,
        rate_per_second: float,
        burst: int,
        *,
        max_principals: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        Limits(rate_per_second=rate_per_second, burst=burst, max_principals=max_principals)
        self._rate = rate_per_second
        self._burst = float(burst)
        self._max = max_principals
        self._clock = clock
        self._lock = threading.Lock()
        # key -> (tokens left, time of last refill)
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}

    @classmethod
    def from_limits(cls, limits: Limits) -> RateLimiter:
        return cls(limits.rate_per_second, limits.burst, max_principals=limits.max_principals)

    @property
    def enabled(self) -> bool:
        return self._rate > 0

    @classmethod
    def for_unauthenticated(cls, limits: Limits) -> RateLimiter:
        """The budget of callers whose token did not verify, keyed by client."""
        return cls(
            limits.unauthenticated_rate_per_second,
            limits.unauthenticated_burst,
            max_principals=limits.max_principals,
        )

    def check(self, principal: Principal, *, tool_id: str = "") -> None:
        """Take one call from the principal's budget or raise :class:`RateLimited`."""
        self.check_key((principal.tenant, principal.subject), principal.subject, tool_id=tool_id)

    def check_key(self, key: tuple[str, str], who: str, *, tool_id: str = "") -> None:
        """Take one call from ``key``'s budget or raise :class:`RateLimited`."""
        if self._rate <= 0:
            return
        with self._lock:
            now = self._clock()
            tokens, last = self._buckets.get(key, (self._burst, now))
            tokens = min(self._burst, tokens + (now - last) * self._rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                wait = (1.0 - tokens) / self._rate
                raise RateLimited(
                    f"rate limit exceeded for {who!r}; retry in {wait:.2f}s",
                    tool_id=tool_id,
                    reason=REASON_RATE_LIMITED,
                )
            if key not in self._buckets and len(self._buckets) >= self._max:
                self._evict(now)
            self._buckets[key] = (tokens - 1.0, now)

    def remaining(self, principal: Principal) -> float:
        """Calls the principal could make right now (``inf`` when disabled)."""
        if self._rate <= 0:
            return math.inf
        with self._lock:
            now = self._clock()
            tokens, last = self._buckets.get(
                (principal.tenant, principal.subject), (self._burst, now)
            )
            return min(self._burst, tokens + (now - last) * self._rate)

    def _evict(self, now: float) -> None:
        """Drop buckets that have refilled (forgetting them changes nothing), else the oldest."""
        full = [
            k
            for k, (t, last) in self._buckets.items()
            if t + (now - last) * self._rate >= self._burst
        ]
        for k in full:
            del self._buckets[k]
        if len(self._buckets) >= self._max:
            oldest = min(self._buckets, key=lambda k: self._buckets[k][1])
            del self._buckets[oldest]


def check_argument_size(size: int, limit: int, *, tool_id: str = "") -> None:
    """Raise :class:`ArgumentError` when ``size`` bytes of arguments exceed ``limit``."""
    if size > limit:
        raise ArgumentError(
            f"arguments are {size} bytes, over the limit of {limit}",
            tool_id=tool_id,
            reason=REASON_ARGUMENTS_TOO_LARGE,
        )


class Ticket:
    """One call's place in :class:`InFlight`, freed when every holder has let go.

    The gateway holds it for the call; an executor that hands the work to a
    thread takes another hold (:meth:`hold`) and lets go when the thread ends,
    so a timed-out call that is still running keeps counting.
    """

    def __init__(self, owner: InFlight, keys: tuple[tuple[str, str], ...]) -> None:
        self._owner = owner
        self._keys = keys
        self._holds = 1
        self._lock = threading.Lock()

    def hold(self) -> Callable[[], None]:
        """Take one more hold; returns the function that lets it go (once)."""
        with self._lock:
            self._holds += 1
        done = threading.Event()

        def let_go() -> None:
            if not done.is_set():
                done.set()
                self._drop()

        return let_go

    def release(self) -> None:
        """The gateway's hold: call once, when the call returns to the caller."""
        self._drop()

    def _drop(self) -> None:
        with self._lock:
            self._holds -= 1
            last = self._holds == 0
        if last:
            self._owner._leave(self._keys)


#: the ticket of the call running in this context (read by executors that use threads)
CURRENT_TICKET: ContextVar[Ticket | None] = ContextVar("toolscout_ticket", default=None)


class InFlight:
    """Counts calls running at once, per principal and per (tenant, tool); refuses over
    the bounds."""

    def __init__(self, per_principal: int, per_tool: int) -> None:
        if per_principal < 1 or per_tool < 1:
            raise ConfigError("in-flight bounds must be at least 1")
        self.per_principal = per_principal
        self.per_tool = per_tool
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_limits(cls, limits: Limits) -> InFlight:
        return cls(limits.max_in_flight_per_principal, limits.max_in_flight_per_tool)

    def enter(self, principal: Principal, tool_id: str) -> Ticket:
        """A ticket for one call, or :class:`RateLimited` when a bound is reached."""
        who = ("p", f"{principal.tenant}\x00{principal.subject}")
        tool = ("t", f"{principal.tenant}\x00{tool_id}")
        with self._lock:
            if self._counts.get(who, 0) >= self.per_principal:
                raise RateLimited(
                    f"{self.per_principal} calls of {principal.subject!r} are still running; "
                    "retry when one has finished",
                    tool_id=tool_id,
                    reason=REASON_TOO_MANY_IN_FLIGHT,
                )
            if self._counts.get(tool, 0) >= self.per_tool:
                raise RateLimited(
                    f"{tool_id} has {self.per_tool} calls of your tenant running; retry later",
                    tool_id=tool_id,
                    reason=REASON_TOOL_BUSY,
                )
            for key in (who, tool):
                self._counts[key] = self._counts.get(key, 0) + 1
        return Ticket(self, (who, tool))

    def _leave(self, keys: tuple[tuple[str, str], ...]) -> None:
        with self._lock:
            for key in keys:
                left = self._counts.get(key, 0) - 1
                if left > 0:
                    self._counts[key] = left
                else:
                    self._counts.pop(key, None)

    def running(
        self,
        principal: Principal | None = None,
        tool_id: str | None = None,
        *,
        tenant: str | None = None,
    ) -> int:
        """Calls running now for a principal, or of a tool (for one ``tenant``, or every
        tenant's summed); all calls with neither."""
        with self._lock:
            if principal is not None:
                return self._counts.get(("p", f"{principal.tenant}\x00{principal.subject}"), 0)
            if tool_id is not None:
                return sum(
                    v
                    for (kind, key), v in self._counts.items()
                    if kind == "t"
                    and key.partition("\x00")[2] == tool_id
                    and (tenant is None or key.partition("\x00")[0] == tenant)
                )
            return sum(v for (kind, _), v in self._counts.items() if kind == "p")
