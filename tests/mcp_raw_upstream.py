"""An upstream MCP server over stdio written line by line (no SDK), for answers the SDK's
own servers never give: a result that breaks its tool's output schema, a malformed
result, progress on the caller's token, a call that is never answered.

Run: ``python tests/mcp_raw_upstream.py``. It speaks the handshake era (``initialize``,
protocol 2025-11-25) and answers every other request it does not know with
``-32601``. Tools (each declares an output schema ``{"value": string}``):

* ``ok`` — ``structuredContent`` that fits the schema;
* ``shape`` — ``structuredContent`` that does not (``value`` is a number);
* ``malformed`` — a result whose ``content`` is not a list;
* ``refuse`` — a JSON-RPC error (code 1234, with data);
* ``progress`` — ``seconds`` long, a progress report every 0.2 s on the request's token;
* ``hang`` — never answered (for cancellation); ``cancelled`` — the ids cancelled so far.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

SCHEMA = {
    "type": "object",
    "properties": {"value": {"type": "string"}},
    "required": ["value"],
}
TOOLS = [
    {
        "name": name,
        "description": f"A raw upstream tool: {name}.",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        "outputSchema": SCHEMA,
        "annotations": {"readOnlyHint": True},
    }
    for name in ("ok", "shape", "malformed", "refuse", "progress", "hang", "cancelled")
]
_lock = threading.Lock()
_cancelled: list[Any] = []


def send(message: dict[str, Any]) -> None:
    with _lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def result(rid: Any, value: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def text(value: str, structured: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "structuredContent": structured}


def call(rid: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "ok":
        result(rid, text("fine", {"value": "fine"}))
    elif name == "shape":
        result(rid, text("12", {"value": 12}))
    elif name == "malformed":
        result(rid, {"content": "not a list"})
    elif name == "refuse":
        error = {"code": 1234, "message": "the raw upstream refuses", "data": {"why": "test"}}
        send({"jsonrpc": "2.0", "id": rid, "error": error})
    elif name == "progress":

        def work() -> None:
            seconds = float(arguments.get("seconds", 1.0))
            steps = max(1, int(seconds / 0.2))
            for step in range(steps):
                time.sleep(0.2)
                if token is not None:
                    note = {"progressToken": token, "progress": step + 1, "total": steps}
                    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
            result(rid, text("done", {"value": f"{steps} steps"}))

        threading.Thread(target=work, daemon=True).start()
    elif name == "hang":
        return
    elif name == "cancelled":
        with _lock:
            seen = json.dumps(_cancelled)
        result(rid, text(seen, {"value": seen}))
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no such tool"}})


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "notifications/cancelled":
            with _lock:
                _cancelled.append(params.get("requestId"))
            continue
        if rid is None or method is None:
            continue  # a notification, or an answer to nothing it asked
        if method == "initialize":
            result(rid, {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw-upstream", "version": "1.0.0"},
            })  # fmt: skip
        elif method == "tools/list":
            result(rid, {"tools": TOOLS})
        elif method == "ping":
            result(rid, {})
        elif method == "tools/call":
            call(rid, params)
        else:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32601, "message": f"method not found: {method}"}})  # fmt: skip


if __name__ == "__main__":
    main()
