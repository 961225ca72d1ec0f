"""``make test`` runs lint beside the suite and fails when either fails.

The Makefile's ``test`` target is run with stand-ins for the venv's ``python`` (the suite),
``ruff`` and ``mypy`` (``VENV`` and ``NODE`` point at a temporary directory with their
stamps, so nothing is installed): each stand-in records what it was asked and exits as
the test says."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the suite: says it started (a file mypy's stand-in waits for), then exits with $SUITE_RC
PYTHON = """#!/bin/sh
: > "$MARKS/suite-started"
echo "the suite ran: $*"
echo "the suite at niceness $(nice)"
exit "${SUITE_RC:-0}"
"""
#: ruff: its niceness, then $RUFF_RC
RUFF = """#!/bin/sh
echo "ruff $1 at niceness $(nice)"
exit "${RUFF_RC:-0}"
"""
#: mypy: waits (60 s at most) until the suite has started, so it passes only beside it
MYPY = """#!/bin/sh
i=0
while [ ! -e "$MARKS/suite-started" ]; do
  i=$((i + 1)); [ "$i" -gt 600 ] && { echo "mypy ran before the suite"; exit 3; }
  sleep 0.1
done
echo "mypy ran beside the suite"
exit "${MYPY_RC:-0}"
"""


def _make(tmp_path: Path, **rcs: str) -> subprocess.CompletedProcess[str]:
    venv, node, marks = tmp_path / "venv", tmp_path / "node", tmp_path / "marks"
    for where in (venv / "bin", node, marks):
        where.mkdir(parents=True, exist_ok=True)
    for name, text in (("python", PYTHON), ("ruff", RUFF), ("mypy", MYPY)):
        (venv / "bin" / name).write_text(text)
        (venv / "bin" / name).chmod(0o755)
    (marks / "suite-started").unlink(missing_ok=True)
    (venv / ".installed-stamp").touch()  # newer than pyproject.toml and the Makefile
    (node / ".installed-stamp").touch()
    env = {**os.environ, "MARKS": str(marks), **rcs}
    # the Makefile's own defaults, whoever runs the test
    for name in ("MAKEFLAGS", "MFLAGS", "PYTEST_WORKERS"):
        env.pop(name, None)
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "test", f"VENV={venv}", f"NODE={node}"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_lint_runs_niced_beside_the_suite_and_is_shown_after_it(tmp_path: Path) -> None:
    done = _make(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "mypy ran beside the suite" in out
    suite = int(re.findall(r"the suite at niceness (\d+)", out)[0])
    niced = min(suite + 10, 19)  # nice -n 10, as far as the scheduler goes
    assert f"ruff check at niceness {niced}" in out and f"ruff format at niceness {niced}" in out
    assert out.index("the suite ran: -m pytest -n auto") < out.index("ruff check at niceness")


@pytest.mark.parametrize(
    "rcs",
    [{"SUITE_RC": "1"}, {"MYPY_RC": "1"}, {"RUFF_RC": "1"}, {"SUITE_RC": "1", "MYPY_RC": "1"}],
    ids=["suite", "mypy", "ruff", "both"],
)
def test_make_test_fails_when_the_suite_or_lint_fails(tmp_path: Path, rcs: dict[str, str]) -> None:
    done = _make(tmp_path, **rcs)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "the suite ran" in done.stdout
    if set(rcs) - {"SUITE_RC"}:
        assert "make test: lint failed" in done.stderr
