"""Storage: the store protocols (``stores.base``) and their implementations.

Core code imports only :mod:`toolscout.stores.base`. A concrete backend is chosen
in one place, :func:`open_store`, and imported lazily there.
"""

from __future__ import annotations

from pathlib import Path

from toolscout.stores.base import Store
from toolscout.stores.dsn import is_dsn


def open_store(target: str | Path) -> Store:
    """The store ``target`` names.

    ``":memory:"`` or ``"memory:"``: the in-memory reference store;
    ``"postgresql://..."``: PostgreSQL + pgvector (the ``postgres`` extra);
    anything else: a SQLite file at that path.
    """
    text = str(target)
    if text in (":memory:", "memory:"):
        from toolscout.stores.memory import MemoryStore

        return MemoryStore()
    if is_dsn(text):
        from toolscout.stores.postgres import PostgresStore

        store: Store = PostgresStore(text)
        return store
    from toolscout.stores.sqlite import SQLiteStore

    return SQLiteStore(target)


__all__ = ["Store", "open_store"]
