"""The README runs as written: every ``sh`` and ``python`` block, in order, from the repo root.

Blocks run as a new user would run them after cloning: shell blocks with bash in
the repository root (``.venv/bin`` first on ``PATH``, as ``make demo`` leaves it),
Python blocks with the project's interpreter. The one line not run is ``make test``:
it is the command running this test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from demo_fixture import demo_db_copy, demo_template  # noqa: F401  (fixture)
from fork_kit import toolscout as fork_toolscout

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    return [(lang, body) for lang, body in FENCE.findall(text) if lang in ("sh", "python")]


def test_readme_has_runnable_blocks() -> None:
    langs = [lang for lang, _ in blocks()]
    assert langs.count("python") >= 2 and langs.count("sh") >= 2


def test_every_block_runs_in_order(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["TOOLSCOUT_DB"] = str(tmp_path / "default.db")  # never the user's own catalog
    env.pop("TOOLSCOUT_TOKEN_KEY", None)
    made: list[Path] = []
    for n, (lang, body) in enumerate(blocks(), 1):
        if lang == "sh":
            script = "\n".join(
                "true  # make test: the command running this test" if re.match(
                    r"^make test\b", line) else line
                for line in body.splitlines()
            )  # fmt: skip
            cmd = ["bash", "-euo", "pipefail", "-c", script]
        else:
            cmd = [sys.executable, "-c", body]
        before = {p for p in ROOT.glob("*.db")}
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        made += [p for p in ROOT.glob("*.db") if p not in before]
        assert proc.returncode == 0, f"README block {n} ({lang}) failed:\n{body}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
    for path in made:  # files the README made beside demo.db (demo.db is make demo's)
        if path.name != "demo.db":
            path.unlink(missing_ok=True)
            for extra in path.parent.glob(path.name + "-*"):
                extra.unlink(missing_ok=True)


KEY = "a-development-secret-of-32-bytes!"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory, demo_template: Path) -> Path:  # noqa: F811
    """What ``toolscout demo`` leaves (one run's copy: tests/demo_fixture.py)."""
    return demo_db_copy(demo_template, tmp_path_factory.mktemp("readme"))


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_a_searched_name_calls_from_the_shell(demo_db: Path, fmt: str) -> None:
    """What `toolscout search --format F --json` names is what `toolscout call` accepts.
    Each command is a process of its own forked from the worker's fork server
    (``fork_kit.toolscout``: ``python -m toolscout ARGS`` with the imports done; what the
    README's own blocks and ``make demo`` run is tested above, cold)."""
    import json

    env = dict(os.environ, TOOLSCOUT_TOKEN_KEY=KEY)
    found = subprocess.run(
        fork_toolscout("search", "where is order 94218", "--db", str(demo_db), "--roles",
                           "support_agent", "--tenant", "acme", "--format", fmt, "--json"),
        check=True, capture_output=True, text=True, env=env,
    )  # fmt: skip
    schema = json.loads(found.stdout)["schemas"][0]
    name = schema["function"]["name"] if fmt == "openai" else schema["name"]
    assert name != "orders.find_order" or fmt == "mcp"
    token = subprocess.run(
        fork_toolscout("token", "issue", "--sub", "alice", "--tenant", "acme", "--roles",
                           "support_agent"),
        check=True, capture_output=True, text=True, env=env,
    ).stdout.strip()  # fmt: skip
    called = subprocess.run(
        fork_toolscout("call", name, "--db", str(demo_db), "--token", token, "--args",
                           '{"order_id": "94218"}'),
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["tool"] == "orders.find_order"
