"""SEP-1699 (server-side SSE polling) behind the gateway: an upstream that closes a call's
SSE stream mid-call, after its priming event (an id and ``retry``), answers on the stream
the client resumes with ``GET`` and ``Last-Event-ID``. Through ``toolscout mcp serve
--transport http`` the caller gets that answer intact, with the progress sent before the
close, and the call is audited once.

The upstream is the published TypeScript SDK (a real process on 127.0.0.1). Its tool
waits until the client's resuming GET has arrived before it answers: that SDK drops a
response sent while the request's stream is closed (it neither stores nor writes it), so
an upstream that answered sooner would lose its result for any client that waits the
``retry`` it was told to (docs/history/mcp-gateway.md, round twenty, h/sse14).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from _mcp_kit import http_gateway, node_env, node_script, stop, wait_port
from port_kit import free_port
from toolscout.gateway.audit import AuditLog
from toolscout.gateway.auth import issue_token
from toolscout.settings import Settings

KEY = "sse14-resume-test-secret-0123456789abcdef"

#: the upstream: ``node polling.cjs PORT LOG``; every request's method and Last-Event-ID,
#: and whether the tool had a stream to close, go to LOG as JSON lines
POLLING = r"""
const http = require("node:http");
const fs = require("node:fs");
const { randomUUID } = require("node:crypto");
const sdk = "@modelcontextprotocol/sdk/server/";
const { McpServer } = require(sdk + "mcp.js");
const { StreamableHTTPServerTransport } = require(sdk + "streamableHttp.js");
const { z } = require("zod");

const [port, logPath] = [Number(process.argv[2]), process.argv[3]];
const note = (o) => fs.appendFileSync(logPath, JSON.stringify(o) + "\n");
const events = [];  // [eventId, streamId, message], in order
const eventStore = {
  async storeEvent(streamId, message) {
    const id = `${streamId}_${String(events.length + 1).padStart(8, "0")}`;
    events.push([id, streamId, message]);
    return id;
  },
  async getStreamIdForEventId(id) { const e = events.find(([i]) => i === id); return e && e[1]; },
  async replayEventsAfter(lastId, { send }) {
    const at = events.findIndex(([i]) => i === lastId);
    const stream = events[at][1];
    for (const [id, sid, msg] of events.slice(at + 1)) {
      if (sid === stream && Object.keys(msg).length > 0) await send(id, msg);
    }
    return stream;
  },
};
let resumed = null;  // the waiting call's release: the client's resuming GET arrived
const transports = {};

function makeServer() {
  const server = new McpServer({ name: "polling", version: "1.0.0" });
  server.registerTool("polled", {
    description: "Close this call's stream, answer once the client has resumed it.",
    inputSchema: { text: z.string() },
  }, async ({ text }, extra) => {
    if (extra._meta?.progressToken !== undefined) {
      await extra.sendNotification({ method: "notifications/progress",
        params: { progressToken: extra._meta.progressToken, progress: 1, total: 2 } });
    }
    const back = new Promise((r) => { resumed = r; });
    note({ closing: typeof extra.closeSSEStream === "function" });
    extra.closeSSEStream?.();
    await back;
    return { content: [{ type: "text", text: `polled:${text}` }] };
  });
  return server;
}

function body(req) {
  return new Promise((ok) => {
    let b = "";
    req.on("data", (c) => (b += c));
    req.on("end", () => ok(b ? JSON.parse(b) : undefined));
  });
}

http.createServer(async (req, res) => {
  const sid = req.headers["mcp-session-id"];
  const last = req.headers["last-event-id"];
  note({ method: req.method, lastEventId: last ?? null });
  if (req.method === "GET" && last && resumed) {
    // answer once the resumed stream is in place: the SDK maps it before it writes the
    // response's head
    const release = resumed;
    const head = res.writeHead.bind(res);
    res.writeHead = (...a) => { const r = head(...a); release(); return r; };
  }
  if (req.method === "POST") {
    const msg = await body(req);
    let t = sid && transports[sid];
    if (!t) {
      t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), eventStore,
        retryInterval: 100, onsessioninitialized: (id) => { transports[id] = t; } });
      await makeServer().connect(t);
    }
    return t.handleRequest(req, res, msg);
  }
  const t = sid && transports[sid];
  if (!t) { res.writeHead(400).end("no session"); return; }
  return t.handleRequest(req, res);
}).listen(port, "127.0.0.1");
"""


async def _call(url: str, token: str) -> tuple[Any, list[tuple[float, float | None]]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    seen: list[tuple[float, float | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        # the gateway answers before its upstream is connected and indexed (it serves at
        # once and connects in the background): call once the tool is listed
        deadline = time.monotonic() + 60
        while "polled" not in [t.name for t in (await client.list_tools()).tools]:
            assert time.monotonic() < deadline, "the upstream's tool was never listed"
            await asyncio.sleep(0.1)
        result = await client.call_tool("polled", {"text": "über ✓"}, progress_callback=progress)
    return result, seen


def test_a_call_whose_upstream_closes_its_stream_is_resumed_and_answered(tmp_path: Path) -> None:
    log = tmp_path / "upstream.jsonl"
    log.touch()
    up_port = free_port()
    upstream = subprocess.Popen(
        [*node_script(tmp_path / "polling.cjs", POLLING), str(up_port), str(log)],
        env=node_env(), stderr=subprocess.DEVNULL,
    )  # fmt: skip
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({
        "mcpServers": {"poll": {"url": f"http://127.0.0.1:{up_port}/mcp"}},
        "toolscout": {"jwt_key": KEY, "mode": "direct", "connect_timeout_s": 60,
                      "timeout_s": 60, "db": str(tmp_path / "g.db")},
    }))  # fmt: skip
    gateway, port = http_gateway(config, tmp_path)
    token = issue_token(subject="poller", key=KEY, scopes=["mcp:poll"])
    try:
        wait_port(up_port, 60)
        wait_port(port, 120)
        result, progress = asyncio.run(_call(f"http://127.0.0.1:{port}/mcp", token))
    finally:
        stop(gateway)  # type: ignore[arg-type]
        stop(upstream)  # type: ignore[arg-type]

    assert not result.is_error, result
    assert [getattr(b, "text", None) for b in result.content] == ["polled:über ✓"]
    assert progress == [(1.0, 2.0)]  # sent before the close, relayed to the caller
    notes = [json.loads(line) for line in log.read_text().splitlines()]
    # the upstream did close the call's stream (it had a priming event to resume from) ...
    assert {"closing": True} in notes
    after = notes[notes.index({"closing": True}) + 1 :]
    # ... and the gateway resumed it: a GET naming the last event it had seen
    resumes = [n for n in after if n.get("method") == "GET" and n.get("lastEventId")]
    assert len(resumes) == 1, notes
    # one call, checked and audited once (its start and its end)
    audit = AuditLog(Settings(db=str(tmp_path / "g.db")).audit_target())
    try:
        records = [r for r in audit.read(subject="poller") if r.tool_id == "poll/polled"]
    finally:
        audit.close()
    assert [(r.decision, r.status) for r in records] == [("allowed", "started"), ("allowed", "ok")]
