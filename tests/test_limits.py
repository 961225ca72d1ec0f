"""Tests for toolscout.gateway.limits: token buckets per principal and the argument size cap."""

from __future__ import annotations

import threading

import pytest

from toolscout.errors import ArgumentError, ConfigError, RateLimited
from toolscout.gateway.limits import Limits, RateLimiter, check_argument_size
from toolscout.policy import Principal

ALICE = Principal.of("alice", "acme")
BOB = Principal.of("bob", "acme")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_refused_with_reason() -> None:
    limiter = RateLimiter(rate_per_second=1.0, burst=3, clock=Clock())
    for _ in range(3):
        limiter.check(ALICE)
    with pytest.raises(RateLimited) as err:
        limiter.check(ALICE, tool_id="t")
    assert err.value.reason == "rate_limited"
    assert err.value.tool_id == "t"
    assert "retry in" in str(err.value)


def test_refills_at_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_second=2.0, burst=2, clock=clock)
    limiter.check(ALICE)
    limiter.check(ALICE)
    with pytest.raises(RateLimited):
        limiter.check(ALICE)
    clock.now += 0.5  # one token back
    limiter.check(ALICE)
    with pytest.raises(RateLimited):
        limiter.check(ALICE)
    clock.now += 100
    assert limiter.remaining(ALICE) == 2.0


def test_budgets_are_per_principal_and_tenant() -> None:
    limiter = RateLimiter(rate_per_second=1.0, burst=1, clock=Clock())
    limiter.check(ALICE)
    limiter.check(BOB)
    limiter.check(Principal.of("alice", "other-tenant"))
    with pytest.raises(RateLimited):
        limiter.check(ALICE)


def test_zero_rate_disables() -> None:
    limiter = RateLimiter(rate_per_second=0, burst=1)
    assert not limiter.enabled
    for _ in range(1000):
        limiter.check(ALICE)
    assert limiter.remaining(ALICE) == float("inf")


def test_memory_is_bounded() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_second=1.0, burst=1, max_principals=10, clock=clock)
    for i in range(100):
        limiter.check(Principal.of(f"user{i}", "t"))
    assert len(limiter._buckets) <= 10


def test_thread_safe_exact_budget() -> None:
    limiter = RateLimiter(rate_per_second=1e-9, burst=500)
    ok: list[int] = []
    refused: list[int] = []

    def worker() -> None:
        for _ in range(100):
            try:
                limiter.check(ALICE)
                ok.append(1)
            except RateLimited:
                refused.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 500
    assert len(refused) == 300


def test_argument_size() -> None:
    check_argument_size(10, 10)
    with pytest.raises(ArgumentError) as err:
        check_argument_size(11, 10, tool_id="t")
    assert err.value.reason == "arguments_too_large"
    assert "11 bytes" in str(err.value)


@pytest.mark.parametrize(
    "kwargs",
    [{"rate_per_second": -1}, {"burst": 0}, {"max_argument_bytes": 0}, {"max_principals": 0}],
)
def test_bad_limits(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        Limits(**kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ calls in flight


def test_in_flight_bounds_per_principal_and_per_tool() -> None:
    from toolscout.gateway.limits import InFlight

    flight = InFlight(per_principal=2, per_tool=3)
    a1, a2 = flight.enter(ALICE, "t"), flight.enter(ALICE, "u")
    with pytest.raises(RateLimited) as err:
        flight.enter(ALICE, "v")
    assert err.value.reason == "too_many_in_flight"
    flight.enter(BOB, "t")
    carol = Principal.of("carol", "acme")
    with pytest.raises(RateLimited) as err:  # t in acme: alice, bob, carol; dave is one too many
        flight.enter(carol, "t")
        flight.enter(Principal.of("dave", "acme"), "t")
    assert err.value.reason == "tool_busy"
    a1.release()
    assert flight.running(ALICE) == 1 and flight.running(tool_id="t") == 2
    flight.enter(ALICE, "v")  # a place was freed
    a2.release()


def test_the_per_tool_bound_is_per_tenant_so_one_tenant_cannot_starve_another() -> None:
    from toolscout.gateway.limits import InFlight

    flight = InFlight(per_principal=100, per_tool=3)
    for i in range(3):
        flight.enter(Principal.of(f"bot{i}", "acme"), "search")
    with pytest.raises(RateLimited) as err:
        flight.enter(Principal.of("bot9", "acme"), "search")
    assert err.value.reason == "tool_busy" and "your tenant" in str(err.value)
    for i in range(3):  # acme holds every place it may have; globex still has all of its own
        flight.enter(Principal.of(f"user{i}", "globex"), "search")
    assert flight.running(tool_id="search") == 6
    assert flight.running(tool_id="search", tenant="globex") == 3


def test_a_ticket_is_freed_only_when_every_holder_let_go() -> None:
    from toolscout.gateway.limits import InFlight

    flight = InFlight(per_principal=1, per_tool=10)
    ticket = flight.enter(ALICE, "t")
    let_go = ticket.hold()
    ticket.release()
    with pytest.raises(RateLimited):
        flight.enter(ALICE, "t")
    let_go()
    let_go()  # idempotent
    assert flight.running(ALICE) == 0
    flight.enter(ALICE, "t")


def test_unauthenticated_budget_is_keyed_by_client() -> None:
    limits = Limits(unauthenticated_rate_per_second=1.0, unauthenticated_burst=2)
    limiter = RateLimiter.for_unauthenticated(limits)
    for _ in range(2):
        limiter.check_key(("anonymous", "10.0.0.1"), "10.0.0.1")
    with pytest.raises(RateLimited):
        limiter.check_key(("anonymous", "10.0.0.1"), "10.0.0.1")
    limiter.check_key(("anonymous", "10.0.0.2"), "10.0.0.2")
    with pytest.raises(ConfigError):
        Limits(max_in_flight_per_principal=0)
    with pytest.raises(ConfigError):
        Limits(unauthenticated_rate_per_second=float("nan"))
