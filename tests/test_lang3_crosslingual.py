"""Round ten of the cross-lingual bridge: the hubness-corrected floor for carrying a word
over, and the word list built when the catalog is written, not on the first request."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support import embedder
from test_crosslingual import JA, TOOLS, e5, watch_builds  # noqa: F401  (e5: a fixture)
from toolscout.discovery import crosslingual
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.crosslingual import Lexicon, build_lexicon, hubness, prepare
from toolscout.discovery.lexical import terms
from toolscout.discovery.search import parse_query
from toolscout.embed.e5 import MultilingualE5Embedder
from toolscout.stores.sqlite import SQLiteStore


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_hubness_is_each_content_words_mean_cosine_to_its_nearest_others() -> None:
    rng = np.random.default_rng(7)
    vectors = _unit(rng.normal(size=(40, 6)))
    stop = np.zeros(40, dtype=bool)
    stop[-4:] = True
    got = hubness(vectors, stop, k=3, block=5)  # blocks smaller than the lexicon
    sims = vectors[:36] @ vectors[:36].T
    np.fill_diagonal(sims, -np.inf)
    assert np.allclose(got[:36], np.sort(sims, axis=1)[:, -3:].mean(axis=1), atol=1e-6)
    assert not got[36:].any()  # stop words have none


def test_a_word_near_a_crowd_of_catalog_words_is_not_carried_over() -> None:
    """Two request words at the same cosine to their nearest catalog word: the one that is
    as near to a crowd of other catalog words (a function word near a "hub") carries
    nothing over under a CSLS floor, the one whose nearest word stands out does; without
    the floor both do (the rule before it)."""
    eye = np.eye(6)
    vectors = _unit(np.stack([eye[0], *(eye[0] + 0.35 * eye[i] for i in (1, 2, 3)), eye[5]]))
    stop = np.zeros(len(vectors), dtype=bool)
    lexicon = Lexicon(tuple("abcde"), ("hub", "c1", "c2", "c3", "alone"), stop, vectors)
    words = _unit(np.stack([eye[0] + 0.2 * eye[4], eye[5] + 0.2 * eye[4]]))
    assert np.allclose(words @ vectors[[0, 4]].T, np.diag([1, 1]) * float(words[0] @ vectors[0]))
    assert lexicon.carry(words, min_cosine=0.5) == ["hub", "alone"]
    assert lexicon.carry(words, min_cosine=0.5, min_csls=1.0) == ["alone"]


def test_the_shipped_floor_drops_character_pairs_cut_across_words(
    e5: MultilingualE5Embedder,  # noqa: F811
) -> None:
    """With the shipped floor for Han and Kana, Chinese character pairs cut across two words
    (``份城`` of 份/城里, ``的清`` of 的/清单, ``下纽`` of 一下/纽约), which the cosine alone
    carries over to crowded catalog words, carry nothing; real words still do. Latin-script
    words have no floor (the rule before it)."""
    assert crosslingual.MIN_CSLS_UNSPACED is not None and crosslingual.MIN_CSLS is None
    texts = [
        "Weather forecast for one city by day",
        "Book a taxi to an address in a city",
        "Send an email to a recipient with one attachment",
        "Concerts and events in San Francisco",
        "Convert currency amounts at the current exchange rate",
        "Search news articles by topic and date",
        "Find restaurants near a location and book a table",
        "Translate text between languages",
        "Track a parcel by its tracking number",
        "Create calendar events and reminders",
        "Random cat pictures and facts",
        "Stock prices and market data for a company",
        "Local services and shops near you",
        "List every holiday of a country",
    ]
    df: dict[str, int] = {}
    for text in texts:
        for term in set(terms(text)):
            df[term] = df.get(term, 0) + 1
    lexicon = build_lexicon(texts, df, e5)
    floor = crosslingual.MIN_CSLS_UNSPACED
    cut = e5.embed(["份城", "的清", "下纽"])
    assert len(lexicon.carry(cut)) >= 2  # the cosine alone
    assert lexicon.carry(cut, min_csls=floor) == []
    assert lexicon.carry(e5.embed(["天气", "新闻", "猫咪"]), min_csls=floor) == [
        "weather",
        "news",
        "cat",
    ]
    assert [crosslingual._unspaced(w) for w in ("天气", "ニュース", "météo", "wetter")] == [
        True,
        True,
        False,
        False,
    ]


def test_writing_the_catalog_builds_and_keeps_its_word_list_before_any_request(
    e5: MultilingualE5Embedder,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Indexing with the multilingual encoder builds the new generation's word list in the
    background and keeps it (the catalog's close waits for it): a new process's first
    carried-over request reads it and builds nothing."""
    built = watch_builds(monkeypatch)
    db = tmp_path / "c.db"
    with Catalog.open(db, embedder=e5, log=False) as cat:
        cat.add(TOOLS)
    assert len(built) == 1  # at index time, no request asked
    store = SQLiteStore(db)
    kept = store.derived(crosslingual.kept_key(e5.model_id))
    generation = store.generation()
    store.close()
    assert kept is not None and kept[0] == generation
    crosslingual._LEXICONS = crosslingual._Lexicons()  # a new process: nothing in memory
    with Catalog.open(db, embedder=e5, log=False) as cat:
        df, n_docs = cat.store.document_frequency()
        query = parse_query(JA, df, n_docs, cat.settings)
        carried = crosslingual.bridged(cat.retriever(), query)
    assert "weather" in carried.terms
    assert len(built) == 1  # read, not built
    with Catalog.open(db, embedder=e5, log=False) as cat:
        cat.add(TOOLS)  # unchanged: the generation stays, nothing is built
    assert len(built) == 1


def test_the_english_default_builds_no_word_list(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(TOOLS)
        assert prepare(cat) is None
