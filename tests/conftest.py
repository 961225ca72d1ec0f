"""Test hooks: parallel scheduling (pytest-xdist), the security suite's case counts in the
summary, audit logs closed after use.

``make test`` runs the suite on ``-n auto`` workers (capped, see
:func:`pytest_xdist_auto_num_workers`) with ``--dist loadgroup``. The tests of a module that
share a module- or class-scoped fixture (a ``toolscout serve`` process, a built catalog, a
browser) or module state (the security suite's case counter) run on one worker: each gets
``xdist_group(<module>)``, so the fixture is built once, not once per worker. Every other
test is a unit of its own. Each worker is a process with its own session
fixtures (the embedded PostgreSQL of ``pg_fixture``, the model of ``support.embedder``), on
ports the kernel hands out and directories under its own ``tmp_path_factory`` base.

Work units are handed out heaviest first (:data:`HEAVY` below, then larger groups), so a
long test does not start last and leave the other worker idle at the end.

Every ``toolscout`` process a test starts encodes without ONNX Runtime's spin-waiting
(``TOOLSCOUT_EMBED_SPIN=0``, set here unless the caller set it): the suite runs its
workers, servers and CLI processes side by side on few cores, where a spinning thread
only takes a core from another process (the vectors are the same; ``index`` of a
94-tool set took about 22% less CPU). ``tests/test_embed.py`` checks the default spins.
And on one ONNX Runtime thread (``TOOLSCOUT_EMBED_THREADS=1``, the same rule): with as
many processes as cores and more, a second thread only splits a run both cores are busy
with anyway, and each run then took ~20-25% less CPU for the same vectors bit for bit
(300 single queries and 200 cards, docs/history/test-suite-time.md, round fifteen).

Every embedder of the run answers texts embedded before from one vector cache
(``$TOOLSCOUT_VECTOR_CACHE``, a temporary directory per run, see :func:`pytest_configure`):
the same demo and bench card texts are indexed into many catalogs by many processes.

``--cpu-durations N`` lists the N tests that used most CPU (their process's and the
processes they started), which is what the suite's time on two cores is made of;
``--cpu-json PATH`` writes every test's figures as JSON (``benchmarks/suite_cost.py`` runs
the suite with it and adds them up per file). With either, the processes the fork servers
start for a test (``tests/forkserver.py``) are counted for it too: they are the fork
server's children, not the test's, so the fork server writes each one's CPU to a ledger
(``$TOOLSCOUT_TEST_LEDGER``) when it reaps it.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolscout.embed.vectorcache import VECTOR_CACHE_ENV

os.environ.setdefault("TOOLSCOUT_EMBED_SPIN", "0")
os.environ.setdefault("TOOLSCOUT_EMBED_THREADS", "1")

#: the run's shared vector cache (``toolscout.embed.vectorcache``), made by the controlling
#: process (the one process of a serial run) and removed when it ends
_RUN_VECTORS: str | None = None
#: where the fork servers write the CPU of each process they forked and reaped, one JSON
#: line each (``tests/forkserver.py``), when the run counts CPU; made as the vector cache is
LEDGER_ENV = "TOOLSCOUT_TEST_LEDGER"
_RUN_LEDGER: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Point every embedder of the run (this process's, the xdist workers', every process a
    test starts) at one vector cache in a new temporary directory, unless the caller named
    one (``$TOOLSCOUT_VECTOR_CACHE``; set empty: no cache): the demo and bench card texts
    that many tests index into catalogs of their own are embedded once per run. The
    vectors are the model's own (stored as it returned them); a test of the model itself
    calls it directly. And byte-compile the package and the test modules once
    (:func:`_compile_package`, :func:`_compile_tests`)."""
    global _RUN_VECTORS, _RUN_LEDGER
    if hasattr(config, "workerinput"):
        return  # a worker inherits the controlling process's cache and compiled package
    _compile_package()
    _compile_tests(config)
    counting = config.getoption("cpu_durations") is not None or config.getoption("cpu_json")
    if counting and LEDGER_ENV not in os.environ:
        fd, _RUN_LEDGER = tempfile.mkstemp(prefix="toolscout-ledger-", suffix=".jsonl")
        os.close(fd)
        os.environ[LEDGER_ENV] = _RUN_LEDGER
    if VECTOR_CACHE_ENV in os.environ:
        return  # the caller's cache; set empty, there is none
    _RUN_VECTORS = tempfile.mkdtemp(prefix="toolscout-vectors-")
    os.environ[VECTOR_CACHE_ENV] = _RUN_VECTORS


