from __future__ import annotations

import datetime
import math

import pytest

from support import spec
from toolscout.cards import (
    CARD_TOKEN_WARN,
    Risk,
    WarningKind,
    card_tokens,
    check_unique,
    derived_summary,
    make_spec,
)
from toolscout.errors import CardError

#: draft-04 and REST habits real catalogs publish
DRAFT04 = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "required": True},
        "days": {"type": "integer", "minimum": 1, "exclusiveMinimum": True, "maximum": "50"},
    },
}


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
        ({"summary": "x"}, "id", "missing"),
        ({"id": "a.b", "summary": 42}, "summary", "must be a string"),
        ({"id": "bad\tid", "summary": "x"}, "id", "printable"),
        ({"id": "bad\nid", "summary": "x"}, "id", "printable"),
        ({"id": "a.b", "summary": "x", "risk": "scary"}, "risk", "not one of"),
        ({"id": "a.b", "summary": "x", "scopes": ["billing:*"]}, "scopes", "concrete"),
        ({"id": "a.b", "summary": "x", "scopes": "billing write"}, "scopes", "concrete"),
        ({"id": "a.b", "summary": "x", "tags": [1, 2]}, "tags", "list of strings"),
        ({"id": "a.b", "summary": "x", "colour": "red"}, "colour", "unknown field"),
        ({"id": "a.b\ud800", "summary": "x"}, "id", "lone surrogate ('\\ud800')"),
        ({"id": "a.b", "summary": "caf\udce9"}, "summary", "lone surrogate"),
        ({"id": "a.b", "summary": "x", "tags": ["ok", "\udc80"]}, "tags", "lone surrogate"),
        (
            {"id": "a.b", "summary": "x", "parameters": {"properties": {"q\ud800": {}}}},
            "parameters",
            "lone surrogate",
        ),
        ({"id": "a.b", "summary": "x", "parameters": []}, "parameters", "JSON Schema object"),
        ({"id": "a.b", "summary": "x", "parameters": {"type": "string"}}, "parameters", "'object'"),
        (
            {
                "id": "a.b",
                "summary": "x",
                "parameters": {"type": "object", "properties": {"q": {"$ref": "http://h/s"}}},
            },
            "parameters",
            "remote $ref 'http://h/s' refused",
        ),
        (
            {
                "id": "a.b",
                "summary": "x",
                "parameters": {"properties": {"n": {"maximum": math.nan}}},
            },
            "parameters",
            "/properties/n/maximum: nan: not representable in JSON",
        ),
        (
            {"id": "a.b", "summary": "x", "parameters": {"enum": [1, math.inf]}},
            "parameters",
            "/enum/1: inf",
        ),
        (
            {"id": "a.b", "summary": "x", "parameters": {"default": {1: "x"}}},
            "parameters",
            "key 1 is not a string",
        ),
        (
            {"id": "a.b", "summary": "x", "parameters": {"default": datetime.date(2024, 1, 1)}},
            "parameters",
            "a date",
        ),
        (
            {"id": "a.b", "summary": "x", "output_schema": {"$ref": "https://example.com/o.json"}},
            "output_schema",
            "remote $ref",
        ),
        (
            {
                "id": "a.b",
                "summary": "x",
                "parameters": {"properties": {"year": {"pattern": "(^[0-9]{4}$"}}},
            },
            "parameters",
            "at /properties/year/pattern: pattern '(^[0-9]{4}$' is refused: it does not compile",
        ),
        (
            {"id": "a.b", "summary": "x", "parameters": {"patternProperties": {"^(?!x)": {}}}},
            "parameters",
            "needs a backtracking engine",
        ),
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


def test_empty_description_gets_a_derived_summary_and_a_warning() -> None:
    s = make_spec(
        {
            "id": "rapid:getWeatherForecast",
            "description": "   ",
            "parameters": {"type": "object", "properties": {"city": {}, "days": {}}},
        }
    )
    assert s.card.summary == "Get weather forecast (city, days)."
    (w,) = s.warnings
    assert (w.tool_id, w.kind, w.field) == (
        "rapid:getWeatherForecast",
        WarningKind.EMPTY_SUMMARY,
        "summary",
    )
    assert "Get weather forecast" in str(w)
    # no parameters, no summary key at all
    assert make_spec({"id": "svc.ping"}).card.summary == "Ping."
    assert make_spec({"id": "svc.ping", "summary": "", "description": "Pings."}).warnings == ()


def test_derived_summary_caps_the_parameter_list() -> None:
    props = {f"p{i}": {} for i in range(10)}
    text = derived_summary("list_users", {"properties": props})
    assert text.startswith("List users (p0, p1,") and text.endswith("...).")


def test_invalid_schema_is_kept_as_published_with_a_warning() -> None:
    s = make_spec({"id": "mcp.forecast", "summary": "Forecast.", "parameters": DRAFT04})
    assert s.parameters == DRAFT04  # kept as published, nothing rewritten
    (w,) = s.warnings
    assert w.kind is WarningKind.INVALID_SCHEMA and w.field == "parameters"
    assert "2020-12" in w.message and "/properties/" in w.message and "more" in w.message
    # a schema that declares draft-04 is valid for what it declares: no warning
    declared = {"$schema": "http://json-schema.org/draft-04/schema#", **DRAFT04}
    declared["properties"] = {"days": {"type": "integer", "minimum": 1, "exclusiveMinimum": True}}
    assert make_spec({"id": "a.b", "summary": "x", "parameters": declared}).warnings == ()


def test_strict_turns_warnings_into_errors() -> None:
    with pytest.raises(CardError) as info:
        make_spec({"id": "a.b", "summary": "x", "parameters": DRAFT04}, strict=True)
    assert info.value.field == "parameters" and "strict" in str(info.value)
    with pytest.raises(CardError) as info:
        make_spec({"id": "a.b"}, strict=True)
    assert info.value.field == "summary"
    assert make_spec({"id": "a.b", "summary": "x"}, strict=True).warnings == ()


def test_warnings_do_not_change_identity_or_hash() -> None:
    a = make_spec({"id": "a.b", "summary": "B."})
    b = make_spec({"id": "a.b", "description": ""})
    assert b.warnings and not a.warnings
    assert a == b and a.content_hash() == b.content_hash()


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("billing.\u202erefund", "U+202E"),  # right-to-left override
        ("billing.re\u200bfund", "U+200B"),  # zero-width space
        ("\ufeffbilling.refund", "U+FEFF"),  # byte-order mark
        ("billing.refund\u2066", "U+2066"),  # left-to-right isolate
        ("billing.re\u00adfund", "U+00AD"),  # soft hyphen
        ("billing.\u3164refund", "U+3164"),  # Hangul filler
    ],
)
def test_ids_with_bidi_or_invisible_characters_are_refused(raw: str, code: str) -> None:
    with pytest.raises(CardError) as info:
        make_spec({"id": raw, "summary": "x"})
    assert info.value.field == "id" and code in str(info.value)


def test_ids_are_nfkc_normalised() -> None:
    fullwidth = "\uff42\uff49\uff4c\uff4c\uff49\uff4e\uff47.refund"  # ｂｉｌｌｉｎｇ.refund
    assert make_spec({"id": fullwidth, "summary": "x"}).id == "billing.refund"
    assert make_spec({"id": "ﬁles.read", "summary": "x"}).id == "files.read"  # the fi ligature
    with pytest.raises(CardError, match="duplicate id"):
        check_unique([make_spec({"id": fullwidth, "summary": "x"}), spec("billing.refund")])
