"""``toolscout mcp serve`` and ``toolscout mcp inspect``: the MCP gateway from the shell.

``serve`` fronts every server of an ``mcpServers`` config as one MCP server,
over stdio (for Claude Desktop, Cursor, Claude Code) or streamable HTTP.
``inspect`` connects to each upstream and prints what it offers, the cards the
gateway makes of it and the warnings. A bad config prints one line and exits 2;
``inspect`` exits 1 when a server could not be reached.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from toolscout.errors import ToolscoutError

mcp_app = typer.Typer(
    help="The MCP gateway: one MCP server in front of many.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def run_mcp(args: list[str]) -> None:
    """``toolscout mcp ARGS``: these commands alone (``toolscout.cli.main`` calls this
    rather than building the whole command line, for the gateway's start-up)."""
    mcp_app(args=args, prog_name="toolscout mcp")


#: the environment variable holding the audit chain's HMAC key (as for `toolscout audit`)
AUDIT_KEY_ENV = "TOOLSCOUT_AUDIT_KEY"

ConfigOpt = Annotated[
    Path, typer.Option("--config", "-c", help="An mcpServers JSON file (Claude Desktop format).")
]


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM: stop every stdio upstream, write the discovery log's held records, then exit
    at once. (Unwinding would wait for the thread blocked reading stdin; every audit record
    is committed when written.)"""
    from toolscout.mcp.upstream import kill_children
    from toolscout.telemetry.log import flush_open_logs

    kill_children()
    flush_open_logs(timeout_s=1.0)
    os._exit(128 + signum)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(2)


@mcp_app.command("serve")
def serve(
    config: ConfigOpt,
    transport: Annotated[
        str, typer.Option("--transport", "-t", help="stdio (default) or http.")
    ] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP: the address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP: the port to listen on.")] = 8701,
    mode: Annotated[
        str | None,
        typer.Option(help="What clients see: auto (tier rule), meta, dynamic or direct."),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            help="The catalog file (default: from the config, else one per config file under "
            "the user data directory; ':memory:' for a temporary one)."
        ),
    ] = None,
    audit: Annotated[
        str | None,
        typer.Option(
            help="The audit log file (default: from the config, else beside the catalog file)."
        ),
    ] = None,
    dev: Annotated[
        bool,
        typer.Option(
            "--dev",
            help="HTTP development mode, for the MCP Inspector: loopback only, requests "
            "without a token act as the local user, CORS for the Inspector's page.",
        ),
    ] = False,
) -> None:
    """Serve the gateway over stdio or streamable HTTP.

    To drive it with the MCP Inspector CLI, put toolscout's options after ``--`` (the
    Inspector has a --config of its own) or use -c:
    ``npx @modelcontextprotocol/inspector --cli -- toolscout mcp serve --config FILE``."""
    from toolscout.mcp.config import MODES, load_config, local_principal
    from toolscout.mcp.server import MCPGateway, check_transport
    from toolscout.mcp.timeline import mark

    mark("gateway modules imported")

    if transport not in ("stdio", "http"):
        _fail(f"--transport must be stdio or http, got {transport!r}")
    if mode is not None and mode not in MODES:
        _fail(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not 0 < port < 65536:
        _fail(f"--port must be within 1-65535, got {port}")
    if dev and transport != "http":
        _fail("--dev is a mode of the http transport: add --transport http")
    try:
        cfg = load_config(config)
        changes: dict[str, object] = {}
        if mode is not None:
            changes["mode"] = mode
        if db is not None:
            changes["db"] = db
        if audit is not None:
            changes["audit"] = str(Path(audit).resolve())
        env_key = os.environ.get(AUDIT_KEY_ENV)
        if env_key and cfg.audit_key is None:
            changes["audit_key"] = env_key
        cfg = dataclasses.replace(cfg, **changes)  # type: ignore[arg-type]
        if dev:
            from toolscout.mcp.devmode import check_host

            check_host(host)
            cfg = dataclasses.replace(cfg, dev=True)
        if (transport == "stdio" or dev) and cfg.principal is None:
            cfg = dataclasses.replace(cfg, principal=local_principal(cfg))
            assert cfg.principal is not None
            scopes = ", ".join(sorted(cfg.principal.scopes)) or "none"
            typer.echo(
                f"toolscout: no toolscout.principal in {config}: serving the local user "
                f"{cfg.principal.subject!r} with each server's own scope ({scopes}); tools "
                "marked destructive need toolscout:admin — set toolscout.principal to change",
                err=True,
            )
        check_transport(cfg, transport)
        gateway = MCPGateway(cfg, errlog=sys.stderr)
        mark("gateway built")
    except ToolscoutError as exc:
        _fail(str(exc))
    keyed = "keyed" if cfg.audit_key else f"unkeyed: set {AUDIT_KEY_ENV} to key it"
    typer.echo(f"toolscout: audit log at {cfg.audit_path()} ({keyed})", err=True)
    # a client stopping us with SIGTERM: no upstream outlives the gateway
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if transport == "stdio":
            asyncio.run(gateway.serve_stdio())
        else:
            url = f"http://{_netloc(host, port)}/mcp"
            if dev:
                from toolscout.mcp.devmode import banner

                assert cfg.principal is not None
                typer.echo(banner(url, cfg.principal.subject), err=True)
            else:
                typer.echo(f"toolscout MCP gateway on {url}", err=True)
            asyncio.run(gateway.serve_http(host=host, port=port))
    except ToolscoutError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        pass
    finally:
        gateway.close()


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@mcp_app.command("inspect")
def inspect(
    config: ConfigOpt,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False,
    wait: Annotated[
        float | None, typer.Option(help="Seconds to wait for each server (default: config).")
    ] = None,
) -> None:
    """Connect to each upstream and print its tools, their cards and the warnings."""
    from toolscout.mcp.config import load_config
    from toolscout.mcp.upstream import Upstreams

    if wait is not None and not 0 < wait <= 600:
        _fail(f"--wait must be within (0, 600] seconds, got {wait}")
    try:
        cfg = load_config(config)
    except ToolscoutError as exc:
        _fail(str(exc))

    async def collect() -> list[dict[str, object]]:
        ups = Upstreams(cfg, errlog=sys.stderr)
        try:
            await ups.start(wait_s=wait)
            return [_report(up) for up in ups.servers.values()]
        finally:
            await ups.aclose()

    reports = asyncio.run(collect())
    if as_json:
        typer.echo(json.dumps({"servers": reports}, indent=2))
    else:
        _print(reports)
    if any(r["state"] != "up" for r in reports):
        raise typer.Exit(1)


def _report(up: object) -> dict[str, object]:
    from toolscout.mcp.upstream import Upstream

    assert isinstance(up, Upstream)
    cfg = up.config
    return {
        "server": up.name,
        "transport": cfg.transport,
        "state": up.state,
        "error": up.last_error or None,
        "policy": "default (needs scope mcp:" + cfg.prefix[:-1] + ")"
        if cfg.defaulted
        else "toolscout section",
        "tools": [
            {
                "id": t.spec.id,
                "name": t.name,
                "risk": t.spec.card.risk.value,
                "scopes": list(t.spec.card.scopes),
                "summary": t.spec.card.summary,
            }
            for t in up.tools.values()
        ],
        "warnings": list(up.warnings),
    }


def _print(reports: list[dict[str, object]]) -> None:
    """Upstream text (names, descriptions, errors) is printed literally, never as markup."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    out = Console()
    for r in reports:
        tools = r["tools"]
        assert isinstance(tools, list)
        head = Text()
        head.append(_plain(r["server"]), style="bold")
        head.append(f" ({r['transport']}): {r['state']}")
        if r["error"]:
            head.append(" — " + _plain(r["error"]))
        head.append(f" — {len(tools)} tools — policy: {_plain(r['policy'])}")
        out.print(head, highlight=False)
        if tools:
            table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
            for col in ("id", "risk", "scopes", "summary"):
                table.add_column(col, overflow="fold")
            for t in tools:
                table.add_row(
                    Text(_plain(t["id"])),
                    Text(_plain(t["risk"])),
                    Text(_plain(", ".join(t["scopes"]))),
                    Text(_plain(t["summary"])),
                )
            out.print(table)
        warnings = r["warnings"]
        assert isinstance(warnings, list)
        for w in warnings:
            out.print(Text(f"  warning: {_plain(w)}", style="yellow"), highlight=False)


