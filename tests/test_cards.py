from __future__ import annotations

import pytest

from support import spec
from toolscout.cards import CARD_TOKEN_WARN, Risk, card_tokens, check_unique, make_spec
from toolscout.errors import CardError


def test_make_spec_fills_defaults_and_normalises() -> None:
    s = make_spec(
        {
            "id": "billing.issue_refund",
            "summary": "  Refund   an invoice. ",
            "scopes": ["billing:write"],
            "aliases": ["give money back", " "],
            "risk": "write",
            "parameters": {"type": "object", "properties": {"invoice_id": {"type": "string"}}},
        }
    )
    assert s.card.name == "issue_refund"
    assert s.card.summary == "Refund an invoice."
    assert s.card.aliases == ("give money back",)
    assert s.card.risk is Risk.WRITE
    assert s.parameters["properties"]["invoice_id"]["type"] == "string"


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        ({"id": "a.b"}, "summary", "missing"),
        ({"summary": "x"}, "id", "missing"),
        ({"id": "bad id", "summary": "x"}, "id", "without spaces"),
        ({"id": "a.b", "summary": "x", "risk": "scary"}, "risk", "not one of"),
        ({"id": "a.b", "summary": "x", "scopes": ["billing:*"]}, "scopes", "concrete"),
        ({"id": "a.b", "summary": "x", "scopes": "billing write"}, "scopes", "concrete"),
        ({"id": "a.b", "summary": "x", "tags": [1, 2]}, "tags", "list of strings"),
        ({"id": "a.b", "summary": "x", "colour": "red"}, "colour", "unknown field"),
        ({"id": "a.b", "summary": "x", "parameters": []}, "parameters", "JSON Schema object"),
        (
            {"id": "a.b", "summary": "x", "parameters": {"type": "object", "properties": 3}},
            "parameters",
            "not a valid JSON Schema",
        ),
        ({"id": "a.b", "summary": "x", "parameters": {"type": "string"}}, "parameters", "'object'"),
    ],
)
def test_bad_cards_name_the_card_and_field(
    data: dict[str, object], field: str, fragment: str
) -> None:
    with pytest.raises(CardError) as info:
        make_spec(data)
    assert info.value.field == field
    assert fragment in str(info.value)


def test_duplicate_ids_rejected() -> None:
    with pytest.raises(CardError, match="duplicate id"):
        check_unique([spec("a.x"), spec("a.y"), spec("a.x")])


def test_card_tokens_counts_real_tokens() -> None:
    small = spec("a.x", "Refund an invoice.")
    big = spec("a.y", "Refund an invoice. " * 20)
    assert 3 < card_tokens(small.card) < CARD_TOKEN_WARN < card_tokens(big.card)


def test_content_hash_changes_with_content_only() -> None:
    a, b = spec("a.x", "One."), spec("a.x", "One.")
    assert a.content_hash() == b.content_hash()
    assert a.content_hash() != spec("a.x", "Two.").content_hash()
    assert a.with_aliases(["new words"]).content_hash() != a.content_hash()


def test_card_text_includes_aliases_and_not_for() -> None:
    s = spec(
        "orders.find_order",
        "Find one order.",
        aliases=["where is my order"],
        not_for=["search by email — use orders.search_orders"],
    )
    assert "where is my order" in s.card.text()
    assert "Not for: search by email" in s.card.text()
