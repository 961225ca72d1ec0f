"""Every example under examples/ runs as written (against the local replay endpoint)
and stays under 25 lines of user code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _adapters_kit import EXAMPLES, open_demo

SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
EXPECTED = {
    "anthropic_deferred.py": ["tool_reference", "refused: missing_scope", "'mode': 'deferred'"],
    "openai_responses.py": ["tool_search_output", "refused: missing_scope", "'mode': 'deferred'"],
    "openai_chat.py": ["orders_find_order", "refused: missing_scope", "'mode': 'plain'"],
    "openai_agents.py": ["Loaded tools:", "refused: missing_scope", "final: Order 94218"],
    "langgraph_agent.py": ["Available tools:", "refused: missing_scope", "bound tools:"],
    "pydantic_ai_agent.py": ["Loaded tools:", "refused: schema_mismatch", "Order 94218"],
    "fastmcp_server.py": [
        "found: ['find_order']",
        "refund_order -> refused: missing_scope",
        "[('find_order', 'ok'), ('refund_order', 'refused')]",
    ],
}


def _user_lines(path: Path) -> int:
    """Lines of code, not counting the docstring, blank lines and comments."""
    text = path.read_text(encoding="utf-8")
    body = text.split('"""', 2)[2] if text.startswith('"""') else text
    return sum(1 for line in body.splitlines() if line.strip() and not line.strip().startswith("#"))


def test_every_adapter_has_an_example() -> None:
    assert sorted(p.name for p in SCRIPTS) == sorted(EXPECTED)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_example_runs(script: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    open_demo(tmp_path_factory).close()  # index the demo catalog once, in this process
    assert _user_lines(script) < 25
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=EXAMPLES,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for expected in EXPECTED[script.name]:
        assert expected in done.stdout, done.stdout
