"""The discovery log in PostgreSQL: one log for every replica of a service.

:class:`~toolscout.telemetry.log.DiscoveryLog` keeps its rows in the SQLite
catalog file; a catalog in PostgreSQL keeps them in that database instead, so a
discovery made through one replica is known to all of them (feedback on it, the
executions that follow it, the false-negative report, learned phrases). The
queue, the writer thread, every statement and every reader are the SQLite log's
own: this module gives them a connection and a :class:`~toolscout.telemetry.log.Dialect`.

* The tables are ``toolscout_discoveries``, ``toolscout_calls``,
  ``toolscout_accepted_aliases`` and ``toolscout_log_meta``, created under a
  transaction-scoped advisory lock, so replicas starting together do not race.
* Each table has an identity column ``seq``: "oldest first" is ``ts`` and then
  ``seq``, as it is ``ts`` and ``rowid`` in SQLite.
* The query-hash key is one row of ``toolscout_log_meta``, inserted if absent and
  then read: every replica hashes a query to the same digest.
* Times are ``double precision`` (``real`` would round them).
* The log has its own connection, not the store's: writes stay on the log's
  background thread and never join a catalog transaction. A connection lost
  between statements is opened again on the next one.
* Deleted and scrubbed rows are vacuumed at once; PostgreSQL does not zero the
  freed space the way SQLite's ``secure_delete`` does, and its write-ahead log
  keeps what was written until the server recycles it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from toolscout.errors import StoreError
from toolscout.settings import QUERY_TEXT_DAYS
from toolscout.stores.dsn import redact
from toolscout.stores.pgsession import PgSession
from toolscout.telemetry.log import Dialect, DiscoveryLog

#: the advisory lock key taken while the tables are created (any constant shared by replicas)
_SCHEMA_LOCK = 0x7A5C_10C5

POSTGRES = Dialect(
    tables=(
        ("discoveries", "toolscout_discoveries"),
        ("calls", "toolscout_calls"),
        ("accepted_aliases", "toolscout_accepted_aliases"),
        ("log_meta", "toolscout_log_meta"),
    ),
    seq="seq",
    param="%s",
)

_PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolscout_log_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS toolscout_discoveries (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY,
    id           TEXT             PRIMARY KEY,
    ts           DOUBLE PRECISION NOT NULL,
    subject      TEXT             NOT NULL,
    tenant       TEXT             NOT NULL,
    conversation TEXT,
    query        TEXT,
    query_hash   TEXT,
    shown        TEXT             NOT NULL,
    confidence   DOUBLE PRECISION NOT NULL,
    low          INTEGER          NOT NULL DEFAULT 0,
    latency_ms   DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS toolscout_calls (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts           DOUBLE PRECISION NOT NULL,
    discovery_id TEXT,
    tool_id      TEXT             NOT NULL,
    ok           INTEGER          NOT NULL,
    kind         TEXT             NOT NULL DEFAULT 'call',
    subject      TEXT,
    tenant       TEXT,
    conversation TEXT
);
CREATE TABLE IF NOT EXISTS toolscout_accepted_aliases (
    seq      BIGINT GENERATED ALWAYS AS IDENTITY,
    id       TEXT             PRIMARY KEY,
    ts       DOUBLE PRECISION NOT NULL,
    tool_id  TEXT             NOT NULL,
    alias    TEXT             NOT NULL,
    tenant   TEXT             NOT NULL,
    source   TEXT             NOT NULL,
    evidence TEXT             NOT NULL
);
CREATE INDEX IF NOT EXISTS toolscout_discoveries_ts ON toolscout_discoveries (ts, seq);
CREATE INDEX IF NOT EXISTS toolscout_discoveries_conv
    ON toolscout_discoveries (tenant, conversation, ts);
CREATE INDEX IF NOT EXISTS toolscout_calls_tool ON toolscout_calls (tool_id);
CREATE INDEX IF NOT EXISTS toolscout_calls_ts ON toolscout_calls (ts, seq);
CREATE INDEX IF NOT EXISTS toolscout_calls_discovery ON toolscout_calls (discovery_id);
"""


#: what ``toolscout_log_meta``'s ``schema`` row holds once :data:`_PG_SCHEMA` has run
_SCHEMA_MARK = hashlib.sha256(_PG_SCHEMA.encode()).hexdigest()[:16]


def _schema_in_place(conn: Any) -> bool:
    """Whether this version's tables and indexes are all there (the ``schema`` row says
    :data:`_PG_SCHEMA` ran), read without a lock on the log's tables: the DDL, even with
    ``IF NOT EXISTS``, takes a share lock on each table it indexes, which waits on a
    replica's open insert and, with the replica's next insert, deadlocks."""
    with conn.transaction():
        if conn.execute("SELECT to_regclass('toolscout_log_meta')").fetchone()[0] is None:
            return False
        row = conn.execute("SELECT value FROM toolscout_log_meta WHERE key = 'schema'").fetchone()
    return row is not None and row[0] == _SCHEMA_MARK


class PostgresDiscoveryLog(DiscoveryLog):
    """:class:`DiscoveryLog` in a PostgreSQL database that several replicas share."""

    dialect: ClassVar[Dialect] = POSTGRES

    def __init__(
        self,
        dsn: str,
        *,
        query_log: str = "text",
        retention_days: float | None = None,
        query_text_days: float | None = QUERY_TEXT_DAYS,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self._timeout_s = connect_timeout_s
        super().__init__(
            dsn,
            query_log=query_log,
            retention_days=retention_days,
            query_text_days=query_text_days,
        )
        self.path = redact(dsn)  # what messages and reports show

    # -- backend: PostgreSQL -----------------------------------------------------
    def _connect(self, location: str) -> None:
        self._session = PgSession(
            location,
            name="discovery log",
            timeout_s=self._timeout_s,
            application_name="toolscout-log",
        )
        conn = self._session.connection()
        try:
            if _schema_in_place(conn):
                return
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                conn.execute(_PG_SCHEMA)
                conn.execute(
                    "INSERT INTO toolscout_log_meta (key, value) VALUES ('schema', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (_SCHEMA_MARK,),
                )
        except self._session.driver_error as exc:
            conn.close()
            raise self._session.error("cannot create the discovery log's tables in", exc) from None

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._session.run(sql, params).rowcount)

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._session.run(sql, params).fetchall()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._session.transaction():
            yield

    def _connected(self) -> bool:
        return self._session.connected

    def _compact(self) -> None:
        # dead row versions (pruned or scrubbed text) go now, not at the next autovacuum
        with contextlib.suppress(StoreError):
            self._execute("VACUUM toolscout_discoveries, toolscout_calls")

    def _disconnect(self) -> None:
        self._session.close()
