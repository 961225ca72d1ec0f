"""The groups tier keeps the best hits and adds their groups around them."""

from __future__ import annotations

from pathlib import Path

from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.groups import expand_groups
from toolscout.discovery.search import Candidate
from toolscout.policy import Principal


def test_ungrouped_best_hit_is_kept_first() -> None:
    group_of = {"w": "", "f1": "flights", "f2": "flights", "f3": "flights", "h1": "hotels"}
    out = expand_groups([Candidate("w"), Candidate("f1")], group_of, list(group_of), limit=4)
    assert [c.id for c in out] == ["w", "f1", "f2", "f3"]


def test_hits_are_never_dropped_and_the_budget_bounds_members() -> None:
    group_of = {"a1": "a", "a2": "a", "a3": "a", "b1": "b"}
    hits = [Candidate("b1"), Candidate("a1")]
    assert [c.id for c in expand_groups(hits, group_of, list(group_of), limit=1)] == ["b1", "a1"]
    costs = {"a1": 10, "a2": 50, "a3": 10, "b1": 10}
    out = expand_groups(
        hits, group_of, list(group_of), limit=10, token_cost=costs.__getitem__, token_budget=35
    )
    assert [c.id for c in out] == ["b1", "a1", "a3"]  # a2 does not fit, a3 does


def test_only_entitled_members_are_added() -> None:
    group_of = {"a1": "a", "a2": "a", "secret": "a"}
    out = expand_groups([Candidate("a1")], group_of, ["a1", "a2"])
    assert [c.id for c in out] == ["a1", "a2"]


TRAVEL = [
    ("flights.search", "flights", "Search flights between two airports on a date."),
    ("flights.book", "flights", "Book a seat on a chosen flight for a passenger."),
    ("flights.cancel", "flights", "Cancel a flight booking and request a refund."),
    ("flights.status", "flights", "Live departure and arrival status of a flight number."),
    ("flights.seat_map", "flights", "Show the seat map of a flight and pick a seat."),
    ("flights.baggage", "flights", "Add checked baggage to a flight booking."),
    ("hotels.search", "hotels", "Find hotels in a city for given check-in and check-out dates."),
    ("hotels.book", "hotels", "Reserve a hotel room for a guest."),
    ("hotels.cancel", "hotels", "Cancel a hotel reservation."),
    ("hotels.reviews", "hotels", "Read guest reviews of a hotel."),
    ("hotels.amenities", "hotels", "List a hotel's amenities: pool, gym, breakfast, parking."),
    ("cars.search", "cars", "Find rental cars available at a pick-up location."),
    ("cars.book", "cars", "Reserve a rental car."),
    ("cars.cancel", "cars", "Cancel a rental car reservation."),
    ("trains.search", "trains", "Search train connections between two stations."),
    ("trains.book", "trains", "Buy a train ticket."),
    ("weather.get_forecast", "", "Weather forecast for a place: rain, temperature and wind."),
    ("currency.convert", "", "Convert an amount between two currencies at today's rate."),
    ("visa.requirements", "", "Entry and visa requirements for a citizen visiting a country."),
    ("timezone.local_time", "", "The local time and time zone of a city."),
]


def test_rain_in_bali_returns_the_weather_tool_first(tmp_path: Path) -> None:
    specs = [spec(tid, summary, group=group) for tid, group, summary in TRAVEL]
    with Catalog.open(tmp_path / "travel.db", embedder=embedder(), log=False) as cat:
        cat.add(specs)
        who = Principal.of("u", scopes=["*"])
        cases = {
            "will it rain in Bali next week": "weather.get_forecast",
            "how much is 200 euros in yen": "currency.convert",
            "do I need a visa for Japan": "visa.requirements",
            "what time is it in Tokyo right now": "timezone.local_time",
            "book me a room in Lisbon": "hotels.book",
        }
        for query, want in cases.items():
            got = cat.discover(query, who, k=3)
            assert got.tier.value == "groups"
            assert got.ids[0] == want, (query, got.ids)
        rain = cat.discover("will it rain in Bali next week", who, k=3)
        groups = {tid: g for tid, g, _ in TRAVEL}
        # the other hits' groups come whole after the hits, within the cap
        assert len(rain.ids) <= 10
        for tid in rain.ids[3:]:
            assert groups[tid] in {groups[t] for t in rain.ids[:3]}
