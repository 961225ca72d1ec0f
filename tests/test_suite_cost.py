"""What ``benchmarks/suite_cost.py`` reads: the CPU the fork server counts for the test that
started each forked process (``tests/forkserver.py``'s ledger), and the tests' figures added
up per file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fork_kit
from forkserver import LEDGER_ENV

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from suite_cost import per_file

#: a child that spends CPU (about a fifth of a second) and exits with status 3
BUSY = """
import sys, time
end = time.process_time() + 0.2
while time.process_time() < end:
    pass
sys.exit(3)
"""


def _forked_busy(tmp_path: Path) -> None:
    script = tmp_path / "busy.py"
    script.write_text(BUSY)
    done = subprocess.run(fork_kit.command(script), capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr  # the child's own status, through the client


def test_the_fork_server_counts_a_reaped_childs_cpu_for_the_test_that_started_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))
    _forked_busy(tmp_path)
    # written as the child is reaped, before its client is told how it ended
    (line,) = ledger.read_text().splitlines()
    entry = json.loads(line)
    assert entry["test"] == os.environ["PYTEST_CURRENT_TEST"]  # "<node id> (call)"
    assert entry["test"].endswith(" (call)") and "test_suite_cost.py::" in entry["test"]
    assert entry["cpu"] >= 0.15, entry
    assert entry["argv"][0] == "--script" and entry["argv"][1].endswith("busy.py")


def test_without_a_ledger_in_its_environment_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    before = sorted(p.name for p in tmp_path.iterdir())
    _forked_busy(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "busy.py"])


def test_per_file_adds_up_each_files_tests_most_cpu_first() -> None:
    def t(cpu: float, forked: float, wall: float, procs: int, worker: str) -> dict[str, object]:
        return {"cpu": cpu, "forked_cpu": forked, "wall": wall, "processes": procs,
                "worker": worker}  # fmt: skip

    files = per_file({
        "tests/test_a.py::one": t(1.0, 0.5, 2.0, 1, "gw0"),
        "tests/test_a.py::two[x]@test_a": t(0.25, 0.0, 0.5, 0, "gw1"),
        "tests/test_b.py::one": t(3.0, 0.0, 3.5, 2, "gw0"),
    })  # fmt: skip
    assert list(files) == ["tests/test_b.py", "tests/test_a.py"]
    assert files["tests/test_a.py"] == {
        "tests": 2, "wall": 2.5, "cpu": 1.25, "forked_cpu": 0.5, "processes": 1,
        "workers": ["gw0", "gw1"], "total_cpu": 1.75,
    }  # fmt: skip
    assert files["tests/test_b.py"]["total_cpu"] == 3.0
