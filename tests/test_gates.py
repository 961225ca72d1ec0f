"""Gates on the request's shape: a step around the ranker only where the request warrants it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support import embedder, spec
from toolscout import settings as settings_module
from toolscout.discovery import gates
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.parts import request_parts
from toolscout.discovery.search import parse_query
from toolscout.errors import ConfigError
from toolscout.policy import Principal
from toolscout.settings import SearchSettings

LONG = (
    "We are travelling to Oslo with the whole team for the conference next week. "
    "Search flights from Rome to Oslo on Monday morning, "
    "and convert 300 euros into Norwegian currency. "
    "Then show the weather forecast for Oslo that week."
)


def test_settings_spell_the_steps_and_features_of_the_gates() -> None:
    assert settings_module._GATE_STEPS == gates.STEPS
    assert settings_module._GATE_FEATURES == gates.FEATURES


def test_a_gate_is_parsed_from_its_spelling() -> None:
    g = gates.parse("exact_hits:terms<12")
    assert g == gates.Gate("exact_hits", "terms", 12.0, "lt")
    assert str(g) == "exact_hits:terms<12"
    assert gates.parse(" parts : chars >= 80.5 ") == gates.Gate("parts", "chars", 80.5, "ge")
    assert gates.parse_all(None) == tuple(gates.parse(s) for s in gates.SHIPPED)


@pytest.mark.parametrize(
    ("bad", "names"),
    [
        ("exact_hits terms<12", "spelt"),
        ("exact_hits:terms<=12", "spelt"),
        ("exact_hits:terms<-1", "spelt"),
        ("rerank:terms<12", "step must be one of"),
        ("parts:words>=3", "feature must be one of"),
    ],
)
def test_a_bad_gate_is_refused_naming_what_is_wrong(bad: str, names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        SearchSettings(step_gates=(bad,))
    with pytest.raises(ConfigError, match=names):
        gates.parse(bad)


def test_a_step_gated_twice_or_gates_not_in_a_tuple_are_refused() -> None:
    with pytest.raises(ConfigError, match="one step gate per step"):
        SearchSettings(step_gates=("parts:terms>=4", "parts:chars<100"))
    with pytest.raises(ConfigError, match="one step gate per step"):
        gates.parse_all(("parts:terms>=4", "parts:chars<100"))
    wrong: Any = "parts:terms>=4"
    with pytest.raises(ConfigError, match="tuple of strings"):
        SearchSettings(step_gates=wrong)


def test_the_shape_reads_terms_characters_sentences_and_parts() -> None:
    short = gates.request_shape("convert 300 euros to dollars")
    assert short == {"terms": 4.0, "chars": 28.0, "sentences": 1.0, "parts": 0.0}
    long = gates.request_shape(LONG)
    assert long["sentences"] == 3.0
    assert long["parts"] == float(len(request_parts(LONG))) >= 3
    assert long["terms"] > 12 and long["chars"] == len(LONG)


def test_a_step_is_on_unless_its_gate_says_no() -> None:
    plain = SearchSettings(step_gates=())
    assert gates.step_on("reformulate", LONG, plain)
    short_only = SearchSettings(step_gates=("reformulate:terms<8",))
    assert gates.step_on("reformulate", "convert euros", short_only)
    assert not gates.step_on("reformulate", LONG, short_only)
    # a gate on another step leaves this one alone
    assert gates.step_on("parts", LONG, short_only)
    long_only = SearchSettings(step_gates=("reformulate:terms>=8",))
    assert not gates.step_on("reformulate", "convert euros", long_only)
    assert gates.step_on("reformulate", LONG, long_only)


def test_the_retriever_reads_a_request_in_parts_only_where_the_gate_lets_it(
    tmp_path: Path,
) -> None:
    specs = [
        spec("weather.forecast", summary="Weather forecast for a city: temperature and rain"),
        spec("fx.convert", summary="Convert an amount of money between currencies"),
        spec("flights.search", summary="Search flights between two airports on a date"),
        *[spec(f"misc.tool{i}", summary=f"Unrelated file utility number {i}") for i in range(9)],
    ]
    on = SearchSettings()
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(specs)
        ent = cat.entitle(Principal.of("u", scopes=["*"]))
        df, n = cat.store.document_frequency()
        q = parse_query(LONG, df, n, on)
        assert cat.retriever(on).run(q, ent.ids).parts == request_parts(LONG)
        closed = on.but(step_gates=("parts:sentences<3",))
        assert cat.retriever(closed).run(q, ent.ids).parts == []
        opened = on.but(step_gates=("parts:sentences>=3",))
        assert cat.retriever(opened).run(q, ent.ids).parts == request_parts(LONG)


def test_discovery_applies_the_exact_hit_and_prerequisite_gates(tmp_path: Path) -> None:
    needs = {"type": "object", "properties": {"person_id": {"type": "string"}},
             "required": ["person_id"]}  # fmt: skip
    specs = [
        spec("movies.search_person", summary="Find film people by name."),
        spec(
            "movies.person_movie_credits", summary="The films a person acted in.", parameters=needs
        ),
        spec("movies.list_genres", summary="The list of film genres."),
        *[spec(f"misc.tool{i}", summary=f"Unrelated file utility number {i}") for i in range(9)],
    ]
    who = Principal.of("u", scopes=["*"])
    request = "Which films did Sofia Coppola direct?"
    with Catalog.open(tmp_path / "m.db", embedder=embedder(), log=False) as cat:
        cat.add(specs)
        got = cat.discover(request, who, k=3)
        assert "movies.search_person" in got.ids
        assert any(t.needed_by for t in got.tools)
        gated = SearchSettings(step_gates=("prerequisites:terms>=20",))
        got = cat.discover(request, who, k=3, settings=gated)
        assert all(t.needed_by == "" for t in got.tools)
        named = "use movies.list_genres to show the film genres"
        assert cat.discover(named, who, k=3).tools[0].exact
        no_exact = SearchSettings(step_gates=("exact_hits:terms>=20",))
        assert not any(t.exact for t in cat.discover(named, who, k=3, settings=no_exact).tools)


def test_the_shipped_gate_keeps_the_dedupe_for_short_requests_only() -> None:
    assert gates.parse_all(None) == (gates.Gate("dedupe", "terms", 10.0, "lt"),)
    shipped = SearchSettings()
    assert gates.step_on("dedupe", "convert 300 euros to dollars", shipped)
    assert not gates.step_on("dedupe", LONG, shipped)
    # no gates: the dedupe for every request, as before
    assert gates.step_on("dedupe", LONG, SearchSettings(step_gates=()))
