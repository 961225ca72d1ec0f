"""The official MCP conformance suite, through the gateway (``tests/mcp_conformance/run.sh``).

The harness runs ``@modelcontextprotocol/conformance`` 0.1.16 (``server --suite all``)
against its reference server alone, then through ``toolscout mcp serve`` over
streamable HTTP and over stdio (bridged to HTTP by supergateway), in the listing
mode under test. It installs Node 22 and its npm packages itself (npm is needed).
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
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent / "mcp_conformance" / "run.sh"
#: answered by the stdio bridge (supergateway 4.0.0), which has no Host check of its own
BRIDGE_ONLY = {"dns-rebinding-protection"}


def _table(text: str) -> dict[str, dict[str, str]]:
    rows: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+([PF-])\s+([PF-])\s+([PF-])\s*$", line)
        if m and m[1] != "scenario":
            rows[m[1]] = {"alone": m[2], "http": m[3], "stdio": m[4]}
    return rows


@pytest.mark.parametrize("mode", ["direct", "dynamic"])
def test_every_scenario_passes_through_the_gateway(tmp_path: Path, mode: str) -> None:
    exe = tmp_path / "toolscout"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m toolscout "$@"\n')
    exe.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "MODE": mode, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    done = subprocess.run(
        ["bash", str(HARNESS), str(exe), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    table_file = out / "table.txt"
    assert table_file.is_file(), done.stderr[-3000:]
    rows = _table(table_file.read_text())
    assert len(rows) >= 30, table_file.read_text()
    passing_alone = {s for s, r in rows.items() if r["alone"] == "P"}
    assert len(passing_alone) == len(rows), f"the reference server alone: {rows}"
    lost_http = sorted(s for s in passing_alone if rows[s]["http"] != "P")
    lost_stdio = sorted(s for s in passing_alone - BRIDGE_ONLY if rows[s]["stdio"] != "P")
    assert not lost_http and not lost_stdio, (
        f"{mode}: lost over http {lost_http}, over stdio {lost_stdio}\n" + table_file.read_text()
    )
