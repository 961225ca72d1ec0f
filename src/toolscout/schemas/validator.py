"""The validator execution uses, and the checks every call's arguments pass first.

:func:`make_validator` compiles a tool's schema once (leniently when it must:
schemas/lenient.py) into a :class:`SchemaValidator` of the declared draft, extended to
read ``pattern`` as ECMA-262 does, in linear time, and ``integer`` strictly, with a
reference registry that never retrieves. :func:`check_arguments` refuses non-finite
numbers and nesting deeper than :data:`MAX_DEPTH` before any validation.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolscout.errors import ArgumentError, SchemaError
from toolscout.patterns import pattern_error
from toolscout.schemas.drafts import _draft_class, _draft_name
from toolscout.schemas.lenient import _lenient
from toolscout.schemas.problems import (
    INVALID_PATTERN,
    NOT_AN_OBJECT,
    REMOTE_REF,
    TOO_DEEP,
    UNKNOWN_DRAFT,
    SchemaProblem,
    _compile,
    _short,
    schema_problems,
)
from toolscout.schemas.walk import MAX_SCHEMA_DEPTH, _pointer, _too_deep, remote_refs

#: deepest nesting of arguments (objects and arrays) the gateway accepts
MAX_DEPTH = 32
# ArgumentError / SchemaError reason codes
NON_FINITE = "non_finite_number"
ARGUMENTS_TOO_DEEP = "arguments_too_deep"
SCHEMA_MISMATCH = "schema_mismatch"
UNRESOLVABLE_REF = "unresolvable_ref"
SCHEMA_TOO_DEEP = "schema_too_deep"

# --------------------------------------------------------------------------- patterns


def _pattern_keyword(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    compiled = _compile(pattern) if isinstance(pattern, str) else None
    if compiled is None:
        why = pattern_error(pattern) if isinstance(pattern, str) else "it is not a string"
        raise SchemaError(f"pattern {pattern!r} is refused: {why}", reason=INVALID_PATTERN)
    if compiled.search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties_keyword(
    validator: Any, patterns: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = _compile(pattern)
        if compiled is None:
            raise SchemaError(
                f"pattern {pattern!r} is refused: {pattern_error(pattern)}", reason=INVALID_PATTERN
            )
        for key, value in instance.items():
            if compiled.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@functools.cache
def _strict_class(cls: Any) -> Any:
    """``cls`` with ECMA ``pattern``/``patternProperties`` and a strict ``integer``."""
    from jsonschema import validators

    checker = cls.TYPE_CHECKER.redefine("integer", _is_integer)
    return validators.extend(  # type: ignore[no-untyped-call]
        cls,
        {"pattern": _pattern_keyword, "patternProperties": _pattern_properties_keyword},
        type_checker=checker,
    )


def _refuse_retrieval(uri: str) -> Any:
    raise SchemaError(
        f"reference {uri!r} points outside the schema; it is never fetched", reason="remote_ref"
    )


@functools.cache
def _registry() -> Any:
    from referencing import Registry

    return Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]


# --------------------------------------------------------------------------- arguments


def check_arguments(value: Any, *, tool_id: str = "", max_depth: int = MAX_DEPTH) -> None:
    """Refuse non-finite numbers and nesting deeper than ``max_depth``, anywhere in ``value``.

    Iterative: a value nested a million levels deep is refused, not a ``RecursionError``.
    """
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            where = _pointer(path) or "/"
            raise ArgumentError(
                f"{tool_id + ': ' if tool_id else ''}{where}: {node!r} is not a finite number",
                tool_id=tool_id,
                reason=NON_FINITE,
            )
        if isinstance(node, Mapping | list | tuple):
            if len(path) >= max_depth:
                raise ArgumentError(
                    f"{tool_id + ': ' if tool_id else ''}arguments nest deeper than "
                    f"{max_depth} levels",
                    tool_id=tool_id,
                    reason=ARGUMENTS_TOO_DEEP,
                )
            items = node.items() if isinstance(node, Mapping) else enumerate(node)
            stack.extend((child, (*path, key)) for key, child in items)


@dataclass(frozen=True, slots=True)
class SchemaValidator:
    """A compiled reading of one schema. ``lenient`` says whether the fallback is in use."""

    schema: Mapping[str, Any]
    draft: str
    lenient: bool
    problems: tuple[SchemaProblem, ...]
    _validator: Any = field(repr=False)

    def iter_errors(self, instance: Any) -> Iterator[Any]:
        """jsonschema ``ValidationError`` s, after :func:`check_arguments`."""
        check_arguments(instance)
        errors: list[Any] = self._guarded(lambda: list(self._validator.iter_errors(instance)))
        return iter(errors)

    def is_valid(self, instance: Any) -> bool:
        check_arguments(instance)
        return bool(self._guarded(lambda: self._validator.is_valid(instance)))

    def validate(self, instance: Any, *, tool_id: str = "", limit: int = 3) -> None:
        """Raise :class:`ArgumentError` (naming up to ``limit`` failures) unless valid."""
        check_arguments(instance, tool_id=tool_id)
        if self._guarded(lambda: self._validator.is_valid(instance)):
            return
        errors = self._guarded(lambda: list(self._validator.iter_errors(instance)))
        errors.sort(key=lambda e: [str(p) for p in e.path])
        parts = []
        for err in errors[:limit]:
            where = "/".join(str(p) for p in err.path)
            parts.append(_short(f"{where}: {err.message}" if where else err.message))
        raise ArgumentError(
            f"{tool_id + ': ' if tool_id else ''}invalid arguments: " + "; ".join(parts),
            tool_id=tool_id,
            reason=SCHEMA_MISMATCH,
        )

    def _guarded(self, run: Any) -> Any:
        from referencing.exceptions import Unresolvable

        try:
            return run()
        except SchemaError:
            raise
        except Unresolvable as exc:
            raise SchemaError(
                f"the tool's schema has a reference that does not resolve: {_short(str(exc))}",
                reason=UNRESOLVABLE_REF,
            ) from None
        except RecursionError:
            raise SchemaError(
                "the tool's schema recurses too deeply to validate", reason=SCHEMA_TOO_DEEP
            ) from None


def make_validator(schema: Any) -> SchemaValidator:
    """The validator for a tool's parameter schema (see the module docstring).

    Raises :class:`~toolscout.errors.SchemaError` when the schema references
    anything outside itself, or is not a JSON object.
    """
    if not isinstance(schema, Mapping):
        raise SchemaError("the tool's schema is not a JSON object", reason=NOT_AN_OBJECT)
    if _too_deep(schema):
        raise SchemaError(
            f"the tool's schema nests deeper than {MAX_SCHEMA_DEPTH} levels", reason=TOO_DEEP
        )
    remote = remote_refs(schema)
    if remote:
        raise SchemaError(
            f"the tool's schema references {remote[0]!r} outside itself; it is never fetched",
            reason=REMOTE_REF,
        )
    problems = tuple(schema_problems(schema))
    cls, _ = _draft_class(schema)
    lenient = any(p.code not in (UNKNOWN_DRAFT, NOT_AN_OBJECT) for p in problems)
    readable = _lenient(schema, cls) if lenient else dict(schema)
    strict_cls = _strict_class(cls)
    validator = strict_cls(readable, registry=_registry(), format_checker=strict_cls.FORMAT_CHECKER)
    return SchemaValidator(readable, _draft_name(cls), lenient, problems, validator)
