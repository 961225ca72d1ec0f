"""Derived state a catalog keeps between processes, and building it cheaply.

Token counts: each counted rendering's token parts by a digest of its text, and the join
counts (:mod:`toolscout.discovery.tokencount`), kept in the store's ``derived`` table so
a new process counts what an earlier one counted without loading the tokenizer. And
:func:`no_gc`, under which a catalog builds its large structures.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolscout.discovery import tokencount

__all__ = ["no_gc", "token_blob", "token_key", "token_parts"]


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


def token_key() -> str:
    """The key counted token parts are kept under: a digest of the counting module's
    source (its encoding, pattern and part rule), so another toolscout never reads them."""
    digest = hashlib.sha256(Path(str(tokencount.__file__)).read_bytes()).hexdigest()[:16]
    return f"token-parts:{digest}"


def token_blob(parts: Mapping[str, Any], joins: Mapping[str, int]) -> bytes:
    return json.dumps({"parts": parts, "joins": joins}, separators=(",", ":")).encode()


def token_parts(blob: bytes) -> tuple[dict[str, Any], dict[str, int]] | None:
    """Kept token parts, or None for anything not exactly their shape (rebuilt, not an
    error: a damaged blob only means counting again)."""
    try:
        data = json.loads(blob)
        parts, joins = data["parts"], data["joins"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(parts, dict) or not isinstance(joins, dict):
        return None
    out: dict[str, tuple[int, str, str] | None] = {}
    for key, value in parts.items():
        if value is None:
            out[key] = None
        elif (
            isinstance(value, list)
            and len(value) == 3
            and type(value[0]) is int
            and isinstance(value[1], str)
            and isinstance(value[2], str)
        ):
            out[key] = (value[0], value[1], value[2])
        else:
            return None
    if not all(isinstance(c, str) and type(n) is int for c, n in joins.items()):
        return None
    return out, joins
