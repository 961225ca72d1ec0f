"""When a server is ready: warm, not merely started.

A process that answers ``/readyz`` before its model is loaded sends its first caller a
2-second discovery. :class:`Readiness` warms the service in a background thread as the
app starts — the embedding model loaded and run once, one discovery through the whole
pipeline (not written to the discovery log), the gateway's loop started and a schema
validator compiled — and ``/readyz`` answers 503 until that is done. A warm-up that
fails (the store unreachable) is retried with back-off; its reason is what ``/readyz``
says meanwhile.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from toolscout.embed.queries import query_embedder
from toolscout.policy import Principal

__all__ = ["WARM_UP_QUERY", "Readiness"]

#: the query of the warm-up discovery
WARM_UP_QUERY = "warm up: find a tool"
#: who the warm-up discovery is for: nobody's tenant, no scopes (it records nothing)
_WARM_UP_PRINCIPAL = Principal.of("toolscout:warm-up")


class Readiness:
    """Warms ``service`` once in the background; :attr:`ready` says when it is done."""

    def __init__(
        self, service: Any, *, on_ready: Callable[[Readiness], None] | None = None
    ) -> None:
        self._service = service
        self._on_ready = on_ready
        self._done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.problem = "warming up: loading the model"
        self.seconds: float | None = None

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def start(self) -> None:
        """Warm up in a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="toolscout-warm-up", daemon=True)
            self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until warm (or ``timeout``); whether it is."""
        return self._done.wait(timeout)

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        delay = 0.5
        start = time.perf_counter()
        while not self._stop.is_set():
            try:
                self.warm()
            except Exception as exc:  # retried: the store may come up later
                self.problem = f"warming up failed ({type(exc).__name__}); retrying"
                self._stop.wait(delay)
                delay = min(delay * 2, 10.0)
                continue
            self.seconds = time.perf_counter() - start
            self.problem = ""
            if self._on_ready is not None:  # before /readyz says so: its line is out first
                # an announcement that fails never keeps a server unready
                with contextlib.suppress(Exception):
                    self._on_ready(self)
            self._done.set()
            return

    def warm(self) -> None:
        """One pass: the model, a discovery, the gateway."""
        catalog = self._service.catalog
        embedder = getattr(catalog, "embedder", None)
        if embedder is not None:  # both graphs when requests have their own
            embedder.embed([WARM_UP_QUERY])
            queries = query_embedder(embedder)
            if queries is not embedder:
                queries.embed([WARM_UP_QUERY])
        catalog.discover(WARM_UP_QUERY, _WARM_UP_PRINCIPAL, k=1, record=False)
        gateway = getattr(self._service, "gateway", None)
        if gateway is not None:
            gateway.warm_up()
