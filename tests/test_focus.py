from __future__ import annotations

from pathlib import Path

import pytest

from toolscout.discovery.focus import GAP, focus, latest_user_turn
from toolscout.discovery.search import parse_query
from toolscout.errors import ConfigError, QueryError
from toolscout.settings import SearchSettings

FILLER = "The quarterly figures were reviewed by the committee and filed. " * 400


def test_a_short_request_is_untouched() -> None:
    assert focus("  refund order 42  ", 100) == "refund order 42"


def test_the_latest_user_turn_of_a_transcript_is_the_request() -> None:
    transcript = (
        "System: You are a helpful assistant with many tools.\n"
        f"User: summarise this report\n{FILLER}\n"
        "Assistant: Here is the summary.\n"
        "User: now email the summary to Dana and book a room for Friday\n"
    )
    assert (
        latest_user_turn(transcript) == "now email the summary to Dana and book a room for Friday"
    )
    assert focus(transcript, 2000) == "now email the summary to Dana and book a room for Friday"
    assert latest_user_turn("<|user|>find flights<|assistant|>ok") == "find flights"
    assert latest_user_turn("no roles here") == ""


def test_a_long_task_keeps_its_opening_sentences_and_its_closing_paragraph() -> None:
    task = (
        "Convert the attached invoice to euros. Then file it in the ledger.\n\n"
        + FILLER
        + "\n\nFinally, notify accounting on Slack."
    )
    got = focus(task, 1000)
    assert len(got) <= 1000
    assert got.startswith("Convert the attached invoice to euros. Then file it in the ledger.")
    assert got.endswith(GAP + "Finally, notify accounting on Slack.")


def test_text_without_sentences_is_cut_within_the_budget() -> None:
    got = focus("word " * 10_000, 500)
    assert 0 < len(got) <= 500


def test_parse_query_reads_a_long_request_in_part_and_refuses_a_huge_one() -> None:
    s = SearchSettings()
    task = "Look up the weather forecast for Lisbon. " + FILLER + "\n\nThen book a taxi."
    assert len(task) > s.max_query_chars
    q = parse_query(task, {}, 10, s)
    assert len(q.text) <= s.max_query_chars
    assert {"weather", "lisbon", "taxi"} <= set(q.terms)
    with pytest.raises(QueryError, match="the limit is 65536"):
        parse_query("x" * (s.max_request_chars + 1), {}, 10, s)


def test_the_budget_is_validated() -> None:
    with pytest.raises(ConfigError, match="max_query_chars"):
        SearchSettings(max_query_chars=10)
    with pytest.raises(ConfigError, match="max_query_chars"):
        SearchSettings(max_query_chars=100_000)


def test_discovery_serves_a_long_agent_prompt_instead_of_refusing_it(tmp_path: Path) -> None:
    from support import embedder, spec
    from toolscout.discovery.catalog import Catalog
    from toolscout.policy import Principal

    tools = [
        spec("mail.send_email", "Send an email to a recipient."),
        spec("rooms.book_room", "Book a meeting room for a date."),
        spec("docs.summarise", "Summarise a document."),
        spec("weather.forecast", "Weather forecast for a city."),
        spec("cabs.book_taxi", "Book a taxi to an address."),
    ]
    prompt = (
        "System: You are the office assistant.\n"
        f"User: summarise this report\n{FILLER}\nAssistant: Done.\n"
        "User: what is the weather forecast for Lisbon tomorrow?\n"
    )
    assert len(prompt) > SearchSettings().max_query_chars
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(tools)
        got = cat.discover(prompt, Principal.of("p"), k=2, tier="progressive")
    assert got.ids[0] == "weather.forecast"
