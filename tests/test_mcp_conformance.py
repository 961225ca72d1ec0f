"""The official MCP conformance suite, through the gateway (``tests/mcp_conformance/run.sh``).

The harness runs ``@modelcontextprotocol/conformance`` 0.1.16 (``server --suite all``)
against its reference server alone, then through ``toolscout mcp serve`` over
streamable HTTP and over stdio (bridged to HTTP by supergateway), in each listing
mode. It installs Node 22 and its npm packages itself (npm is needed), into
``.ci/cache/conformance`` where later runs reuse them. It runs once for
the module (``MODES="direct dynamic"``: one install, one baseline, the two modes side by
side); each mode's test reads that mode's table. Over stdio every session has a
gateway process of its own, forked from one process that has imported the gateway
(``STDIO_PYTHON``, ``tests/forkserver.py``): the same command line on the
session's pipes, without the ~1 s of imports each of 66 cold starts spent.
Every scenario the reference server passes alone must pass through the gateway,
with one exception over stdio: ``dns-rebinding-protection`` POSTs ``initialize`` with
``Host: evil.example.com`` and expects a 4xx. Over stdio the HTTP endpoint is the
harness's bridge (``supergateway@4.0.0``, which has no Host or Origin check and no option
for one); the gateway reads JSON-RPC from a pipe and sees no headers. The gateway's own
HTTP transport refuses the foreign host (421) and passes it (docs/mcp-gateway.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent / "mcp_conformance" / "run.sh"
#: where the harness keeps its npm installs between runs (git-ignored; $CONF_CACHE overrides)
CACHE = Path(__file__).resolve().parents[1] / ".ci" / "cache" / "conformance"
#: answered by the stdio bridge (supergateway 4.0.0), which has no Host check of its own
BRIDGE_ONLY = {"dns-rebinding-protection"}


def _table(text: str) -> dict[str, dict[str, str]]:
    rows: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+([PF-])\s+([PF-])\s+([PF-])\s*$", line)
        if m and m[1] != "scenario":
            rows[m[1]] = {"alone": m[2], "http": m[3], "stdio": m[4]}
    return rows


MODES = ("direct", "dynamic")


@dataclass(frozen=True)
class Run:
    """One run of the harness over every mode: its output directory and process."""

    out: Path
    done: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp_path = tmp_path_factory.mktemp("conformance")
    exe = tmp_path / "toolscout"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m toolscout "$@"\n')
    exe.chmod(0o755)
    out = tmp_path / "out"
    env = {
        **os.environ,
        "MODES": " ".join(MODES),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "CONF_CACHE": os.environ.get("CONF_CACHE") or str(CACHE),
        # the stdio sessions' gateways forked from one process that imported them
        "STDIO_PYTHON": sys.executable,
    }
    env.pop("MODE", None)
    done = subprocess.run(
        ["bash", str(HARNESS), str(exe), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    return Run(out, done)


@pytest.mark.parametrize("mode", MODES)
def test_every_scenario_passes_through_the_gateway(harness: Run, mode: str) -> None:
    table_file = harness.out / f"table-{mode}.txt"
    assert table_file.is_file(), harness.done.stderr[-3000:]
    rows = _table(table_file.read_text())
    assert len(rows) >= 30, table_file.read_text()
    passing_alone = {s for s, r in rows.items() if r["alone"] == "P"}
    assert len(passing_alone) == len(rows), f"the reference server alone: {rows}"
    lost_http = sorted(s for s in passing_alone if rows[s]["http"] != "P")
    lost_stdio = sorted(s for s in passing_alone - BRIDGE_ONLY if rows[s]["stdio"] != "P")
    assert not lost_http and not lost_stdio, (
        f"{mode}: lost over http {lost_http}, over stdio {lost_stdio}\n" + table_file.read_text()
    )
