"""Deriving a large catalog's kept parts again in a child process.

A version that finds only another version's kept parts for the current generation serves
those and derives its own behind (:meth:`~toolscout.discovery.derived.DerivedState._rederive`).
At 100k tools that is ~9 s of pure-Python work (reading every card, the phrase index, the
rows' encoding). On a thread of the serving process it held the interpreter 5 ms at a time
while every request's SQLite reads, which give it up and take it back row by row, waited
for it at each row: a request of ~0.3 s took 4-11 s. So from :data:`CHILD_FROM` tools it
runs in a child process (:func:`main`, from the same toolscout) over the same file:
the child builds the parts and keeps them under this version's keys; the serving process
then reads them per key, as a later process would, and puts them in place of the stale
ones. The child refuses (and the caller derives on its thread, as below that size) when
its own code gives other keys than the caller's (toolscout changed on disk meanwhile) or
the generation moved.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from toolscout.discovery.cardtable import CardTable
from toolscout.discovery.kept import built_once, keep_maps, read_maps
from toolscout.discovery.keptparts import (
    FINDER_KINDS,
    NAME_KINDS,
    PHRASE_KINDS,
    finder_parts,
    kept_key,
    name_parts,
    phrase_parts,
)

__all__ = ["CHILD_FROM", "CHILD_TIMEOUT_S", "derive_in_child", "main"]

#: from this many tools, another version's kept parts are derived again in a child process
CHILD_FROM = 20_000
#: the child is given this long (then killed; the caller derives on its thread)
CHILD_TIMEOUT_S = 900.0
#: the child's exit codes
_OK, _USAGE, _OTHER_CODE, _MOVED = 0, 2, 3, 4


def derive_in_child(path: str | Path, generation: int, keys: Mapping[str, str]) -> bool:
    """Derive the parts ``keys`` names (part -> this version's key) of the catalog file at
    ``path`` for ``generation`` in a child process, which keeps them under those keys; True
    if it did (each is then kept, or was already)."""
    if not Path(sys.executable or "-").name.lower().startswith(("python", "pypy")):
        return False  # embedded (a server binary's own interpreter): not started as one
    # toolscout from the directory this process imported it from (the child checks that
    # its code gives the same keys)
    package = str(Path(__file__).resolve().parents[2])
    args = [sys.executable, "-c", _CHILD, package, str(path), str(generation)]
    args += [f"{name}={key}" for name, key in keys.items()]
    try:
        done = subprocess.run(
            args, stdin=subprocess.DEVNULL, capture_output=True, timeout=CHILD_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == _OK


_CHILD = (
    "import sys\n"
    "if sys.argv[1] not in sys.path: sys.path.insert(0, sys.argv[1])\n"
    "from toolscout.discovery.rederiving import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


class _Source:
    """What the builders read of a generation: its cards (read when first asked for) and
    the lexical index's document frequencies."""

    def __init__(self, store: Any) -> None:
        self.table = CardTable(store)
        self.df, _ = store.document_frequency()

    @property
    def cards(self) -> Any:
        return self.table.all()


def _derive(store: Any, generation: int, keys: Mapping[str, str]) -> int:
    if store.generation() != generation:
        return _MOVED
    if any(kept_key(name) != key for name, key in keys.items()):
        return _OTHER_CODE  # not the caller's code: it derives them itself
    source = _Source(store)
    name_terms: Mapping[str, frozenset[str]] | None = None

    def made(name: str, kinds: Mapping[str, str], build: Callable[[], Mapping[str, Any]]) -> Any:
        key = kept_key(name)
        whole = built_once(build)
        found = read_maps(store, key, generation, kinds, lambda p: whole()[p])
        if found is not None:
            return found[0]
        parts = whole()
        if not keep_maps(store, key, generation, {p: (kinds[p], parts[p]) for p in kinds},
                         in_steps=True):  # fmt: skip
            raise _Moved
        return parts

    try:
        if "phrase-index" in keys or "finder-index" in keys:
            name_terms = made("phrase-index", PHRASE_KINDS, lambda: phrase_parts(source))["name"]
        if "name-table" in keys:
            made("name-table", NAME_KINDS, lambda: name_parts(source))
        if "finder-index" in keys and name_terms is not None:
            terms = name_terms
            made("finder-index", FINDER_KINDS, lambda: finder_parts(dict(terms)))
    except _Moved:
        return _MOVED
    return _OK


class _Moved(Exception):
    """The generation moved while the child derived: nothing more is kept for it."""


def main(argv: Sequence[str]) -> int:
    """``PATH GENERATION NAME=KEY...``: derive and keep those parts of the catalog at PATH."""
    if len(argv) < 3 or not argv[1].isdigit() or not all("=" in a for a in argv[2:]):
        return _USAGE
    from toolscout.stores.sqlite import SQLiteStore

    with suppress(AttributeError, OSError):
        os.nice(5)  # beside the process that serves requests, not ahead of it
    keys = dict(a.split("=", 1) for a in argv[2:])
    store = SQLiteStore(argv[0])
    try:
        return _derive(store, int(argv[1]), keys)
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
