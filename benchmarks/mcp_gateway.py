"""The MCP gateway: forwarding overhead per call, and search_tools over 500 upstream tools.

1. **Forwarding overhead.** One SDK-written upstream (``tests/mcp_upstream_app.py``,
   tool ``echo``) is called by the SDK ``Client`` directly and through
   ``toolscout mcp serve`` (direct mode, so the client calls ``app_echo``
   itself), alternating call by call so both see the same machine load. Over
   stdio (client ─stdio→ gateway ─stdio→ upstream vs client ─stdio→ upstream) and
   over streamable HTTP (bearer token per request, verified by the gateway).
   The overhead is the gateway's p50/p99 minus the direct one; every gateway call
   also ran the policy re-check, argument validation and the audit append.
   **In process**, the same without the extra process hop: a client in the
   gateway's own process against the gateway's upstream connection called directly,
   so the difference is the gateway's own work.
2. **search_tools latency.** Ten upstreams over stdio with 50 tools each (500
   tools), fronted in process; the client calls ``search_tools`` for 200
   generated task descriptions. Also the start-up time to list and index them.

3. **Start-up.** ``toolscout mcp serve`` spawned by the SDK client against
   ``examples/servers.json`` (with the default stored catalog): seconds from spawn to
   ``initialize`` answered, to ``tools/list`` and to the first ``search_tools``
   answered, on a first start (no stored catalog) and on the next start (stored).

Writes ``benchmarks/results/mcp.json`` and prints a table. (Not ``benchmarks/mcp.py``:
a module named ``mcp`` there would shadow the SDK when run as a script and
make ruff treat the SDK as first-party everywhere.)

Run: ``.venv/bin/python benchmarks/mcp_gateway.py [--calls N] [--queries N]
[--startup-runs N] [--only-startup] [--import-cpu] [--compare SRC]``
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mcp.json"
APP = ROOT / "tests" / "mcp_upstream_app.py"
PROXY = ROOT / "benchmarks" / "line_proxy.py"
TOOLSCOUT = str(Path(sys.executable).parent / "toolscout")
SECRET = "benchmark-secret-0123456789abcdef-0123456789"
#: the callers' ``Client`` mode in the forwarding run (``legacy``: the initialize handshake
#: of the 2025 clients; ``auto``: the SDK's default, a 2026-07-28 connection here)
CALLER_MODE = {"mode": "auto"}
TOPICS = ["billing", "crm", "support", "shop", "logistics", "legal", "hr", "devops", "docs", "it"]


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(samples: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(samples, 0.50), 3),
        "p99_ms": round(percentile(samples, 0.99), 3),
        "mean_ms": round(sum(samples) / len(samples), 3),
        "n": len(samples),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    t0 = time.perf_counter()
    result = await call()
    elapsed = (time.perf_counter() - t0) * 1000
    if getattr(result, "is_error", False):
        raise RuntimeError(f"call failed: {result.content}")
    return elapsed


def cpu_seconds(config: Path) -> float:
    """User + system CPU seconds of the gateway process serving ``config`` (found by its
    command line under /proc), or -1 when it cannot be read (not Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if str(config).encode() not in argv or b"serve" not in argv:
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        return (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return -1.0


class _Cpu:
    """CPU per measured call of the gateway processes (``name -> config``): a figure the
    machine's load inflates far less than wall time (only cache and frequency effects)."""

    def __init__(self, configs: dict[str, Path]) -> None:
        self.configs = configs
        self.start: dict[str, float] = {}

    def begin(self) -> None:
        self.start = {name: cpu_seconds(cfg) for name, cfg in self.configs.items()}

    def per_call_ms(self, calls: int) -> dict[str, float]:
        out = {}
        for name, cfg in self.configs.items():
            now, then = cpu_seconds(cfg), self.start.get(name, -1.0)
            if now >= 0 and then >= 0:
                out[name] = round((now - then) * 1000 / calls, 3)
        return out


async def side_by_side(
    direct: Any, gateway: Any, calls: int, cpu: _Cpu | None = None
) -> dict[str, Any]:
    """Alternate direct and gateway calls of the same tool; warm both up first.

    The gateway's tool is called by the name it lists (the upstream's own ``echo`` when no
    other tool has it): the SDK client re-lists the tools before every call of a name it was
    not shown (to check the result against an output schema), which before 2026-12-02 made
    each gateway call of ``app_echo`` two round trips."""
    listed = [t.name for t in (await gateway.list_tools()).tools]
    name = next(n for n in ("echo", "app_echo") if n in listed)
    d: list[float] = []
    g: list[float] = []
    for i in range(calls + 20):
        if i == 20 and cpu is not None:
            cpu.begin()
        text = f"ping {i}"
        one = await timed(lambda t=text: direct.call_tool("echo", {"text": t}))  # type: ignore[misc]
        two = await timed(lambda t=text: gateway.call_tool(name, {"text": t}))  # type: ignore[misc]
        two = getattr(gateway, "first_ms", two)  # two gateways in turn: this one's own time
        if i >= 20:
            d.append(one)
            g.append(two)
    ds, gs = summary(d), summary(g)
    out: dict[str, Any] = {
        "direct": ds,
        "gateway": gs,
        "overhead_p50_ms": round(gs["p50_ms"] - ds["p50_ms"], 3),
        "overhead_p99_ms": round(gs["p99_ms"] - ds["p99_ms"], 3),
    }
    if cpu is not None:  # the gateway processes' own CPU per forwarded call
        out["gateway_cpu_ms_per_call"] = cpu.per_call_ms(calls)
    for label, times in getattr(gateway, "extras", {}).items():
        # the compared tree's gateway, the bare pass-through: called in the same turns
        cs = summary(times[20:])
        out[label] = {
            "gateway": cs,
            "overhead_p50_ms": round(cs["p50_ms"] - ds["p50_ms"], 3),
            "overhead_p99_ms": round(cs["p99_ms"] - ds["p99_ms"], 3),
        }
    return out


def gateway_config(tmp: Path, servers: dict[str, Any], **extra: Any) -> Path:
    """A gateway config in ``tmp``, its catalog and audit log beside it (not in the user
    data directory, where each run would leave a catalog and an audit log behind)."""
    path = tmp / f"servers-{len(list(tmp.iterdir()))}.json"
    gateway = {
        "db": str(path.with_suffix(".db")),
        "mode": "direct",
        "principal": {"subject": "bench"},
        "connect_timeout_s": 120,
        "rate_per_second": 0,  # the benchmark's own call rate is not what is measured
    }
    path.write_text(json.dumps({"mcpServers": servers, "toolscout": {**gateway, **extra}}))
    return path


async def bench_stdio(
    tmp: Path,
    calls: int,
    compare: Path | None = None,
    compare_env: dict[str, str] | None = None,
    floor: bool = False,
) -> dict[str, Any]:
    """``compare``: a second gateway from another toolscout source tree, called in turn
    with the direct call and this tree's gateway (the same load for all three);
    ``compare_env``: more environment for it (``TOOLSCOUT_FASTCALL=off`` with this tree's
    ``src``: the same code with every call through the SDK); ``floor``: the upstream also
    called through a bare pass-through process (``benchmarks/line_proxy.py``) in the same
    turns (``floor`` in the result: what an extra process on the path costs by itself)."""
    from mcp import Client, StdioServerParameters

    app = {"command": sys.executable, "args": [str(APP), "--stdio"], "toolscout": {"scopes": []}}
    config = gateway_config(tmp, {"app": app})
    upstream = StdioServerParameters(command=sys.executable, args=[str(APP), "--stdio"])
    args = ["mcp", "serve", "--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    via = StdioServerParameters(command=TOOLSCOUT, args=args, env=env)
    mode = CALLER_MODE["mode"]
    if compare is None and not floor:
        async with (
            Client(upstream, read_timeout_seconds=120, mode=mode) as direct,
            Client(via, read_timeout_seconds=120, mode=mode) as gateway,
        ):
            return await side_by_side(direct, gateway, calls, _Cpu({"this": config}))
    others: dict[str, Any] = {}
    configs = {"this": config}
    if compare is not None:
        other = gateway_config(tmp, {"app": app})  # its own catalog and audit log
        old_env = {**os.environ, "PYTHONPATH": str(compare.resolve()), **(compare_env or {})}
        others["compare"] = StdioServerParameters(
            command=TOOLSCOUT, args=["mcp", "serve", "--config", str(other)], env=old_env
        )
        configs["compare"] = other
    if floor:
        others["floor"] = StdioServerParameters(
            command=sys.executable, args=[str(PROXY), sys.executable, str(APP), "--stdio"]
        )
    async with contextlib.AsyncExitStack() as stack:
        direct = await stack.enter_async_context(
            Client(upstream, read_timeout_seconds=120, mode=mode)
        )
        gateway = await stack.enter_async_context(Client(via, read_timeout_seconds=120, mode=mode))
        extra = {
            label: await stack.enter_async_context(
                Client(params, read_timeout_seconds=120, mode=mode)
            )
            for label, params in others.items()
        }
        return await side_by_side(direct, _Both(gateway, extra), calls, _Cpu(configs))


class _Both:
    """This tree's gateway and the others (the compared tree's gateway, the bare
    pass-through) called one after the other for each call, each timed on its own: the
    others first, in order, their times kept apart (``extras``); this gateway's last, its
    time ``first_ms`` (what :func:`side_by_side` records for the gateway). The pass-through
    is called by the upstream's own name (``echo``)."""

    def __init__(self, first: Any, others: dict[str, Any]) -> None:
        self.first, self.others = first, others
        self.extras: dict[str, list[float]] = {label: [] for label in others}
        self.first_ms = 0.0

    async def list_tools(self) -> Any:
        return await self.first.list_tools()

    async def call_tool(self, name: str, args: dict[str, Any]) -> Any:
        for label, other in self.others.items():
            tool = "echo" if label == "floor" else name
            self.extras[label].append(
                await timed(lambda o=other, t=tool: o.call_tool(t, args))  # type: ignore[misc]
            )
        t0 = time.perf_counter()
        result = await self.first.call_tool(name, args)
        self.first_ms = (time.perf_counter() - t0) * 1000
        return result


async def bench_http(tmp: Path, calls: int) -> dict[str, Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from toolscout.gateway.auth import issue_token

    up_port, gw_port = free_port(), free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, str(APP), "--port", str(up_port)], stderr=subprocess.DEVNULL
        )
    ]
    try:
        wait_port(up_port)
        app = {"url": f"http://127.0.0.1:{up_port}/mcp", "toolscout": {"scopes": []}}
        config = gateway_config(tmp, {"app": app}, jwt_key=SECRET)
        procs.append(
            subprocess.Popen(
                [
                    TOOLSCOUT,
                    "mcp",
                    "serve",
                    "--config",
                    str(config),
                    "--transport",
                    "http",
                    "--port",
                    str(gw_port),
                ],
                stderr=subprocess.DEVNULL,
            )
        )
        wait_port(gw_port)
        token = issue_token(subject="bench", key=SECRET, ttl_seconds=3600)
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            Client(f"http://127.0.0.1:{up_port}/mcp") as direct,
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            Client(
                streamable_http_client(f"http://127.0.0.1:{gw_port}/mcp", http_client=http)
            ) as gateway,  # fmt: skip
        ):
            return await side_by_side(direct, gateway, calls)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