def _plain(value: object) -> str:
    """Upstream text made printable (control characters shown escaped)."""
    text = str(value)
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


CLIENTS = ("claude-desktop", "cursor", "claude-code", "vscode")


@mcp_app.command("config")
def client_config(
    config: ConfigOpt,
    client: Annotated[
        str, typer.Option("--client", help="claude-desktop, cursor, claude-code or vscode.")
    ] = "claude-desktop",
) -> None:
    """Print the snippet that starts this gateway from an MCP client (writes nothing).

    The command is the absolute path of this toolscout (a bare ``toolscout`` fails from a
    desktop client, whose PATH is not your shell's), and so is the config path."""
    from toolscout.mcp.config import load_config

    if client not in CLIENTS:
        _fail(f"--client must be one of {', '.join(CLIENTS)}, got {client!r}")
    try:
        loaded = load_config(config)  # a broken config is reported now, not by the client later
    except ToolscoutError as exc:
        _fail(str(exc))
    command, args = _launcher()
    # a desktop client approves tools one by one: keep each found tool's own identity and
    # annotations (dynamic listing) unless the config chose another mode than auto
    mode = ["--mode", "dynamic"] if loaded.mode == "auto" else []
    args = [*args, "mcp", "serve", *mode, "--config", str(config.resolve())]
    env = _launch_env()
    if client == "claude-code":
        flags = [f"--env={k}={v}" for k, v in env.items()]
        typer.echo(shlex.join(["claude", "mcp", "add", *flags, "toolscout", "--", command, *args]))
        return
    entry: dict[str, object] = {"command": command, "args": args}
    if env:
        entry["env"] = env
    if client == "vscode":  # .vscode/mcp.json
        snippet: dict[str, object] = {"servers": {"toolscout": {"type": "stdio", **entry}}}
    else:  # claude_desktop_config.json, .cursor/mcp.json
        snippet = {"mcpServers": {"toolscout": entry}}
    typer.echo(json.dumps(snippet, indent=2))


def _launch_env() -> dict[str, str]:
    """``PYTHONPATH`` when this toolscout was imported through it (a source checkout): the
    client starts the command without the shell's environment, so the snippet carries it."""
    import toolscout

    src = Path(toolscout.__file__).resolve().parents[1]
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if any(Path(p).resolve() == src for p in entries):
        return {"PYTHONPATH": str(src)}
    return {}


def _launcher() -> tuple[str, list[str]]:
    """The absolute command that runs this toolscout: its console script beside this
    Python, else this Python with ``-m toolscout``."""
    script = Path(sys.executable).parent / "toolscout"
    if script.is_file() and os.access(script, os.X_OK):
        return str(script.absolute()), []
    return str(Path(sys.executable).absolute()), ["-m", "toolscout"]
