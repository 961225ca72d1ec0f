"""A first bulk load into an empty PostgreSQL catalog builds its HNSW index after the rows
(``stores/postgres.py``'s ``_ann_built_after``); the index it leaves is the one it found."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from pg_fixture import pg_dsn, pg_server  # noqa: F401  (fixtures)
from support import spec
from toolscout.errors import StoreError
from toolscout.stores.base import KIND_CARD, IndexedTool
from toolscout.stores.postgres import _BUILD_AFTER, PostgresStore

N = _BUILD_AFTER + 200


def _load(n: int, start: int = 0) -> tuple[list[IndexedTool], dict[str, np.ndarray]]:
    rng = np.random.default_rng(start)
    matrix = rng.standard_normal((n, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = range(start, start + n)
    tools = [
        IndexedTool(spec(f"b.t{i:05d}"), {"name": "word"}, [(KIND_CARD, f"v{i}")]) for i in ids
    ]
    return tools, {f"v{i}": matrix[i - start] for i in ids}


def _hnsw(dsn: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        return [
            (int(oid), str(definition))
            for oid, definition in conn.execute(
                "SELECT c.oid, pg_get_indexdef(c.oid) FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
                " WHERE i.indrelid = 'toolscout_tool_texts'::regclass AND a.amname = 'hnsw'"
            )
        ]


def _count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


def test_a_first_bulk_load_rebuilds_the_index_it_found_and_later_writes_keep_it(
    pg_dsn: str,  # noqa: F811
) -> None:
    store = PostgresStore(pg_dsn, ann_threshold=0, exact_below=0)
    try:
        # an operator's own setting of the index must survive the load
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP INDEX toolscout_tool_texts_hnsw")
            conn.execute(
                "CREATE INDEX toolscout_tool_texts_hnsw ON toolscout_tool_texts"
                " USING hnsw (embedding vector_cosine_ops) WITH (m = 8)"
            )
        (before,) = _hnsw(pg_dsn)
        assert "m='8'" in before[1]
        tools, vectors = _load(N)
        stats = store.upsert(tools, vectors, model_id="m")
        assert (stats.added, stats.embedded) == (N, N)
        (built,) = _hnsw(pg_dsn)
        assert built[1] == before[1]
        assert built[0] != before[0]  # built again after the rows, not kept row by row
        assert _count(pg_dsn, "toolscout_tool_texts") == N
        everyone = {t.spec.id for t in tools}
        # the rebuilt index answers: each tool's own vector finds it first (HNSW path)
        for i in (0, N // 2, N - 1):
            hits = store.dense(vectors[f"v{i}"], everyone, 3, kinds={KIND_CARD}, model_id="m")
            assert hits.ids[0] == f"b.t{i:05d}"
        # a catalog that holds texts keeps its index through another bulk write
        more, more_vectors = _load(N, start=N)
        assert store.upsert(more, more_vectors, model_id="m").added == N
        assert _hnsw(pg_dsn) == [built]
        everyone |= {t.spec.id for t in more}
        hits = store.dense(more_vectors[f"v{N}"], everyone, 3, kinds={KIND_CARD}, model_id="m")
        assert hits.ids[0] == f"b.t{N:05d}"
    finally:
        store.close()


def test_a_failed_first_load_leaves_the_index_as_it_was(pg_dsn: str) -> None:  # noqa: F811
    """The drop and the build are in the write's transaction: a load that fails after
    the drop (here a trigger of the database refuses one of its rows) rolls them back
    with everything else."""
    store = PostgresStore(pg_dsn)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN RAISE EXCEPTION 'refused %', NEW.tool_id; END $$"
            )
            conn.execute(
                "CREATE TRIGGER refuse AFTER INSERT ON toolscout_tool_texts FOR EACH ROW"
                " WHEN (NEW.tool_id = 'b.t00007') EXECUTE FUNCTION refuse()"
            )
        (before,) = _hnsw(pg_dsn)
        tools, vectors = _load(N)
        with pytest.raises(StoreError, match=r"refused b\.t00007"):
            store.upsert(tools, vectors, model_id="m")
        assert _hnsw(pg_dsn) == [before]
        assert _count(pg_dsn, "toolscout_tools") == 0
        assert _count(pg_dsn, "toolscout_tool_texts") == 0
    finally:
        store.close()
