"""Checks on the ``--db`` file before a command opens it, so bad input is one clear line.

They run on a read-only connection (or none at all) and never change the file:
a zero-byte or foreign file is not silently initialised, a corrupted one is not
touched, a read-only or locked one is refused before any work is done.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from toolscout.errors import StoreError

SQLITE_HEADER = b"SQLite format 3\x00"
#: how long ``index`` waits for another writer before giving up
LOCK_WAIT_S = 2.0


def _sqlite_error(path: Path, exc: sqlite3.Error) -> StoreError:
    text = str(exc)
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return StoreError(f"{path} is corrupted ({text}); restore it from a backup or re-index")
    if "locked" in text or "busy" in text:
        return StoreError(
            f"{path} is locked by another writer ({text}); nothing was changed, try again"
        )
    return StoreError(f"cannot use {path}: {text}")


def _header(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None


def _tables(path: Path) -> set[str]:
    """Table names, on a read-only connection; corruption is found here."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT_S)
    except sqlite3.Error as exc:
        raise _sqlite_error(path, exc) from None
    try:
        rows = con.execute("PRAGMA quick_check(1)").fetchall()
        if rows != [("ok",)]:
            problem = " ".join(str(r[0]) for r in rows)
            raise StoreError(f"{path} is corrupted ({problem}); restore it from a backup")
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        raise _sqlite_error(path, exc) from None
    finally:
        con.close()


def check_readable(path: Path) -> None:
    """``path`` is an existing, intact toolscout catalog (for search, schema, ...)."""
    if not path.exists():
        raise StoreError(f"no catalog at {path}; run `toolscout index CATALOG --db {path}` first")
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a toolscout catalog")
    if path.stat().st_size == 0:
        raise StoreError(
            f"{path} is an empty file, not a toolscout catalog; "
            f"run `toolscout index CATALOG --db {path}` to create one"
        )
    if _header(path) != SQLITE_HEADER:
        raise StoreError(f"{path} is not a toolscout catalog (not an SQLite database)")
    if "tools" not in _tables(path):
        raise StoreError(f"{path} is an SQLite database but not a toolscout catalog (no tools)")


def check_writable(path: Path) -> None:
    """``path`` may be created or written as a catalog (for index, demo); nothing is changed.

    A zero-byte file counts as a new catalog: that is what ``touch`` or ``mktemp`` leave.
    """
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a toolscout catalog")
    folder = path.parent if str(path.parent) else Path(".")
    if not path.exists():
        if folder.exists() and not os.access(folder, os.W_OK):
            raise StoreError(f"cannot create {path}: the directory {folder} is not writable")
        return
    mode = path.stat().st_mode
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise StoreError(
            f"{path} is read-only (mode {stat.S_IMODE(mode):04o}); make it writable or "
            "choose another --db"
        )
    if not os.access(folder, os.W_OK):
        raise StoreError(
            f"cannot write {path}: its directory {folder} is not writable (SQLite needs it)"
        )
    if path.stat().st_size == 0:
        return
    if _header(path) != SQLITE_HEADER:
        raise StoreError(f"{path} is not a toolscout catalog (not an SQLite database)")
    _tables(path)
    _check_not_locked(path)


def _check_not_locked(path: Path) -> None:
    """Take and release the write lock once: another writer holding it is refused now,
    before minutes of embedding, rather than after."""
    try:
        con = sqlite3.connect(str(path), timeout=LOCK_WAIT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise _sqlite_error(path, exc) from None
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")
    except sqlite3.Error as exc:
        raise _sqlite_error(path, exc) from None
    finally:
        con.close()
