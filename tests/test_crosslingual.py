"""Carrying a request's words over to the catalog's, with the multilingual encoder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support import e5_embedder, retrieved_both_ways, spec
from toolscout.discovery import crosslingual
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.crosslingual import (
    Lexicon,
    bridged,
    build_lexicon,
    catalog_words,
    merged,
    request_words,
)
from toolscout.discovery.lexical import STOPWORDS, stem, terms
from toolscout.discovery.search import (
    Candidate,
    PhraseIndex,
    Retrieval,
    Retriever,
    parse_query,
)
from toolscout.embed.base import Embedder
from toolscout.embed.e5 import MultilingualE5Embedder
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.memory import MemoryStore
from toolscout.stores.sqlite import SQLiteStore

TOOLS = [
    spec("weather.forecast", "Weather forecast for a city, by day."),
    spec("cabs.book_taxi", "Book a taxi to an address in a city."),
    spec("mail.send_email", "Send an email to a recipient."),
    spec("music.san_francisco_concerts", "Concerts in San Francisco."),
]
JA = "San Francisco の明日の天気予報を教えてください"


@pytest.fixture(scope="module")
def e5() -> Embedder:
    """The multilingual model, one per test process, over the run's vector cache (support)."""
    return e5_embedder()


def test_a_requests_words_are_those_the_catalog_lacks() -> None:
    df = {"weather": 2, "forecast": 1, "lisbon": 1}
    # covered English words stay as they are (not carried), stop words and digits go,
    # accents are kept for the encoder
    assert request_words("Prévisions météo pour Lisbon, weather 2024", df) == [
        "prévisions",
        "météo",
        "pour",
    ]
    # Japanese: Hiragana left out, a Katakana run whole, a short Han run whole
    assert request_words("サンフランシスコの天気を教えて", {}) == ["天気", "教", "サンフランシスコ"]
    # a long Han run (Chinese) in overlapping pairs
    assert request_words("查询天气预报", {}) == ["查询", "询天", "天气", "气预", "预报"]
    assert len(request_words(" ".join(f"mot{chr(97 + i)}x" for i in range(26)), {}, 5)) == 5


def test_a_catalogs_words_are_its_most_frequent_indexed_content_words() -> None:
    texts = ["Forecasts of the weather", "Weather forecast by city", "Send an email"]
    df = {stem(w): n for w, n in (("weather", 2), ("forecast", 2), ("city", 1), ("send", 1),
                                  ("email", 1))}  # fmt: skip
    got = catalog_words(texts, df, 10)
    assert got == {"citi": "city", "email": "email", "forecast": "forecasts", "send": "send",
                   "weather": "weather"}  # fmt: skip
    # "forecasts" and "forecast" are one term, written as its first most common form
    assert set(catalog_words(texts, df, 2)) == {"forecast", "weather"}  # the most frequent
    assert catalog_words(["the of by"], df, 10) == {}


def test_a_word_carries_over_to_its_translation_and_a_function_word_to_nothing(
    e5: MultilingualE5Embedder,
) -> None:
    texts = [t.card.name + " " + t.card.summary for t in TOOLS]
    df: dict[str, int] = {}
    for text in texts:
        for term in set(terms(text)):
            df[term] = df.get(term, 0) + 1
    lexicon = build_lexicon(texts, df, e5)
    assert isinstance(lexicon, Lexicon) and lexicon.vectors.shape[0] == len(lexicon.terms)
    assert int(lexicon.stop.sum()) == len(STOPWORDS)
    asked = ["météo", "courriel", "タクシー", "天気", "le", "の"]
    carried = lexicon.carry(e5.embed(asked))
    assert carried[:3] == ["weather", "email", "taxi"] and stem("forecast") not in carried[:2]
    assert lexicon.carry(e5.embed(["le", "の", "bitte"])) == []  # nearest: a stop word
    assert lexicon.carry(e5.embed(asked), min_cosine=1.01) == []


class _Counts(MemoryStore):
    """A store that may not be asked for its term counts."""

    def document_frequency(self) -> tuple[dict[str, int], int]:
        raise AssertionError("the term counts were read")


def test_the_english_default_reads_nothing_and_changes_nothing() -> None:
    """With an encoder that reads only English, the request is returned as it came, before
    its words, the catalog's term counts or the encoder are read."""
    english = Retriever(_Counts(), MiniLMEmbedder(), PhraseIndex([], {}), SearchSettings())
    query = parse_query(JA, {}, 10, SearchSettings())
    assert bridged(english, query) is query


