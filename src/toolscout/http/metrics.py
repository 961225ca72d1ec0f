"""Prometheus metrics of the service (text exposition format via prometheus_client).

One worker counts in its own registry. ``serve --workers N`` points every worker
at one directory (``PROMETHEUS_MULTIPROC_DIR``, made and removed by the parent)
where prometheus_client keeps each process's values in its own memory-mapped
file, and ``/metrics`` — answered by whichever worker the kernel hands the
scrape to — sums them all: a scrape sees the service, not one random worker.
The counters never block a request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: prometheus_client's switch to multiprocess mode (read when it is first imported)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

_LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.015, 0.025, 0.04, 0.06, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    """The service's counters and histograms."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.discover_seconds = Histogram(
            "toolscout_discover_seconds",
            "Discovery latency inside the service, in seconds",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.shortlist_size = Histogram(
            "toolscout_shortlist_size",
            "Tools in each returned shortlist",
            buckets=(0, 1, 2, 3, 4, 5, 7, 10, 20, 30),
            registry=r,
        )
        self.discoveries = Counter("toolscout_discoveries", "Discoveries answered", registry=r)
        self.low_confidence = Counter(
            "toolscout_low_confidence",
            "Discoveries whose confidence was below the threshold"
            " (rate: toolscout_low_confidence_total / toolscout_discoveries_total)",
            registry=r,
        )
        self.tokens_injected = Counter(
            "toolscout_tokens_injected", "Schema tokens injected into prompts", registry=r
        )
        self.tokens_saved = Counter(
            "toolscout_tokens_saved",
            "Schema tokens not injected (entitled catalog minus injected)",
            registry=r,
        )
        self.denials = Counter(
            "toolscout_denials",
            "Tools withheld at discovery or calls refused at execution, by reason",
            ["stage", "reason"],
            registry=r,
        )
        self.executions = Counter(
            "toolscout_executions", "Executions by status", ["status"], registry=r
        )
        self.requests = Counter(
            "toolscout_http_requests",
            "HTTP requests by route and status code",
            ["route", "status"],
            registry=r,
        )

    def discovered(self, shortlist: Any) -> None:
        self.discoveries.inc()
        self.discover_seconds.observe(float(shortlist.latency_ms) / 1000.0)
        self.shortlist_size.observe(len(shortlist.tools))
        if shortlist.low_confidence:
            self.low_confidence.inc()
        self.tokens_injected.inc(shortlist.tokens.injected)
        self.tokens_saved.inc(shortlist.tokens.saved)
        reasons: Mapping[str, int] = shortlist.policy_reasons
        for reason, n in reasons.items():
            if n:
                self.denials.labels("discover", str(reason)).inc(n)

    def executed(self, status: str, reason: str | None) -> None:
        self.executions.labels(status).inc()
        if status == "refused":
            self.denials.labels("execute", reason or "refused").inc()

    def render(self) -> bytes:
        if os.environ.get(MULTIPROC_ENV):
            every = CollectorRegistry()
            multiprocess.MultiProcessCollector(every)  # type: ignore[no-untyped-call]
            return generate_latest(every)
        return generate_latest(self.registry)


class CountRequests:
    """ASGI middleware: every answered HTTP request counted by its route's path (as
    declared, ``unmatched`` when no route matched) and status code.

    A plain ASGI wrapper rather than Starlette's ``BaseHTTPMiddleware`` (``@app.middleware``),
    which runs each request's app in a task of its own and passes the response through a
    memory stream: work a request paid for one counter. The route is the one the router
    set in the request's scope; the status, the one the response started with. A request
    whose app raised (answered 500 further out) is not counted, as before."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0

        async def seen(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        await self.app(scope, receive, seen)
        if status:
            path = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(path, str(status)).inc()
