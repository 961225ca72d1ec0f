"""How much of a request the catalog's vocabulary covers, and when the dense path leads."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import spec
from toolscout import Toolscout
from toolscout.console.access import Level
from toolscout.console.playground import hidden_for
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.coverage import (
    LOW_COVERAGE,
    coverage,
    dense_led,
    read_request,
    reads_other_languages,
)
from toolscout.embed.base import Embedder
from toolscout.embed.coalesce import CoalescingEmbedder
from toolscout.embed.e5 import MultilingualE5Embedder
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.embed.queries import QuerySide
from toolscout.lint.overlap import measure
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.telemetry.report import catalog_ranker

DF = {"weather": 3, "forecast": 2, "citi": 5, "1000": 1}


def test_coverage_is_the_share_of_terms_the_catalog_has() -> None:
    assert coverage(("weather", "forecast"), DF) == 1.0
    assert coverage(("weather", "temp", "demain", "lisbonn"), DF) == 0.25
    assert coverage(("天気", "予報"), DF) == 0.0
    assert coverage((), DF) == 1.0  # nothing to cover is nothing uncovered


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedder:
    return MultilingualE5Embedder()


def test_only_an_encoder_that_reads_other_languages_says_so(
    e5: MultilingualE5Embedder,
) -> None:
    assert reads_other_languages(e5)
    assert not reads_other_languages(MiniLMEmbedder())
    assert reads_other_languages(CoalescingEmbedder(e5))  # through any wrapper
    assert reads_other_languages(QuerySide(CoalescingEmbedder(e5), e5))
    assert not reads_other_languages(CoalescingEmbedder(CoalescingEmbedder(MiniLMEmbedder())))


def test_dense_leads_only_on_an_uncovered_request_with_a_multilingual_encoder(
    e5: MultilingualE5Embedder,
) -> None:
    on = SearchSettings()
    uncovered = ("明日", "日の", "天気", "気予", "予報", "1000", "san")  # 1 of 7 covered
    assert coverage(uncovered, DF) < LOW_COVERAGE
    led = dense_led(on, uncovered, DF, e5)
    assert led.dense and not led.lexical
    assert led == on.but(lexical=False)  # nothing else changes
    # a covered request, an English encoder, or a strategy without both paths: unchanged
    assert dense_led(on, ("weather", "forecast", "lisbonn"), DF, e5) is on
    assert dense_led(on, uncovered, DF, MiniLMEmbedder()) is on
    bm25 = on.but(dense=False)
    assert dense_led(bm25, uncovered, DF, e5) is bm25
    dense = on.but(lexical=False)
    assert dense_led(dense, uncovered, DF, e5) is dense


TOOLS = [
    spec("weather.forecast", "Weather forecast for a city, by day."),
    spec("cabs.book_taxi", "Book a taxi to an address in a city."),
    spec("mail.send_email", "Send an email to a recipient."),
    spec("music.san_francisco_concerts", "Concerts in San Francisco."),
]


def _shortlist(cat: Catalog, query: str) -> tuple[list[str], tuple[str, ...]]:
    got = cat.discover(query, Principal.of("p"), k=3, tier="progressive")
    return got.ids, got.trace.lexical


def test_a_request_in_another_language_is_read_by_the_dense_path(
    tmp_path: Path, e5: MultilingualE5Embedder
) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        # Japanese: only the place name is shared; BM25 would rank the concerts first
        ids, lexical = _shortlist(cat, "San Francisco の明日の天気予報を教えてください")
        assert lexical == () and ids[0] == "weather.forecast"
        # the same request in the catalog's words keeps both paths
        ids, lexical = _shortlist(cat, "weather forecast for San Francisco tomorrow")
        assert lexical and ids[0] == "weather.forecast"


def test_the_english_default_keeps_both_paths_for_any_request(tmp_path: Path) -> None:
    embedder: Embedder = MiniLMEmbedder()
    with Catalog.open(tmp_path / "c.db", embedder=embedder, log=False) as cat:
        cat.add(TOOLS)
        _, lexical = _shortlist(cat, "San Francisco の明日の天気予報を教えてください")
        assert lexical  # the place name is the best evidence an English model has


JA = "San Francisco の明日の天気予報を教えてください"


def test_the_console_hidden_view_reads_a_request_as_discovery_does(
    tmp_path: Path, e5: MultilingualE5Embedder
) -> None:
    """The hidden-tools view ranks the tools policy refuses a caller by the same rule as
    discovery: an uncovered request by the dense path alone (BM25 alone would put the
    concerts first on the place name)."""
    ops = [spec(t.id, t.card.summary, scopes=["ops"]) for t in TOOLS]
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(ops)
        shown = cat.discover(JA, Principal.of("ops", scopes=["ops"]), k=3, tier="progressive")
        hidden, counts, total = hidden_for(
            Toolscout(cat), Principal.of("root"), Level.PLATFORM, Principal.of("p"), JA
        )
        assert total == sum(counts.values()) == len(ops) and shown.trace.lexical == ()
        assert [h.tool_id for h in hidden][:1] == shown.ids[:1] == ["weather.forecast"]


def test_lint_reads_a_probe_as_discovery_does(tmp_path: Path, e5: MultilingualE5Embedder) -> None:
    """A not-for hint in another language: discovery reads it by the dense path and shows
    the tool it sends to first, so the hint separates the pair; lint's probe must be read
    the same way (else BM25's place name makes the concerts "steal" their own hint)."""
    hinted = spec(
        "music.san_francisco_concerts",
        "Concerts in San Francisco.",
        not_for=[f"{JA} — use weather.forecast"],
    )
    tools = [hinted if t.id == hinted.id else t for t in TOOLS]
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(tools)
        ids, lexical = _shortlist(cat, JA)
        assert lexical == () and ids[0] == "weather.forecast"
        pairs, probes = measure(tools, cat)
        assert probes > len(tools)
        assert not [p for p in pairs if {p.a, p.b} == {hinted.id, "weather.forecast"}], pairs


def test_read_request_is_parse_then_the_coverage_rule(e5: MultilingualE5Embedder) -> None:
    on = SearchSettings()
    query, led = read_request(JA, DF, 10, on, e5)
    assert query.terms and led == on.but(lexical=False)
    assert read_request(JA, DF, 10, on, MiniLMEmbedder())[1] is on
    assert read_request("weather forecast", DF, 10, on, e5)[1] is on


def test_the_report_ranks_a_missed_phrase_as_discovery_does(
    tmp_path: Path, e5: MultilingualE5Embedder
) -> None:
    """The false-negative report suggests a missed phrase as an alias only when it ranks
    its tool near the top: ranked as discovery ranks it (here the dense path alone)."""
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        ids, _ = _shortlist(cat, JA)
        rank = catalog_ranker(cat)
        assert rank("", ids[0], JA) == 1 and ids[0] == "weather.forecast"
