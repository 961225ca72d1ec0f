"""The SDK's names the per-call paths use: one holder (mcp/sdk.py), made once, shared by
the caller's fast path (mcp/fastcall.py), the gateway's own upstream call (mcp/lean.py)
and an upstream request's fault handling (mcp/connection.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import toolscout
from toolscout.mcp import connection, fastcall, lean, sdk


def test_one_holder_made_once_and_shared() -> None:
    names = sdk.sdk_names()
    assert sdk.sdk_names() is names is sdk._NAMES
    assert fastcall.sdk_names is lean.sdk_names is connection.sdk_names is sdk.sdk_names


def test_the_names_are_the_sdks() -> None:
    from mcp.server.runner import ServerRunner
    from mcp.shared.exceptions import MCPError
    from mcp.types import CallToolResult
    from mcp_types import CONNECTION_CLOSED
    from pydantic import ValidationError

    names = sdk.sdk_names()
    assert names.MCPError is MCPError and names.ValidationError is ValidationError
    assert names.CallToolResult is CallToolResult and names.ServerRunner is ServerRunner
    assert names.CONNECTION_CLOSED == CONNECTION_CLOSED


def test_importing_the_call_paths_does_not_load_the_sdk() -> None:
    # the start-up path imports these modules before it loads the SDK: the holder waits for
    # the first call
    code = (
        "import sys\n"
        "import toolscout.mcp.sdk, toolscout.mcp.fastcall, toolscout.mcp.lean\n"
        "loaded = sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.'))\n"
        "assert toolscout.mcp.sdk._NAMES is None, 'the holder was made at import'\n"
        "print(loaded)\n"
    )
    src = str(Path(toolscout.__file__).resolve().parents[1])  # this tree's, not another's
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    assert out.stdout.strip() == "[]"
