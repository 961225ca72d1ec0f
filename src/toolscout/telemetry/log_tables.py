"""The discovery log's tables, written once for every backend, and the SQL dialect.

The statements use ``{discoveries}``, ``{calls}``, ``{accepted_aliases}`` and
``{log_meta}`` for the tables, ``{seq}`` for the column in insertion order and ``?`` for
parameters; a backend's :class:`Dialect` renders them (:data:`SQLITE` here,
``POSTGRES`` in telemetry/log_postgres.py). Older SQLite files gain the columns added
since (``_UPGRADES``) in place.
"""

from __future__ import annotations

from dataclasses import dataclass

_DISCOVERIES = """
CREATE TABLE IF NOT EXISTS discoveries (
    id TEXT PRIMARY KEY,
    ts REAL NOT NULL,
    subject TEXT NOT NULL,
    tenant TEXT NOT NULL,
    conversation TEXT,
    query TEXT,
    query_hash TEXT,
    shown TEXT NOT NULL,
    confidence REAL NOT NULL,
    low INTEGER NOT NULL DEFAULT 0,
    latency_ms REAL NOT NULL
)"""
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS log_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
{_DISCOVERIES};
CREATE TABLE IF NOT EXISTS calls (
    ts REAL NOT NULL,
    discovery_id TEXT,
    tool_id TEXT NOT NULL,
    ok INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'call',
    subject TEXT,
    tenant TEXT,
    conversation TEXT
);
CREATE TABLE IF NOT EXISTS accepted_aliases (
    id TEXT PRIMARY KEY,
    ts REAL NOT NULL,
    tool_id TEXT NOT NULL,
    alias TEXT NOT NULL,
    tenant TEXT NOT NULL,
    source TEXT NOT NULL,
    evidence TEXT NOT NULL
);
"""
_INDEXES = """
CREATE INDEX IF NOT EXISTS discoveries_ts ON discoveries(ts);
CREATE INDEX IF NOT EXISTS discoveries_conv ON discoveries(tenant, conversation, ts);
CREATE INDEX IF NOT EXISTS calls_tool ON calls(tool_id);
CREATE INDEX IF NOT EXISTS calls_ts ON calls(ts);
"""

# columns added after the first version of the log (older files are upgraded in place)
_UPGRADES = {
    "discoveries": (
        ("conversation", "TEXT"),
        ("query_hash", "TEXT"),
        ("low", "INTEGER NOT NULL DEFAULT 0"),
    ),
    "calls": (
        ("kind", "TEXT NOT NULL DEFAULT 'call'"),
        ("subject", "TEXT"),
        ("tenant", "TEXT"),
        ("conversation", "TEXT"),
    ),
}

#: query text past its time: only the hash (written beside it) stays
_REDUCE_TEXT = "UPDATE {discoveries} SET query = NULL WHERE query IS NOT NULL AND ts < ?"


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs in the SQL of one backend: the statements are written once, with
    ``{discoveries}``, ``{calls}``, ``{accepted_aliases}``, ``{log_meta}`` for the
    tables, ``{seq}`` for the column in insertion order, and ``?`` for parameters."""

    tables: tuple[tuple[str, str], ...]  # (name in the statements, name in the database)
    seq: str
    param: str

    def render(self, template: str) -> str:
        sql = template.format(seq=self.seq, **dict(self.tables))
        return sql if self.param == "?" else sql.replace("?", self.param)


SQLITE = Dialect(
    tables=tuple((t, t) for t in ("discoveries", "calls", "accepted_aliases", "log_meta")),
    seq="rowid",
    param="?",
)
