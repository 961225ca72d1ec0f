"""Reading the discovery log: the questions the report, learned aliases and the gateway ask.

:class:`LogReads` holds every query of the log (who made a discovery, the discoveries
and events of a period, the false negatives, the learned pairs, the tenants, the
counts), written once over the dialect's templates. It is mixed into
:class:`~toolscout.telemetry.log.DiscoveryLog`, which gives :meth:`LogReads._rows`: a
statement run after the writer's queue is flushed.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, ClassVar

from toolscout.telemetry.log_rows import DiscoveryRow, EventRow, FalseNegative

_DISCOVERY_ID = re.compile(r"[0-9a-f]{32}")


class LogReads:
    """The log's queries; the class that mixes them in runs the statements (``_rows``)."""

    #: other processes may write to the same log (HTTP workers, replicas, a gateway beside
    #: the CLI): an unknown discovery may be theirs, still held by their writer
    shared: ClassVar[bool] = True
    #: how long ``owner`` waits for a discovery another process may still be writing (four
    #: of its writer's gathers, ``log_writer.GATHER_S``); this process's own are written
    #: before any read, so only an id no process wrote waits this long
    owner_wait_s: ClassVar[float] = 1.0

    def _rows(self, template: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """The rows ``template`` selects (the log's, once what is queued is written)."""
        raise NotImplementedError

    def owner(self, discovery_id: str) -> tuple[str, str] | None:
        """(subject, tenant) of the caller who made ``discovery_id``; None if unknown.

        On a shared log, an id of the form this log hands out that is not (yet) there is
        asked again for up to ``owner_wait_s``: another replica may still be writing it."""
        sql = "SELECT subject, tenant FROM {discoveries} WHERE id = ?"
        rows = self._rows(sql, (str(discovery_id),))
        if not rows and self.shared and _DISCOVERY_ID.fullmatch(str(discovery_id)):
            deadline = time.monotonic() + self.owner_wait_s
            while not rows and time.monotonic() < deadline:
                time.sleep(0.02)
                rows = self._rows(sql, (str(discovery_id),))
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def discoveries(self, since: float = 0.0, until: float | None = None) -> list[DiscoveryRow]:
        """Discoveries logged in ``[since, until)``, oldest first."""
        rows = self._rows(
            "SELECT id, ts, subject, tenant, conversation, query, query_hash, shown, confidence,"
            " low FROM {discoveries} WHERE ts >= ? AND ts < ? ORDER BY ts, {seq}",
            (since, until if until is not None else float("inf")),
        )
        return [
            DiscoveryRow(
                str(r[0]),
                float(r[1]),
                str(r[2]),
                str(r[3]),
                r[4],
                r[5],
                r[6],
                tuple(json.loads(r[7])),
                float(r[8]),
                bool(r[9]),
            )
            for r in rows
        ]

    def events(self, since: float = 0.0, until: float | None = None) -> list[EventRow]:
        """Executions and feedback logged in ``[since, until)``, oldest first."""
        rows = self._rows(
            "SELECT ts, discovery_id, tool_id, ok, kind, subject, tenant, conversation"
            " FROM {calls} WHERE ts >= ? AND ts < ? ORDER BY ts, {seq}",
            (since, until if until is not None else float("inf")),
        )
        return [
            EventRow(float(r[0]), r[1], str(r[2]), bool(r[3]), str(r[4]), r[5], r[6], r[7])
            for r in rows
        ]

    def false_negatives(self, limit: int = 20) -> list[FalseNegative]:
        """Tools that were called after a discovery that did not show them, worst first."""
        rows = self._rows(
            "SELECT c.tool_id, d.shown, coalesce(d.query, d.query_hash, '') FROM {calls} c"
            " JOIN {discoveries} d ON d.id = c.discovery_id ORDER BY c.ts, c.{seq}"
        )
        stats: dict[str, list[Any]] = {}
        for tool_id, shown, query in rows:
            entry = stats.setdefault(tool_id, [0, 0, []])
            entry[1] += 1
            if tool_id not in json.loads(shown):
                entry[0] += 1
                if len(entry[2]) < 3 and query:
                    entry[2].append(query)
        out = [FalseNegative(t, m, c, tuple(q)) for t, (m, c, q) in stats.items() if m]
        out.sort(key=lambda f: (-f.misses, f.tool_id))
        return out[:limit]

    def learned_pairs(
        self, min_count: int = 1, *, tenant: str | None = None
    ) -> list[tuple[str, str, int]]:
        """(tool id, query, times) for queries after which the tool was called successfully.

        Only query text can be learned from: with query_log "hash" or "none" this is empty.
        With ``tenant``, only that tenant's usage (one tenant's phrasing must not steer
        another's shortlists).
        """
        where = " AND d.tenant = ?" if tenant is not None else ""
        params: tuple[Any, ...] = (tenant, min_count) if tenant is not None else (min_count,)
        rows = self._rows(
            "SELECT c.tool_id, d.query, count(*) FROM {calls} c"
            " JOIN {discoveries} d ON d.id = c.discovery_id"
            f" WHERE c.ok = 1 AND c.kind = 'call' AND d.query IS NOT NULL{where}"
            " GROUP BY c.tool_id, d.query HAVING count(*) >= ?"
            " ORDER BY c.tool_id, count(*) DESC, d.query",
            params,
        )
        return [(str(t), str(q), int(n)) for t, q, n in rows]

    def tenants(self) -> list[str]:
        """Every tenant with discoveries in the log."""
        rows = self._rows("SELECT DISTINCT tenant FROM {discoveries} ORDER BY tenant")
        return [str(r[0]) for r in rows]

    def stats(self) -> dict[str, float]:
        ((n, conf, lat),) = self._rows(
            "SELECT count(*), coalesce(avg(confidence), 0), coalesce(avg(latency_ms), 0)"
            " FROM {discoveries}"
        )
        (calls,) = self._rows("SELECT count(*) FROM {calls} WHERE kind = 'call'")[0]
        return {"discoveries": n, "mean_confidence": conf, "mean_latency_ms": lat, "calls": calls}
