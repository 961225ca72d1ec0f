"""Tests for toolscout.schemas: problems, remote refs, and the validator execution uses."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft3Validator, Draft202012Validator

from support import CountingServer, counting_server
from toolscout.errors import ArgumentError, SchemaError
from toolscout.schemas import (
    MAX_DEPTH,
    check_arguments,
    ecma_regex,
    invalid_patterns,
    make_validator,
    remote_refs,
    schema_problems,
)

DRAFT04_STYLE = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 5, "exclusiveMinimum": True, "required": True},
        "limit": {"type": "number", "maximum": "50"},
        "code": {"type": "string", "pattern": "^INV-[0-9]+$"},
    },
}


def codes(schema: Any) -> list[str]:
    return [p.code for p in schema_problems(schema)]


# --------------------------------------------------------------------------- problems


def test_clean_schema_has_no_problems() -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "minLength": 1}, "n": {"type": "integer"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    assert schema_problems(schema) == []
    assert schema_problems({}) == []


def test_draft04_habits_are_named_with_their_path() -> None:
    problems = schema_problems(DRAFT04_STYLE)
    found = {(p.code, p.path) for p in problems}
    assert ("draft04_exclusive_bool", "/properties/count/exclusiveMinimum") in found
    assert ("required_in_property", "/properties/count/required") in found
    assert ("string_number_bound", "/properties/limit/maximum") in found
    assert all(p.message for p in problems)


def test_not_an_object_and_unknown_draft_and_invalid_2020_12() -> None:
    assert codes([1, 2]) == ["not_an_object"]
    assert "not_an_object" in codes({"type": "string"})
    assert "unknown_draft" in codes({"$schema": "http://example.com/mine"})
    assert "invalid_2020_12" in codes({"properties": {"a": {"type": "strin"}}})
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "minItems": -1}
    assert "invalid_for_draft" in codes(draft7)


def test_a_declared_draft_04_schema_is_clean_under_draft_04() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "properties": {"a": {"type": "integer", "minimum": 1, "exclusiveMinimum": True}},
    }
    assert schema_problems(schema) == []


def test_invalid_pattern_is_a_problem_and_refuses_instead_of_being_dropped() -> None:
    schema = {"properties": {"a": {"type": "string", "pattern": "(^[0-9]{4}$"}}}
    assert "invalid_pattern" in codes(schema)
    assert [p.path for p in invalid_patterns(schema)] == ["/properties/a/pattern"]
    validator = make_validator(schema)
    # dropped, the pattern would accept anything; kept, it refuses every string
    with pytest.raises(SchemaError) as err:
        validator.is_valid({"a": "x"})
    assert err.value.reason == "invalid_pattern" and "does not compile" in str(err.value)
    assert not validator.is_valid({"a": 1})


def test_a_pattern_needing_backtracking_is_refused_with_the_reason() -> None:
    for pattern in ("^(?=.*[0-9]).{8,}$", "^(a)\\1$", "(?<y>a)\\k<y>", "(?<=a)b"):
        problems = invalid_patterns({"properties": {"p": {"pattern": pattern}}})
        assert len(problems) == 1 and "backtracking" in problems[0].message, pattern
    keys = invalid_patterns({"patternProperties": {"([": {}, "^x-": {}}})
    assert [p.path for p in keys] == ["/patternProperties/(["]
    assert "does not compile" in keys[0].message


def test_a_catastrophic_pattern_is_matched_in_linear_time() -> None:
    schema = {
        "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}},
        "patternProperties": {"^(b+)+$": {"type": "integer"}},
    }
    validator = make_validator(schema)
    assert validator.is_valid({"a": "a" * 40})
    # 20 then 40 characters: a backtracking engine takes ~0.3 s at 20 and years at 40
    for n in (20, 40, 10_000):
        start = time.perf_counter()
        assert not validator.is_valid({"a": "a" * n + "!", "b" * n + "!": "s"})
        assert time.perf_counter() - start < 0.05, n


def test_deep_schema_is_a_problem_not_a_recursion_error() -> None:
    schema: dict[str, Any] = {"type": "object"}
    node = schema
    for _ in range(5000):
        node["properties"] = {"a": {"type": "object"}}
        node = node["properties"]["a"]
    assert codes(schema) == ["too_deep"]
    with pytest.raises(SchemaError):
        make_validator(schema)


# --------------------------------------------------------------------------- remote refs


def test_remote_refs_are_listed_and_local_ones_are_not() -> None:
    schema = {
        "$defs": {"id": {"type": "string"}},
        "properties": {
            "a": {"$ref": "#/$defs/id"},
            "b": {"$ref": "http://127.0.0.1:9/internal"},
            "c": {"items": {"$dynamicRef": "other.json#x"}},
        },
    }
    assert remote_refs(schema) == ["http://127.0.0.1:9/internal", "other.json#x"]
    assert "remote_ref" in codes(schema)


def test_an_empty_ref_is_the_root_and_local() -> None:
    assert remote_refs({"properties": {"a": {"items": {"$ref": ""}}}}) == []


def test_a_ref_to_an_embedded_id_is_local() -> None:
    schema = {
        "$id": "urn:example:root",
        "$defs": {"s": {"$id": "urn:example:s", "type": "string"}},
        "properties": {"a": {"$ref": "urn:example:s"}, "b": {"$ref": "urn:example:root#/$defs/s"}},
    }
    assert remote_refs(schema) == []
    validator = make_validator(schema)
    assert validator.is_valid({"a": "x", "b": "y"})
    assert not validator.is_valid({"a": 1})
    assert not validator.is_valid({"b": 1})


@pytest.fixture
def ref_server() -> Iterator[tuple[str, type[CountingServer]]]:
    with counting_server() as served:
        yield served


def test_a_remote_ref_is_refused_and_never_fetched(
    ref_server: tuple[str, type[CountingServer]],
) -> None:
    url, counter = ref_server
    schema = {"properties": {"a": {"$ref": url}}}
    with pytest.raises(SchemaError) as err:
        make_validator(schema)
    assert err.value.reason == "remote_ref" and url in str(err.value)
    # jsonschema by itself would fetch it: prove the server is reachable
    assert counter.hits == 0


def test_an_unresolvable_local_ref_is_a_typed_error() -> None:
    validator = make_validator({"properties": {"a": {"$ref": "#/$defs/missing"}}})
    with pytest.raises(SchemaError) as err:
        validator.validate({"a": 1})
    assert err.value.reason == "unresolvable_ref"


# --------------------------------------------------------------------------- the validator


def test_declared_draft_is_used() -> None:
    d4 = make_validator(
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "properties": {"a": {"type": "integer", "minimum": 3, "exclusiveMinimum": True}},
        }
    )
    assert d4.draft == "4" and not d4.lenient
    assert not d4.is_valid({"a": 3}) and d4.is_valid({"a": 4})
    assert make_validator({}).draft == "202012"


def test_lenient_reading_means_what_draft04_habits_meant() -> None:
    validator = make_validator(DRAFT04_STYLE)
    assert validator.lenient
    assert validator.is_valid({"count": 6})
    assert not validator.is_valid({"count": 5})  # exclusive minimum
    assert not validator.is_valid({})  # required: true
    assert not validator.is_valid({"count": 6, "limit": 50.5})  # "maximum": "50"
    assert validator.is_valid({"count": 6, "limit": 50})


def test_pattern_dollar_is_end_of_input() -> None:
    validator = make_validator({"properties": {"c": {"type": "string", "pattern": "^INV-[0-9]+$"}}})
    assert validator.is_valid({"c": "INV-1024"})
    assert not validator.is_valid({"c": "INV-1024\n"})
    # plain jsonschema accepts it: the override is what refuses
    assert Draft202012Validator({"pattern": "^INV-[0-9]+$"}).is_valid("INV-1024\n")


def test_pattern_digits_are_ascii_and_pattern_properties_too() -> None:
    validator = make_validator(
        {
            "properties": {"d": {"type": "string", "pattern": "^\\d+$"}},
            "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
        }
    )
    assert validator.is_valid({"d": "123"})
    assert not validator.is_valid({"d": "١٢٣"})  # Arabic-Indic digits: not ECMA \d
    assert not validator.is_valid({"x-a": "s"})
    assert validator.is_valid({"x-a\n": "s"})  # the key does not match: $ is end of input


def test_ecma_translation() -> None:
    assert ecma_regex("^a$") == "^a$"  # RE2's $ is the end of the input, as ECMA's
    assert ecma_regex("[$]") == "[$]"
    assert ecma_regex("\\$") == "\\$"
    assert ecma_regex("[\\d.]") == "[0-9.]"
    assert ecma_regex("(?<y>a)") == "(?P<y>a)"
    assert ecma_regex("\\u00e9") == "\\x{00e9}"


def test_ecma_semantics_of_dot_space_and_unicode_escapes() -> None:
    validator = make_validator(
        {
            "properties": {
                "dot": {"type": "string", "pattern": "^a.b$"},
                "space": {"type": "string", "pattern": "^a\\sb$"},
                "e": {"type": "string", "pattern": "^caf\\u00e9$"},
            }
        }
    )
    assert validator.is_valid({"dot": "axb", "space": "a\u00a0b", "e": "café"})
    assert not validator.is_valid({"dot": "a\nb"})
    assert not validator.is_valid({"dot": "a\u2028b"})
    assert not validator.is_valid({"e": "cafe"})


def test_integer_is_strict() -> None:
    validator = make_validator({"properties": {"n": {"type": "integer"}}})
    assert validator.is_valid({"n": 3})
    assert not validator.is_valid({"n": 3.0})
    assert not validator.is_valid({"n": True})
    with pytest.raises(ArgumentError, match="not of type 'integer'"):
        validator.validate({"n": 3.0}, tool_id="t")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused_anywhere(bad: float) -> None:
    validator = make_validator({"properties": {"x": {"type": "number", "minimum": 0}}})
    for args in ({"x": bad}, {"x": 1, "y": [1, {"z": bad}]}):
        with pytest.raises(ArgumentError) as err:
            validator.validate(args, tool_id="t")
        assert err.value.reason == "non_finite_number"
    with pytest.raises(ArgumentError):
        check_arguments([[{"a": bad}]])


def test_deep_arguments_are_an_argument_error() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    validator = make_validator({"type": "object"})
    with pytest.raises(ArgumentError) as err:
        validator.validate({"a": deep}, tool_id="t")
    assert err.value.reason == "arguments_too_deep"
    nested: Any = 1
    for _ in range(MAX_DEPTH - 2):
        nested = {"a": nested}
    check_arguments({"a": nested})


def test_recursive_local_ref_schema_validates_bounded_depth() -> None:
    schema = {
        "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
        "properties": {"tree": {"$ref": "#/$defs/node"}},
    }
    validator = make_validator(schema)
    tree: Any = {}
    for _ in range(MAX_DEPTH - 3):
        tree = {"child": tree}
    assert validator.is_valid({"tree": tree})
    assert not validator.is_valid({"tree": {"child": 5}})


# ------------------------------------------------------------- lenient never accepts more


bounds = st.integers(-20, 20)


@st.composite
def draft04_schema(draw: st.DrawFn) -> dict[str, Any]:
    prop: dict[str, Any] = {"type": draw(st.sampled_from(["integer", "number"]))}
    if draw(st.booleans()):
        prop["minimum"] = draw(bounds)
        prop["exclusiveMinimum"] = draw(st.booleans())
    if draw(st.booleans()):
        prop["maximum"] = draw(bounds)
        prop["exclusiveMaximum"] = draw(st.booleans())
    required = draw(st.booleans())
    prop["required"] = required
    return {"type": "object", "properties": {"v": prop}}


values = st.one_of(st.integers(-25, 25), st.floats(-25, 25, allow_nan=False), st.just("s"))


@settings(max_examples=300, deadline=None)
@given(draft04_schema(), st.one_of(st.just({}), st.fixed_dictionaries({"v": values})))
def test_lenient_reading_equals_draft04_and_never_accepts_what_strict_refuses(
    schema: dict[str, Any], args: dict[str, Any]
) -> None:
    lenient = make_validator(schema)
    accepted = lenient.is_valid(args)
    # the meaning the author wrote (boolean exclusive bounds and a boolean required
    # in a property are draft-03/04 habits; draft 3 reads both)
    assert accepted == Draft3Validator(schema).is_valid(args)
    # the strict 2020-12 reading, on the parts it can read (a boolean "required" in a
    # property and boolean exclusive bounds are not valid 2020-12)
    prop = schema["properties"]["v"]
    readable = {k: v for k, v in prop.items() if not isinstance(v, bool)}
    strict_readable = {"type": "object", "properties": {"v": readable}}
    if accepted:
        assert Draft202012Validator(strict_readable).is_valid(args)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab\n$^[]\\d.", max_size=8), st.text(alphabet="ab1\n", max_size=6))
def test_ecma_pattern_never_accepts_what_python_search_refuses(pattern: str, text: str) -> None:
    import re
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            python = re.compile(pattern)
    except re.error:
        return
    validator = make_validator({"properties": {"s": {"type": "string", "pattern": pattern}}})
    if validator.lenient:
        return
    if validator.is_valid({"s": text}):
        assert python.search(text) is not None


# ------------------------------------------------------------------ the cheap 2020-12 check

#: a keyword of the cheap check's set, with a value of the right shape or not
_PLAIN_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 3), st.floats(-2, 3), st.text(max_size=3),
    st.sampled_from(["string", "integer", "object", "strin"]),
    st.lists(st.sampled_from(["a", "b", "string", "number", "nul"]), max_size=3),
)  # fmt: skip
_PLAIN_KEYS = st.sampled_from(
    ["type", "description", "title", "default", "enum", "required", "minimum", "maxLength",
     "exclusiveMinimum", "multipleOf", "uniqueItems", "examples", "format", "const", "$ref",
     "x-extra"]
)  # fmt: skip
plain_schemas = st.recursive(
    st.dictionaries(_PLAIN_KEYS, _PLAIN_VALUES, max_size=4),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"properties": st.dictionaries(st.text(max_size=2), inner)}),
        st.fixed_dictionaries({"items": st.one_of(inner, st.booleans(), st.integers())}),
        st.fixed_dictionaries({"anyOf": st.lists(inner, max_size=2)}),
        st.fixed_dictionaries({"additionalProperties": st.one_of(inner, st.booleans())}),
    ),
    max_leaves=6,
)


@given(plain_schemas)
@settings(max_examples=150, deadline=None)
def test_the_cheap_check_never_passes_what_the_metaschema_refuses(schema: dict[str, Any]) -> None:
    from toolscout.schemas.drafts import _meta_validator, _plainly_valid

    if _plainly_valid(schema):
        assert list(_meta_validator(Draft202012Validator).iter_errors(schema)) == []


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strin"}, {"type": []}, {"type": ["string", "string"]}, {"required": ["a", "a"]},
        {"required": "a"}, {"minLength": -1}, {"enum": 3}, {"anyOf": []}, {"format": 3},
        {"examples": 3}, {"properties": {"a": 3}}, {"items": [{"type": "string"}]},
        {"exclusiveMinimum": True}, {"maximum": "50"}, {"properties": {"a": {"type": "lst"}}},
    ],
)  # fmt: skip
def test_the_cheap_check_leaves_invalid_schemas_to_the_metaschema(schema: dict[str, Any]) -> None:
    from toolscout.schemas.drafts import _plainly_valid

    assert not _plainly_valid(schema)
    assert codes({"type": "object", "properties": {"p": schema}}) != []
