"""A shortlisted tool that needs an identifier the request lacks brings its finder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import embedder, spec
from toolscout.cards import ToolSpec
from toolscout.discovery.calibrate import FieldTerms
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.prerequisites import (
    FinderIndex,
    add_prerequisites,
    entity_of,
    gives_identifier,
    needed_entities,
)
from toolscout.discovery.search import Candidate
from toolscout.policy import Principal
from toolscout.settings import SearchSettings


def _needs(*params: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {p: {"type": "string"} for p in params},
        "required": list(params),
    }


MOVIES: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("movies.search_person", "Find film people by name.", _needs("query"), []),
    ("movies.search_movie", "Look up films by their title.", _needs("query"), []),
    ("movies.person_movie_credits", "The films a person acted in, directed or produced.",
     _needs("person_id"), []),
    ("movies.list_person_images", "Profile pictures of a person.", _needs("person_id"), []),
    ("movies.movie_credits", "Cast and crew of a film: actors, director, writers.",
     _needs("movie_id"), []),
    ("movies.movie_reviews", "What critics wrote about a film.", _needs("movie_id"), []),
    ("movies.top_rated", "The best rated films of all time.", {}, []),
    ("movies.now_playing", "Films in cinemas this week.", {}, []),
    ("movies.genres", "The list of film genres.", {}, []),
    ("movies.trending", "What people watch most today.", {}, []),
    ("music.search_artist", "Find musicians by name.", _needs("query"), ["music:read"]),
    ("music.artist_albums", "The albums a musician released.", _needs("artistId"), ["music:read"]),
    ("music.album_tracks", "The songs on an album.", _needs("album_id"), ["music:read"]),
]  # fmt: skip


def _specs() -> list[ToolSpec]:
    return [
        spec(tid, summary, parameters=params, scopes=scopes)
        for tid, summary, params, scopes in MOVIES
    ]


@pytest.fixture(scope="module")
def movies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Catalog]:
    with Catalog.open(
        tmp_path_factory.mktemp("movies") / "movies.db", embedder=embedder(), log=False
    ) as cat:
        cat.add(_specs())
        yield cat


EVERYONE = Principal.of("u", scopes=["music:read"])
NO_MUSIC = Principal.of("v", scopes=[])


def test_entity_of_reads_identifier_parameters_only() -> None:
    assert entity_of("person_id") == ("person",)
    assert entity_of("playlistId") == ("playlist",)
    assert entity_of("userIDs") == ("user",)
    assert entity_of("channel-id") == ("channel",)
    for not_an_entity in ("id", "ids", "paid", "valid", "android", "query", "x_id"):
        assert entity_of(not_an_entity) == (), not_an_entity


def test_identifier_values_in_the_request() -> None:
    for given in ("credits of person 5566", "order A1B2C3", "user usr_42x",
                  "id 3fa85f64-5717-4562-b3fc-2c963f66afa6"):  # fmt: skip
        assert gives_identifier(given), given
    for named in ("movies directed by Sofia Coppola", "the top-1 rated movie",
                  "her 2nd album", "films of the 1990s", ""):  # fmt: skip
        assert not gives_identifier(named), named


def test_needed_entities_are_the_required_identifiers() -> None:
    s = spec("t", parameters={**_needs("movie_id", "query"), "properties": {
        "movie_id": {"type": "string"}, "query": {"type": "string"},
        "person_id": {"type": "string"}}})  # fmt: skip
    assert needed_entities(s) == [("movi",)]  # person_id is optional: not needed
    assert needed_entities(spec("u", parameters={"type": "object", "required": "x"})) == []


def test_the_credits_tool_brings_the_person_search(movies: Catalog) -> None:
    got = movies.discover(
        "how many movies were directed by Sofia Coppola", EVERYONE, k=5, tier="progressive"
    )
    assert "movies.person_movie_credits" in got.ids
    at = got.ids.index("movies.person_movie_credits")
    assert got.ids[at + 1] == "movies.search_person"
    finder = got.tools[at + 1]
    assert finder.needed_by == "movies.person_movie_credits"
    assert finder.to_dict()["needed_by"] == "movies.person_movie_credits"
    assert got.tools[0].needed_by == ""
    assert len(got.ids) == 5


def test_a_given_identifier_needs_no_finder(movies: Catalog) -> None:
    got = movies.discover("film credits of person 5566", EVERYONE, k=5, tier="progressive")
    assert "movies.person_movie_credits" in got.ids
    assert all(t.needed_by == "" for t in got.tools)


def test_off_switch(movies: Catalog) -> None:
    query = "how many movies were directed by Sofia Coppola"
    off = SearchSettings(prerequisites=False)
    got = movies.discover(query, EVERYONE, k=5, tier="progressive", settings=off)
    assert all(t.needed_by == "" for t in got.tools)


def test_a_finder_the_caller_may_not_use_is_never_added(movies: Catalog) -> None:
    query = "which albums did Radiohead release"
    allowed = movies.discover(query, EVERYONE, k=3, tier="progressive")
    assert allowed.ids[:2] == ["music.artist_albums", "music.search_artist"], allowed.ids
    # without music:read neither the albums tool nor its finder is entitled
    denied = movies.discover(query, NO_MUSIC, k=5, tier="progressive")
    assert not any(t.startswith("music.") for t in denied.ids), denied.ids


def _index() -> FinderIndex:
    return FinderIndex(FieldTerms.of(s.card for s in _specs()).name)


def test_a_finder_that_needs_the_same_identifier_finds_nothing() -> None:
    index = _index()
    # list_person_images is named like a finder of person but requires person_id itself
    assert set(index.finders(("person",), {s.id for s in _specs()})) == {
        "movies.search_person",
        "movies.list_person_images",
    }
    by_id = {s.id: s for s in _specs()}
    out = add_prerequisites(
        [Candidate("movies.person_movie_credits")],
        5,
        request="films by Sofia Coppola",
        index=index,
        allowed=set(by_id) - {"movies.search_person"},
        specs_of=lambda ids: [by_id[t] for t in ids if t in by_id],
        candidates=[],
    )
    assert [c.id for c in out] == ["movies.person_movie_credits"]


def test_the_shortlist_keeps_its_length_and_its_order() -> None:
    by_id = {s.id: s for s in _specs()}
    chosen = [
        Candidate("movies.movie_credits", fused=1.0, exact="name"),
        Candidate("movies.person_movie_credits", fused=0.8),
        Candidate("movies.top_rated", fused=0.5),
    ]
    out = add_prerequisites(
        chosen,
        3,
        request="who directed Lost in Translation and what else did she make",
        index=_index(),
        allowed=set(by_id),
        specs_of=lambda ids: [by_id[t] for t in ids if t in by_id],
        candidates=[Candidate("movies.search_movie", fused=0.3)],
    )
    assert [c.id for c in out] == [
        "movies.movie_credits",
        "movies.search_movie",
        "movies.person_movie_credits",
    ]
    assert out[0].exact == "name"
    assert out[1].needed_by == "movies.movie_credits" and out[1].fused == 0.3


def test_the_token_budget_still_holds(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "m.db", embedder=embedder(), log=False) as cat:
        cat.add(_specs())
        query = "how many movies were directed by Sofia Coppola"
        full = cat.discover(query, EVERYONE, k=5, tier="progressive")
        budget = full.tokens.injected - 1
        tight = cat.discover(query, EVERYONE, k=5, tier="progressive", token_budget=budget)
        assert tight.tokens.injected <= budget
