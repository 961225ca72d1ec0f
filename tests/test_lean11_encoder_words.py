"""What the query encoder reads of a request in English: its words without the function
words (round seventeen, h/lean11); other languages as written; the parts' spans in the
request's run still found; the pseudo-queries a catalog's ranker is fitted on read whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support import CountingEmbedder, embedder, spec
from toolscout.discovery import queryvectors
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.lexical import ENCODER_STOPWORDS, STOPWORDS, encoder_text, words
from toolscout.discovery.parts import request_parts
from toolscout.discovery.queryvectors import embed_keys, piece_spans
from toolscout.discovery.search import CALIBRATION_META
from toolscout.policy import Principal

REQUEST = "Could you please convert the 250 dollars in my wallet to euros for the trip?"
LONG = (
    "I'm planning a family holiday in Lisbon next month with my parents. "
    "Can you find the flights from Berlin to Lisbon for four passengers? "
    "Also check the weather forecast for the first week, and convert 500 euros to dollars."
)


def test_the_encoder_reads_an_english_request_without_its_function_words() -> None:
    (key,) = embed_keys([REQUEST])
    assert key == "convert 250 dollars in wallet to euros trip"
    assert not set(key.split()) & ENCODER_STOPWORDS
    # read whole without ``lean`` (what it was before, and what a card's name is read as)
    assert embed_keys([REQUEST], lean=False)[0] == " ".join(words(REQUEST))
    assert encoder_text("Find the order") == "find the order"


def test_negation_quantity_direction_and_question_words_are_kept() -> None:
    kept = "not no without all each every any from to between before after in out on off"
    assert not set(kept.split()) & ENCODER_STOPWORDS
    assert not {"what", "which", "who", "when", "where", "how", "may", "us", "am"} & (
        ENCODER_STOPWORDS
    )
    # the encoder's list is its own: the lexical one drops negation and direction
    assert {"not", "from", "between"} <= STOPWORDS
    (key,) = embed_keys(["I can't log in, and it won't let me out"])
    assert key == "can t log in won t let out"


def test_a_request_made_only_of_function_words_keeps_them() -> None:
    assert embed_keys(["Is it this or that?"]) == ["is it this or that"]
    assert embed_keys(["Is it the one that I have?"]) == ["one"]
    assert embed_keys(["the of a"]) == ["the of a"]


def test_text_in_another_language_is_given_as_written() -> None:
    texts = [
        "Convertir le montant de la facture en euros pour le client, s'il vous plaît",
        "東京の天気を教えてください",
        "Покажи мне погоду в Москве на завтра",
    ]
    assert (
        embed_keys(texts) == embed_keys(texts, lean=False) == [" ".join(t.split()) for t in texts]
    )


def test_the_function_words_come_out_of_the_words_the_encoder_reads_not_before() -> None:
    """The request's first QUERY_EMBED_WORDS words are what is read, as before; the
    function words among them are then dropped (the encoder never reads further in)."""
    n = queryvectors.QUERY_EMBED_WORDS
    text = " ".join(["the report"] * n) + " invoices"
    (key,) = embed_keys([text])
    assert key == " ".join(["report"] * (n // 2))


def test_each_part_is_found_in_the_lean_request() -> None:
    keys = embed_keys([LONG, *request_parts(LONG)])
    assert not set(keys[0].split()) & ENCODER_STOPWORDS
    spans = piece_spans(keys[0], keys[1:])
    assert all(s is not None for s in spans)
    # each part's own lean reading is the request's text at its span, in order
    found = [keys[0][a:b] for a, b in (s for s in spans if s is not None)]
    assert found == keys[1:]
    starts = [a for a, _ in (s for s in spans if s is not None)]
    assert starts == sorted(starts)


def test_the_pooled_parts_cover_their_spans_in_the_requests_run() -> None:
    enc = embedder()
    keys = embed_keys([LONG, *request_parts(LONG)])
    spans = piece_spans(keys[0], keys[1:])
    rows, covered = enc.embed_spans(keys[0], [s or (0, 0) for s in spans])
    assert covered == [True] * len(spans)
    sims = rows[1:] @ enc.embed(keys[1:]).T
    assert list(sims.argmax(axis=1)) == list(range(len(spans)))


SPECS = [
    spec(f"tools.{name}", summary)
    for name, summary in [
        ("find_flights", "Find the flights between two cities for a date."),
        ("forecast", "The weather forecast for a city over the coming days."),
        ("convert", "Convert an amount of money from one currency to another."),
        ("hotels", "Search for hotels in a city for the given dates."),
        ("restaurants", "Book a table at a restaurant for a number of people."),
        ("translate", "Translate a text into another language."),
        ("stocks", "The latest price of a stock on the market."),
        ("news", "The headlines of the day for a topic."),
        ("calendar", "Add an event to the user's calendar."),
        ("email", "Send an email with a subject and a body to a person."),
        ("timer", "Start a timer that rings after a number of minutes."),
        ("recipes", "Find the recipes that use the ingredients you have."),
        ("taxi", "Order a taxi from an address to another one."),
    ]
]


def _fitted(
    path: Path, monkeypatch: pytest.MonkeyPatch, lean: bool
) -> tuple[dict[str, Any], list[str]]:
    monkeypatch.setattr(queryvectors, "LEAN_REQUESTS", lean)
    emb = CountingEmbedder(embedder())
    with Catalog.open(path, embedder=emb, log=False) as cat:
        cat.add(SPECS)
        calibration = json.loads(cat.store.meta(CALIBRATION_META) or "{}")
        calibration.pop("seconds", None)  # how long the fit took
        queryvectors.clear_query_cache()
        emb.texts.clear()
        cat.discover("Book me a table for the four of us", Principal.of("u", scopes=["*"]), k=3)
    return calibration, emb.texts


def test_the_catalogs_ranker_is_fitted_on_pseudo_queries_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored calibration stays what a fresh index fits: leaning the requests changes
    nothing at index time."""
    whole, before = _fitted(tmp_path / "a.db", monkeypatch, lean=False)
    lean, after = _fitted(tmp_path / "b.db", monkeypatch, lean=True)
    assert whole.get("fitted") and whole == lean
    assert before[0] == "book me a table for the four of us"
    assert after[0] == "book table four us"
