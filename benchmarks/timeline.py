"""Where a new process's time goes: perf_counter marks around the steps of opening a
catalog and answering its first discovery, on every thread (``coldstart.py --timeline``).

:func:`install` puts an import hook in front of the others: it times the import of a
few heavy modules, and as each watched toolscout module finishes executing it wraps the
functions named in :data:`WATCH` (before any importer binds them), so every call of
them records (name, thread, start, end). Nothing in toolscout changes; the wrappers cost
a few microseconds a call. :func:`marks` returns the records as seconds from process
start (the parent's clock before it spawned the process).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import threading
import time
from typing import Any

#: heavy imports timed as a whole (their own imports included)
IMPORTS = {
    "numpy",
    "onnxruntime",
    "tokenizers",
    "snowballstemmer",
    "toolscout",
    "sqlite3",
    "toolscout.service",
    "catalog_gen",
    "tiktoken",
}
#: module -> functions and methods ("Class.method") wrapped after the module executed
WATCH: dict[str, tuple[str, ...]] = {
    "toolscout.service": ("Toolscout.open", "Toolscout.discover"),
    "toolscout.stores": ("open_store",),
    "toolscout.discovery.opening": ("stored_embedder", "prefetch_models"),
    "toolscout.discovery.catalog": (
        "Catalog.__init__", "Catalog.refresh", "Catalog.entitle", "Catalog.specs_of",
    ),
    "toolscout.discovery.derived": (
        "DerivedState._preload_tokens", "DerivedState.phrases", "DerivedState.names",
        "DerivedState.finders", "DerivedState.entitled_tokens", "_kept_key",
    ),
    "toolscout.discovery.cardtable": ("CardTable.__init__", "CardTable.many"),
    "toolscout.stores.sqlite": (
        "SQLiteStore.__init__", "SQLiteStore.document_frequency", "SQLiteStore.cards_of",
        "SQLiteStore.tenant_share", "SQLiteStore._ids", "SQLiteStore.lexical",
        "SQLiteStore.dense", "SQLiteStore._kept_dense", "SQLiteStore._dense_index",
        "SQLiteStore.prepare_lexical", "SQLiteStore.prepare_dense",
    ),
    "toolscout.embed.minilm": (
        "MiniLMEmbedder._load", "MiniLMEmbedder.embed", "_checked", "MiniLMEmbedder._make_session",
    ),
    "toolscout.embed.session": ("from_kept", "make_and_keep", "file_check"),
    "toolscout.discovery.lexical": ("_stemmer",),
    "toolscout.discovery.tokencount": ("encoding",),
    "toolscout.discovery.pipeline": (
        "select", "retrieve_or_skip", "inject", "exact_mentions", "top_k",
        "name_first_or_abstain",
    ),
    "toolscout.discovery.search": ("parse_query", "Retriever.run", "Retriever._once"),
    "toolscout.telemetry.log": ("open_log",),
}  # fmt: skip

_RECORDS: list[tuple[str, str, float, float]] = []
_OFFSET = 0.0  # time.time() - perf_counter() at install


def _record(name: str, start: float) -> None:
    _RECORDS.append((name, threading.current_thread().name, start, time.perf_counter()))


def _timed(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _record(name, start)

    return wrapper


def _wrap(module: Any, names: tuple[str, ...]) -> None:
    for dotted in names:
        owner: Any = module
        *path, attr = dotted.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        fn = owner.__dict__.get(attr) if owner is not None else None
        if fn is None:
            continue
        if isinstance(fn, classmethod | staticmethod):
            kind = type(fn)
            setattr(owner, attr, kind(_timed(dotted, fn.__func__)))
        elif callable(fn):
            setattr(owner, attr, _timed(dotted, fn))


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, name: str) -> None:
        self.inner, self.name = inner, name

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        start = time.perf_counter()
        self.inner.exec_module(module)
        if self.name in IMPORTS:
            _record(f"import {self.name}", start)
        if self.name in WATCH:
            _wrap(module, WATCH[self.name])


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in IMPORTS and name not in WATCH:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, name)
        return spec


def install(t0: float) -> None:
    """Start recording (``t0``: the parent's ``time.time()`` when it spawned us)."""
    global _OFFSET
    _OFFSET = time.time() - time.perf_counter()
    sys.meta_path.insert(0, _Finder())
    _RECORDS.append(("interpreter up", "MainThread", t0 - _OFFSET, time.perf_counter()))


def marks(t0: float, end: float) -> list[dict[str, Any]]:
    """Every record as seconds from ``t0`` (by start), up to ``end`` (both ``time.time()``)."""
    out = []
    for name, thread, start, stop in sorted(_RECORDS, key=lambda r: r[2]):
        if start + _OFFSET > end:
            continue
        out.append(
            {"name": name, "thread": thread, "start": round(start + _OFFSET - t0, 4),
             "end": round(stop + _OFFSET - t0, 4)}
        )  # fmt: skip
    return out
