"""Quality problems of a published schema: what is indexed with a warning, or refused.

:func:`schema_problems` lists them (a stable code, a JSON pointer and a message each,
:class:`SchemaProblem`): draft-04 and REST habits the declared draft does not mean,
bounds written as strings, references outside the schema, and whatever else the draft's
metaschema refuses. :func:`invalid_patterns` are the ``pattern`` keys that are refused at
import (they do not compile, or need backtracking: :mod:`toolscout.patterns`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolscout.patterns import CompiledPattern, compile_pattern, pattern_error
from toolscout.schemas.drafts import _draft_class, _draft_name, _meta_errors
from toolscout.schemas.walk import MAX_SCHEMA_DEPTH, _pointer, _too_deep, _walk, remote_refs

# problem codes
NOT_AN_OBJECT = "not_an_object"
INVALID_2020_12 = "invalid_2020_12"
INVALID_FOR_DRAFT = "invalid_for_draft"
UNKNOWN_DRAFT = "unknown_draft"
DRAFT04_EXCLUSIVE_BOOL = "draft04_exclusive_bool"
REQUIRED_IN_PROPERTY = "required_in_property"
STRING_NUMBER_BOUND = "string_number_bound"
REMOTE_REF = "remote_ref"
INVALID_PATTERN = "invalid_pattern"
TOO_DEEP = "too_deep"

_NUMERIC_BOUNDS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
)


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """One quality problem: a stable ``code``, a JSON pointer ``path`` and a message."""

    code: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '/'}: {self.message} ({self.code})"


# --------------------------------------------------------------------------- problems


def _number(value: str) -> int | float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and "." not in value and "e" not in value else number


def _habits(schema: Mapping[str, Any], draft: str) -> list[SchemaProblem]:
    """Draft-04 and REST habits that the declared draft does not mean."""
    problems: list[SchemaProblem] = []
    for path, node, _ in _walk(schema):
        where = _pointer(path)
        if draft not in ("3", "4"):
            for key in ("exclusiveMinimum", "exclusiveMaximum"):
                if isinstance(node.get(key), bool):
                    problems.append(
                        SchemaProblem(
                            DRAFT04_EXCLUSIVE_BOOL,
                            f"{where}/{key}",
                            f"{key} is a boolean (draft-04 style); it should be a number",
                        )
                    )
        in_property = len(path) >= 2 and path[-2] == "properties"
        if draft != "3" and isinstance(node.get("required"), bool) and in_property:
            problems.append(
                SchemaProblem(
                    REQUIRED_IN_PROPERTY,
                    f"{where}/required",
                    "required is a boolean inside a property; list the name in the "
                    "parent's required array",
                )
            )
        for key in _NUMERIC_BOUNDS:
            if isinstance(node.get(key), str):
                problems.append(
                    SchemaProblem(
                        STRING_NUMBER_BOUND,
                        f"{where}/{key}",
                        f"{key} is the string {node[key]!r}; it should be a number",
                    )
                )
    return problems


def invalid_patterns(schema: Any) -> list[SchemaProblem]:
    """Every ``pattern`` and ``patternProperties`` key of ``schema`` that is refused
    (does not compile, or needs a backtracking engine): refused at import."""
    problems: list[SchemaProblem] = []
    if not isinstance(schema, Mapping) or _too_deep(schema):
        return problems
    for path, node, _ in _walk(schema):
        where = _pointer(path)
        pattern = node.get("pattern")
        if isinstance(pattern, str) and _compile(pattern) is None:
            problems.append(
                SchemaProblem(
                    INVALID_PATTERN,
                    f"{where}/pattern",
                    f"pattern {pattern!r} is refused: {pattern_error(pattern)}",
                )
            )
        patterns = node.get("patternProperties")
        if isinstance(patterns, Mapping):
            problems += [
                SchemaProblem(
                    INVALID_PATTERN,
                    _pointer((*path, "patternProperties", key)),
                    f"patternProperties key {key!r} is refused: {pattern_error(key)}",
                )
                for key in patterns
                if isinstance(key, str) and _compile(key) is None
            ]
    return problems


def schema_problems(schema: Any) -> list[SchemaProblem]:
    """Quality problems of a tool's parameter schema (empty when it is clean).

    Codes: ``not_an_object``, ``too_deep``, ``unknown_draft``, ``remote_ref``,
    ``draft04_exclusive_bool``, ``required_in_property``, ``string_number_bound``,
    ``invalid_pattern``, and ``invalid_2020_12`` (or ``invalid_for_draft`` when the
    schema declares another draft) for whatever else the draft's metaschema refuses.
    """
    if not isinstance(schema, Mapping):
        return [SchemaProblem(NOT_AN_OBJECT, "", "the schema is not a JSON object")]
    if _too_deep(schema):
        return [
            SchemaProblem(TOO_DEEP, "", f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
        ]
    problems: list[SchemaProblem] = []
    if "type" in schema and schema["type"] != "object":
        problems.append(
            SchemaProblem(
                NOT_AN_OBJECT,
                "/type",
                f"parameters must be an object schema, not {schema['type']!r}",
            )
        )
    cls, understood = _draft_class(schema)
    draft = _draft_name(cls)
    if not understood:
        problems.append(
            SchemaProblem(
                UNKNOWN_DRAFT,
                "/$schema",
                f"unknown $schema {schema.get('$schema')!r}; read as 2020-12",
            )
        )
    problems += [
        SchemaProblem(REMOTE_REF, "", f"reference {ref!r} points outside the schema")
        for ref in remote_refs(schema)
    ]
    habits = _habits(schema, draft) + invalid_patterns(schema)
    problems += habits
    seen = {p.path for p in habits}
    code = INVALID_2020_12 if draft == "202012" else INVALID_FOR_DRAFT
    for err in _meta_errors(cls, schema):
        where = _pointer(tuple(err.path))
        if where in seen:
            continue
        seen.add(where)
        label = "2020-12" if draft == "202012" else f"draft {draft}"
        problems.append(SchemaProblem(code, where, f"not valid {label}: {_short(err.message)}"))
    return problems


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compile(pattern: str) -> CompiledPattern | None:
    return compile_pattern(pattern)
