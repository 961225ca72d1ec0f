"""A PostgreSQL restart costs the store no request made after the database is back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from pg_fixture import PostgresServer
from toolscout.errors import StoreError
from toolscout.stores.postgres import PostgresStore


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of this test's own: restarting the session's would cut other tests."""
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()


def _fill_pool(store: PostgresStore, n: int) -> None:
    """Grow the pool to ``n`` connections, each then idle in it."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with store._conn() as conn:
                barrier.wait(timeout=30)
                conn.execute("SELECT 1")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=hold) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert store._pool.get_stats()["pool_size"] == n


def _calls(store: PostgresStore, n: int) -> list[str]:
    failed: list[str] = []
    for _ in range(n):  # more calls than pooled connections, one at a time
        try:
            assert store.schema_version() >= 1
        except StoreError as exc:
            failed.append(str(exc))
    return failed


def test_no_request_after_a_restart_draws_a_dead_pooled_connection(
    own_server: PostgresServer,
) -> None:
    store = PostgresStore(own_server.new_database(), dim=8, pool_size=4)
    try:
        _fill_pool(store, 4)
        store.generation()  # as every request of a running process does
        own_server.restart(down_s=0.5)
        # every request asks the generation first (its own kept connection, which
        # reconnects): seeing that connection lost clears the pool's dead ones
        store.generation()
        started = time.monotonic()
        assert _calls(store, 8) == []
        # and without the pool's back-off between dead connections (seconds)
        assert time.monotonic() - started < 5
    finally:
        store.close()


def test_a_lost_pooled_connection_clears_the_others(own_server: PostgresServer) -> None:
    """Without a generation read first, the one call that draws a dead connection fails
    (it was sent on a cut socket) and takes the other dead ones out with it."""
    store = PostgresStore(own_server.new_database(), dim=8, pool_size=4)
    try:
        _fill_pool(store, 4)
        own_server.restart(down_s=0.5)
        assert len(_calls(store, 8)) == 1
    finally:
        store.close()
