"""Derived state a catalog keeps between processes, and building it cheaply.

Maps kept as rows (:class:`KeptMap`, :func:`keep_maps`, :func:`read_maps`): a part of a
catalog's derived state written once and read one key at a time by later processes, with
its damage check and its readers' holds. And :func:`no_gc`, under which a catalog builds its
large structures, :func:`built_once` and :func:`code_digest`, by which a kept thing names the
code that built it. The token counts kept the same way as whole blobs are in
:mod:`toolscout.discovery.kepttokens`.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import json
import secrets
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TypeVar, cast

from toolscout.stores.base import HELD_PART

__all__ = [
    "KeptMap",
    "KeptSet",
    "MARK",
    "MARKED_PART",
    "MARKED_READ",
    "built_once",
    "code_digest",
    "differing",
    "keep_maps",
    "no_gc",
    "read_ahead",
    "read_maps",
    "row_store",
    "stale_maps",
]

V = TypeVar("V")


@contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while a large structure is built (100k cards,
    a kept index of a million small containers): each of its full passes walks every
    object built so far, which made reading the kept phrase index at 100k tools about
    twice as slow. While it is paused, garbage cycles are only collected later; what is
    built is the same."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def built_once(build: Callable[[], Mapping[str, Any]]) -> Callable[[], Mapping[str, Any]]:
    """``build()`` run at most once, under a lock and with the collector paused, its result
    kept: a derived structure whose kept parts are each replaced with its own part when
    found damaged (``read_maps``' ``rebuild``), built once however many parts ask."""
    built: list[Mapping[str, Any]] = []
    lock = threading.Lock()

    def whole() -> Mapping[str, Any]:
        with lock:
            if not built:
                with no_gc():
                    built.append(build())
            return built[0]

    return whole


def code_digest(*modules: ModuleType, seed: bytes = b"") -> str:
    """The part of a kept key that names the code which made what is kept: the first 16
    hex digits of the sha256 of ``seed`` and the modules' source files, in order."""
    digest = hashlib.sha256(seed)
    for module in modules:
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


# -- maps kept as rows, read one key at a time ---------------------------------------
#: a map's values as kept: JSON text, decoded by the map's kind
KIND_STR = "str"  # a string
KIND_SET = "set"  # a frozenset of strings
KIND_LIST = "list"  # a list of strings
KIND_PAIRS = "pairs"  # a list of (string, string) pairs
KIND_FLAG = "flag"  # a member of a set (the value is 1)
_MISSING: Any = object()
#: the header part that says each part of the map also keeps a row under :data:`MARK`. Its
#: rows are removed with the header gone first and then in key order, the mark's key
#: first of all (stores/sqlite_derived.py: ``_drop_rows``), or in one transaction
#: (``_replace_rows``): a read that finds the mark found every row it asked for that was
#: kept, so a key it misses is not kept, with no second read of the header. A toolscout
#: before the mark does not know the part and never reads such a map
MARKED_PART = "~marked"
#: the key of the mark: before every other key, and no map's (a map with such a key is
#: kept unmarked)
MARK = ""
#: the most keys a read asks for beside the mark: the SQLite store reads at most 500 names
#: in one statement (one snapshot); a read of more keys is checked against the header
MARKED_READ = 499


class RowStore(Protocol):
    """What a store offers to keep derived maps as indexed rows (SQLite does)."""

    def derived(self, key: str) -> tuple[int, bytes] | None: ...

    def derived_rows(self, token: str, part: str, names: Sequence[str]) -> dict[str, str]: ...

    def derived_part(self, token: str, part: str) -> list[tuple[str, str]]: ...

    def derived_count(self, token: str, part: str) -> int: ...

    def hold_derived(self, token: str) -> Callable[[], None] | None: ...

    def set_derived_rows(
        self,
        key: str,
        generation: int,
        header: bytes,
        token: str,
        parts: Mapping[str, Iterable[tuple[str, str]]],
    ) -> bool: ...


def row_store(store: object) -> RowStore | None:
    """``store`` if it can keep derived maps as rows, else None (they are built in memory)."""
    names = ("derived", "derived_rows", "derived_part", "derived_count", "hold_derived",
             "set_derived_rows")  # fmt: skip
    ok = all(callable(getattr(store, n, None)) for n in names)
    return cast(RowStore, store) if ok else None


class Damaged(Exception):
    """A kept row is not what its kind says: the map is rebuilt from the catalog."""


def _decode(kind: str, raw: str) -> Any:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise Damaged(str(exc)) from exc
    if kind == KIND_STR and isinstance(value, str):
        return value
    if kind == KIND_FLAG and value == 1:
        return True
    if isinstance(value, list):
        if kind == KIND_SET and all(isinstance(v, str) for v in value):
            return frozenset(value)
        if kind == KIND_LIST and all(isinstance(v, str) for v in value):
            return value
        if kind == KIND_PAIRS and all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)
            for v in value
        ):
            return [(a, b) for a, b in value]
    raise Damaged(f"a kept {kind} value is {raw[:80]!r}")


