"""How much of a request the catalog's vocabulary covers, and when dense retrieval leads.

A request's *coverage* is the share of its terms (:func:`lexical.terms`, before
frequent-term pruning) that occur in at least one card of the catalog. It is a property
of the request against the catalog, measurable for any language: an English request
phrased in the catalog's words covers most of it; the same request in French, German or
Japanese covers only its numbers, names and cognates (a median of 0.00-0.12 on the
multilingual set against 0.58 in English, docs/history/other-languages.md, h/lang), and so
may an English request in words the catalog never uses.

On such a request BM25 has almost nothing to say, and what it finds (a place name, a
borrowed word) pushes the dense list's answer down. With an encoder that reads the
request's language, its words are first carried over to the catalog's own
(discovery/crosslingual.py) and BM25 runs on those; a request whose words carry nothing
over is ranked by the dense path alone (:func:`dense_led`). With an encoder that does
not (the default, an English model), the few shared words are the best evidence there
is, and nothing changes.

The rule is applied where every retrieval goes through, :meth:`search.Retriever.run`
(:meth:`search.Retriever.for_request`): discovery, the console's hidden-tools view,
lint's overlap probes, the report's alias ranker and the evaluation's fits rank a request
the same way without any of them asking for it. With the English default it returns
before reading anything (:func:`may_lead`).
"""

from __future__ import annotations

from collections.abc import Mapping

from toolscout.embed.base import Embedder
from toolscout.settings import SearchSettings

#: below this coverage a request is read by the dense path alone (with an encoder that
#: reads other languages). Chosen on one half of the multilingual set and checked on
#: the other, both ways (docs/history/other-languages.md, "This round (h/lang, round seven)").
LOW_COVERAGE = 0.15


def coverage(query_terms: tuple[str, ...], df: Mapping[str, int]) -> float:
    """The share of ``query_terms`` found in at least one document (1.0 for no term:
    nothing is left uncovered)."""
    if not query_terms:
        return 1.0
    return sum(1 for t in query_terms if df.get(t, 0) > 0) / len(query_terms)


def reads_other_languages(embedder: Embedder) -> bool:
    """Whether ``embedder`` (or the model it wraps) says it reads requests in other
    languages than its catalog's: a ``multilingual`` attribute set true."""
    seen: Embedder | None = embedder
    for _ in range(8):  # wrappers of wrappers; never a cycle in practice
        if seen is None:
            return False
        if getattr(seen, "multilingual", False) is True:
            return True
        seen = getattr(seen, "inner", None)
    return False


def may_lead(settings: SearchSettings, embedder: Embedder) -> bool:
    """Whether :func:`dense_led` can change ``settings`` for any request: both paths on and
    an encoder that reads other languages (no request is read to say so)."""
    return settings.dense and settings.lexical and reads_other_languages(embedder)


def dense_led(
    settings: SearchSettings,
    query_terms: tuple[str, ...],
    df: Mapping[str, int],
    embedder: Embedder,
    threshold: float = LOW_COVERAGE,
) -> SearchSettings:
    """``settings`` with lexical retrieval off when the request's coverage is below
    ``threshold`` and ``embedder`` reads other languages; else ``settings`` itself (the
    same object: a no-op on every request the catalog's vocabulary covers)."""
    if not may_lead(settings, embedder):
        return settings
    if coverage(query_terms, df) >= threshold:
        return settings
    return settings.but(lexical=False)
