"""The catalog ``toolscout demo`` leaves, made once per test run and copied for each user.

``toolscout demo`` indexes the bundled 205-tool catalog (embedding every card and fitting
its calibration, most of a minute of CPU) and runs its scripted requests. The tests that
start from what it leaves (the shell's ``call``, the README's search-then-call) get a copy
of one such catalog instead of running it each: :func:`demo_db_copy`. The copy is the
files the command wrote (the catalog, its derived state, an audit log if any), so a test
sees what it saw when it ran the command itself. ``test_cli.py::test_demo_runs`` checks that
run's output (kept beside the template: :data:`STDOUT`), so the suite runs the command once
(and the README's ``make demo`` once more, as written).

The console tests start from the demo catalog indexed and nothing run yet:
:func:`indexed_demo` (one per run as well), copied by each.

Under pytest-xdist the workers share the one copy: the first to need it builds it under
a file lock in the run's common temporary directory (``shared/`` there, so never a
directory a test names under its own process's base: in one process both are the same base).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from fork_kit import toolscout as fork_toolscout


def _run_root(factory: pytest.TempPathFactory) -> Path:
    """The directory every worker of this run shares (the worker's own base otherwise)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


#: beside the template: what the command printed (``test_cli.py::test_demo_runs`` checks it)
STDOUT = "demo-stdout.txt"


def _build(db: Path) -> None:
    proc = subprocess.run(
        fork_toolscout("demo", "--db", str(db)),  # forked with the imports done (fork_kit)
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    assert "filtered by policy" in proc.stdout, proc.stdout
    (db.parent / STDOUT).write_text(proc.stdout)


def _shared(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """``shared/NAME/demo.db`` in the run's common directory, made by ``build`` once per
    run: the first worker to get here builds it under the lock, the others wait for it."""
    where = _run_root(factory) / "shared" / name
    where.mkdir(parents=True, exist_ok=True)
    done = where / "done"
    with (where / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            for left in where.glob("demo.*"):  # what a failed build left
                left.unlink()
            build(where / "demo.db")
            done.write_text("ok\n")
    return where / "demo.db"


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``demo.db`` as ``toolscout demo`` left it (read-only: copy it with :func:`demo_db_copy`)."""
    return _shared(tmp_path_factory, "demo-template", _build)


@pytest.fixture(scope="session")
def indexed_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled demo catalog and its policy indexed, nothing else
    (``console_kit.build_demo``; read-only: copy it with :func:`demo_db_copy`)."""
    from console_kit import build_demo

    return _shared(tmp_path_factory, "demo-indexed", build_demo)


def demo_db_copy(template: Path, into: Path) -> Path:
    """A private copy of the demo catalog (every file ``toolscout demo`` wrote beside it)
    in directory ``into`` (not the template's own directory)."""
    into.mkdir(parents=True, exist_ok=True)
    if into.resolve() == template.parent.resolve():
        raise ValueError(f"a copy of {template} cannot go into its own directory {into}")
    files = sorted(template.parent.glob(f"{template.stem}.*"))
    names = {f.name for f in files}
    assert template.name in names, f"toolscout demo left no {template.name}"
    # SQLite files a process left open would be copied half-written; the command closes them
    assert not [n for n in names if n.endswith(("-wal", "-shm", "-journal"))], names
    for source in files:
        shutil.copy2(source, into / source.name)
    return into / template.name
