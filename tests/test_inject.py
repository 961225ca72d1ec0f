"""Tests for toolscout.discovery.inject, against the real o200k tokenizer.

Regenerate the golden files with ``TOOLSCOUT_UPDATE_GOLDEN=1 pytest tests/test_inject.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema.validators import Draft202012Validator

from toolscout.cards import CapabilityCard, ToolSpec, make_spec
from toolscout.discovery.inject import (
    ALL_BELOW,
    FORMATS,
    GEMINI_KEYWORDS,
    GROUPS_UP_TO,
    MAX_NAME,
    Tier,
    choose_tier,
    description,
    gemini_schema,
    group_members,
    name_map,
    render,
    schema_tokens,
    tool_name,
)
from toolscout.discovery.tokencount import count_json, count_text
from toolscout.errors import CardError, ConfigError, FormatError

GOLDEN = Path(__file__).parent / "golden" / "inject"
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")

SEARCH = {
    "id": "crm.contacts.search",
    "summary": "Search CRM contacts by name, company or tag.",
    "group": "crm",
    "parameters": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "required": ["query"],
        "properties": {
            "query": {"type": "string", "description": "Free-text search.", "minLength": 1},
            "status": {"type": "string", "enum": ["active", "archived"], "default": "active"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
            "owner": {"type": ["string", "null"], "description": "Owner email, or null."},
            "page": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 100},
                    "cursor": {"type": "string", "examples": ["abc"]},
                },
            },
        },
    },
}
PING = {"id": "status/ping", "summary": "Check that the service is up.", "group": "ops"}
DROP = {
    "id": "db/drop.partition",
    "summary": "Permanently drop one table partition.",
    "group": "db",
    "risk": "destructive",
    "scopes": ["db:admin"],
    "not_for": ["deleting single rows", "archiving old data."],
    "parameters": {
        "type": "object",
        "required": ["table", "partition"],
        "properties": {"table": {"type": "string"}, "partition": {"type": "string"}},
    },
    "output_schema": {
        "type": "object",
        "properties": {"dropped_rows": {"type": "integer"}},
        "required": ["dropped_rows"],
    },
}


@pytest.fixture()
def specs() -> list[ToolSpec]:
    return [make_spec(SEARCH), make_spec(PING), make_spec(DROP)]


def spec(tool_id: str, **extra: Any) -> ToolSpec:
    return make_spec({"id": tool_id, "summary": f"Tool {tool_id}.", **extra})


def walk(value: Any) -> Iterator[dict[str, Any]]:
    """Every dict inside value, recursively."""
    if isinstance(value, dict):
        yield value
        for sub in value.values():
            yield from walk(sub)
    elif isinstance(value, list):
        for sub in value:
            yield from walk(sub)


def schema_nodes(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every schema node (skipping the name → schema maps under ``properties``)."""
    yield schema
    for name, sub in schema.get("properties", {}).items():
        assert isinstance(name, str)
        yield from schema_nodes(sub)
    if "items" in schema:
        yield from schema_nodes(schema["items"])
    for sub in schema.get("anyOf", []):
        yield from schema_nodes(sub)


def desc_of(tool: dict[str, Any]) -> str:
    return str(tool["function"]["description"] if "function" in tool else tool["description"])


def params_of(tool: dict[str, Any], fmt: str) -> dict[str, Any] | None:
    key = {"anthropic": "input_schema", "mcp": "inputSchema"}.get(fmt, "parameters")
    holder = tool["function"] if fmt in ("openai", "langchain") else tool
    result: dict[str, Any] | None = holder.get(key)
    return result


