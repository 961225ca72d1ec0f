"""The quick "certainly valid" check never accepts what the full validators refuse."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.errors import ArgumentError
from toolscout.gateway.quickcheck import compile_quick
from toolscout.gateway.validation import ArgumentValidator
from toolscout.schemas import make_validator

PLAIN = {
    "type": "object",
    "title": "echoArguments",
    "properties": {
        "text": {"type": "string", "title": "Text", "minLength": 1},
        "n": {"type": "integer", "minimum": 0, "maximum": 10},
        "x": {"type": ["number", "null"]},
        "unit": {"enum": ["c", "f"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "flag": {"type": "boolean", "default": False},
        "opts": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["text"],
    "additionalProperties": False,
}

VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 3, 11, 2.5, 3.0, -0.5, "", "a", "c", "f", "ab",
    [], ["a"], ["a", 1], ["a", "b", "c", "d"], {}, {"k": 1}, {"k": "v"}, {"k": True},
]  # fmt: skip


def _documents(rng: random.Random, n: int) -> list[Any]:
    keys = [*PLAIN["properties"], "other"]
    docs: list[Any] = [rng.choice(VALUES) for _ in range(n // 4)]
    for _ in range(n):
        docs.append({k: rng.choice(VALUES) for k in rng.sample(keys, rng.randint(0, 4))})
    return docs


def _schemas(rng: random.Random) -> list[Any]:
    """PLAIN, its parts, and variants of it with keywords dropped or loosened."""
    out: list[Any] = [PLAIN, True, False, {}, *PLAIN["properties"].values()]
    for _ in range(40):
        schema = {k: v for k, v in PLAIN.items() if rng.random() < 0.8}
        props = dict(schema.get("properties", {}))
        for name in list(props):
            if rng.random() < 0.3:
                del props[name]
        if props:
            schema["properties"] = props
        if rng.random() < 0.3:
            schema["additionalProperties"] = rng.choice([True, {"type": "string"}, False])
        out.append(schema)
    return out


@pytest.mark.parametrize("draft", ["toolscout", "2020-12", "draft7", "draft4"])
def test_the_quick_check_never_accepts_what_a_full_validator_refuses(draft: str) -> None:
    rng = random.Random(24)
    accepted = refused_full = 0
    for schema in _schemas(rng):
        quick = compile_quick(schema)
        assert quick is not None, schema
        if draft == "toolscout":
            if not isinstance(schema, dict):
                continue
            full = make_validator(schema)
            valid = full.is_valid
        else:
            cls = {
                "2020-12": jsonschema.Draft202012Validator,
                "draft7": jsonschema.Draft7Validator,
                "draft4": jsonschema.Draft4Validator,
            }[draft]
            if draft == "draft4" and isinstance(schema, bool):
                continue  # no boolean schemas in draft-04
            valid = cls(schema).is_valid
        for doc in _documents(rng, 60):
            ok = valid(doc)
            if quick(doc):
                accepted += 1
                assert ok, (schema, doc)
            refused_full += not ok
    # the generated cases exercise both sides: many accepted, many the full one refuses
    assert accepted > 300 and refused_full > 300


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "format": "email"},
        {"type": "string", "pattern": "^a$"},
        {"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}},
        {"anyOf": [{"type": "string"}]},
        {"const": 1},
        {"type": "integer", "exclusiveMinimum": True, "minimum": 0},
        {"properties": {"a": {"type": "string", "required": True}}},
        {"items": [{"type": "string"}]},
        {"enum": [1, True]},
        {"type": "any"},
        {"type": "object", "x-unknown": 1},
        {"properties": {"a": {"$schema": "http://json-schema.org/draft-04/schema#"}}},
    ],
)
def test_anything_beyond_the_plain_subset_is_left_to_the_full_validator(schema: Any) -> None:
    assert compile_quick(schema) is None


def test_integers_and_numbers_are_read_strictly() -> None:
    quick = compile_quick({"type": "integer"})
    assert quick is not None
    assert quick(3) and not quick(3.0) and not quick(True)
    number = compile_quick({"type": "number"})
    assert number is not None
    assert number(3) and number(2.5) and not number(False) and not number("1")


def _spec(schema: dict[str, Any]) -> ToolSpec:
    card = CapabilityCard(id="t.echo", name="echo", summary="Echo the text back.", source="mcp:t")
    return ToolSpec(card=card, parameters=schema)


def test_argument_refusals_are_still_the_full_validators() -> None:
    validator = ArgumentValidator()
    spec = _spec(PLAIN)
    validator.validate(spec, {"text": "hi", "n": 3, "tags": ["a"]})  # accepted quickly
    assert validator._compiled(spec).quick is not None
    with pytest.raises(ArgumentError) as caught:
        validator.validate(spec, {"text": "hi", "n": 3.0})
    assert caught.value.reason == "schema_mismatch"
    assert "n: 3.0 is not of type 'integer'" in str(caught.value)
    with pytest.raises(ArgumentError) as caught:
        validator.validate(spec, {"n": 1})
    assert "'text' is a required property" in str(caught.value)
    with pytest.raises(ArgumentError) as caught:
        validator.validate(spec, {"text": "hi", "other": 1})
    assert caught.value.reason == "unknown_parameter"