def encode(kind: str, value: Any) -> str:
    """The kept text of one value of a map of ``kind``."""
    if kind == KIND_SET:
        return json.dumps(sorted(value), ensure_ascii=False, separators=(",", ":"))
    if kind == KIND_FLAG:
        return "1"
    if kind == KIND_PAIRS:
        return json.dumps([list(p) for p in value], ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class KeptMap(Mapping[str, V]):
    """A derived map kept as rows of the store, each key read (and decoded) when first
    asked for, then held: a new process answers its first discovery after reading the few
    hundred keys it needs, not after unpickling a million objects.

    On first use the number of kept rows is checked against the header's; a count that
    differs, or a row that does not decode as its kind, means the map is not used: it is
    ``rebuild()``-ed whole from the catalog instead (the same contents), never an error.
    So is a read that misses keys once the header under ``key`` no longer names the
    token (its rows were removed: an older generation's, or another version's no reader
    held). ``holder``: what holds the rows against removal while the map is alive.

    ``marked``: each part also keeps a row under :data:`MARK`, asked for with every read
    of a few keys: found, the keys the read missed are not kept; not found, the rows were
    removed (the map is rebuilt). A hold is no such proof: it keeps the rows from another
    version's removal for their own generation, not from a newer generation's write
    under the same key, which removes them whatever holds them."""

    def __init__(self, store: RowStore, token: str, part: str, kind: str, count: int,
                 rebuild: Callable[[], Mapping[str, V]], key: str = "",
                 holder: object = None, *, marked: bool = False) -> None:  # fmt: skip
        self._store, self._token, self._part, self._kind = store, token, part, kind
        self._count, self._key, self._holder = count, key, holder
        self._marked = marked
        self._rebuild = rebuild
        self._held: dict[str, Any] = {}
        self._whole: Mapping[str, V] | None = None
        self._checked = False
        self._lock = threading.Lock()

    def _fallback(self) -> Mapping[str, V]:
        with self._lock:
            if self._whole is None:
                self._whole = self._rebuild()
            return self._whole

    def _check(self) -> bool:
        if not self._checked:
            try:
                rows = self._count + 1 if self._marked else self._count
                same = self._store.derived_count(self._token, self._part) == rows
            except Exception:  # an unreadable table is a damaged one
                same = False
            if not same:
                self._fallback()
            self._checked = True
        return self._whole is None

    def get(self, key: str, default: Any = None) -> Any:
        # once checked, the rows are read without calling _check (the hot path)
        if self._whole is not None or not (self._checked or self._check()):
            return cast(Mapping[str, V], self._whole).get(key, default)
        hit = self._held.get(key, _MISSING)
        if hit is _MISSING:
            self.read_ahead((key,))
            if self._whole is not None:  # damaged or unreadable: the map was rebuilt
                return self._whole.get(key, default)
            hit = self._held[key]
        return default if hit is None else hit

    def read_ahead(self, keys: Iterable[str]) -> None:
        """Hold the values of ``keys`` not held yet, read in one store read (:meth:`get`
        reads its one key through it; a request's few dozen new keys read at once)."""
        if self._whole is not None or not (self._checked or self._check()):
            return
        new = [k for k in dict.fromkeys(keys) if k not in self._held]
        if not new:
            return
        marked = self._marked and len(new) <= MARKED_READ
        if self._marked and MARK in new:  # never a key of a marked map
            self._held[MARK] = None
            new.remove(MARK)
            if not new:
                return
        try:
            asked = [MARK, *new] if marked else new
            raw = self._store.derived_rows(self._token, self._part, asked)
            if marked and raw.pop(MARK, None) is None:
                raise Damaged(f"the rows of {self._key} were removed while read")
            got = {k: None if k not in raw else _decode(self._kind, raw[k]) for k in new}
            if not marked and len(raw) < len(new) and not self._still_kept():
                raise Damaged(f"the rows of {self._key} were removed while read")
        except Exception:  # damaged, unreadable or removed: the whole map is rebuilt
            self._fallback()
            return
        self._held.update(got)

    def _still_kept(self) -> bool:
        """Whether the header under the map's key still names its token: read after rows
        that missed keys, it says those rows were all there when read (a header is
        removed before its rows, never after)."""
        if not self._key:
            return True
        header = _header(self._store.derived(self._key))
        return header is not None and header.get("token") == self._token

    def __getitem__(self, key: str) -> V:
        hit = self.get(key, _MISSING)
        if hit is _MISSING:
            raise KeyError(key)
        return cast(V, hit)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _MISSING) is not _MISSING

    def _all(self) -> Mapping[str, V]:
        if self._whole is not None or not self._check():
            return cast(Mapping[str, V], self._whole)
        try:
            rows = self._store.derived_part(self._token, self._part)
            if self._marked:
                rows = [(k, raw) for k, raw in rows if k != MARK]
            whole = {k: _decode(self._kind, raw) for k, raw in rows}
        except Exception:
            return self._fallback()
        if len(whole) != self._count:
            return self._fallback()
        with self._lock:
            if self._whole is None:
                self._whole = whole
            return self._whole

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all()) if self._whole is not None or not self._check() else self._count