@pytest.mark.parametrize("fmt", FORMATS)
def test_golden(specs: list[ToolSpec], fmt: str) -> None:
    text = json.dumps(render(specs, fmt), indent=2, ensure_ascii=False) + "\n"
    path = GOLDEN / f"{fmt}.json"
    if os.environ.get("TOOLSCOUT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text


def test_formats_are_unique_and_stable() -> None:
    assert FORMATS == ("openai", "openai-responses", "anthropic", "gemini", "mcp", "langchain")


@pytest.mark.parametrize("fmt", FORMATS)
def test_not_for_hints_reach_every_format(specs: list[ToolSpec], fmt: str) -> None:
    drop = render(specs, fmt)[2]
    assert desc_of(drop) == (
        "Permanently drop one table partition.\nNot for: deleting single rows; archiving old data."
    )
    assert desc_of(render(specs, fmt)[1]) == "Check that the service is up."


@pytest.mark.parametrize("fmt", FORMATS)
def test_names_and_params_are_valid_for_every_format(specs: list[ToolSpec], fmt: str) -> None:
    tools = render(specs, fmt)
    names = [str(t["function"]["name"] if "function" in t else t["name"]) for t in tools]
    assert names == list(name_map(specs))
    assert all(NAME_RE.match(name) for name in names)
    for tool in tools:
        params = params_of(tool, fmt)
        if params is not None:
            Draft202012Validator.check_schema(params)
            assert params["type"] == "object"


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic", "mcp", "langchain"])
def test_empty_parameters_render_as_empty_object(specs: list[ToolSpec], fmt: str) -> None:
    assert params_of(render(specs, fmt)[1], fmt) == {"type": "object", "properties": {}}


def test_shapes(specs: list[ToolSpec]) -> None:
    first = {fmt: render(specs, fmt)[0] for fmt in FORMATS}
    assert set(first["openai"]) == {"type", "function"}
    assert set(first["openai"]["function"]) == {"name", "description", "parameters"}
    assert first["langchain"] == first["openai"]
    assert set(first["openai-responses"]) == {"type", "name", "description", "parameters"}
    assert set(first["anthropic"]) == {"name", "description", "input_schema"}
    assert set(first["gemini"]) == {"name", "description", "parameters"}
    assert set(first["mcp"]) == {"name", "description", "inputSchema", "annotations"}
    assert first["anthropic"]["input_schema"] == specs[0].parameters


def test_gemini_drops_unsupported_keywords(specs: list[ToolSpec]) -> None:
    tools = render(specs, "gemini")
    assert not any("additionalProperties" in node for node in walk(tools))
    assert not any("$schema" in node or "examples" in node for node in walk(tools))
    for tool in tools:
        for node in schema_nodes(tool.get("parameters", {})):
            assert set(node) <= GEMINI_KEYWORDS
    assert "parameters" not in tools[1]  # no arguments: no parameters at all


def test_gemini_nullable(specs: list[ToolSpec]) -> None:
    owner = render(specs, "gemini")[0]["parameters"]["properties"]["owner"]
    assert owner == {"type": "string", "nullable": True, "description": "Owner email, or null."}
    optional = gemini_schema({"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "N"})
    assert optional == {"title": "N", "nullable": True, "type": "integer"}
    both = gemini_schema({"type": ["string", "integer"]})
    assert both == {"anyOf": [{"type": "string"}, {"type": "integer"}]}


def test_gemini_refs_one_of_and_const() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/Node"}, "v": {"const": "x"}},
            }
        },
        "properties": {
            "root": {"$ref": "#/$defs/Node"},
            "pick": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        },
    }
    out = gemini_schema(schema)
    assert "$defs" not in out
    root = out["properties"]["root"]
    assert root["properties"]["child"] == {"type": "object"}  # recursion stops
    assert root["properties"]["v"] == {"enum": ["x"]}
    assert out["properties"]["pick"] == {"anyOf": [{"type": "string"}, {"type": "number"}]}


def test_mcp_annotations_and_output_schema(specs: list[ToolSpec]) -> None:
    writer = spec("crm/contacts.update", risk="write")
    admin = spec("iam/role.grant", risk="admin", scopes=["iam:admin"])
    tools = render([*specs, writer, admin], "mcp")
    hints = [tool["annotations"] for tool in tools]
    assert hints[0] == {"readOnlyHint": True, "destructiveHint": False}
    assert hints[2] == {"readOnlyHint": False, "destructiveHint": True}
    assert hints[3] == hints[4] == {"readOnlyHint": False, "destructiveHint": False}
    assert tools[2]["outputSchema"]["required"] == ["dropped_rows"]
    assert ["outputSchema" in tool for tool in tools] == [False, False, True, False, False]


