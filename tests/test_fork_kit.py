"""The fork server of the suite (``fork_kit``, ``forkserver.py``): what it
makes before it forks is what a cold process makes for itself, and nothing else of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import fork_kit

#: a child that reports whether the token counter's encoding was there when it started, and
#: what it counts, what its own modules are and which of the run's threads it has
PROBE = """
import json, os, sys, threading
from toolscout.discovery import tokencount
built = tokencount._encoding is not None
text = "Réserve un taxi pour 7h — {\\"order_id\\": 94218} 東京駅"
print(json.dumps({
    "built": built,
    "count": tokencount.count_text(text),
    "parts": tokencount.count_json([{"a": text}, {"b": [1, 2, 3]}]),
    "threads": threading.active_count(),
    "ort": "onnxruntime" in sys.modules,
    "prometheus": "prometheus_client" in sys.modules,
    "argv": sys.argv[1:],
}))
"""


def _run(cmd: list[str]) -> dict[str, object]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_forked_child_finds_the_token_counter_built_and_counts_as_a_cold_one(
    tmp_path: Path,
) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    forked = _run(fork_kit.command(script, "x"))
    cold = _run([sys.executable, str(script), "x"])
    assert forked["built"] is True and cold["built"] is False
    assert (forked["count"], forked["parts"]) == (cold["count"], cold["parts"])
    assert forked["argv"] == cold["argv"] == ["x"]
    # one thread, and neither ONNX Runtime (it starts a thread a child would not have) nor
    # prometheus_client (it reads its environment when imported) imported ahead
    assert forked["threads"] == 1
    assert forked["ort"] is False and forked["prometheus"] is False


#: a process that becomes a forked ``toolscout`` (``forkserver.become``) and prints, instead
#: of running the command, the first entry of its ``sys.path`` and its working directory
BECOME = """
import os, runpy, sys
sys.path.insert(0, sys.argv[1])
import forkserver
runpy.run_module = lambda *args, **kwargs: print(sys.path[0], os.getcwd(), sep="\\n")
forkserver.become({"fds": [os.dup(0), os.dup(1), os.dup(2)], "env": dict(os.environ),
                   "cwd": sys.argv[2], "argv": ["--version"]})
"""


def test_a_forked_toolscout_finds_its_working_directory_first_as_python_m_puts_it(
    tmp_path: Path,
) -> None:
    """``python -m toolscout`` puts its working directory first on ``sys.path``; a forked one
    too, not the fork server's directory (the suite's test modules)."""
    tests = str(Path(fork_kit.FORKSERVER).parent)
    done = subprocess.run([sys.executable, "-c", BECOME, tests, str(tmp_path)],
                          cwd=tests, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, cwd = done.stdout.splitlines()
    assert first == cwd == str(tmp_path)
