from __future__ import annotations

from pathlib import Path

from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.parts import (
    MAX_PARTS,
    PartRanking,
    joint_order,
    request_parts,
)
from toolscout.discovery.search import parse_query
from toolscout.policy import Principal
from toolscout.settings import SearchSettings


def test_a_short_request_is_read_whole() -> None:
    assert request_parts("refund order 1234 for the customer") == []
    # long, but one sentence with no clause boundary: one part
    one = "send the quarterly revenue summary spreadsheet to the finance director by email tonight"
    assert request_parts(one) == []


def test_a_long_request_is_cut_at_sentences_and_clauses() -> None:
    text = (
        "I'm planning a family holiday in Lisbon next month with my parents. "
        "Can you find flights from Berlin to Lisbon for four passengers? "
        "Also check the weather forecast for the first week, and convert 500 euros to dollars."
    )
    parts = request_parts(text)
    assert len(parts) == 4
    assert parts[1].startswith("Can you find flights")
    assert parts[2] == "Also check the weather forecast for the first week"
    assert parts[3].startswith("convert 500 euros")
    assert " ".join(parts).replace("  ", " ").count("Lisbon") == 2  # nothing dropped


def test_fragments_join_their_neighbour_and_the_count_is_capped() -> None:
    text = (
        "Look up the stock price of the company Acme Industries today. Thanks! "
        "Then show recent news articles about its products."
    )
    parts = request_parts(text)
    # "Thanks!" is no part of its own: it joins the part after it
    assert parts == [
        "Look up the stock price of the company Acme Industries today.",
        "Thanks! Then show recent news articles about its products.",
    ]
    many = " ".join(f"Find report number {i} about topic alpha{i} quickly." for i in range(12))
    cut = request_parts(many)
    assert len(cut) == MAX_PARTS
    assert "alpha11" in cut[-1]  # the rest joins the last part


def test_joint_order_covers_each_sure_part_before_a_second_tool_of_the_whole() -> None:
    whole = (["a1", "a2", "a3", "b2"], [1.0, 0.9, 0.8, 0.2])
    flights = PartRanking(["a1", "a2"], [1.0, 0.5], 0.9)
    hotels = PartRanking(["b1", "b2"], [1.0, 0.6], 0.6)
    chatter = PartRanking(["c1"], [1.0], 0.05)  # context: nothing it is sure of
    order, joint = joint_order(*whole, [flights, hotels, chatter])
    assert order[:2] == ["a1", "b1"]  # the hotel part is covered before a2
    assert "c1" not in order[:4]
    assert joint["a1"] > joint["a2"] > 0
    assert sorted(order) == sorted(joint)


def test_joint_order_of_unsure_parts_keeps_the_whole_ranking_on_top() -> None:
    whole = (["a", "b", "c"], [1.0, 0.7, 0.5])
    unsure = PartRanking(["z", "c"], [1.0, 0.9], 0.1)
    order, _ = joint_order(*whole, [unsure])
    assert order[:3] == ["a", "b", "c"]


def test_retriever_reads_a_long_request_in_parts(tmp_path: Path) -> None:
    specs = [
        spec("weather.forecast", summary="Weather forecast for a city: temperature and rain"),
        spec("fx.convert", summary="Convert an amount of money between currencies"),
        spec("flights.search", summary="Search flights between two airports on a date"),
        *[spec(f"misc.tool{i}", summary=f"Unrelated file utility number {i}") for i in range(9)],
    ]
    text = (
        "We are travelling to Oslo with the whole team for the conference next week. "
        "Search flights from Rome to Oslo on Monday morning, "
        "and convert 300 euros into Norwegian currency. "
        "Then show the weather forecast for Oslo that week."
    )
    on = SearchSettings()
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(specs)
        ent = cat.entitle(Principal.of("u", scopes=["*"]))
        df, n = cat.store.document_frequency()
        q = parse_query(text, df, n, on)
        got = cat.retriever(on).run(q, ent.ids)
        assert got.parts == request_parts(text) and len(got.parts) >= 3
        top3 = {c.id for c in got.candidates[:3]}
        assert top3 == {"weather.forecast", "fx.convert", "flights.search"}
        assert all(0 < c.fused <= 1 for c in got.candidates)
        off = cat.retriever(on.but(parts=False)).run(q, ent.ids)
        assert off.parts == []
        short = cat.retriever(on).run(parse_query("convert euros", df, n, on), ent.ids)
        assert short.parts == []
