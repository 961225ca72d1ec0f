"""discovery/query.py: a name several tools share mentions only the ones the request
qualifies (a word of their id the others' ids lack); none when it qualifies none."""

from __future__ import annotations

from support import spec
from toolscout.discovery.query import PhraseIndex, qualified, word_forms

SHARED = [
    spec("imdb.search_movies", name="Search Movies"),
    spec("tmdb.search_movies", name="Search Movies"),
    spec("moviesdb.search_movies", name="Search Movies"),
    spec("weather.get_forecast_daily", name="Get Forecast Daily"),
]
ALL = frozenset(s.id for s in SHARED)


def test_a_shared_name_mentions_no_tool_when_the_request_names_no_service() -> None:
    idx = PhraseIndex(SHARED, df={})
    assert idx.find("please search movies about dragons", ALL) == {}
    # unresolved, every tool of the name: what the guarantee did before
    assert set(idx.find("please search movies about dragons", ALL, resolve=False)) == {
        "imdb.search_movies",
        "tmdb.search_movies",
        "moviesdb.search_movies",
    }


def test_a_request_that_is_the_shared_name_alone_asks_for_every_tool_of_it() -> None:
    idx = PhraseIndex(SHARED, df={})
    assert len(idx.find("Search Movies", ALL)) == 3
    assert len(idx.find("search_movies", ALL)) == 3


def test_a_shared_name_mentions_the_tools_the_request_qualifies() -> None:
    idx = PhraseIndex(SHARED, df={})
    assert idx.find("search movies on IMDb about dragons", ALL) == {"imdb.search_movies": "name"}
    both = idx.find("search movies on imdb and tmdb", ALL)
    assert set(both) == {"imdb.search_movies", "tmdb.search_movies"}
    # a name only one tool has is a mention as before, whatever else the request says
    assert idx.find("get forecast daily for Paris", ALL) == {"weather.get_forecast_daily": "name"}


def test_a_name_shared_with_a_tool_not_entitled_is_not_ambiguous() -> None:
    idx = PhraseIndex(SHARED, df={})
    only = frozenset({"tmdb.search_movies", "weather.get_forecast_daily"})
    assert idx.find("search movies about dragons", only) == {"tmdb.search_movies": "name"}


def test_shared_identifiers_are_resolved_the_same_way() -> None:
    specs = [spec("github.create_issue", name="create_issue"),
             spec("gitlab.create_issue", name="create_issue")]  # fmt: skip
    idx = PhraseIndex(specs, df={})
    allowed = frozenset(s.id for s in specs)
    assert idx.find("call create_issue", allowed) == {}
    assert idx.find("call create_issue on gitlab", allowed) == {"gitlab.create_issue": "name"}


def test_qualified_ignores_words_every_candidate_shares_and_stop_words() -> None:
    ids = ["stb:Movies API::Search", "stb:IMDb API::Search", "stb:The API::Search"]
    assert qualified(ids, frozenset({"api", "search", "stb"})) == frozenset()
    assert qualified(ids, frozenset({"the"})) == frozenset()  # a stop word tells none apart
    assert qualified(ids, frozenset({"imdb"})) == frozenset({"stb:IMDb API::Search"})
    assert qualified(ids, frozenset({"im", "db"})) == frozenset({"stb:IMDb API::Search"})
    assert qualified(ids, frozenset({"movies", "imdb"})) == frozenset(ids[:2])
    assert word_forms("IMDb search_movies") == frozenset({"im", "db", "imdb", "search", "movies"})


def test_ids_that_read_the_same_words_are_one_name_spelt_twice() -> None:
    specs = [spec("bfcl.CalculateTax", name="CalculateTax"),
             spec("bfcl.calculate_tax", name="calculate_tax")]  # fmt: skip
    idx = PhraseIndex(specs, df={})
    allowed = frozenset(s.id for s in specs)
    assert set(idx.find("calculate tax for my income", allowed)) == allowed
    assert qualified(["x:AclApi.add", "x:acl_api.add"], frozenset()) == frozenset(
        {"x:AclApi.add", "x:acl_api.add"}
    )
