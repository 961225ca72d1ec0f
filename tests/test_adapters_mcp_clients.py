"""The gateway as people start it (issue 21): the published MCP Inspector CLI driving it over
stdio (``--`` or ``-c``, since the Inspector has a ``--config`` of its own) and over HTTP in
development mode (``--dev``), and the ``mcp config`` snippet run in a clean environment."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from _mcp_kit import APP, node_modules, wait_port
from fork_kit import toolscout as fork_toolscout
from fork_kit import upstream as forked
from port_kit import free_port
from test_mcp_clients import _listed

SRC = str(Path(__file__).resolve().parent.parent / "src")
INSPECTOR_PAGE = "http://localhost:6274"


def _config(tmp_path: Path) -> Path:
    """A Claude Desktop file with one upstream, no principal, its catalog under tmp_path."""
    path = tmp_path / "servers.json"
    servers = {"app": forked(APP, "--stdio")}
    gateway = {"db": "catalog.db", "connect_timeout_s": 120}
    path.write_text(json.dumps({"mcpServers": servers, "toolscout": gateway}))
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "XDG_DATA_HOME": str(tmp_path / "xdg")}


def _inspector(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``npx @modelcontextprotocol/inspector --cli ARGS``, from the installed package."""
    build = node_modules() / "@modelcontextprotocol" / "inspector-cli" / "build"
    assert (build / "cli.js").is_file(), f"{build} is missing; run make test (it installs it)"
    return subprocess.run(
        ["node", str(build / "cli.js"), "--cli", *args],
        cwd=build, capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip


def _toolscout() -> list[str]:
    return [sys.executable, "-m", "toolscout"]


def test_inspector_cli_over_stdio_with_separator_or_short_option(tmp_path: Path) -> None:
    """What the Inspector passes on to the gateway's command: its own options before ``--``
    or around a ``-c``, and a ``--config`` it takes for its own. The gateways are forked
    (``fork_kit.toolscout``: each a process of its own on the Inspector's pipes, with the
    arguments the Inspector gave it); how a gateway starts cold is tested elsewhere."""
    config = str(_config(tmp_path))
    env = _env(tmp_path)
    gateway = fork_toolscout()
    after = _inspector("--method", "tools/list", "--", *gateway, "mcp", "serve",
                       "--config", config, env=env)  # fmt: skip
    assert after.returncode == 0, after.stderr
    assert "echo" in {t["name"] for t in json.loads(after.stdout)["tools"]}
    short = _inspector(*gateway, "mcp", "serve", "-c", config, "--method", "tools/list",
                       env=env)  # fmt: skip
    assert short.returncode == 0, short.stderr
    assert "echo" in {t["name"] for t in json.loads(short.stdout)["tools"]}
    clash = _inspector(*gateway, "mcp", "serve", "--config", config, "--method",
                       "tools/list", env=env)  # fmt: skip
    assert clash.returncode != 0  # the Inspector took --config as its own


def _initialize(origin: str) -> dict[str, Any]:
    return {
        "headers": {"Origin": origin, "Accept": "application/json, text/event-stream"},
        "json": {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "inspector-page", "version": "0"},
            },
        },
    }


