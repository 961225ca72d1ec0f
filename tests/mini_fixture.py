"""The mini catalog (``fixtures/mini_tools.jsonl``) as ``toolscout index`` leaves it, made
once per test run and copied by each module that starts from it (``test_cli.py``,
``test_cli_inputs.py``): one ``index`` process for the run instead of one per module
(per worker under pytest-xdist: the first worker to need it builds it, the others wait).
The command's output is kept beside it for the test that checks that first index."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fork_kit import toolscout as fork_toolscout
from support import FIXTURES, made_once_per_run

MINI = FIXTURES / "mini_tools.jsonl"


def _build(where: Path) -> None:
    proc = subprocess.run(
        fork_toolscout("index", str(MINI), "--db", str(where / "mini.db")),  # forked (fork_kit)
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    (where / "index.out").write_text(proc.stdout)
    (where / "index.err").write_text(proc.stderr)


@pytest.fixture(scope="session")
def mini_indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mini.db`` as the first ``toolscout index`` of the mini catalog left it, with that
    command's stdout (``index.out``) and stderr (``index.err``) beside it. Read-only: copy
    it (``support.copy_catalog``)."""
    return made_once_per_run(tmp_path_factory, "mini-indexed", _build) / "mini.db"