def _compile_package() -> None:
    """Write the ``__pycache__`` of the ``toolscout`` package the run imports, where it is
    missing or stale. The suite starts several hundred ``toolscout`` processes; where
    ``$PYTHONDONTWRITEBYTECODE`` is set (a source checkout on PYTHONPATH in such an
    environment) none of them writes its bytecode, so each compiled every module it
    imported again (0.1-0.4 s of CPU a process). An unwritable tree is left as it is."""
    import compileall

    import toolscout

    with contextlib.suppress(OSError):
        compileall.compile_dir(Path(toolscout.__file__).parent, quiet=2)


def _compile_tests(config: pytest.Config) -> None:
    """Write the ``__pycache__`` of ``tests/`` before any worker starts, where it is missing
    or stale: each test module as pytest rewrites its asserts (pytest's own rewriting and
    file format, so a worker's import finds it and does not rewrite), every other module
    here (the kits) as Python compiles it. In a fresh clone each xdist worker otherwise
    rewrote and compiled all of them itself, at once with the others (~3.5 s of CPU a
    worker, three under ``make test``; round twenty-one, h/suite15). A pytest whose
    rewriting module lacks these names only loses the head start: the workers write the
    cache as before (:func:`pytest_make_collect_report`)."""
    import compileall

    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    tests = Path(__file__).resolve().parent
    state = config.stash.get(rewrite.assertstate_key, None)
    needed = ("PYC_TAIL", "_read_pyc", "_rewrite_test", "_write_pyc", "get_cache_dir")
    if state is None or not all(hasattr(rewrite, name) for name in needed):
        return
    patterns = config.getini("python_files") or ["test_*.py"]
    stale: list[tuple[Path, Path | None]] = []  # a source, and its rewritten file's name
    for source in sorted(tests.glob("*.py")):
        # pytest rewrites this file too (every conftest.py), before any hook of it runs
        rewritten = source.name == "conftest.py" or any(source.match(p) for p in patterns)
        if not rewritten:
            if not _compiled(source):
                stale.append((source, None))
            continue
        cache = rewrite.get_cache_dir(source)
        pyc = cache / (source.name[:-3] + rewrite.PYC_TAIL)
        # pytest's private functions: any failure (a changed signature in a later pytest
        # included, as pytest is not pinned) leaves the file to the worker, as before
        with contextlib.suppress(Exception):
            if rewrite._read_pyc(source, pyc) is None:
                stale.append((source, pyc))

    def write(source: Path, pyc: Path | None) -> None:
        if pyc is None:
            with contextlib.suppress(OSError):
                compileall.compile_file(source, quiet=2)
            return
        with contextlib.suppress(Exception):
            source_hash, code = rewrite._rewrite_test(source, config)
            pyc.parent.mkdir(exist_ok=True)
            rewrite._write_pyc(state, code, source_hash, pyc)

    _in_two(stale, write, at_least=8)


def _compiled(source: Path) -> bool:
    """Whether ``source``'s bytecode is there and of this source (the check compileall
    makes: the magic number, and the source's time and size in the header)."""
    import importlib.util

    try:
        st = source.stat()
        with open(importlib.util.cache_from_source(str(source)), "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    expect = (
        importlib.util.MAGIC_NUMBER
        + (0).to_bytes(4, "little")
        + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    )
    return head == expect


