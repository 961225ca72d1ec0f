"""Tests for toolscout.executors.python: JSON Schemas and cards derived from Python functions."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from jsonschema.validators import Draft202012Validator

from toolscout.errors import CardError
from toolscout.executors.python import parse_docstring, spec_from_function, type_schema


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (None, {"type": "null"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (Sequence[int], {"type": "array", "items": {"type": "integer"}}),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (tuple[int, str], {"type": "array", "items": False, "minItems": 2,
                           "prefixItems": [{"type": "integer"}, {"type": "string"}]}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Mapping[str, Any], {"type": "object", "additionalProperties": {}}),
        (dict, {"type": "object"}),
        (list, {"type": "array"}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045
        (int | None, {"type": ["integer", "null"]}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),  # noqa: UP007
        (list[int] | None, {"type": ["array", "null"], "items": {"type": "integer"}}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "a"], {"enum": [1, "a"]}),
        (Optional[Literal["x"]], {"anyOf": [{"type": "string", "enum": ["x"]}, {"type": "null"}]}),  # noqa: UP045
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Annotated[int, "How many."], {"type": "integer", "description": "How many."}),
    ],
)  # fmt: skip
def test_type_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert type_schema(hint) == schema
    Draft202012Validator.check_schema(schema)


def test_docstring_google_and_sphinx() -> None:
    summary, params = parse_docstring(
        """Refund an order.

        Longer text that is not the summary.

        Args:
            order_id (str): The order to refund.
            amount: How much, in cents;
                defaults to the full amount.

        Returns:
            Nothing useful.
        """
    )
    assert summary == "Refund an order."
    assert params == {
        "order_id": "The order to refund.",
        "amount": "How much, in cents; defaults to the full amount.",
    }
    _, sphinx = parse_docstring("Do it.\n\n:param int x: the x value\n:param y: why\n")
    assert sphinx == {"x": "the x value", "y": "why"}


def test_spec_from_function_full() -> None:
    def refund(
        order_id: str,
        reason: Literal["damaged", "late"] = "late",
        color: Color = Color.RED,
        notes: list[str] | None = None,
        *,
        notify: bool = True,
    ) -> dict[str, Any]:
        """Refund an order in part.

        Args:
            order_id: The order.
        """
        return {}

    s = spec_from_function(
        refund, id="billing.refund", scopes=["billing:refund"], risk="write", tags=["billing"]
    )
    assert s.id == "billing.refund" and s.card.risk.value == "write"
    props = s.parameters["properties"]
    assert props["order_id"] == {"type": "string", "description": "The order."}
    assert props["reason"]["default"] == "late"
    assert props["color"]["default"] == "red"
    assert props["notes"] == {
        "type": ["array", "null"],
        "items": {"type": "string"},
        "default": None,
    }
    assert props["notify"] == {"type": "boolean", "default": True}
    assert s.parameters["required"] == ["order_id"]
    Draft202012Validator.check_schema(dict(s.parameters))


def test_kwargs_open_the_schema_and_positional_only_is_refused() -> None:
    def loose(a: int, **rest: Any) -> None:
        """Loose."""

    assert spec_from_function(loose).parameters["additionalProperties"] is True

    def positional(a: int, /) -> None:
        """Positional."""

    with pytest.raises(CardError, match="positional-only"):
        spec_from_function(positional)


@pytest.mark.parametrize(
    "fn_src",
    [
        "def f(a: object.__class__) -> None:\n    '''Doc.'''",
        "def f(a: dict[int, str]) -> None:\n    '''Doc.'''",
        "def f(a=object()) -> None:\n    '''Doc.'''",
        "def f(a: int) -> None:\n    pass",
    ],
)
def test_refusals(fn_src: str) -> None:
    scope: dict[str, Any] = {}
    exec(fn_src, scope)
    with pytest.raises(CardError):
        spec_from_function(scope["f"])
