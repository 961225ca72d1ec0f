"""Multi-intent splitting and the per-intent merge."""

from __future__ import annotations

from collections.abc import Sequence

from toolscout.discovery.intents import MAX_INTENTS, interleave, split_intents


def test_conjunctions_and_commas_split_tasks() -> None:
    parts = split_intents("find the flight, book the hotel and add both to my calendar")
    assert parts == ["find the flight", "book the hotel", "add both to my calendar"]


def test_sequencing_words_and_sentences_split() -> None:
    parts = split_intents(
        "Check the weather in Paris and then book a table nearby. Also convert 100 USD to EUR."
    )
    assert len(parts) == 3
    assert parts[0] == "Check the weather in Paris"
    assert "convert 100 USD to EUR" in parts[2]


def test_noun_pairs_and_single_tasks_stay_whole() -> None:
    for text in (
        "salt and pepper shakers for sale",
        "search for cats and dogs",
        "list my open pull requests",
        "I run a bakery in Lyon. How much flour do I need for 40 loaves?",
    ):
        assert split_intents(text) == [text]


def test_fragments_are_glued_to_a_neighbour() -> None:
    parts = split_intents("Refund order 1234. Thanks!")
    assert parts == ["Refund order 1234. Thanks!"]


def test_many_tasks_are_capped() -> None:
    text = "; ".join(f"open ticket number {i} in the tracker" for i in range(10))
    assert len(split_intents(text)) == MAX_INTENTS


def test_a_configured_splitter_replaces_the_rules() -> None:
    class Halves:
        def split(self, query: str) -> Sequence[str]:
            return ["get the weather", " ", "book a taxi"]

    assert split_intents("weather, then a taxi", Halves()) == ["get the weather", "book a taxi"]
    assert split_intents("one thing only", None) == ["one thing only"]


def test_interleave_represents_every_intent_before_a_second_tool() -> None:
    full = ["flight.search", "flight.book", "flight.cancel", "hotel.book", "calendar.add"]
    per = [
        ["flight.search", "flight.book"],
        ["hotel.book", "hotel.search"],
        ["calendar.add", "calendar.list"],
    ]
    merged = interleave(full, per)
    assert merged[:3] == ["flight.search", "hotel.book", "calendar.add"]
    assert merged[3:] == ["flight.book", "flight.cancel"]
    assert set(merged) == set(full)  # nothing invented, nothing lost


def test_interleave_counts_a_shared_best_once() -> None:
    merged = interleave(["a", "b", "c"], [["a", "b"], ["a", "c"]])
    assert merged == ["a", "b", "c"]