def test_mcp_tools_validate_against_the_sdk_model(specs: list[ToolSpec]) -> None:
    from mcp.types import Tool

    for tool in render(specs, "mcp"):
        parsed = Tool.model_validate(tool)
        assert parsed.model_dump(by_alias=True, exclude_none=True, mode="json") == tool


def test_render_copies_the_schema(specs: list[ToolSpec]) -> None:
    before = json.dumps(specs[0].parameters, sort_keys=True)
    for fmt in FORMATS:
        for node in walk(render(specs, fmt)):
            node.clear()
    assert json.dumps(specs[0].parameters, sort_keys=True) == before


def test_unknown_format() -> None:
    with pytest.raises(FormatError) as info:
        render([], "cohere")
    assert info.value.name == "cohere"
    for fmt in FORMATS:
        assert fmt in str(info.value)


def test_render_nothing() -> None:
    assert render([], "openai") == []
    assert name_map([]) == {}


def test_tool_name_sanitises(specs: list[ToolSpec]) -> None:
    assert tool_name(specs[2].card) == "db_drop_partition"
    assert tool_name(specs[1].card) == "status_ping"
    assert tool_name(spec("3d/render").card) == "_3d_render"  # Gemini: no leading digit
    assert tool_name(spec("ok-name_1").card) == "ok-name_1"
    assert name_map(specs)["db_drop_partition"] == "db/drop.partition"


def test_tool_name_truncates_with_stable_hash() -> None:
    long_a = spec("svc/" + "a" * 100 + ".one")
    long_b = spec("svc/" + "a" * 100 + ".two")
    name_a, name_b = tool_name(long_a.card), tool_name(long_b.card)
    assert len(name_a) == len(name_b) == MAX_NAME
    assert name_a != name_b
    assert name_a == tool_name(long_a.card)
    assert NAME_RE.match(name_a)
    assert name_map([long_a, long_b]) == {name_a: long_a.id, name_b: long_b.id}


def test_colliding_ids_get_hash_suffix() -> None:
    clean, dotted, slashed = spec("a_b"), spec("a.b"), spec("a/b")
    names = name_map([clean, dotted, slashed])
    assert names["a_b"] == "a_b"  # a valid id keeps its own name
    assert sorted(names.values()) == ["a.b", "a/b", "a_b"]
    assert all(NAME_RE.match(name) for name in names)
    # order-independent: the same id gets the same name whatever the order
    assert name_map([slashed, clean, dotted]) == names
    rendered = [tool["name"] for tool in render([clean, dotted, slashed], "anthropic")]
    assert rendered == list(names)
    # no collision in this shortlist: no suffix
    assert name_map([dotted]) == {"a_b": "a.b"}


def test_description_without_hints() -> None:
    card = CapabilityCard(id="x", name="x", summary="Does x.")
    assert description(card) == "Does x."


def test_schema_tokens(specs: list[ToolSpec]) -> None:
    one = schema_tokens(specs[:1])
    assert one > 0
    assert schema_tokens(specs[:2]) > one
    assert schema_tokens(specs) > schema_tokens(specs[:2])
    assert schema_tokens(specs) == count_json(render(specs, "openai"))
    for fmt in FORMATS:
        assert schema_tokens(specs, fmt) == count_json(render(specs, fmt))
    assert schema_tokens([]) == count_json([])
    with pytest.raises(FormatError):
        schema_tokens(specs, "nope")


@pytest.mark.parametrize(
    ("n", "tier"),
    [(0, Tier.ALL), (9, Tier.ALL), (10, Tier.GROUPS), (30, Tier.GROUPS), (31, Tier.PROGRESSIVE)],
)
def test_tier_boundaries(n: int, tier: Tier) -> None:
    assert choose_tier(n) is tier