async def bench_in_process(calls: int) -> dict[str, Any]:
    """The gateway's own cost without the extra process hop: an in-process client calls
    ``app_echo`` through the gateway, alternating with the same upstream connection
    called directly (so the difference is dispatch, policy, validation and audit)."""
    from mcp import Client

    from toolscout.mcp.config import parse_config
    from toolscout.mcp.server import MCPGateway

    app = {"command": sys.executable, "args": [str(APP), "--stdio"], "toolscout": {"scopes": []}}
    # connect_timeout_s: on a loaded machine the upstream takes more than 10 s to start
    settings = {"mode": "direct", "principal": {"subject": "bench"}, "rate_per_second": 0,
                "connect_timeout_s": 120}  # fmt: skip
    gateway = MCPGateway(parse_config({"mcpServers": {"app": app}, "toolscout": settings}))
    try:
        async with gateway.running(), Client(gateway.server) as client:
            up = gateway.upstreams.servers["app/"]
            up.wanted()  # a stored catalog's server starts after the warm-up: now, here
            await up.wait_listed(120)
            spec = up.tools["app/echo"].spec

            class Direct:
                async def call_tool(self, name: str, args: dict[str, Any]) -> Any:
                    return await up.call(spec, args)

            return await side_by_side(Direct(), client, calls)
    finally:
        gateway.close()