class KeptSet(AbstractSet[str]):
    """A kept set of strings, its membership read per element (a :class:`KeptMap` of flags)."""

    def __init__(self, flags: KeptMap[bool]) -> None:
        self._flags = flags

    def __contains__(self, item: object) -> bool:
        return item in self._flags

    def read_ahead(self, items: Iterable[str]) -> None:
        """Hold the membership of ``items`` (:meth:`KeptMap.read_ahead`)."""
        self._flags.read_ahead(items)

    def __iter__(self) -> Iterator[str]:
        return iter(self._flags)

    def __len__(self) -> int:
        return len(self._flags)


def read_ahead(m: object, keys: Iterable[str]) -> None:
    """Have a map read from the store per key (a kept map or set, the SQLite store's
    vocabulary) hold ``keys`` in one store read before they are looked up one by one; a
    mapping without ``read_ahead`` holds everything already, and nothing is done."""
    hook = getattr(m, "read_ahead", None)
    if callable(hook):
        hook(keys)


def keep_maps(
    store: RowStore,
    key: str,
    generation: int,
    maps: Mapping[str, tuple[str, Mapping[str, Any] | AbstractSet[str]]],
    extra: Mapping[str, Any] | None = None,
    *,
    in_steps: bool = False,
) -> bool:
    """Keep ``maps`` (part → (kind, map or set)) as rows under a fresh token, and a header
    naming the token, each part's row count and ``extra`` (JSON) under ``key``, all for
    ``generation`` (written only while it is current). True if written. ``in_steps``: in
    many short transactions when the store can (a background writer's way)."""
    token = secrets.token_hex(8)
    counts = {part: len(m) for part, (_, m) in maps.items()}
    counts[HELD_PART] = 0  # this version's readers hold the rows while they read them
    marked = all(MARK not in m for _, m in maps.values())
    if marked:
        counts[MARKED_PART] = 0  # each part keeps a row under MARK besides its own
    header = json.dumps({"token": token, "counts": counts, "extra": dict(extra or {})})

    def rows(kind: str, m: Mapping[str, Any] | AbstractSet[str]) -> Iterator[tuple[str, str]]:
        mark = ((MARK, "1"),) if marked else ()
        if isinstance(m, Mapping):
            return itertools.chain(mark, ((k, encode(kind, v)) for k, v in m.items()))
        return itertools.chain(mark, ((k, "1") for k in m))

    parts = {part: rows(kind, m) for part, (kind, m) in maps.items()}
    stepped = getattr(store, "set_derived_rows_in_steps", None) if in_steps else None
    write = stepped if callable(stepped) else store.set_derived_rows
    return bool(write(key, generation, header.encode(), token, parts))


