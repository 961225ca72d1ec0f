"""Derived state kept in PostgreSQL: blobs a catalog generation derives, shared by replicas.

The SQLite store keeps what a generation derives beside the catalog (``sqlite_derived``);
without this, every replica on PostgreSQL derived it again in every new process: the
token parts it counted, the per-tool token counts, and the multilingual option's word
list (~10 s of embedding on a 1,000-tool catalog, on the first request that needed it).
Here they are kept as blobs in ``toolscout_derived`` (key, generation, blob), made on
first use outside the numbered migrations, as SQLite's ``derived`` table is: an older
replica that does not know the table keeps working and never reads it.

The rules are ``sqlite_derived``'s: a write whose generation is no longer the current one
is dropped; reading or writing is a cache, so a failure only means deriving again; and
a blob kept under ``name:digest`` (the digest names the code that made it) drops what
other versions kept of the same ``name`` for an older generation. Derived *maps* (the
phrase index and name table kept as rows) stay in each replica's in-memory mirror.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import Any

from toolscout.errors import StoreError
from toolscout.stores.sqlite_derived import _names_code

__all__ = ["PgDerivedState"]

_log = logging.getLogger(__name__)

_TABLE = (
    "CREATE TABLE IF NOT EXISTS toolscout_derived"
    " (key TEXT PRIMARY KEY, generation BIGINT NOT NULL, blob BYTEA NOT NULL)"
)


class PgDerivedState:
    """The derived-state methods of the PostgreSQL store (over its pooled connections)."""

    _psycopg: Any
    _derived_table: bool = False  # made (or seen) by this process

    def _conn(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def derived(self, key: str) -> tuple[int, bytes] | None:
        """The blob kept under ``key`` and the generation it was derived from, if any."""
        try:
            with self._conn() as conn:
                (table,) = conn.execute("SELECT to_regclass('toolscout_derived')").fetchone()
                if table is None:
                    return None
                row = conn.execute(
                    "SELECT generation, blob FROM toolscout_derived WHERE key = %s", (key,)
                ).fetchone()
        except StoreError as exc:
            _log.debug("derived state %s not read: %s", key, exc)
            return None
        return None if row is None else (int(row[0]), bytes(row[1]))

    def set_derived(self, key: str, generation: int, blob: bytes) -> bool:
        """Keep ``blob`` as derived from ``generation`` if that is still the current one;
        False when it was not kept (a moved generation, a failed write)."""
        try:
            with self._conn() as conn:
                if not self._derived_table:
                    conn.execute(_TABLE)
                    self._derived_table = True
                with conn.transaction():
                    # no lock: a blob kept for a generation that moved meanwhile is one
                    # no reader takes (each compares it with its own)
                    (current,) = conn.execute("SELECT generation FROM toolscout_state").fetchone()
                    if int(current) != generation:
                        return False
                    conn.execute(
                        "INSERT INTO toolscout_derived(key, generation, blob) VALUES (%s, %s, %s)"
                        " ON CONFLICT (key) DO UPDATE"
                        " SET generation = EXCLUDED.generation, blob = EXCLUDED.blob",
                        (key, generation, blob),
                    )
                    name, sep, _ = key.rpartition(":")
                    if sep and _names_code(key):
                        conn.execute(
                            "DELETE FROM toolscout_derived WHERE left(key, %s) = %s"
                            " AND key <> %s AND generation < %s",
                            (len(name) + 1, name + ":", key, generation),
                        )
        except (StoreError, self._psycopg.Error) as exc:
            _log.debug("derived state %s not kept: %s", key, exc)
            return False
        return True
