"""Round eleven of the cross-lingual bridge: short words of spaced scripts not carried over,
and what the encoder reads in the carried-over reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_crosslingual import TOOLS, e5  # noqa: F401  (e5: a fixture)
from toolscout.discovery import crosslingual
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.crosslingual import bridged, request_words
from toolscout.discovery.search import parse_query
from toolscout.embed.e5 import MultilingualE5Embedder


def test_short_words_of_spaced_scripts_are_not_carried_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Articles and prepositions (``la``, ``une``, ``der``, ``mir``) are left out of the words
    carried over; longer words and the pieces of Chinese and Japanese are not. Before
    (:data:`crosslingual.MIN_WORD_LETTERS` at 2) every word of two letters or more was."""
    fr, de = "Envoyez une lettre à la mairie de Lyon", "Zeig mir den Wetterbericht für Köln"
    assert request_words(fr, {}) == ["envoyez", "lettre", "mairie", "lyon"]
    assert request_words(de, {}) == ["zeig", "wetterbericht", "köln"]
    assert request_words("天気 一覧", {}) == ["天気", "一覧"]  # two-character Han words stay
    monkeypatch.setattr(crosslingual, "MIN_WORD_LETTERS", 2)
    assert request_words(fr, {}) == ["envoyez", "une", "lettre", "la", "mairie", "de", "lyon"]


def test_the_carried_over_reading_is_the_request_as_written(
    e5: MultilingualE5Embedder,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The shipped mode: the encoder reads the request as written in the carried-over
    reading (re-encoding it with the carried words was measured and not kept)."""
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        df, n_docs = cat.store.document_frequency()
        query = parse_query("Envoyez un courriel à Marie", df, n_docs, cat.settings)
        got = bridged(cat.retriever(), query)
    assert got is not query and "email" in got.terms and "send" in got.terms
    assert got.text == query.text


@pytest.mark.parametrize(("mode", "expected"), [(1, "Envoyez un courriel à Marie send email"),
                                                (2, "send email")])  # fmt: skip
def test_the_encoder_can_read_the_carried_words_too(
    e5: MultilingualE5Embedder,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: int,
    expected: str,
) -> None:
    """With :data:`crosslingual.REENCODE` the carried-over reading's encoder input is the
    request followed by the catalog words carried over (1) or those words alone (2)."""
    monkeypatch.setattr(crosslingual, "REENCODE", mode)
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        df, n_docs = cat.store.document_frequency()
        query = parse_query("Envoyez un courriel à Marie", df, n_docs, cat.settings)
        assert bridged(cat.retriever(), query).text == expected