def queries(n: int, seed: int = 7) -> list[str]:
    sys.path.insert(0, str(APP.parent))
    from mcp_upstream_app import NOUNS, VERBS

    rng = random.Random(seed)
    phrasing = ["{v} the {n} in {t}", "I need to {v} {n} ({t})", "{t}: {v} all {n}",
                "can you {v} our {t} {n}"]  # fmt: skip
    out = []
    for _ in range(n):
        noun = rng.choice(NOUNS[:5]).replace("_", " ")
        out.append(rng.choice(phrasing).format(v=rng.choice(VERBS), n=noun, t=rng.choice(TOPICS)))
    return out


async def bench_search(n_queries: int) -> dict[str, Any]:
    from mcp import Client

    from toolscout.mcp.config import parse_config
    from toolscout.mcp.server import MCPGateway

    servers = {
        topic: {
            "command": sys.executable,
            "args": [str(APP), "--stdio", "--many", "45", "--topic", topic],
            "toolscout": {"scopes": []},
        }
        for topic in TOPICS
    }
    cfg = parse_config(
        {
            "mcpServers": servers,
            "toolscout": {
                "mode": "meta",
                "principal": {"subject": "bench"},
                "connect_timeout_s": 300,
                "rate_per_second": 0,
            },
        }
    )
    gateway = MCPGateway(cfg)
    try:
        t0 = time.perf_counter()
        async with gateway.running():
            startup = time.perf_counter() - t0
            n_tools = len(gateway.ts.catalog)
            async with Client(gateway.server) as client:
                qs = queries(n_queries + 10)
                for q in qs[:10]:  # warm-up: the query embedder, caches
                    await client.call_tool("search_tools", {"query": q, "k": 5})
                samples = [
                    await timed(lambda q=q: client.call_tool("search_tools", {"query": q, "k": 5}))  # type: ignore[misc]
                    for q in qs[10:]
                ]
        return {
            "servers": len(servers),
            "tools": n_tools,
            "startup_list_and_index_s": round(startup, 2),
            "search_tools": summary(samples),
        }
    finally:
        gateway.close()


