"""Tests for toolscout.evaluate.naive: the keyword-counter baseline."""

from __future__ import annotations

from pathlib import Path

from support import FIXTURES, embedder
from toolscout.cards import CapabilityCard
from toolscout.discovery.catalog import Catalog
from toolscout.evaluate.evalset import read_tools
from toolscout.evaluate.naive import naive_discover, naive_rank, naive_score
from toolscout.policy import Principal

A = CapabilityCard("a", "a", "Refund a card payment", tags=("refund",))
B = CapabilityCard("b", "b", "Send a payment reminder email")
C = CapabilityCard("c", "c", "Weather forecast", tags=("Weather",))
D = CapabilityCard("d", "d", "Issue a refund for an order")


def test_scores_by_hand() -> None:
    q = "refund my payment"
    # A: tag "refund" in the query +3; "refund" +1 and "payment" +1 in the summary -> 5
    assert naive_score(q, A) == 5
    # B: only "payment" is in the summary -> 1
    assert naive_score(q, B) == 1
    # C: nothing -> 0;  D: "refund" -> 1
    assert naive_score(q, C) == 0
    assert naive_score(q, D) == 1
    # case-insensitive tags and words: tag "Weather" +3, word "weather" +1
    assert naive_score("WEATHER today", C) == 4
    # words are matched as substrings of the summary, as the article's counter does
    assert naive_score("pay", B) == 1
    # each occurrence of a query word counts
    assert naive_score("payment payment", B) == 2


def test_rank_ties_keep_catalog_order_and_zero_never_returned() -> None:
    q = "refund my payment"
    assert naive_rank(q, [A, B, C, D]) == [("a", 5), ("b", 1), ("d", 1)]
    assert naive_rank(q, [D, C, B, A]) == [("a", 5), ("d", 1), ("b", 1)]
    assert naive_rank(q, [A, B, C, D], k=2) == [("a", 5), ("b", 1)]
    assert naive_rank("nothing matches zzz", [A, B, C, D]) == []


def test_discover_ranks_only_entitled_cards(tmp_path: Path) -> None:
    specs, _ = read_tools(FIXTURES / "eval" / "tools.jsonl")
    query = "salary and pay history of an employee"
    salary = "fx:hr.view_salary"  # offered to tenant acme only
    assert salary in [t for t, _ in naive_rank(query, [s.card for s in specs])]
    with Catalog.open(tmp_path / "n.db", embedder=embedder(), log=False) as cat:
        cat.add(specs)
        anyone = Principal.of("eval", scopes=["*", "toolscout:admin"])
        acme = Principal.of("hr", tenant="acme", scopes=["hr:read"])
        assert salary not in [t for t, _ in naive_discover(cat, query, anyone, k=None)]
        assert naive_discover(cat, query, acme, k=1) == [(salary, 6)]
