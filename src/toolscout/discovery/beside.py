"""BM25 beside the query encoder: a request's lexical searches run on a pool thread while
its texts are encoded on the caller's.

The lexical searches of a request do not need its vectors: the whole request's terms are
known when it is parsed, and so are the terms of each part it is read in
(:func:`~toolscout.discovery.parts.part_terms`). ONNX Runtime and SQLite both release the
GIL, so the searches cost the request no wall time while the encoder runs. A request read
in parts encodes its parts too (a second encoder run for most), and its parts' searches
(one a part) ran after it on the caller's thread; they now run on the pool beside it, in
one task after the whole request's (one store connection, used by one thread at a time as
before). Each search is the same call with the same terms as before: the same hits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from toolscout.stores.base import Hits

_T = TypeVar("_T")

_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def pool() -> ThreadPoolExecutor:
    """The threads BM25 runs on beside the query encoder, created on first use (no side
    effect on import)."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=2, thread_name_prefix="toolscout-bm25"))
        return _POOL[0]


def searched_beside(
    encode: Callable[[], _T],
    lexical: Callable[[Sequence[str]], Hits],
    whole_terms: Sequence[str] | None,
    part_terms: Sequence[Sequence[str]],
) -> tuple[_T, Hits | None, list[Hits]]:
    """``encode()`` on this thread and, beside it on the pool, ``lexical`` of
    ``whole_terms`` (None: not searched, the caller has its hits) and then of each of
    ``part_terms`` in order: (what ``encode`` returned, the whole request's hits, each
    part's hits). An error of either side is raised here, after both ended."""

    def searches() -> tuple[Hits | None, list[Hits]]:
        whole = lexical(whole_terms) if whole_terms is not None else None
        return whole, [lexical(terms) for terms in part_terms]

    if whole_terms is None and not part_terms:  # nothing to search: no hand-off
        return encode(), None, []
    pending = pool().submit(searches)
    try:
        encoded = encode()
    finally:
        whole, parts = pending.result()
    return encoded, whole, parts
