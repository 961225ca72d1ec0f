"""How much of a request the catalog's vocabulary covers, and when the dense path leads."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import e5_embedder, spec
from toolscout import Toolscout
from toolscout.console.access import Level
from toolscout.console.playground import hidden_for
from toolscout.discovery import crosslingual
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.coverage import (
    LOW_COVERAGE,
    coverage,
    dense_led,
    may_lead,
    reads_other_languages,
)
from toolscout.discovery.pipeline import retrieve_or_skip
from toolscout.discovery.search import PhraseIndex, Retriever, parse_query
from toolscout.embed.base import Embedder
from toolscout.embed.coalesce import CoalescingEmbedder
from toolscout.embed.e5 import MultilingualE5Embedder
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.embed.queries import QuerySide
from toolscout.lint.overlap import measure
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.memory import MemoryStore
from toolscout.telemetry.report import catalog_ranker

DF = {"weather": 3, "forecast": 2, "citi": 5, "1000": 1}


@pytest.fixture(autouse=True)
def _nothing_carried_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule as it reads a request whose words carry nothing over to the catalog's (no
    catalog word is this close to any): the cross-lingual bridge (tests/test_crosslingual.py)
    otherwise gives these requests lexical terms before the rule reads them."""
    monkeypatch.setattr(crosslingual, "MATCH_COSINE", 2.0)


def test_coverage_is_the_share_of_terms_the_catalog_has() -> None:
    assert coverage(("weather", "forecast"), DF) == 1.0
    assert coverage(("weather", "temp", "demain", "lisbonn"), DF) == 0.25
    assert coverage(("天気", "予報"), DF) == 0.0
    assert coverage((), DF) == 1.0  # nothing to cover is nothing uncovered


@pytest.fixture(scope="module")
def e5() -> Embedder:
    """The multilingual model, one per test process, over the run's vector cache (support)."""
    return e5_embedder()


def test_only_an_encoder_that_reads_other_languages_says_so(
    e5: MultilingualE5Embedder,
) -> None:
    assert reads_other_languages(MultilingualE5Embedder())  # the model itself (not loaded)
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


class _Counts(MemoryStore):
    """A store whose lexical index counts :data:`DF` (``raises``: may not be asked)."""

    def __init__(self, raises: bool = False) -> None:
        super().__init__()
        self.raises = raises

    def document_frequency(self) -> tuple[dict[str, int], int]:
        if self.raises:
            raise AssertionError("the term counts were read")
        return DF, 10


def _retriever(store: MemoryStore, embedder: Embedder) -> Retriever:
    return Retriever(store, embedder, PhraseIndex([], {}), SearchSettings())


def test_the_retriever_reads_a_request_by_the_rule(e5: MultilingualE5Embedder) -> None:
    """:meth:`Retriever.for_request` is :func:`dense_led` over every term of the parsed
    request; with the English default it reads nothing, not even the term counts."""
    on = SearchSettings()
    ja, covered = parse_query(JA, DF, 10, on), parse_query("weather forecast", DF, 10, on)
    multilingual = _retriever(_Counts(), e5)
    led = multilingual.for_request(ja)
    assert led is not multilingual and led.settings == on.but(lexical=False)
    assert led.settings == dense_led(on, (*ja.terms, *ja.dropped), DF, e5)
    assert multilingual.for_request(covered) is multilingual
    english = _retriever(_Counts(raises=True), MiniLMEmbedder())
    assert not may_lead(on, english.embedder)
    assert english.for_request(ja) is english  # returned before reading anything
    with pytest.raises(AssertionError, match="term counts"):
        _retriever(_Counts(raises=True), e5).for_request(ja)


def test_a_caller_running_the_retriever_itself_gets_the_rule(
    tmp_path: Path, e5: MultilingualE5Embedder
) -> None:
    """A caller that parses a request and retrieves it itself, with the catalog's retriever
    or with the pipeline's retrieval stage (as evaluate/fitting.py's grid does), ranks it
    as discovery does without asking for the rule: the dense path alone, its tool first
    (BM25's place name would put the concerts in the lexical list)."""
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        ids, _ = _shortlist(cat, JA)
        df, n_docs = cat.store.document_frequency()
        query = parse_query(JA, df, n_docs, cat.settings)
        ent = cat.entitle(Principal.of("p"))
        direct = cat.retriever().run(query, ent.ids)
        staged, skipped = retrieve_or_skip(cat, query, ent, cat.settings)
        for got in (direct, staged):
            assert got.lexical_ids == [] and got.dense_weight == 1.0
            assert got.candidates[0].id == ids[0] == "weather.forecast"
        assert skipped == ""
        # the same request in the catalog's words keeps both paths
        covered = parse_query("weather forecast for San Francisco", df, n_docs, cat.settings)
        assert cat.retriever().run(covered, ent.ids).lexical_ids


def test_the_rule_comes_before_the_encoder_skip(tmp_path: Path, e5: MultilingualE5Embedder) -> None:
    """A request the rule reads by the dense path alone is not answered lexical only
    because it names a tool (``encoder_skip``): the rule is read first, as in discovery."""
    named = (
        "cabs.book_taxi で明日の朝七時に東京駅から羽田空港までのタクシーを予約してください。"
        "荷物が多いので大きい車をお願いします"
    )
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        df, _ = cat.store.document_frequency()
        query = parse_query(named, df, len(TOOLS), cat.settings)
        assert coverage((*query.terms, *query.dropped), df) < LOW_COVERAGE
        skipping = SearchSettings(encoder_skip=True)
        got = cat.discover(named, Principal.of("p"), k=3, tier="progressive", settings=skipping)
        assert got.trace.encoder_skipped == "" and got.trace.lexical == ()
        assert got.trace.dense and got.ids[0] == "cabs.book_taxi"


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
