"""A vector cache shared by processes: a text embedded once is not embedded again.

``$TOOLSCOUT_VECTOR_CACHE=<dir>`` makes every embedder :func:`toolscout.embed.make_embedder`
builds answer from ``<dir>/vectors.sqlite3`` the texts it has embedded before, under any
catalog and in any process: a test run, a CI job or a machine that indexes the same card
texts into many catalogs (each catalog already skips its own unchanged cards; this skips
texts another catalog or an earlier process embedded). Unset (the default), nothing is
cached outside a catalog.

A vector is stored under its model id and the SHA-256 of its text, exactly as the model
returned it; a later lookup returns those bytes, so one model id and one text always get
one vector, and a different model id never reads another's vectors. The first process to
store a text's vector wins (``INSERT OR IGNORE``); processes share the file through
SQLite's write-ahead log, a writer waiting for another at most :data:`BUSY_SECONDS`. The
cache never fails an embedding: a file that cannot be opened or read (damaged, not a
database, a directory that cannot be made) is logged once and ignored, and a row of the
wrong size is read as a miss.

With the cache the model is not loaded ahead (``load`` does nothing; ``prefetch_models``
and a server's warm-up then load nothing): it is loaded by the first text the cache does
not hold, and a process whose texts are all cached never loads it (ONNX Runtime's session
is about 0.6 s of CPU and 100 MB). A server's first query the cache lacks waits for it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from toolscout.embed.base import Embedder, Vectors, Wrapped

#: the directory of the shared vector cache (unset: no cache)
VECTOR_CACHE_ENV = "TOOLSCOUT_VECTOR_CACHE"
#: the cache file in that directory
FILE_NAME = "vectors.sqlite3"
#: how long a process waits for another's write before it leaves its vectors unstored
BUSY_SECONDS = 30.0
#: texts looked up per query (SQLite's bound-parameter limit is far above)
_CHUNK = 500

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    digest BLOB NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, digest)
) WITHOUT ROWID
"""

_SELECT = "SELECT digest, vector FROM vectors WHERE model = ? AND digest IN ({marks})"


def digest(text: str) -> bytes:
    """The key of a text in the cache (with the model id)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class VectorCache:
    """The cache file: lookups and stores of vectors by (model id, text)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE_NAME
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._broken = False

    def _connect(self) -> sqlite3.Connection | None:
        """The open connection; None once the file proved unusable (logged once)."""
        if self._db is None and not self._broken:
            db: sqlite3.Connection | None = None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(
                    self.path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
                )
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(_SCHEMA)
                self._db = db
            except (OSError, sqlite3.Error) as exc:
                if db is not None:
                    db.close()
                self._ignore(exc)
        return self._db

    def _ignore(self, exc: BaseException) -> None:
        if not self._broken:
            log.warning("vector cache %s ignored: %s", self.path, exc)
        self._broken = True
        if self._db is not None:
            self._db.close()
            self._db = None

    def get(self, model_id: str, dim: int, keys: Sequence[bytes]) -> dict[bytes, Vectors]:
        """The stored vectors of ``keys`` under ``model_id`` (rows of another size: misses)."""
        found: dict[bytes, Vectors] = {}
        with self._lock:
            db = self._connect()
            if db is None:
                return found
            try:
                for chunk in _chunks(list(keys), _CHUNK):
                    marks = ",".join("?" * len(chunk))
                    rows = db.execute(_SELECT.format(marks=marks), [model_id, *chunk]).fetchall()
                    for key, blob in rows:
                        if isinstance(blob, bytes) and len(blob) == dim * 4:
                            found[bytes(key)] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
            except sqlite3.Error as exc:
                self._ignore(exc)
                return {}
        return found

    def put(self, model_id: str, items: Sequence[tuple[bytes, Vectors]]) -> None:
        """Store vectors the model returned (a key already stored keeps its vector)."""
        if not items:
            return
        with self._lock:
            db = self._connect()
            if db is None:
                return
            rows = [(model_id, key, np.asarray(v, dtype="<f4").tobytes()) for key, v in items]
            try:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)", rows)
                db.execute("COMMIT")
            except sqlite3.OperationalError as exc:  # busy past the timeout: left unstored
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if "locked" not in str(exc) and "busy" not in str(exc):
                    self._ignore(exc)
            except sqlite3.Error as exc:
                self._ignore(exc)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _chunks(items: list[bytes], size: int) -> Iterator[list[bytes]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class CachedEmbedder(Wrapped):
    """An :class:`Embedder` that embeds only the texts the cache does not hold."""

    def __init__(self, inner: Embedder, cache: VectorCache) -> None:
        super().__init__(inner)
        self.cache = cache
        #: texts answered from the cache, and texts the model embedded
        self.hits = 0
        self.misses = 0

    def load(self) -> None:
        """Nothing: the model is loaded by the first text the cache does not hold, so a
        process whose texts are all cached (a re-run, a test's CLI process, a gateway's
        warm-up query) never loads it. A server's first uncached query pays the load."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return self.inner.embed(texts)
        keys = [digest(t) for t in texts]
        found = self.cache.get(self.model_id, self.dim, list(dict.fromkeys(keys)))
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found:
                missing.setdefault(key, text)
        if missing:
            vectors = self.inner.embed(list(missing.values()))
            fresh = list(zip(missing, vectors, strict=True))
            self.cache.put(self.model_id, fresh)
            found.update(fresh)
            # another process may have stored a text first: its vector is the one kept
            found.update(self.cache.get(self.model_id, self.dim, list(missing)))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = found[key]
        return out


def with_vector_cache(embedder: Embedder) -> Embedder:
    """``embedder`` answering from the cache :data:`VECTOR_CACHE_ENV` names, if it is set."""
    where = os.environ.get(VECTOR_CACHE_ENV, "").strip()
    if not where:
        return embedder
    return CachedEmbedder(embedder, VectorCache(Path(where)))


__all__ = [
    "BUSY_SECONDS",
    "FILE_NAME",
    "VECTOR_CACHE_ENV",
    "CachedEmbedder",
    "VectorCache",
    "digest",
    "with_vector_cache",
]