def test_dev_mode_serves_the_inspector_on_loopback_only(tmp_path: Path) -> None:
    config = _config(tmp_path)
    port = free_port()
    errlog = tmp_path / "stderr.txt"
    with errlog.open("w") as err:
        proc = subprocess.Popen(
            [*_toolscout(), "mcp", "serve", "-c", str(config), "--transport", "http", "--dev",
             "--port", str(port)],
            stderr=err, env=_env(tmp_path),
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_port(port, 120)
        # the Inspector CLI, as the banner tells: no token, the local user
        listed = _inspector(url, "--transport", "http", "--method", "tools/list")
        assert listed.returncode == 0, listed.stderr
        assert "echo" in {t["name"] for t in json.loads(listed.stdout)["tools"]}
        called = _inspector(url, "--transport", "http", "--method", "tools/call", "--tool-name",
                            "echo", "--tool-arg", "text=from the inspector")  # fmt: skip
        assert called.returncode == 0 and "from the inspector" in called.stdout, called.stderr
        # a token is still checked when one is sent (no verifier configured: refused)
        forged = _inspector(url, "--transport", "http", "--method", "tools/list",
                            "--header", "Authorization: Bearer not-a-token")  # fmt: skip
        assert forged.returncode != 0 and "refused" in forged.stderr + forged.stdout
        # the Inspector's web page: its CORS preflight, then a post whose session it can read
        preflight = httpx.options(url, headers={
            "Origin": INSPECTOR_PAGE, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers":
                "authorization,content-type,mcp-protocol-version,mcp-session-id",
        })  # fmt: skip
        assert preflight.status_code == 200, preflight.text
        assert preflight.headers["access-control-allow-origin"] == INSPECTOR_PAGE
        page = httpx.post(url, **_initialize(INSPECTOR_PAGE))
        assert page.status_code == 200, page.text
        assert page.headers["access-control-allow-origin"] == INSPECTOR_PAGE
        assert "mcp-session-id" in page.headers["access-control-expose-headers"].lower()
        # another site's page gets no CORS grant, and the DNS-rebinding guard refuses it
        other = httpx.options(url, headers={
            "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})  # fmt: skip
        assert "access-control-allow-origin" not in other.headers
        assert httpx.post(url, **_initialize("https://evil.example")).status_code == 403
        rebound = httpx.post(url, headers={**_initialize(INSPECTOR_PAGE)["headers"],
                                           "Host": "evil.example"},
                             json=_initialize(INSPECTOR_PAGE)["json"])  # fmt: skip
        assert rebound.status_code in (403, 421)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = errlog.read_text()
    assert "development mode" in text and url in text, text
    assert sum("toolscout.principal" in ln for ln in text.splitlines()) == 1, text
    records = _audit(tmp_path / "catalog.audit.db")
    assert any(r.tool_id.endswith("echo") and r.status == "ok" and r.subject.startswith("local:")
               for r in records), records  # fmt: skip


def _audit(path: Path) -> list[Any]:
    from toolscout.gateway.audit import AuditLog

    log = AuditLog(str(path))
    try:
        return log.read(outcomes=True)
    finally:
        log.close()


def test_dev_mode_refuses_anything_but_loopback_http(tmp_path: Path) -> None:
    config = str(_config(tmp_path))
    env = _env(tmp_path)

    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*_toolscout(), "mcp", "serve", "-c", config, *args],
                              capture_output=True, text=True, timeout=120, env=env)  # fmt: skip

    wide = serve("--transport", "http", "--dev", "--host", "0.0.0.0")
    assert wide.returncode == 2 and "loopback" in wide.stderr
    stdio = serve("--dev")
    assert stdio.returncode == 2 and "--transport http" in stdio.stderr
    plain = serve("--transport", "http")  # without --dev, HTTP still needs tokens
    assert plain.returncode == 2 and "jwt_key" in plain.stderr


def test_claude_desktop_snippet_starts_the_gateway_in_a_clean_environment(tmp_path: Path) -> None:
    """What a desktop client does: ``mcp config --client claude-desktop``, its command run
    under ``env -i PATH=/usr/bin:/bin`` (plus the snippet's own ``env``, as a client applies
    it)."""
    from mcp import StdioServerParameters

    config = _config(tmp_path)
    done = subprocess.run(
        [*_toolscout(), "mcp", "config", "-c", str(config), "--client", "claude-desktop"],
        capture_output=True, text=True, timeout=60, env=_env(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)["mcpServers"]["toolscout"]
    assert Path(entry["command"]).is_absolute()
    extra = [f"{k}={v}" for k, v in entry.get("env", {}).items()]
    params = StdioServerParameters(
        command="env", args=["-i", "PATH=/usr/bin:/bin", *extra, entry["command"], *entry["args"]]
    )
    errlog = tmp_path / "stderr.txt"
    names = asyncio.run(_listed(params, errlog))
    assert "echo" in names, errlog.read_text()
    lines = [ln for ln in errlog.read_text().splitlines() if "toolscout.principal" in ln]
    assert len(lines) == 1 and "mcp:app" in lines[0], errlog.read_text()


def test_search_tools_says_when_it_abstains(tmp_path: Path, monkeypatch: Any) -> None:
    """An MCP search answered with nothing says why, with the confidence (as HTTP and the
    library do), instead of an empty list that looks like "no match"."""
    import dataclasses

    from mcp import Client

    from toolscout import Principal
    from toolscout.mcp.config import load_config
    from toolscout.mcp.server import MCPGateway

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    cfg = load_config(_config(tmp_path))
    nobody = Principal.of("local:nobody", "", ["other:read"])  # no scope of this server
    gateway = MCPGateway(dataclasses.replace(cfg, principal=nobody, mode="meta"))

    async def scenario() -> Any:
        async with gateway.running(wait_s=120), Client(gateway.server) as client:
            found = await client.call_tool("search_tools", {"query": "echo my text back"})
            return found.structured_content

    try:
        payload = asyncio.run(scenario())
    finally:
        gateway.close()
    assert payload["tools"] == [] and payload["abstained"] == "nothing_entitled", payload
    assert payload["confidence"] == 0.0 and payload["low_confidence"] is True