def test_tier_constants() -> None:
    assert (ALL_BELOW, GROUPS_UP_TO) == (10, 30)
    assert [t.value for t in Tier] == ["all", "groups", "progressive"]


def test_tier_override() -> None:
    assert choose_tier(500, Tier.ALL) is Tier.ALL
    assert choose_tier(3, "progressive") is Tier.PROGRESSIVE
    assert choose_tier(3, " Groups ") is Tier.GROUPS
    assert choose_tier(3, None) is Tier.ALL


def test_tier_bad_override() -> None:
    with pytest.raises(ConfigError) as info:
        choose_tier(3, "some")
    message = str(info.value)
    assert "'some'" in message
    for tier in Tier:
        assert tier.value in message


def test_group_members(specs: list[ToolSpec]) -> None:
    assert group_members(specs, ["db", "crm"]) == [specs[0], specs[2]]
    assert group_members(specs, iter(["ops"])) == [specs[1]]
    assert group_members(specs, []) == []
    assert group_members(specs, ["nope"]) == []


def test_render_errors_on_an_unresolvable_collision() -> None:
    dotted = spec("a.b")
    suffixed = tool_name(spec("a_b").card) + "_" + hashlib.sha256(b"a.b").hexdigest()[:8]
    with pytest.raises(CardError) as info:
        render([dotted, spec("a_b"), spec(suffixed)], "openai")
    assert "a.b" in str(info.value)
    same_twice = name_map([dotted, dotted])
    assert same_twice == {"a_b": "a.b"}  # one id twice is not a collision


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_cached_rendering_is_a_new_copy_each_time(specs: list[ToolSpec], fmt: str) -> None:
    first = render(specs, fmt)
    text = json.dumps(first)
    for node in walk(first):
        node.clear()
    again = render(specs, fmt)
    assert json.dumps(again) == text
    assert again is not first and all(a is not b for a, b in zip(again, first, strict=True))


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_shortlist_count_equals_counting_the_whole_list(
    specs: list[ToolSpec], fmt: str
) -> None:
    odd = [
        spec("t.space", summary="Ends in a space and a quote ' "),
        spec("t.digits", summary="Version 2", parameters={"type": "object", "maximum": 100}),
        spec("t.marks", summary="Café naïve ré\u0301sumé 🚚 — ünïcode\u0301"),
        spec("t.slash", summary="Path a/b/", parameters={"properties": {"p": {"default": "/"}}}),
    ]
    every = [*specs, *odd]
    for start in range(len(every)):
        for size in (1, 2, 3, 5):
            chosen = every[start : start + size]
            whole = count_json(json.loads(json.dumps(render(chosen, fmt))))
            assert schema_tokens(chosen, fmt) == whole
            assert count_json(render(chosen, fmt)) == whole
            # and against the tokenizer over the exact text sent
            text = json.dumps(render(chosen, fmt), separators=(",", ":"), ensure_ascii=False)
            from toolscout.discovery.tokencount import count_text

            assert whole == count_text(text)


def test_a_changed_spec_is_rendered_again() -> None:
    before = spec("t.change", parameters={"properties": {"a": {"type": "string"}}})
    after = spec("t.change", parameters={"properties": {"b": {"type": "integer"}}})
    assert "a" in render([before], "openai")[0]["function"]["parameters"]["properties"]
    assert "b" in render([after], "openai")[0]["function"]["parameters"]["properties"]
    for one in (before, after):
        text = json.dumps(render([one], "openai"), separators=(",", ":"))
        assert schema_tokens([one], "openai") == count_text(text)


def test_values_json_cannot_hold_are_rendered_as_given() -> None:
    import datetime

    day = datetime.date(2026, 1, 15)
    odd = ToolSpec(spec("t.date").card, {"properties": {"d": {"default": day}}})
    rendered = render([odd], "anthropic")[0]
    assert rendered["input_schema"]["properties"]["d"]["default"] == day
    assert render([odd], "anthropic")[0]["input_schema"]["properties"]["d"]["default"] == day
