"""discovery/query.py: of the copies of a name a request cannot tell apart (a tenant's
own, one shared by a few tenants, the platform-wide one), the mention goes to the copy
most specific to the caller; a catalog without tenants is unchanged, and nothing outside
the caller's entitlement is ever mentioned."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from support import embedder, spec
from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.query import PhraseIndex, closest, closest_first
from toolscout.policy import PolicyConfig, Principal, entitle

NAME = "jira_create_issue"
COPIES = [
    spec("acme.jira.create_issue", name=NAME, tenants=["acme"]),
    spec("pair.jira.create_issue", name=NAME, tenants=["acme", "globex"]),
    spec("shared.jira.create_issue", name=NAME),
    spec("globex.jira.create_issue", name=NAME, tenants=["globex"]),
    spec("acme.jira.close_issue", name="jira_close_issue", tenants=["acme"]),
]
ASK = "jira: create issue 4821"


def by_id(specs: list[ToolSpec], tenant: str) -> Mapping[str, CapabilityCard]:
    """The cards a principal of ``tenant`` is entitled to, as the pipeline has them."""
    who = Principal.of("u", tenant, scopes=["*"])
    return entitle([s.card for s in specs], who, PolicyConfig()).by_id


def test_the_callers_own_copy_is_the_mention_when_the_request_cannot_tell_copies_apart() -> None:
    idx = PhraseIndex(COPIES, df={})
    acme = by_id(COPIES, "acme")
    assert set(acme) == {"acme.jira.create_issue", "pair.jira.create_issue",
                         "shared.jira.create_issue", "acme.jira.close_issue"}  # fmt: skip
    assert idx.find(ASK, frozenset(acme), cards=acme) == {"acme.jira.create_issue": "name"}
    # without the cards: round eighteen's rule, no copy is a mention (retrieval ranks them)
    assert idx.find(ASK, frozenset(acme)) == {}
    globex = by_id(COPIES, "globex")
    assert idx.find(ASK, frozenset(globex), cards=globex) == {"globex.jira.create_issue": "name"}


def test_a_copy_offered_to_fewer_tenants_comes_before_the_platform_wide_one() -> None:
    idx = PhraseIndex(COPIES, df={})
    # a tenant without its own copy: the one it shares with one other tenant, not the
    # platform's
    mine = [c for c in COPIES if c.id != "acme.jira.create_issue"]
    acme = by_id(mine, "acme")
    assert idx.find(ASK, frozenset(acme), cards=acme) == {"pair.jira.create_issue": "name"}
    # a caller of no tenant is offered the platform's copy alone: a mention as before
    nobody = by_id(COPIES, "")
    assert idx.find(ASK, frozenset(nobody), cards=nobody) == {"shared.jira.create_issue": "name"}


def test_a_request_that_names_the_copy_still_gets_that_copy() -> None:
    idx = PhraseIndex(COPIES, df={})
    acme = by_id(COPIES, "acme")
    got = idx.find("jira create issue on the shared workspace", frozenset(acme), cards=acme)
    assert got == {"shared.jira.create_issue": "name"}
    # the request that is the name alone asks for every copy, as before
    assert len(idx.find(NAME, frozenset(acme), cards=acme)) == 3


def test_nothing_outside_the_entitlement_is_mentioned() -> None:
    idx = PhraseIndex(COPIES, df={})
    acme = by_id(COPIES, "acme")
    every = {s.id: s.card for s in COPIES}  # more cards than the caller may use
    allowed = frozenset(acme) - {"acme.jira.create_issue"}
    got = idx.find(ASK, allowed, cards=every)
    assert set(got) <= allowed
    assert got == {"pair.jira.create_issue": "name"}
    # an entitled copy whose card is not given: nothing is told apart
    assert idx.find(ASK, frozenset(acme), cards={}) == {}


def test_the_callers_own_tools_of_one_name_are_not_told_apart() -> None:
    specs = [
        spec("acme.imdb.search_movies", name="Search Movies", tenants=["acme"]),
        spec("acme.tmdb.search_movies", name="Search Movies", tenants=["acme"]),
        spec("shared.search_movies", name="Search Movies"),
    ]
    idx = PhraseIndex(specs, df={})
    acme = by_id(specs, "acme")
    assert idx.find("please search movies about dragons", frozenset(acme), cards=acme) == {}
    got = idx.find("search movies on imdb", frozenset(acme), cards=acme)
    assert got == {"acme.imdb.search_movies": "name"}


def test_a_catalog_without_tenants_finds_the_same_with_or_without_the_cards() -> None:
    specs = [
        spec("imdb.search_movies", name="Search Movies"),
        spec("tmdb.search_movies", name="Search Movies"),
        spec("moviesdb.search_movies", name="Search Movies"),
        spec("CalculateTax", name="CalculateTax"),
        spec("calculate_tax", name="calculate_tax"),
        spec("weather.get_forecast_daily", name="Get Forecast Daily"),
    ]
    idx = PhraseIndex(specs, df={})
    cards = by_id(specs, "")
    allowed = frozenset(cards)
    for text in ("please search movies about dragons", "search movies on imdb and tmdb",
                 "Search Movies", "what is calculate tax for 10 dollars",
                 "get forecast daily for Paris", "call calculate_tax now"):  # fmt: skip
        assert idx.find(text, allowed, cards=cards) == idx.find(text, allowed), text


def test_closest_reads_the_offer_not_the_ids() -> None:
    cards = {s.id: s.card for s in COPIES}
    three = ["shared.jira.create_issue", "pair.jira.create_issue", "acme.jira.create_issue"]
    assert closest(three, cards) == {"acme.jira.create_issue"}
    assert closest(["shared.jira.create_issue", "pair.jira.create_issue"], cards) == {
        "pair.jira.create_issue"
    }
    # offered alike: nothing told apart
    assert closest(["acme.jira.create_issue", "globex.jira.create_issue"], cards) == frozenset()
    assert closest([], cards) == frozenset()


def test_a_ranking_puts_the_callers_own_copy_in_the_first_place_its_name_holds() -> None:
    cards = by_id(COPIES, "acme")
    ranked = ["shared.jira.create_issue", "acme.jira.close_issue", "pair.jira.create_issue",
              "acme.jira.create_issue"]  # fmt: skip
    got = closest_first(ranked, cards, "open a jira issue")
    assert got == ["acme.jira.create_issue", "acme.jira.close_issue", "pair.jira.create_issue",
                   "shared.jira.create_issue"]  # fmt: skip
    assert sorted(got) == sorted(ranked)  # the same ids, the other name in its place


def test_a_ranking_the_request_tells_copies_apart_in_is_left_as_it_is() -> None:
    cards = by_id(COPIES, "acme")
    ranked = ["shared.jira.create_issue", "acme.jira.create_issue"]
    assert closest_first(ranked, cards, "the shared jira: create issue") == ranked


def test_a_ranking_without_tenants_or_copies_is_unchanged() -> None:
    specs = [
        spec("imdb.search_movies", name="Search Movies"),
        spec("tmdb.search_movies", name="Search Movies"),
        spec("weather.get_forecast_daily", name="Get Forecast Daily"),
    ]
    cards = by_id(specs, "")
    ranked = ["tmdb.search_movies", "weather.get_forecast_daily", "imdb.search_movies"]
    assert closest_first(ranked, cards, "search movies") == ranked
    # copies offered alike (two tenants' own, seen by a caller of neither: not entitled,
    # but given) keep their order too
    every = {c.id: c.card for c in COPIES}
    two = ["globex.jira.create_issue", "acme.jira.create_issue"]
    assert closest_first(two, every, "create issue") == two
    assert closest_first([], cards, "") == []


def test_discovery_shows_the_callers_own_copy_first_and_never_another_tenants(
    tmp_path: Path,
) -> None:
    """Through the whole pipeline (exact mentions and the ranking before selection): a
    request naming a shared name gets the caller's own copy first, another tenant's copy
    never, and a request that names the platform's copy gets that one first."""
    filler = [spec(f"svc.tool_{i}", f"Looks up record kind {i} in the archive.") for i in range(30)]
    with Catalog.open(tmp_path / "copies.db", embedder=embedder()) as cat:
        cat.add([*COPIES, *filler])
        for tenant, own in (
            ("acme", "acme.jira.create_issue"),
            ("globex", "globex.jira.create_issue"),
        ):
            who = Principal.of("u", tenant, scopes=["*"])
            for text in (ASK, "please open a ticket in jira, create issue for the outage"):
                got = cat.discover(text, who, k=3, tier="progressive").ids
                assert got[0] == own, (tenant, text, got)
                others = {c.id for c in COPIES if c.card.tenants and tenant not in c.card.tenants}
                assert not others & set(got)
        acme = Principal.of("u", "acme", scopes=["*"])
        named = cat.discover("jira create issue on the shared workspace", acme, k=3).ids
        assert named[0] == "shared.jira.create_issue"
