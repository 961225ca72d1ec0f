"""Token counts a catalog keeps between processes, as whole blobs in the store's
``derived`` table: each counted rendering's token parts by a digest of its text and the
join counts (:mod:`toolscout.discovery.tokencount`), and per-tool counts of one generation,
so a new process counts what an earlier one counted without loading the tokenizer. Each is
kept under a key naming the code that made it (:func:`~toolscout.discovery.kept.code_digest`),
so another toolscout never reads it; a blob not exactly of its shape is counted again, never
an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolscout.discovery import tokencount
from toolscout.discovery.kept import code_digest

__all__ = [
    "token_blob",
    "token_key",
    "token_parts",
    "tool_token_blob",
    "tool_token_key",
    "tool_tokens",
]


def token_key() -> str:
    """The key counted token parts are kept under: a digest of the counting module's
    source (its encoding, pattern and part rule), so another toolscout never reads them."""
    return f"token-parts:{code_digest(tokencount)}"


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


def tool_token_key() -> str:
    """The key per-tool token counts are kept under: a digest of the modules that render a
    tool (its schema and its catalog-wide name) and count it. The counts are kept for one
    generation (the names and the schemas are the generation's)."""
    from toolscout.discovery import inject

    return f"tool-tokens:{code_digest(inject, tokencount)}"


def tool_token_blob(counts: Mapping[tuple[str, str], int]) -> bytes:
    """``(tool id, format) -> tokens`` as kept: ``{format: {id: tokens}}``."""
    out: dict[str, dict[str, int]] = {}
    for (tool_id, fmt), n in counts.items():
        out.setdefault(fmt, {})[tool_id] = n
    return json.dumps(out, separators=(",", ":")).encode()


def tool_tokens(blob: bytes) -> dict[tuple[str, str], int] | None:
    """Kept per-tool counts, or None for anything not exactly their shape."""
    try:
        data = json.loads(blob)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    out: dict[tuple[str, str], int] = {}
    for fmt, counts in data.items():
        if not isinstance(counts, dict):
            return None
        for tool_id, n in counts.items():
            if type(n) is not int or n < 0:
                return None
            out[(tool_id, fmt)] = n
    return out
