"""Text normalisation shared by every lexical step: indexing, querying, exact hits.

Identifiers are split the way people read them: ``query_freight_telemetry``,
``queryFreightTelemetry``, ``billing.issue_refund`` and ``github/create-issue``
all become plain words. Words are lower-cased, stop words dropped and stemmed
(Snowball English), so "refunds" finds "refund".
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORD_RE = re.compile(r"[A-Za-z0-9]+")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_IDENT_RE = re.compile(
    r"[A-Za-z][A-Za-z0-9]*(?:[_./:-][A-Za-z0-9]+)+"  # snake_case, dotted.names, paths/ids
    r"|[a-z]+[A-Z][A-Za-z0-9]*"  # camelCase
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"  # PascalCase
)

STOPWORDS = frozenset(
    (
        "a about above after again against all am an and any are as at be because been before "
        "being below between both but by can could did do does doing down during each few for "
        "from further had has have having he her here hers herself him himself his how i if in "
        "into is it its itself just let me more most my myself no nor not now of off on once only "
        "or other our ours ourselves out over own please same she should so some such than that "
        "the their theirs them themselves then there these they this those through to too under "
        "until up very was we were what when where which while who whom why will with would you "
        "your yours yourself yourselves want need like get give tell show help could would also "
        "using use"
    ).split()
)


@lru_cache(maxsize=1)
def _stemmer() -> object:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    return str(_stemmer().stemWord(word))  # type: ignore[attr-defined]


def words(text: str) -> list[str]:
    """Lower-cased words, identifiers split (``findOrder`` -> ``find order``), no stemming."""
    out: list[str] = []
    for chunk in _WORD_RE.findall(text):
        parts = _CAMEL_RE.findall(chunk) if not chunk.islower() else [chunk]
        out.extend(p.lower() for p in parts)
    return out


def terms(text: str) -> list[str]:
    """Index/query terms: :func:`words` minus stop words, stemmed."""
    return [stem(w) for w in words(text) if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]


def identifiers(text: str) -> list[str]:
    """Tokens of the query that look like code identifiers (snake, camel, dotted, paths)."""
    return _IDENT_RE.findall(text)


def phrase_key(text: str) -> str:
    """The canonical form under which names and aliases are matched exactly."""
    return " ".join(words(text))
