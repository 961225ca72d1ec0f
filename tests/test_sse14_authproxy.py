"""The conformance harness's ``authproxy.mjs`` passes a response's status and headers on as
soon as its target sends them, not with the first body chunk: an SSE response whose first
event comes late (the gateway's keep-alive comment, 15 s on) must not reach the
conformance client that late, or a scenario that reads it on a timer (``server-sse-polling``
gives the stream 10 s) sees a wait the gateway did not make."""

from __future__ import annotations

import http.client
import http.server
import os
import subprocess
import threading
from pathlib import Path

from _mcp_kit import stop, wait_port
from port_kit import free_port

PROXY = Path(__file__).resolve().parent / "mcp_conformance" / "authproxy.mjs"


def test_the_proxy_passes_headers_before_the_first_event() -> None:
    release = threading.Event()
    seen: dict[str, str] = {}

    class Slow(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            seen["authorization"] = self.headers.get("Authorization", "")
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            release.wait(60)  # the body only once the client has had the head
            event = b'event: message\ndata: {"ok":true}\n\n'
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event))
            self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    target = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    port = free_port()
    proxy = subprocess.Popen(
        ["node", str(PROXY), str(port), str(target.server_address[1])],
        env={"TOKEN": "t0ken", "PATH": os.environ.get("PATH", "")},
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, 30)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.request("POST", "/mcp", body=b"{}", headers={"Content-Type": "application/json"})
        # the head arrives while the target still holds the body (without the flush this
        # waits for the body, which waits for this: the socket's timeout ends it)
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type") == "text/event-stream"
        release.set()
        assert response.read() == b'event: message\ndata: {"ok":true}\n\n'
        assert seen["authorization"] == "Bearer t0ken"
        conn.close()
    finally:
        release.set()
        stop(proxy)  # type: ignore[arg-type]
        target.shutdown()
        target.server_close()