async def spawn_once(config: Path, env: dict[str, str], timeline: bool = False) -> dict[str, float]:
    """Spawn ``toolscout mcp serve`` with the SDK client: seconds to ``initialize`` answered,
    to the tool list, and to the first ``search_tools`` answered.

    ``timeline``: the gateway prints its start-up timeline on stderr (``TOOLSCOUT_TIMELINE``
    set to the spawn's wall-clock time, so its seconds count from the spawn)."""
    from mcp import Client, StdioServerParameters

    if timeline:
        env = {**env, "TOOLSCOUT_TIMELINE": repr(time.time())}
    params = StdioServerParameters(
        command=TOOLSCOUT, args=["mcp", "serve", "--config", str(config)], env=env
    )
    t0 = time.perf_counter()
    async with Client(params, mode="legacy", read_timeout_seconds=600) as client:
        initialize = time.perf_counter() - t0
        listed = await client.list_tools()
        tools_list = time.perf_counter() - t0
        names = [t.name for t in listed.tools]
        if "search_tools" in names:
            found = await client.call_tool("search_tools", {"query": "what time is it in Tokyo"})
        else:  # direct: the first call of a listed tool
            found = await client.call_tool(names[0], {})
        first = time.perf_counter() - t0
        cpu = _gateway_cpu()
        text = " ".join(getattr(b, "text", "") for b in found.content)
    return {
        "initialize_s": round(initialize, 3),
        "tools_list_s": round(tools_list, 3),
        "first_search_s": round(first, 3),
        # the gateway process's CPU seconds (every thread) when the first search came back
        "first_search_cpu_s": round(cpu, 3),
        "indexing_note": float("still indexing" in text),
    }


