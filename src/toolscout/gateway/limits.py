"""Execution limits: a per-principal call budget and a maximum argument size.

The rate limiter is an in-process token bucket per (tenant, subject): each
principal may make ``burst`` calls at once and then ``rate_per_second`` calls
per second on average. Over the budget is a :class:`RateLimited` refusal, never
a silent delay. Arguments larger than ``max_argument_bytes`` (as canonical
JSON) are refused before the token is even verified.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from toolscout.errors import ArgumentError, ConfigError, RateLimited
from toolscout.policy import Principal

#: reason codes carried by the errors this module raises
REASON_RATE_LIMITED = "rate_limited"
REASON_ARGUMENTS_TOO_LARGE = "arguments_too_large"


@dataclass(frozen=True, slots=True)
class Limits:
    """The gateway's limits. ``rate_per_second=0`` switches rate limiting off."""

    rate_per_second: float = 10.0
    burst: int = 50
    max_argument_bytes: int = 64 * 1024
    #: buckets kept in memory; idle (full) buckets are dropped beyond this
    max_principals: int = 100_000

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

    def check(self, principal: Principal, *, tool_id: str = "") -> None:
        """Take one call from the principal's budget or raise :class:`RateLimited`."""
        if self._rate <= 0:
            return
        key = (principal.tenant, principal.subject)
        with self._lock:
            now = self._clock()
            tokens, last = self._buckets.get(key, (self._burst, now))
            tokens = min(self._burst, tokens + (now - last) * self._rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                wait = (1.0 - tokens) / self._rate
                raise RateLimited(
                    f"rate limit exceeded for {principal.subject!r}; retry in {wait:.2f}s",
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