def _in_two(
    jobs: list[tuple[Path, Path | None]],
    do: Callable[[Path, Path | None], None],
    at_least: int,
) -> None:
    """``do`` each job, half of them in a forked child on another core when there are
    ``at_least`` to do: a fresh clone's test modules (~3.5 s of CPU before any worker starts,
    on one core while the other had only the niced lint) then take about half the wall
    time. Each file is written atomically by one process; a child that fails leaves its
    files to the workers, as when this is not done."""
    if len(jobs) < at_least or not hasattr(os, "fork") or len(os.sched_getaffinity(0)) < 2:
        for job in jobs:
            do(*job)
        return
    # largest first, dealt out in turn: two halves of about the same work
    jobs = sorted(jobs, key=lambda job: -job[0].stat().st_size)
    mine, theirs = jobs[0::2], jobs[1::2]
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            for job in theirs:
                do(*job)
        finally:
            os._exit(0)
    try:
        for job in mine:
            do(*job)
    finally:
        os.waitpid(pid, 0)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """In the controlling process: start removing the old runs' temporary directories that
    pytest removes as this run ends, in a thread, so that the end does not wait for it.
    Pytest keeps the last ``tmp_path_retention_count`` (3) numbered ``pytest-N`` directories
    and, at the end of a session, deletes the older ones (``cleanup_numbered_dir``): a whole
    run's is ~2 GB in ~3,000 entries, and deleting one took 4.7 s of waiting on the disk (0.24 s
    of CPU) while other work wrote to it, at the end of every run (round twenty-one, h/suite15).
    The same call with the same arguments, earlier: it skips a directory whose lock is held
    (another run still using it) as it does at the end, which does whatever is left. Not with
    ``--basetemp`` (no numbered directories) or pytest without these names."""
    config = session.config
    if hasattr(config, "workerinput") or config.option.basetemp:
        return
    try:
        from _pytest.pathlib import LOCK_TIMEOUT, cleanup_numbered_dir

        base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        keep = int(config.getini("tmp_path_retention_count"))
        if config.getini("tmp_path_retention_policy") == "none":
            keep = 0
        before = base.stat().st_mtime - LOCK_TIMEOUT
    except (ImportError, AttributeError, ValueError, OSError):
        return
    if keep == 0 or not base.name.startswith("pytest-"):
        return  # pytest removes every run's directory, this one's too, as it ends

    def clear() -> None:
        # a private function: whatever it raises, pytest's own call at the end remains
        with contextlib.suppress(Exception):
            cleanup_numbered_dir(base.parent, "pytest-", keep, before)

    threading.Thread(target=clear, name="old-basetemps", daemon=True).start()


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Let pytest keep a test module's rewritten asserts in ``tests/__pycache__`` even where
    ``$PYTHONDONTWRITEBYTECODE`` is set (this machine sets it): otherwise every worker of
    every run parses and rewrites all ~105 test modules again (~2.5 s of CPU a worker), as
    :func:`_compile_package` does for the package. Only while a test module is imported (what
    it imports for the first time is cached too); pytest writes each file atomically."""
    if not isinstance(collector, pytest.Module):
        yield
        return
    before, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        yield
    finally:
        sys.dont_write_bytecode = before


def pytest_unconfigure(config: pytest.Config) -> None:
    global _RUN_VECTORS, _RUN_LEDGER
    if _RUN_LEDGER is not None:
        with contextlib.suppress(OSError):
            os.unlink(_RUN_LEDGER)
        if os.environ.get(LEDGER_ENV) == _RUN_LEDGER:
            del os.environ[LEDGER_ENV]
        _RUN_LEDGER = None
    if _RUN_VECTORS is not None:
        shutil.rmtree(_RUN_VECTORS, ignore_errors=True)
        if os.environ.get(VECTOR_CACHE_ENV) == _RUN_VECTORS:
            del os.environ[VECTOR_CACHE_ENV]
        _RUN_VECTORS = None


#: most workers ``-n auto`` starts: the suite is mostly real processes (servers, the CLI,
#: PostgreSQL, Chromium) that use cores of their own, so many more workers than cores queue
MAX_WORKERS = 4
#: workers beyond one per core: a worker spends much of its time waiting on those processes
#: (the soak's fixed run, the conformance harness, slow-upstream tests), and with forked
#: processes (tests/fork_kit.py) one per core left the cores ~65% busy. The whole suite on
#: 2 cores, round thirteen: 7:05 with 2 workers, 5:50 with 3, 6:09 with 4
#: (docs/history/issue-24-targets.md, the merged tree of round thirteen)
EXTRA_WORKERS = 1

#: modules (or ``module::test``) that take longest, started first in this order when the
#: suite runs on several workers; a stale entry only changes the order, never what runs.
#: By the wall time of a full run (docs/history/test-suite-time.md): every unit of
#: 40 s or more there, so none starts in the last minutes and leaves a worker idle
HEAVY = (
    "test_mcp_conformance.py",  # one harness run for both modes: the longest unit
    "test_security.py",  # one group: its last test counts the cases of the others
    "test_soak.py",
    "test_readme.py",
    "test_cli_inputs.py::test_policy_beside_the_catalog_needs_a_flag_to_replace",
    "test_cli_inputs.py::test_reimport_cannot_widen_or_take_over_a_tool",
    "test_adapters_mcp_clients.py::test_inspector_cli_over_stdio_with_separator_or_short_option",
    "test_mcp_everything.py",  # one group, with a 14-second upstream operation
    "test_cli_inputs.py::test_messy_catalog_imports_with_warnings_and_is_searchable",
    "test_console_browser.py",
    "test_http.py",
    # a sixth of bfcl's catalog embedded (was all of it and the longest unit: 150-250 s)
    "test_cli.py::test_bfcl_index_then_search",
)

#: fixture scopes that tie a module's tests to one process
_SHARED_SCOPES = {"module", "class", "package"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-durations",
        type=int,
        default=None,
        metavar="N",
        help="list the N tests that used most CPU (user + system, the test process and the "
        "processes it started and reaped; 0: all), besides the run's total",
    )
    parser.addoption(
        "--cpu-json",
        default=None,
        metavar="PATH",
        help="write each test's CPU, wall time, processes and worker to PATH as JSON "
        "(benchmarks/suite_cost.py adds them up per file)",
    )


def _cpu_seconds() -> float:
    """User + system CPU of this process and of every child process it has reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


