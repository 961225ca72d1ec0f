"""A local HTTP endpoint that replays recorded model responses, for tests and examples.

Point a model SDK's real client at :attr:`ReplayEndpoint.url` (``base_url=``) and it
gets the recorded responses in order, one per request, whatever the path; every request
it sent is kept (:attr:`ReplayEndpoint.requests`: path, headers, decoded JSON body) so a
test can assert what the SDK actually sent. No model is ever called. It listens on
127.0.0.1 on a free port, in a background thread, until :meth:`close`.

    with ReplayEndpoint([{"id": "msg_1", ...}, ...]) as endpoint:
        client = anthropic.Anthropic(base_url=endpoint.url, api_key="replay")
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from toolscout.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Recorded:
    """One request the endpoint received."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    raw: bytes


class ReplayEndpoint:
    """Serves ``responses`` (JSON documents) in order; answers 500 once they run out."""

    def __init__(self, responses: Iterable[Any]) -> None:
        self.responses = list(responses)
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                endpoint._serve(self)

            def do_GET(self) -> None:
                endpoint._serve(self)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @classmethod
    def from_file(cls, path: str | Path) -> ReplayEndpoint:
        """The responses recorded in a JSON file (a list of response documents)."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ConfigError(f"{path}: a recording is a JSON list of responses")
        return cls(data)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            index = len(self.requests)
            self.requests.append(
                Recorded(handler.command, handler.path, dict(handler.headers), body, raw)
            )
            reply = self.responses[index] if index < len(self.responses) else None
        status = 200 if reply is not None else 500
        payload = json.dumps(
            reply if reply is not None else {"error": {"message": "no recorded response left"}}
        ).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> ReplayEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
