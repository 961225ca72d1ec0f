"""Secrets taken out of upstream text before it reaches a caller or the audit log.

A private stand-in until the shared ``toolscout.redact`` helper lands: it masks
the password of a URL or DSN (``postgresql://user:***@host``), bearer and basic
credentials, JWTs, ``password=``/``token=``/``api_key=``-style assignments (also
as JSON members), and common provider key shapes (``sk-…``, ``ghp_…``,
``AKIA…``, ``xox?-…``). What is left is the upstream's own wording.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "redact"]

MASK = "***"

_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)(?P<pw>[^\s@/]+)(?=@)")
_AUTH_HEADER = re.compile(
    r"(?i)\b(?P<head>(?:bearer|basic|token)\s+)(?P<pw>[A-Za-z0-9._~+/=-]{8,})"
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")
_ASSIGNED = re.compile(
    r"(?i)(?P<head>\b(?:password|passwd|pwd|secret|client_secret|token|access_token|"
    r"refresh_token|api[_-]?key|apikey|auth|authorization|private[_-]?key|credentials?)"
    r"\b[\"']?\s*[:=]\s*[\"']?)(?P<pw>[^\s\"',;&}]+)"
)
_KEY_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
    r"AKIA[0-9A-Z]{16}|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,})"
)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``***``."""
    if not text:
        return text
    text = _URL_PASSWORD.sub(lambda m: m["head"] + MASK, text)
    text = _JWT.sub(MASK, text)
    text = _AUTH_HEADER.sub(lambda m: m["head"] + MASK, text)
    text = _ASSIGNED.sub(lambda m: m["head"] + MASK, text)
    return _KEY_SHAPES.sub(MASK, text)
