"""Secrets taken out of text before it is stored or shown: :func:`redact`.

Tool exceptions and upstream error bodies carry whatever the tool had at hand: a
database DSN with its password, an ``Authorization`` header, an API key. That text
goes to the audit ``detail`` (and must never go back to a caller). :func:`redact`
replaces each secret with :data:`MASK`, keeping the words around it so the text
still says what failed:

* the password of a URL/DSN (``postgresql://app:s3cret@db/x`` → ``postgresql://app:***@db/x``);
* bearer and basic credentials (``Bearer eyJ...``, ``Authorization: Basic ...``);
* JSON Web Tokens anywhere (three base64url parts, the first two starting ``eyJ``);
* values of secret-named fields in ``key=value``, ``key: value`` and JSON
  (``password``, ``passwd``, ``pwd``, ``secret``, ``token``, ``api_key``, ``apikey``,
  ``access_key``, ``private_key``, ``client_secret``, ``session``, ``cookie``, ...);
* PEM private key blocks and well-known key shapes (``sk-...``, ``ghp_...``,
  ``xox?-...``, ``AKIA...``, ``AIza...``).

Redaction is best effort on free text: it errs towards masking. It never raises.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "redact"]

#: what a secret is replaced with
MASK = "***"

_SECRET_NAMES = (
    r"(?:[A-Za-z0-9_.-]*?(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey"
    r"|access[_-]?key|private[_-]?key|client[_-]?secret|credentials?|session[_-]?id|cookie"
    r"|authorization|auth))"
)
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM private keys, whole block
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
            re.S,
        ),
        MASK,
    ),
    # user:password@ in a URL or DSN
    (re.compile(r"(?P<pre>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@\s/]+(?=@)"), rf"\g<pre>{MASK}"),
    # Authorization schemes
    (
        re.compile(r"(?P<pre>\b(?:Bearer|Basic|Token|Digest|Negotiate)\s+)[A-Za-z0-9._~+/=-]{6,}"),
        rf"\g<pre>{MASK}",
    ),
    # JWTs anywhere
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), MASK),
    # secret-named fields: JSON "name": "value"
    (
        re.compile(rf'(?P<pre>"{_SECRET_NAMES}"\s*:\s*")(?:[^"\\]|\\.)*(?=")', re.I),
        rf"\g<pre>{MASK}",
    ),
    # secret-named fields: name=value, name: value (query strings, DSN keywords, headers)
    (
        re.compile(
            rf"(?P<pre>\b{_SECRET_NAMES}\s*[=:]\s*)(?!{re.escape(MASK)})['\"]?[^\s'\",;&]+", re.I
        ),
        rf"\g<pre>{MASK}",
    ),
    # well-known key shapes
    (
        re.compile(
            r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
            r"|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,})"
        ),
        MASK,
    ),
)


def redact(text: str) -> str:
    """``text`` with every secret it recognisably holds replaced by :data:`MASK`."""
    if not text:
        return text
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text