#: CPU seconds of each test (set-up, call and teardown) in this process
_CPU: dict[str, float] = {}
#: wall seconds of each test (set-up, call and teardown), and the worker that ran it
_WALL: dict[str, float] = {}
_WORKER_OF: dict[str, str] = {}
#: processes each test's own process started (set-up, call and teardown): every
#: ``subprocess.Popen``, asyncio's and anyio's included, and ``os.posix_spawn``
_SPAWNS: dict[str, int] = {}
_spawned = 0
#: when this process's first test started and its last one ended (``time.time()``)
_SPAN: list[float] = []
#: the controlling process: when the session started, and what each worker reported
_SESSION_START = time.time()
_WORKERS: dict[str, dict[str, float]] = {}


def _count_spawns(event: str, args: tuple[Any, ...]) -> None:
    global _spawned
    if event in ("subprocess.Popen", "os.posix_spawn"):
        _spawned += 1


sys.addaudithook(_count_spawns)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Record the test's CPU: its process's and its reaped child processes' (a server a
    module fixture started counts where it is stopped, at the module's last test), and
    how many processes it started (a module fixture's count at the module's first test)."""
    start, spawned, began = _cpu_seconds(), _spawned, time.perf_counter()
    if not _SPAN:
        _SPAN.append(time.time())
    yield
    _CPU[item.nodeid] = _CPU.get(item.nodeid, 0.0) + _cpu_seconds() - start
    _WALL[item.nodeid] = _WALL.get(item.nodeid, 0.0) + time.perf_counter() - began
    _WORKER_OF[item.nodeid] = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _SPAWNS[item.nodeid] = _SPAWNS.get(item.nodeid, 0) + _spawned - spawned
    _SPAN[1:] = [time.time()]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per core and :data:`EXTRA_WORKERS` more, at most
    :data:`MAX_WORKERS` (``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides)."""
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if env:
        return int(env)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min((cores or 1) + EXTRA_WORKERS, MAX_WORKERS))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: Any) -> None:
    """On the controlling process, as the workers start: one fork server for them all
    (``fork_kit.start_for_run``), which imports while they collect, instead of one a
    worker (~1.6 s of CPU each, three under ``make test``)."""
    import fork_kit

    fork_kit.start_for_run()


def _module_scoped(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in _SHARED_SCOPES for defs in info.name2fixturedefs.values())


