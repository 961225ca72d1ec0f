"""The discovery log: what was asked, what was shown, what was then called.

Writes go through a queue to one background thread, so logging never blocks
discovery. From the log come the false-negative report (a tool was called that
the preceding discovery did not show) and the usage-learned aliases (queries
after which a tool was called successfully).
"""

from __future__ import annotations

import contextlib
import json
import queue
import sqlite3
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS discoveries (
    id TEXT PRIMARY KEY,
    ts REAL NOT NULL,
    subject TEXT NOT NULL,
    tenant TEXT NOT NULL,
    query TEXT NOT NULL,
    shown TEXT NOT NULL,
    confidence REAL NOT NULL,
    latency_ms REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS calls (
    ts REAL NOT NULL,
    discovery_id TEXT,
    tool_id TEXT NOT NULL,
    ok INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_tool ON calls(tool_id);
"""

_STOP = object()


@dataclass(frozen=True, slots=True)
class FalseNegative:
    tool_id: str
    misses: int  # calls that followed a discovery which did not show the tool
    calls: int
    example_queries: tuple[str, ...]


class DiscoveryLog:
    """Append-only log of discoveries and the tool calls that followed them."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=100_000)
        self._thread: threading.Thread | None = None

    def _writer(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                self._queue.task_done()
                return
            sql, params = item
            # telemetry must never break the request path
            with self._lock, contextlib.suppress(sqlite3.Error):
                self._db.execute(sql, params)
            self._queue.task_done()

    def _put(self, sql: str, params: tuple[Any, ...]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._writer, name="toolscout-log", daemon=True)
            self._thread.start()
        with contextlib.suppress(queue.Full):  # drop rather than block
            self._queue.put_nowait((sql, params))

    def record_discovery(
        self,
        subject: str,
        tenant: str,
        query: str,
        shown: Sequence[str],
        confidence: float,
        latency_ms: float,
    ) -> str:
        did = uuid.uuid4().hex
        self._put(
            "INSERT INTO discoveries VALUES (?,?,?,?,?,?,?,?)",
            (
                did,
                time.time(),
                subject,
                tenant,
                query,
                json.dumps(list(shown)),
                confidence,
                latency_ms,
            ),
        )
        return did

    def record_call(self, tool_id: str, *, discovery_id: str | None, ok: bool) -> None:
        self._put(
            "INSERT INTO calls VALUES (?,?,?,?)", (time.time(), discovery_id, tool_id, int(ok))
        )

    def flush(self) -> None:
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        self.flush()
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def false_negatives(self, limit: int = 20) -> list[FalseNegative]:
        """Tools that were called after a discovery that did not show them, worst first."""
        rows = self._rows(
            "SELECT c.tool_id, d.shown, d.query FROM calls c"
            " JOIN discoveries d ON d.id = c.discovery_id"
        )
        stats: dict[str, list[Any]] = {}
        for tool_id, shown, query in rows:
            entry = stats.setdefault(tool_id, [0, 0, []])
            entry[1] += 1
            if tool_id not in json.loads(shown):
                entry[0] += 1
                if len(entry[2]) < 3:
                    entry[2].append(query)
        out = [FalseNegative(t, m, c, tuple(q)) for t, (m, c, q) in stats.items() if m]
        out.sort(key=lambda f: (-f.misses, f.tool_id))
        return out[:limit]

    def learned_pairs(self, min_count: int = 1) -> list[tuple[str, str, int]]:
        """(tool id, query, times) for queries after which the tool was called successfully."""
        rows = self._rows(
            "SELECT c.tool_id, d.query, count(*) FROM calls c"
            " JOIN discoveries d ON d.id = c.discovery_id WHERE c.ok = 1"
            " GROUP BY c.tool_id, d.query HAVING count(*) >= ? ORDER BY c.tool_id, count(*) DESC",
            (min_count,),
        )
        return [(str(t), str(q), int(n)) for t, q, n in rows]

    def stats(self) -> dict[str, float]:
        ((n, conf, lat),) = self._rows(
            "SELECT count(*), coalesce(avg(confidence), 0), coalesce(avg(latency_ms), 0)"
            " FROM discoveries"
        )
        (calls,) = self._rows("SELECT count(*) FROM calls")[0]
        return {"discoveries": n, "mean_confidence": conf, "mean_latency_ms": lat, "calls": calls}
