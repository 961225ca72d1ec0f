"""``mcp.processes.kill_children``, what a gateway runs as it stops (h/suite15)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from toolscout.mcp import processes


def test_with_no_server_recorded_it_kills_nothing_and_reads_no_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def scan(parent: int) -> list[tuple[int, int, int]]:
        raise AssertionError(f"/proc read for the children of {parent}")

    monkeypatch.setattr(processes, "_children_of", scan)
    monkeypatch.setattr(processes, "SPAWNED", set())
    assert processes.kill_children() == 0


def test_a_recorded_session_leader_is_killed_and_the_record_cleared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        assert child.pid in processes.leaders()
        monkeypatch.setattr(processes, "SPAWNED", {child.pid})
        assert processes.kill_children() == 1
        assert child.wait(10) == -signal.SIGKILL
        assert not processes.SPAWNED
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(10)