def _weight(item: pytest.Item) -> int:
    """Position in :data:`HEAVY` (lower runs earlier); everything else after."""
    path = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    name = item.nodeid.split("::", 2)[1] if "::" in item.nodeid else ""
    name = name.split("[", 1)[0].split("@", 1)[0]  # no parameters, no xdist group
    for rank, entry in enumerate(HEAVY):
        if entry in (path, f"{path}::{name}"):
            return rank
    return len(HEAVY)


def _name_group(item: pytest.Item, name: str) -> None:
    """Put ``@name`` at the end of the item's node id, where the loadgroup scheduler reads
    the group. pytest-xdist does it itself by setting ``item._nodeid``, which pytest 9.2
    no longer reads (the id is ``item._id``, a ``NodeId``); there it is done here."""
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # an older pytest: xdist's own hook names the group
        return
    if isinstance(getattr(item, "_id", None), NodeId) and not item.nodeid.endswith(f"@{name}"):
        item._id = NodeId.parse(f"{item.nodeid}@{name}")  # type: ignore[attr-defined]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: put the tests of a module that share a fixture (module, class)
    or module state in one group, run by one worker, and order the work heaviest first:
    the entries of :data:`HEAVY`, then groups by size, then single tests. Every worker
    computes the same order (xdist checks); ``--no-loadscope-reorder`` keeps it."""
    if not hasattr(config, "workerinput"):
        return  # one process: the plain order
    group: dict[int, str] = {}
    for item in items:
        module = getattr(getattr(item, "module", None), "__name__", "")
        # test_security's last test counts the cases its property tests generated
        if _module_scoped(item) or module == "test_security":
            item.add_marker(pytest.mark.xdist_group(module))
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})  # fmt: skip
        if names:
            group[id(item)] = "_".join(names)
            _name_group(item, group[id(item)])
    size = Counter(group.values())
    items.sort(key=lambda item: (_weight(item), -size.get(group.get(id(item), ""), 0)))


@pytest.fixture(autouse=True)
def _close_audit_logs() -> Iterator[None]:
    """Close the audit logs a test opened through ``_gateway_kit.audit_log``."""
    yield
    kit = sys.modules.get("_gateway_kit")
    logs = getattr(kit, "OPEN_LOGS", None)
    while logs:
        logs.pop().close()


def _case_counts() -> Counter[str]:
    kit = sys.modules.get("_gateway_kit")
    return Counter(getattr(kit, "CASE_COUNTS", None) or {})


#: case counts the workers reported (on the controlling process of a parallel run)
_WORKER_COUNTS: Counter[str] = Counter()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker: hand this worker's case counts to the controlling process."""
    output: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["case_counts"] = dict(_case_counts())
        output["cpu"] = dict(_CPU)
        output["spawns"] = dict(_SPAWNS)
        output["wall"] = dict(_WALL)
        output["worker_of"] = dict(_WORKER_OF)
        output["span"] = {"tests": len(_CPU), "cpu": sum(_CPU.values()), "first": _SPAN[0],
                          "last": _SPAN[-1]} if _SPAN else {}  # fmt: skip


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the controlling process: add up the case counts a worker reported."""
    output = getattr(node, "workeroutput", {})
    _WORKER_COUNTS.update(output.get("case_counts", {}))
    _CPU.update(output.get("cpu", {}))
    _SPAWNS.update(output.get("spawns", {}))
    _WALL.update(output.get("wall", {}))
    _WORKER_OF.update(output.get("worker_of", {}))
    if output.get("span"):
        _WORKERS[str(getattr(getattr(node, "gateway", None), "id", "?"))] = output["span"]


def _forked_cpu() -> dict[str, float]:
    """CPU seconds of the processes the fork servers forked for each test and reaped (the
    ledger's lines: ``tests/forkserver.py``), by the test's node id; a process started in a
    module fixture's set-up counts for the test being set up."""
    forked: dict[str, float] = {}
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return forked
    with contextlib.suppress(OSError), open(path, encoding="utf-8") as lines:
        for line in lines:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                entry = json.loads(line)
                test = str(entry["test"]).rsplit(" (", 1)[0]  # without " (call)"
                forked[test] = forked.get(test, 0.0) + float(entry["cpu"])
    return forked


def _cpu_summary(terminalreporter: pytest.TerminalReporter, forked: dict[str, float]) -> None:
    """``--cpu-durations N``: the N tests and the N files that used most CPU (with the
    processes they started, forked ones included), and the run's total."""
    top = terminalreporter.config.getoption("cpu_durations")
    if top is None or not _CPU:
        return
    total = {nodeid: seconds + forked.get(nodeid, 0.0) for nodeid, seconds in _CPU.items()}
    files: dict[str, float] = {}
    file_forked: dict[str, float] = {}
    file_spawns: Counter[str] = Counter()
    for nodeid, seconds in total.items():
        path = nodeid.split("::", 1)[0]
        files[path] = files.get(path, 0.0) + seconds
        file_forked[path] = file_forked.get(path, 0.0) + forked.get(nodeid, 0.0)
        file_spawns[path] += _SPAWNS.get(nodeid, 0)
    terminalreporter.section("most CPU (user + system, with reaped and forked child processes)")
    terminalreporter.write_line("     CPU   forked  processes  test")
    for nodeid, seconds in sorted(total.items(), key=lambda kv: -kv[1])[: top or None]:
        terminalreporter.write_line(
            f"{seconds:8.2f}s {forked.get(nodeid, 0.0):7.2f}s {_SPAWNS.get(nodeid, 0):6d}     "
            f"{nodeid}"
        )
    terminalreporter.write_line("     CPU   forked  processes  file")
    for path, seconds in sorted(files.items(), key=lambda kv: -kv[1])[: top or None]:
        terminalreporter.write_line(
            f"{seconds:8.2f}s {file_forked[path]:7.2f}s {file_spawns[path]:6d}     {path}"
        )
    terminalreporter.write_line(
        f"total: {sum(total.values()):.1f}s over {len(_CPU)} tests ({sum(forked.values()):.1f}s "
        f"of it forked), {sum(_SPAWNS.values())} processes started by the tests' own processes"
    )
    # how evenly the workers shared the run: the run ends with the last one
    for name, span in sorted(_WORKERS.items()):
        terminalreporter.write_line(
            f"{name}: {span['tests']:.0f} tests, {span['cpu']:.1f}s of CPU, its tests from "
            f"{span['first'] - _SESSION_START:.0f}s to {span['last'] - _SESSION_START:.0f}s "
            "after the start"
        )


def _write_cpu_json(path: str, forked: dict[str, float]) -> None:
    """``--cpu-json PATH``: every test's figures (``benchmarks/suite_cost.py`` reads them)."""
    tests = {
        nodeid: {
            "cpu": round(seconds, 3),
            "forked_cpu": round(forked.get(nodeid, 0.0), 3),
            "wall": round(_WALL.get(nodeid, 0.0), 3),
            "processes": _SPAWNS.get(nodeid, 0),
            "worker": _WORKER_OF.get(nodeid, "main"),
        }
        for nodeid, seconds in _CPU.items()
    }
    workers = {
        name: {"tests": span["tests"], "cpu": round(span["cpu"], 3),
               "first": round(span["first"] - _SESSION_START, 3),
               "last": round(span["last"] - _SESSION_START, 3)}
        for name, span in _WORKERS.items()
    }  # fmt: skip
    unmatched = {k: round(v, 3) for k, v in forked.items() if k not in _CPU}
    Path(path).write_text(
        json.dumps({"tests": tests, "workers": workers, "forked_elsewhere": unmatched}, indent=1)
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    forked = _forked_cpu()
    _cpu_summary(terminalreporter, forked)
    out = terminalreporter.config.getoption("cpu_json")
    if out and not hasattr(terminalreporter.config, "workerinput"):
        _write_cpu_json(out, forked)
    counts = _case_counts() + _WORKER_COUNTS
    if not counts:
        return
    terminalreporter.section("security suite: generated cases")
    for name, n in sorted(counts.items()):
        terminalreporter.write_line(f"{name}: {n}")
    terminalreporter.write_line(f"total: {sum(counts.values())}")