def _discover(cat: Catalog, query: str, settings: SearchSettings | None = None) -> tuple:
    got = cat.discover(query, Principal.of("p"), k=3, tier="progressive", settings=settings)
    return got.ids, got.trace.lexical, got.confidence, got.trace.dense


@pytest.mark.parametrize("english", [True, False])
def test_a_request_in_another_language_is_searched_in_the_catalogs_words(
    tmp_path: Path, e5: MultilingualE5Embedder, english: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the option, an uncovered request's BM25 runs on the catalog words its own words
    carry over (before: the dense path alone, no lexical list); with the English default
    every shortlist is what it is with the bridge taken out."""
    embedder: Embedder = MiniLMEmbedder() if english else e5
    requests = [JA, "Envoyez un courriel à Marie", "weather forecast for San Francisco"]
    with Catalog.open(tmp_path / "c.db", embedder=embedder, log=False) as cat:
        cat.add(TOOLS)
        with_bridge = [_discover(cat, q) for q in requests]
        monkeypatch.setattr(crosslingual, "bridged", lambda retriever, query: query)
        without = [_discover(cat, q) for q in requests]
    if english:
        assert with_bridge == without
        return
    (ja_ids, ja_lex, _, _), (fr_ids, fr_lex, _, _) = with_bridge[:2]
    assert without[0][1] == () and without[1][1] == ()  # the dense path alone before
    assert ja_lex[:1] == ("weather.forecast",) and ja_ids[0] == "weather.forecast"
    assert fr_lex[:1] == ("mail.send_email",) and fr_ids[0] == "mail.send_email"
    assert with_bridge[2] == without[2]  # a covered request is read as before


def test_the_bridged_query_takes_the_carried_terms_and_keeps_the_text(
    tmp_path: Path, e5: MultilingualE5Embedder
) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        df, n_docs = cat.store.document_frequency()
        query = parse_query(JA, df, n_docs, cat.settings)
        retriever = cat.retriever()
        got = bridged(retriever, query)
        assert got is not query and got.text == query.text
        assert "weather" in got.terms and "san" in got.terms  # carried, and its own covered
        assert all(df.get(t, 0) > 0 for t in (*got.terms, *got.dropped))
        assert bridged(retriever, got) is got  # a bridged request is covered: read as is
        covered = parse_query("weather in San Francisco", df, n_docs, cat.settings)
        assert bridged(retriever, covered) is covered
        # one lexicon per catalog generation: built again only when the catalog changes
        first = crosslingual._LEXICONS.get(cat.retriever(), df)
        assert crosslingual._LEXICONS.get(cat.retriever(), df) is first
        cat.add([spec("rail.book_train", "Book a train ticket.")])
        df, _ = cat.store.document_frequency()
        assert crosslingual._LEXICONS.get(cat.retriever(), df) is not first


def test_a_bridged_request_never_skips_the_encoder(
    tmp_path: Path, e5: MultilingualE5Embedder
) -> None:
    """A request in other words that names a tool is not answered lexical only
    (``encoder_skip``): its lexical terms are the bridge's guesses, the encoder reads it."""
    named = "cabs.book_taxi で明日の朝七時に東京駅から羽田空港までのタクシーを予約してください"
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        ids, lexical, _, dense = _discover(cat, named, SearchSettings(encoder_skip=True))
        assert dense and lexical and ids[0] == "cabs.book_taxi"


def test_every_caller_of_the_retriever_gets_the_bridge(
    tmp_path: Path, e5: MultilingualE5Embedder
) -> None:
    """A caller that parses a request and retrieves it itself (the catalog's retriever, the
    pipeline's retrieval stage: the console, lint, the report and the fits) ranks it as
    discovery does: on the carried-over terms."""
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        ids, lexical, _, _ = _discover(cat, JA)
        both, skipped = retrieved_both_ways(cat, JA)
        for got in both:
            assert tuple(got.lexical_ids[:1]) == lexical[:1] == ("weather.forecast",)
            assert got.candidates[0].id == ids[0] == "weather.forecast"
        assert skipped == ""


def test_an_empty_lexicon_carries_nothing() -> None:
    empty = Lexicon((), (), np.zeros(0, bool), np.zeros((0, 4), np.float32))
    assert empty.carry(np.ones((2, 4), np.float32)) == []


def test_a_function_word_as_near_a_stop_word_as_a_content_word_brings_nothing(
    e5: MultilingualE5Embedder,
) -> None:
    """French ``une`` is nearest to the catalog's ``one`` and almost as near ``under``: with
    a stop margin it carries nothing over, while ``météo`` still does."""
    texts = ["one weather forecast"]
    lexicon = build_lexicon(texts, {"one": 1, "weather": 1, "forecast": 1}, e5)
    une, meteo = e5.embed(["une", "météo"])
    assert lexicon.carry(une[None, :], min_cosine=0.8) == ["one"]
    assert lexicon.carry(une[None, :], min_cosine=0.8, stop_margin=0.05) == []
    assert lexicon.carry(meteo[None, :], min_cosine=0.8, stop_margin=0.05) == ["weather"]


def _retrieval(scores: dict[str, float], confidence: float) -> Retrieval:
    cands = [Candidate(t, fused=f) for t, f in sorted(scores.items(), key=lambda kv: -kv[1])]
    return Retrieval(cands, confidence, confidence < 0.5, 0.7, lexical_ids=["a"])


def test_a_merge_keeps_each_tool_at_its_better_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    bridged_out = _retrieval({"a": 0.9, "b": 0.2}, 0.4)
    dense_led = _retrieval({"b": 0.95, "c": 0.5}, 0.6)
    monkeypatch.setattr(crosslingual, "MERGE", False)
    calls: list[int] = []

    def other() -> Retrieval:
        calls.append(1)
        return dense_led

    assert merged(bridged_out, other) is bridged_out and not calls  # the other never run
    monkeypatch.setattr(crosslingual, "MERGE", True)
    monkeypatch.setattr(crosslingual, "MERGE_AGREE", 0.0)  # the better alone (round nine)
    got = merged(_retrieval({"a": 0.9, "b": 0.2}, 0.4), other)
    assert [(c.id, c.fused) for c in got.candidates] == [("b", 0.95), ("a", 0.9), ("c", 0.5)]
    assert got.confidence == 0.6 and not got.low_confidence and got.lexical_ids == ["a"]


def watch_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per lexicon built from the catalog's words from now on."""
    built: list[int] = []
    real = crosslingual.build_lexicon

    def counted(*args: Any) -> Any:
        built.append(1)
        return real(*args)

    monkeypatch.setattr(crosslingual, "build_lexicon", counted)
    return built


def test_a_new_process_reads_the_kept_lexicon_instead_of_encoding_the_catalog_again(
    tmp_path: Path, e5: MultilingualE5Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lexicon is kept beside the catalog per generation: another process (another
    catalog object, with nothing in memory) reads it instead of encoding the catalog's
    words on its first carried-over request; a catalog write, or a kept blob that is not
    exactly a lexicon, means building it again."""
    built = watch_builds(monkeypatch)
    db = tmp_path / "c.db"

    def carried() -> tuple[str, ...]:
        with Catalog.open(db, embedder=e5, log=False) as cat:
            df, n_docs = cat.store.document_frequency()
            return bridged(cat.retriever(), parse_query(JA, df, n_docs, cat.settings)).terms

    with Catalog.open(db, embedder=e5, log=False) as cat:
        cat.add(TOOLS)
    first = carried()
    assert "weather" in first and len(built) == 1
    assert carried() == first and len(built) == 1  # read, not built
    store = SQLiteStore(db)
    key = crosslingual.kept_key(e5.model_id)
    kept = store.derived(key)
    assert kept is not None and kept[0] == store.generation()
    lexicon = crosslingual.lexicon_of(kept[1], e5.dim)
    assert lexicon is not None and "weather" in lexicon.terms
    store.set_derived(key, store.generation(), kept[1][:-4])  # cut short: not a lexicon
    store.close()
    assert crosslingual.lexicon_of(kept[1][:-4], e5.dim) is None
    assert carried() == first and len(built) == 2  # built again, and kept whole
    assert carried() == first and len(built) == 2
    with Catalog.open(db, embedder=e5, log=False) as cat:
        cat.add([spec("rail.book_train", "Book a train ticket.")])  # a newer generation
    carried()
    assert len(built) == 3
