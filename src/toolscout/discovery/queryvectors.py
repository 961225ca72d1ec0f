"""A request's vectors: what the encoder reads of each text, the process's cache of them,
and the parts of a long request pooled from the whole request's one encoder run.

A request read in parts (discovery/parts.py) needs a vector for the whole request and one
for each part. Encoding every part on its own takes a second encoder run for most such
requests (2.16 runs a request on bfcl, 30–48 ms against 8–13 ms for one read whole:
docs/history/discovery-latency.md, h/hot). When the query encoder can pool spans of one run
(:class:`~toolscout.embed.base.SpanEmbedder`: the default MiniLM), a part's vector can
instead be the mean of its tokens' vectors in the whole request's run ("late chunking"):
no run beyond the whole request's. A part the whole request's text does not hold (beyond
its first :data:`QUERY_EMBED_WORDS` words, or past the model's length) is then encoded on
its own, and so is every part with an encoder without the capability (the e5 option, a
custom or wrapped embedder).

Pooled parts are **not** the default reading: on the six dev sets they cost toolbench
0.015 recall@5 and toolalpaca 0.005 against parts encoded alone (docs/history/discovery-latency.md,
"This round (h/parts2, round ten)"); a request is read with its parts pooled only when
``parts.AGREEING`` says so. Pooled vectors differ from the parts encoded alone, so they are
kept in the cache under keys of their own (the request's text with the part's): a part's
pooled vector never answers a later request whose whole text is that part.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from toolscout.discovery.lexical import encoder_text
from toolscout.embed.base import Embedder, span_embedder
from toolscout.stores.base import Vector

#: query vectors kept (repeated queries skip the encoder)
QUERY_VECTOR_CACHE = 2048
#: a query is embedded from its first this many words (the encoder's cost grows with length)
QUERY_EMBED_WORDS = 64
#: a request read with its parts pooled (``parts.AGREEING``) has them pooled from its own
#: encoder run when the encoder can; off, each part is encoded alone
POOLED_PARTS = True
#: the cache's model-id suffix of a part's pooled vector
_POOLED = "\x00pooled"


class VectorCache:
    """A small thread-safe LRU of query vectors by (model id, embedded text)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], Vector] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> Vector | None:
        with self._lock:
            vec = self._items.get(key)
            if vec is not None:
                self._items.move_to_end(key)
            return vec

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def put(self, key: tuple[str, str], vec: Vector) -> None:
        with self._lock:
            self._items[key] = vec
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


QUERY_VECTORS = VectorCache(QUERY_VECTOR_CACHE)


def clear_query_cache() -> None:
    """Forget every cached query vector (the evaluation times each strategy cold)."""
    QUERY_VECTORS.clear()


def embed_keys(texts: Sequence[str]) -> list[str]:
    """What the encoder reads of each query (its first words), also the vector cache's key."""
    return [encoder_text(t, QUERY_EMBED_WORDS) or t[:QUERY_EMBED_WORDS] for t in texts]


#: the most words of the request skipped before a part's word: the clause words a split
#: drops ("and then", "after that": discovery/parts.py) lie between a part's pieces
MAX_SKIPPED_WORDS = 3


def piece_spans(whole: str, pieces: Sequence[str]) -> list[tuple[int, int] | None]:
    """Where each piece (in order) stands in ``whole``: the characters from its first word
    to its last, its words found in order after the previous piece's, with at most
    :data:`MAX_SKIPPED_WORDS` of ``whole`` between two of them; None when ``whole`` does
    not hold it so (a part beyond the words the encoder reads of the request)."""
    out: list[tuple[int, int] | None] = []
    cursor = 0
    for piece in pieces:
        span = _words_span(whole, piece.split(), cursor)
        out.append(span)
        if span is not None:
            cursor = span[1]
    return out


def _words_span(text: str, piece_words: Sequence[str], start: int) -> tuple[int, int] | None:
    first = end = -1
    cursor = start
    for w in piece_words:
        at = _word_find(text, w, cursor)
        if at < 0 or len(text[cursor:at].split()) > MAX_SKIPPED_WORDS:
            return None
        first = at if first < 0 else first
        end = cursor = at + len(w)
    return (first, end) if first >= 0 else None


def _word_find(text: str, word: str, start: int) -> int:
    """The first place of ``word`` in ``text`` from ``start`` not inside a longer ASCII
    word (scripts without spaces have no word boundary to check)."""
    at = text.find(word, start)
    while at >= 0:
        end = at + len(word)
        if not (_inside(text, at - 1, word[0]) or _inside(text, end, word[-1])):
            return at
        at = text.find(word, at + 1)
    return -1


def _inside(text: str, i: int, edge: str) -> bool:
    """Whether ``text[i]`` continues an ASCII word whose edge character is ``edge``."""
    return 0 <= i < len(text) and text[i].isascii() and text[i].isalnum() and edge.isascii()


def pools_pieces(embedder: Embedder, pieces: int) -> bool:
    """Whether a request with ``pieces`` parts has them pooled from its own run."""
    return POOLED_PARTS and pieces > 0 and span_embedder(embedder) is not None


def _cache_keys(model_id: str, keys: Sequence[str], pooled: bool) -> list[tuple[str, str]]:
    if not pooled or not keys:
        return [(model_id, k) for k in keys]
    whole = keys[0]
    return [(model_id, whole), *((model_id + _POOLED, f"{whole}\x00{k}") for k in keys[1:])]


def cached(embedder: Embedder, keys: Sequence[str], pooled: bool = False) -> list[Vector] | None:
    """The vectors of ``keys`` (:func:`embed_keys`) when this process encoded them all
    (``pooled``: ``keys[1:]`` are parts of ``keys[0]`` read by :func:`encoded`)."""
    found = [QUERY_VECTORS.get(k) for k in _cache_keys(embedder.model_id, keys, pooled)]
    return [v for v in found if v is not None] if all(v is not None for v in found) else None


def encoded(
    embedder: Embedder, keys: Sequence[str], pooled: bool = False, cache: bool = True
) -> list[Vector]:
    """The vectors of ``keys``; ``pooled``: ``keys[1:]`` are parts of the request
    ``keys[0]``, each pooled from its run where it can be (:func:`pools_pieces`)."""
    spanner = span_embedder(embedder) if pooled and keys else None
    if spanner is None:
        vectors = list(embedder.embed(list(keys)))
    else:
        spans = piece_spans(keys[0], keys[1:])
        rows, covered = spanner.embed_spans(keys[0], [s or (0, 0) for s in spans])
        got: list[Vector | None] = [rows[0]]
        got += [rows[i + 1] if s is not None and covered[i] else None for i, s in enumerate(spans)]
        alone = [i for i, v in enumerate(got) if v is None]
        if alone:  # beyond the whole request's text: encoded on its own
            for i, vec in zip(alone, embedder.embed([keys[i] for i in alone]), strict=True):
                got[i] = vec
        vectors = [v for v in got if v is not None]
    if cache:
        for key, vec in zip(_cache_keys(embedder.model_id, keys, pooled), vectors, strict=True):
            QUERY_VECTORS.put(key, vec)
    return vectors