def _gateway_cpu() -> float:
    """User + system CPU seconds of this process's child running ``mcp serve`` (the
    gateway the SDK client spawned), from /proc; NaN when it is not found."""
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != os.getpid():
                continue
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if b"serve" in cmdline and b"mcp" in cmdline:
            return (int(fields[11]) + int(fields[12])) / tick
    return float("nan")


def bench_startup(runs: int, compare: Path | None = None, timeline: bool = False) -> dict[str, Any]:
    """Spawn → initialize and spawn → first search_tools against examples/servers.json:
    fresh (no stored catalog and an empty user cache: new data and cache directories each
    run) and stored (second start).

    ``compare``: another toolscout source tree (its ``src``), run alternately with this
    one on every step (its own data directory), so both see the same machine load."""
    example = json.loads((ROOT / "examples" / "servers.json").read_text())
    example["toolscout"].pop("db", None)  # the default: a stored catalog per config file
    trees = {"this": str(ROOT / "src")}
    if compare is not None:
        trees["compare"] = str(compare.resolve())
    fresh: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    stored: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for src in trees.values():
        # the bytecode an install compiles (pip does): with PYTHONDONTWRITEBYTECODE set, a
        # tree without it would compile every module from source at every spawn
        compileall.compile_dir(src, quiet=1)
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmpdir:
            tmp = Path(tmpdir)
            config = tmp / "servers.json"
            config.write_text(json.dumps(example))
            envs = {
                name: {
                    **os.environ,
                    "XDG_DATA_HOME": str(tmp / name / "data"),
                    # an empty user cache dir too: a first start after an install, as a
                    # checker's fresh machine sees it (the stored start keeps what it kept)
                    "XDG_CACHE_HOME": str(tmp / name / "cache"),
                    "PYTHONPATH": src,
                }
                for name, src in trees.items()
            }
            for name in trees:
                fresh[name].append(asyncio.run(spawn_once(config, envs[name], timeline)))
            for name in trees:
                stored[name].append(asyncio.run(spawn_once(config, envs[name], timeline)))

    def med(rows: list[dict[str, float]], key: str) -> float:
        return round(percentile([r[key] for r in rows], 0.5), 3)

    keys = ("initialize_s", "tools_list_s", "first_search_s", "first_search_cpu_s")
    out: dict[str, Any] = {
        "config": "examples/servers.json (db: the default stored catalog)",
        "runs": runs,
        "fresh": {k: med(fresh["this"], k) for k in keys},
        "stored": {k: med(stored["this"], k) for k in keys},
        "fresh_runs": fresh["this"],
        "stored_runs": stored["this"],
    }
    if compare is not None:
        out["compare"] = {
            "tree": str(compare),
            "fresh": {k: med(fresh["compare"], k) for k in keys},
            "stored": {k: med(stored["compare"], k) for k in keys},
            "fresh_runs": fresh["compare"],
            "stored_runs": stored["compare"],
        }
    return out


#: what a stdio start imports before it can answer tools/list, in its order (cli/__init__.py
#: → cli/mcp.py → mcp/server.py → service → the SDK; the encoder's libraries on their thread)
IMPORT_STEPS = (
    ("command line (typer, cli/mcp.py)", ("toolscout.cli.mcp",)),
    ("gateway modules (mcp/server.py and below)", ("toolscout.mcp.server",)),
    ("library (service, discovery: numpy, jwt)", ("toolscout.service",)),
    (
        "MCP SDK (the whole mcp package)",
        ("mcp.server.subscriptions", "mcp.server.lowlevel", "mcp.server.stdio"),
    ),
    ("encoder libraries (onnxruntime, tokenizers)", ("onnxruntime", "tokenizers")),
)
_IMPORT_SCRIPT = """
import importlib, json, sys, time
out = [["interpreter start", time.process_time()]]
for name, modules in json.loads(sys.argv[1]):
    t = time.process_time()
    for m in modules:
        importlib.import_module(m)
    out.append([name, time.process_time() - t])
print(json.dumps(out))
"""


