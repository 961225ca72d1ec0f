"""Console sessions: the token lives on the server, the browser holds a random id.

* Logging in posts the token in a form body (never a URL); the server keeps it in
  memory under a random session id, sent back as an ``HttpOnly``, ``SameSite=Strict``
  cookie (``Secure`` over https). The token is verified again on every request, so an
  expired or revoked token ends the session.
* Every state-changing request carries the session's CSRF token in its form; the
  login form, before any session exists, uses a double-submit cookie. A POST whose
  ``Origin`` is another site is refused whatever it carries.
* Failed logins are throttled per client address.

Sessions are per process: behind ``serve --workers N`` a browser that reaches
another worker logs in again.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

COOKIE = "toolscout_console"
LOGIN_COOKIE = "toolscout_console_login"
#: a session unused this long is forgotten
IDLE_S = 30 * 60
#: sessions kept at most (the oldest go first)
MAX_SESSIONS = 10_000
#: failed logins per client within FAIL_WINDOW_S before it is refused for a while
MAX_FAILURES = 10
FAIL_WINDOW_S = 60.0


@dataclass(slots=True)
class Session:
    id: str
    token: str
    csrf: str
    created: float
    seen: float


def same(a: str, b: str) -> bool:
    """Constant-time comparison of two secrets."""
    return bool(a) and bool(b) and hmac.compare_digest(a.encode(), b.encode())


@dataclass
class Sessions:
    """The server-side session store (in memory, bounded, idle sessions expire)."""

    idle_s: float = IDLE_S
    max_sessions: int = MAX_SESSIONS
    _items: OrderedDict[str, Session] = field(default_factory=OrderedDict)
    _failures: dict[str, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def create(self, token: str) -> Session:
        now = time.time()
        session = Session(secrets.token_urlsafe(32), token, secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._items[session.id] = session
            while len(self._items) > self.max_sessions:
                self._items.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        now = time.time()
        with self._lock:
            session = self._items.get(session_id)
            if session is None:
                return None
            if now - session.seen > self.idle_s:
                del self._items[session_id]
                return None
            session.seen = now
            self._items.move_to_end(session_id)
            return session

    def drop(self, session_id: str | None) -> None:
        with self._lock:
            self._items.pop(session_id or "", None)

    def throttled(self, client: str) -> bool:
        """Has ``client`` failed to log in too often lately?"""
        now = time.time()
        with self._lock:
            seen = self._failures.get(client)
            while seen and now - seen[0] > FAIL_WINDOW_S:
                seen.popleft()
            return seen is not None and len(seen) >= MAX_FAILURES

    def failed(self, client: str) -> None:
        with self._lock:
            if len(self._failures) > self.max_sessions:
                self._failures.clear()
            self._failures.setdefault(client, deque(maxlen=MAX_FAILURES)).append(time.time())


__all__ = ["COOKIE", "LOGIN_COOKIE", "Session", "Sessions", "same"]