def read_maps(
    store: RowStore,
    key: str,
    generation: int,
    kinds: Mapping[str, str],
    rebuild: Callable[[str], Mapping[str, Any]],
) -> tuple[dict[str, Any], Any] | None:
    """The maps kept under ``key`` for ``generation`` (part → :class:`KeptMap`, or
    :class:`KeptSet` for flags) and the header's extra, or None when there are none for
    this generation or the header is not exactly one of ours. ``rebuild(part)`` is what a
    damaged part is replaced with."""
    kept = store.derived(key)
    if kept is None or kept[0] != generation:
        return None
    header = _header(kept)
    if header is None:
        return None
    try:
        token, counts, extra = header["token"], dict(header["counts"]), header["extra"]
    except (KeyError, TypeError, ValueError):  # a header without these fields
        return None
    held = counts.pop(HELD_PART, None) == 0
    marked = counts.pop(MARKED_PART, None) == 0
    if not isinstance(token, str) or set(counts) != set(kinds):
        return None
    if not all(type(n) is int and n >= 0 for n in counts.values()):
        return None
    holder = _Holder() if held else None
    if holder is not None:  # held, then the header read again: not removed meanwhile
        release = store.hold_derived(token)
        if release is None:
            return None
        weakref.finalize(holder, release)
        if store.derived(key) != kept:
            return None  # released with the holder
    out: dict[str, Any] = {}
    for part, kind in kinds.items():
        m: KeptMap[Any] = KeptMap(store, token, part, kind, counts[part],
                                  _part_of(rebuild, part), key, holder,
                                  marked=marked)  # fmt: skip
        out[part] = KeptSet(m) if kind == KIND_FLAG else m
    return out, extra


class _Holder:
    """Held by every map of one kept header: when the last is gone, so is the hold on its
    rows (``weakref.finalize``)."""


def stale_maps(
    store: RowStore,
    name: str,
    key: str,
    generation: int,
    kinds: Mapping[str, str],
    rebuild: Callable[[str], Mapping[str, Any]],
) -> dict[str, Any] | None:
    """The maps ``name`` kept for ``generation`` under another key than ``key`` (another
    version of toolscout kept them: the key names a digest of the code), when they are of
    this version's parts and kinds; else None. What a new version serves while it derives
    its own in the background, instead of deriving them on its first request."""
    keys = getattr(store, "derived_keys", None)
    if not callable(keys):
        return None
    others = [
        k for k, kept_generation in keys(f"{name}:") if k != key and kept_generation == generation
    ]
    for other in sorted(others, key=lambda k: not _held(store, k)):
        found = read_maps(store, other, generation, kinds, rebuild)
        if found is not None:
            return found[0]
    return None


def _held(store: RowStore, key: str) -> bool:
    """Whether the map kept under ``key`` is one its readers hold (:data:`HELD_PART`): of
    several versions' maps, such a one is served first — its rows are not removed while
    served, and the store checks it by a kept count, where an older version's rows are
    counted (0.18 s for the name table at 100k tools over pages not in memory)."""
    header = _header(store.derived(key))
    return (
        header is not None
        and isinstance(header.get("counts"), dict)
        and (HELD_PART in header["counts"])
    )


def _header(kept: tuple[int, bytes] | None) -> dict[str, Any] | None:
    """The JSON header of a kept map (``store.derived(key)``), or None: none kept, or not
    a JSON object."""
    if kept is None:
        return None
    try:
        header = json.loads(kept[1])
    except (ValueError, TypeError):
        return None
    return header if isinstance(header, dict) else None


def _part_of(
    rebuild: Callable[[str], Mapping[str, Any]], part: str
) -> Callable[[], Mapping[str, Any]]:
    def whole() -> Mapping[str, Any]:
        return rebuild(part)

    return whole


def differing(
    served: Mapping[str, str], now: Mapping[str, str], side: Callable[[], Any] | None = None
) -> frozenset[str]:
    """The keys ``served`` and ``now`` give different values (a key in one only is left
    out). When both are :class:`KeptMap` s of one part still read from rows and ``side()``
    opens a store that can (``derived_differ``), compared inside the store on that
    connection: at 100k names ~0.2 s of SQLite that gives the interpreter up, against
    ~1.2 s of Python holding it while requests ran beside (their kept text compared: a
    value another version encoded otherwise counts as different, the safe side); else
    compared whole, here."""
    if isinstance(served, KeptMap) and isinstance(now, KeptMap) and callable(side):
        a, b = served, now
        if a._whole is None and b._whole is None and a._part == b._part:
            store = None
            try:
                with suppress(Exception):  # then compared here
                    store = side()
                    differ = getattr(store, "derived_differ", None)
                    if callable(differ) and a._check() and b._check():
                        return frozenset(differ(a._token, b._token, a._part))
            finally:
                if store is not None:
                    with suppress(Exception):
                        store.close()
    whole = dict(now)
    return frozenset(k for k, v in served.items() if whole.get(k, v) != v)
