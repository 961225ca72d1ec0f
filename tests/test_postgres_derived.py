"""Derived state kept in PostgreSQL: what one replica's process derived (token counts, the
multilingual word list) is read by the next process of any replica, under sqlite_derived's
rules (a moved generation is not kept; another version's older blobs go)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import psycopg
import pytest

from pg_fixture import pg_dsn, pg_server  # noqa: F401  (fixtures)
from support import embedder, spec
from toolscout.discovery import tokencount
from toolscout.discovery.catalog import Catalog
from toolscout.policy import Principal
from toolscout.stores.postgres import PostgresStore

WHO = Principal.of("p", scopes=["*"])
QUERIES = ["refund an order", "find the weather in a city", "send an email to a customer"]
OLD, NEW = "tool-tokens:" + "a" * 16, "tool-tokens:" + "b" * 16


def _tools() -> list[Any]:
    return [
        spec("shop.refund_order", "Refund an order by its number."),
        spec("shop.find_order", "Find an order by its number or the customer's email."),
        spec("weather.forecast", "The weather forecast of a city for the next days."),
        spec("mail.send", "Send an email to a customer.", aliases=["write to a customer"]),
    ]


def _catalog_write(dsn: str, tools: list[Any]) -> None:
    with Catalog.open(dsn, embedder=embedder(), log=False, prefetch=False) as cat:
        cat.add(tools)


def test_a_blob_is_kept_for_the_current_generation_and_read_by_another_replica(
    pg_dsn: str,  # noqa: F811
) -> None:
    _catalog_write(pg_dsn, _tools())
    one, two = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    try:
        assert one.derived(NEW) is None  # nothing kept yet (and no table yet)
        gen = one.generation()
        assert one.set_derived(NEW, gen, b"\x00blob\xff")
        assert two.derived(NEW) == (gen, b"\x00blob\xff")  # another replica reads it
        assert not one.set_derived(NEW, gen - 1, b"stale")  # a moved generation: not kept
        assert two.derived(NEW) == (gen, b"\x00blob\xff")
    finally:
        one.close()
        two.close()


def test_another_versions_blob_for_an_older_generation_goes(pg_dsn: str) -> None:  # noqa: F811
    _catalog_write(pg_dsn, _tools())
    store = PostgresStore(pg_dsn)
    try:
        gen = store.generation()
        assert store.set_derived(OLD, gen, b"older")
        assert store.set_derived("dense-index:9:model-a", gen, b"older")
        assert store.set_derived(NEW, gen, b"newer")
        assert store.derived(OLD) == (gen, b"older")  # the same generation: a rolling upgrade's
        _catalog_write(pg_dsn, [spec("extra.tool", "One more tool.")])
        newer = store.generation()
        assert newer > gen
        assert store.set_derived(NEW, newer, b"newest")
        assert store.derived(OLD) is None
        assert store.derived("dense-index:9:model-a") == (gen, b"older")  # no code digest
    finally:
        store.close()


def test_a_read_or_write_that_fails_is_a_miss_not_an_error(pg_dsn: str) -> None:  # noqa: F811
    _catalog_write(pg_dsn, _tools())
    store = PostgresStore(pg_dsn)
    try:
        gen = store.generation()
        assert store.set_derived(NEW, gen, b"kept")
        with psycopg.connect(pg_dsn, autocommit=True) as raw:
            raw.execute("ALTER TABLE toolscout_derived RENAME COLUMN blob TO other")
        assert store.derived(NEW) is None
        assert not store.set_derived(NEW, gen, b"again")
    finally:
        store.close()


def _new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new process starts with: no tokenizer, nothing counted or known."""
    monkeypatch.setattr(tokencount, "_encoding", None)
    monkeypatch.setattr(tokencount, "_parts", OrderedDict())
    monkeypatch.setattr(tokencount, "_joins", {})
    monkeypatch.setattr(tokencount, "_known", {})


def test_a_new_process_on_postgres_counts_from_kept_counts_without_the_tokenizer(
    pg_dsn: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _new_process(monkeypatch)
    with Catalog.open(pg_dsn, embedder=embedder(), log=False, prefetch=False) as first:
        first.add(_tools())
        counted = [
            (s.ids, s.tokens.catalog, s.tokens.injected)
            for s in (first.discover(q, WHO, k=3, record=False) for q in QUERIES)
        ]
        assert tokencount._encoding is not None
    _new_process(monkeypatch)
    with Catalog.open(pg_dsn, embedder=embedder(), log=False, prefetch=False) as second:
        assert second.counts_kept
        again = [
            (s.ids, s.tokens.catalog, s.tokens.injected)
            for s in (second.discover(q, WHO, k=3, record=False) for q in QUERIES)
        ]
        assert again == counted
        assert tokencount._encoding is None  # never loaded: every text was known