def import_cpu(runs: int, compare: Path | None = None) -> dict[str, Any]:
    """CPU seconds of each import step of a stdio start, in a new interpreter per run
    (median of ``runs``; alternating with ``compare``'s tree). CPU time, not wall time:
    it moves far less with the machine's load, and the interpreter's lock makes these
    steps add up on the critical path whatever the number of cores."""
    trees = {"this": str(ROOT / "src")}
    if compare is not None:
        trees["compare"] = str(compare.resolve())
    rows: dict[str, list[list[Any]]] = {name: [] for name in trees}
    for src in trees.values():
        compileall.compile_dir(src, quiet=1)
    steps = json.dumps([[name, list(mods)] for name, mods in IMPORT_STEPS])
    for _ in range(runs):
        for name, src in trees.items():
            env = {**os.environ, "PYTHONPATH": src}
            done = subprocess.run(
                [sys.executable, "-c", _IMPORT_SCRIPT, steps],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            rows[name].append(json.loads(done.stdout))
    out: dict[str, Any] = {"runs": runs, "load_1m": round(os.getloadavg()[0], 2)}
    for name, got in rows.items():
        steps_s = {
            step: round(percentile([r[i][1] for r in got], 0.5), 3)
            for i, step in enumerate(s for s, _ in got[0])
        }
        out[name] = {"cpu_s": steps_s, "total_s": round(sum(steps_s.values()), 3)}
    return out


def forwarding(
    calls: int,
    compare: Path | None,
    compare_env: dict[str, str] | None = None,
    floor: bool = False,
) -> None:
    """Stdio (alternating with ``compare``'s gateway and, with ``floor``, the bare
    pass-through) and in process; prints and writes ``benchmarks/results/mcp_forwarding.json``."""
    load = [round(os.getloadavg()[0], 2)]
    with tempfile.TemporaryDirectory() as tmpdir:
        stdio = asyncio.run(bench_stdio(Path(tmpdir), calls, compare, compare_env, floor))
    in_process = asyncio.run(bench_in_process(calls))
    load.append(round(os.getloadavg()[0], 2))
    result = {"benchmark": "mcp gateway forwarding", "load_1m": load, "stdio": stdio,
              "caller_mode": CALLER_MODE["mode"],
              "in_process": in_process, "compare": str(compare) if compare else None,
              "compare_env": compare_env or {}}  # fmt: skip
    out = RESULTS.with_name("mcp_forwarding.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    rows = [("stdio", stdio), ("in-proc", in_process)]
    for label in ("floor", "compare"):
        if label in stdio:
            rows.insert(1, (f"stdio ({label})", {"direct": stdio["direct"], **stdio[label]}))
    print(f"load {load}")
    print(f"{'path':<16}{'direct p50':>12}{'gateway p50':>13}{'overhead p50':>14}"
          f"{'overhead p99':>14}")  # fmt: skip
    for name, r in rows:
        print(f"{name:<16}{r['direct']['p50_ms']:>12.2f}{r['gateway']['p50_ms']:>13.2f}"
              f"{r['overhead_p50_ms']:>14.2f}{r['overhead_p99_ms']:>14.2f}")  # fmt: skip
    for name, ms in stdio.get("gateway_cpu_ms_per_call", {}).items():
        print(f"gateway process CPU per call ({name}): {ms:.3f} ms")
    print(f"wrote {out.relative_to(ROOT)}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls per transport")
    parser.add_argument("--queries", type=int, default=200, help="measured search_tools calls")
    parser.add_argument("--startup-runs", type=int, default=5, help="spawns per start-up case")
    parser.add_argument(
        "--only-startup", action="store_true", help="measure only spawn → initialize / search"
    )
    parser.add_argument(
        "--compare", type=Path, help="start-up: alternate with the toolscout source tree at PATH"
    )
    parser.add_argument(
        "--compare-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="forwarding: more environment for the --compare gateway (e.g. --compare src "
        "--compare-env TOOLSCOUT_FASTCALL=off: this tree with every call through the SDK)",
    )
    parser.add_argument(
        "--only-forwarding",
        action="store_true",
        help="measure only the forwarding overhead over stdio and in process (with --compare:"
        " stdio alternates this tree's gateway with the other tree's)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="forwarding: also call the upstream through a bare pass-through process "
        "(benchmarks/line_proxy.py) in the same turns: an extra process's own cost",
    )
    parser.add_argument(
        "--caller-mode",
        default="auto",
        help="forwarding: the callers' SDK Client mode over stdio (legacy: the initialize "
        "handshake of 2025-era clients; default auto: 2026-07-28 here)",
    )
    parser.add_argument(
        "--import-cpu",
        action="store_true",
        help="start-up: CPU seconds of each import step of a stdio start (--startup-runs "
        "interpreters; with --compare, alternating with the other tree)",
    )
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="start-up: the gateway prints its timeline (seconds from spawn) on stderr",
    )
    args = parser.parse_args(argv)
    if args.startup_runs < 1:
        parser.error("--startup-runs must be at least 1")
    CALLER_MODE["mode"] = args.caller_mode
    if args.only_forwarding:
        pairs = [item.partition("=") for item in args.compare_env]
        if any(not key or not eq for key, eq, _ in pairs):
            parser.error("--compare-env takes KEY=VALUE")
        forwarding(args.calls, args.compare, {key: value for key, _, value in pairs}, args.floor)
        return
    if args.import_cpu:
        cpu = import_cpu(args.startup_runs, args.compare)
        print(f"import CPU seconds, median of {cpu['runs']} (load {cpu['load_1m']})")
        for step, value in cpu["this"]["cpu_s"].items():
            other = f"{cpu['compare']['cpu_s'][step]:>10.3f}" if "compare" in cpu else ""
            print(f"{step:<46}{value:>8.3f}{other}")
        out = RESULTS.with_name("mcp_import_cpu.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"benchmark": "mcp gateway import CPU", **cpu}, indent=2))
        print(f"wrote {out.relative_to(ROOT)}")
        return
    startup = bench_startup(args.startup_runs, args.compare, args.timeline)
    print(f"{'start-up (median s)':<22}{'initialize':>12}{'tools/list':>12}{'1st search':>12}"
          f"{'its CPU':>10}")  # fmt: skip
    for case in ("fresh", "stored"):
        rows = [(case, startup[case])]
        if "compare" in startup:
            rows.append((case + " (compare)", startup["compare"][case]))
        for label, r in rows:
            print(f"{label:<22}{r['initialize_s']:>12.3f}{r['tools_list_s']:>12.3f}"
                  f"{r['first_search_s']:>12.3f}{r['first_search_cpu_s']:>10.3f}")  # fmt: skip
    if args.only_startup:
        out = RESULTS.with_name("mcp_startup.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"benchmark": "mcp gateway start-up", **startup}, indent=2))
        print(f"wrote {out.relative_to(ROOT)}")
        return
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        stdio = asyncio.run(bench_stdio(tmp, args.calls))
        http = asyncio.run(bench_http(tmp, args.calls))
    in_process = asyncio.run(bench_in_process(args.calls))
    search = asyncio.run(bench_search(args.queries))
    result = {
        "benchmark": "mcp gateway",
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_1m": round(os.getloadavg()[0], 2),
        },
        "forwarding": {"stdio": stdio, "http": http, "in_process": in_process},
        "search": search,
        "startup": startup,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'transport':<10}{'direct p50':>12}{'gateway p50':>13}{'overhead p50':>14}"
          f"{'direct p99':>12}{'gateway p99':>13}{'overhead p99':>14}")  # fmt: skip
    for name, r in (("stdio", stdio), ("http", http), ("in-proc", in_process)):
        print(f"{name:<10}{r['direct']['p50_ms']:>12.2f}{r['gateway']['p50_ms']:>13.2f}"
              f"{r['overhead_p50_ms']:>14.2f}{r['direct']['p99_ms']:>12.2f}"
              f"{r['gateway']['p99_ms']:>13.2f}{r['overhead_p99_ms']:>14.2f}")  # fmt: skip
    s = search["search_tools"]
    print(f"search_tools over {search['tools']} tools / {search['servers']} servers: "
          f"p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms; "
          f"start-up {search['startup_list_and_index_s']} s")  # fmt: skip
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
