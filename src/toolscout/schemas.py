"""Reading tool parameter schemas as published, and validating arguments against them.

Real catalogs publish imperfect JSON Schema: draft-04 habits (``"exclusiveMinimum":
true``, ``"required": true`` inside a property), bounds written as strings
(``"maximum": "50"``). This module answers three questions about a schema:

* :func:`schema_problems` — quality problems, indexed with a warning;
* :func:`remote_refs` — references that would need a fetch; refused at import;
* :func:`make_validator` — the validator execution uses.

The validator

* uses the draft the schema declares in ``$schema`` (2020-12 when it declares none);
* when the schema is not valid for that draft, reads it leniently: draft-04 habits
  are translated to what they meant (which only ever refuses more), and whatever
  still cannot be read is dropped (never a ``pattern``: one that is refused refuses
  every call) — so the lenient reading never accepts what the
  strict reading refuses on the parts it can read;
* resolves only references inside the schema itself, through an explicit
  :class:`referencing.Registry` that never retrieves: no network, ever; a reference
  that does not resolve is a :class:`~toolscout.errors.SchemaError`;
* reads ``pattern`` as ECMA-262 does: ``$`` is the end of the input (``"INV-1\\n"``
  does not match ``^INV-[0-9]+$``) and ``\\d`` is ``[0-9]``, and matches it in linear
  time (RE2, :mod:`toolscout.patterns`): no pattern can stall a call; a pattern that
  does not compile, or needs backtracking, is :func:`invalid_patterns` — refused at
  import (:func:`toolscout.cards.make_spec`), never dropped;
* reads ``integer`` strictly: ``3.0`` is a number but not an integer, and is refused
  (the tool never receives a float where it declared an integer);
* refuses non-finite numbers (NaN, ±Infinity) anywhere in the arguments, and
  arguments nested deeper than :data:`MAX_DEPTH`, before validating
  (:class:`~toolscout.errors.ArgumentError`, never a ``RecursionError``).
"""

from __future__ import annotations

import copy
import functools
import math
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolscout.errors import ArgumentError, SchemaError
from toolscout.patterns import CompiledPattern, compile_pattern, ecma_regex, pattern_error

__all__ = [
    "MAX_DEPTH",
    "SchemaProblem",
    "SchemaValidator",
    "check_arguments",
    "ecma_regex",
    "invalid_patterns",
    "make_validator",
    "remote_refs",
    "schema_problems",
]

#: deepest nesting of arguments (objects and arrays) the gateway accepts
MAX_DEPTH = 32
#: deepest nesting of a schema this module walks
MAX_SCHEMA_DEPTH = 64

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

# ArgumentError / SchemaError reason codes
NON_FINITE = "non_finite_number"
ARGUMENTS_TOO_DEEP = "arguments_too_deep"
SCHEMA_MISMATCH = "schema_mismatch"
UNRESOLVABLE_REF = "unresolvable_ref"
SCHEMA_TOO_DEEP = "schema_too_deep"

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
_MAPS_OF_SCHEMAS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
_SCHEMA_OR_LIST = frozenset(
    {
        "items",
        "additionalItems",
        "prefixItems",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "propertyNames",
        "contentSchema",
    }
)
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """One quality problem: a stable ``code``, a JSON pointer ``path`` and a message."""

    code: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '/'}: {self.message} ({self.code})"


# --------------------------------------------------------------------------- drafts


def _norm_uri(uri: str) -> str:
    uri = uri.strip().rstrip("#")
    return uri.replace("https://", "http://", 1)


@functools.cache
def _drafts() -> dict[str, Any]:
    from jsonschema import validators

    classes = (
        validators.Draft3Validator,
        validators.Draft4Validator,
        validators.Draft6Validator,
        validators.Draft7Validator,
        validators.Draft201909Validator,
        validators.Draft202012Validator,
    )
    out: dict[str, Any] = {}
    for cls in classes:
        meta = cls.META_SCHEMA
        uri = meta.get("$id") or meta.get("id")
        out[_norm_uri(str(uri))] = cls
    return out


def _draft_class(schema: Mapping[str, Any]) -> tuple[Any, bool]:
    """(validator class for the declared draft, whether the declaration was understood)."""
    from jsonschema import validators

    declared = schema.get("$schema")
    if declared is None:
        return validators.Draft202012Validator, True
    if isinstance(declared, str):
        cls = _drafts().get(_norm_uri(declared))
        if cls is not None:
            return cls, True
    return validators.Draft202012Validator, False


def _draft_name(cls: Any) -> str:
    return str(cls.__name__).removeprefix("Draft").removesuffix("Validator")


# --------------------------------------------------------------------------- walking


def _pointer(path: tuple[Any, ...]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _walk(
    schema: Mapping[str, Any], id_keys: tuple[str, ...] = ("$id",)
) -> Iterator[tuple[tuple[Any, ...], Mapping[str, Any], str]]:
    """Every subschema in schema position: ``(path, subschema, base URI)``; iterative.

    Stops descending at :data:`MAX_SCHEMA_DEPTH`; the caller notices through
    :func:`_too_deep`.
    """
    stack: list[tuple[tuple[Any, ...], Mapping[str, Any], str]] = [((), schema, "")]
    while stack:
        path, node, base = stack.pop()
        for key in id_keys:
            ident = node.get(key)
            if isinstance(ident, str) and not ident.startswith("#"):
                base = urllib.parse.urljoin(base, ident)
                break
        yield path, node, base
        if len(path) >= MAX_SCHEMA_DEPTH * 2:
            continue
        children: list[tuple[tuple[Any, ...], Mapping[str, Any], str]] = []
        for key, value in node.items():
            if key in _MAPS_OF_SCHEMAS and isinstance(value, Mapping):
                for name, sub in value.items():
                    if isinstance(sub, Mapping):
                        children.append(((*path, key, name), sub, base))
            elif key in _SCHEMA_OR_LIST:
                if isinstance(value, Mapping):
                    children.append(((*path, key), value, base))
                elif isinstance(value, list):
                    for i, sub in enumerate(value):
                        if isinstance(sub, Mapping):
                            children.append(((*path, key, i), sub, base))
        stack.extend(reversed(children))


def _too_deep(schema: Mapping[str, Any]) -> bool:
    return any(len(path) >= MAX_SCHEMA_DEPTH * 2 for path, _, _ in _walk(schema))


def remote_refs(schema: Any) -> list[str]:
    """Every ``$ref``/``$dynamicRef``/``$recursiveRef`` that points outside the schema.

    A reference is local when it starts with ``#`` or resolves (against the
    enclosing ``$id``) to a resource the schema itself embeds. Anything else
    would need a fetch, and is refused at import.
    """
    if not isinstance(schema, Mapping):
        return []
    cls, _ = _draft_class(schema)
    id_keys = ("id", "$id") if _draft_name(cls) in ("3", "4") else ("$id",)
    nodes = list(_walk(schema, id_keys))
    embedded = {base.partition("#")[0] for _, _, base in nodes if base}
    out: list[str] = []
    for _, node, base in nodes:
        for key in _REF_KEYS:
            ref = node.get(key)
            if not isinstance(ref, str) or ref.startswith("#"):
                continue
            target = urllib.parse.urljoin(base, ref).partition("#")[0]
            if target and target not in embedded and ref not in out:
                out.append(ref)
    return out


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


def _meta_errors(cls: Any, schema: Mapping[str, Any]) -> list[Any]:
    if cls.__name__ == "Draft202012Validator" and _plainly_valid(schema):
        return []  # what the metaschema would say, without its ~3 ms a schema
    meta_cls = _meta_validator(cls)
    errors = list(meta_cls.iter_errors(schema))
    return sorted(errors, key=lambda e: (len(e.path), [str(p) for p in e.path]))


#: 2020-12 keywords :func:`_plainly_valid` checks, by the shape the metaschema asks of them
_PLAIN_ANY = frozenset({"default", "const"})
_PLAIN_STR = frozenset({"description", "title", "format", "pattern", "$comment"})
_PLAIN_BOOL = frozenset({"deprecated", "readOnly", "writeOnly", "uniqueItems"})
_PLAIN_COUNT = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
_PLAIN_NUMBER = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_PLAIN_SUB = frozenset({"items", "additionalProperties", "not"})
_PLAIN_SUBS = frozenset({"anyOf", "oneOf", "allOf"})
_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})


def _plainly_valid(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` is valid 2020-12 by a check much cheaper than the metaschema's
    (which resolves ``$dynamicRef`` through the vocabularies at every subschema).

    ``True`` only when every subschema uses nothing but the common keywords above, each
    with the shape the metaschema requires (an unknown keyword, a ``$ref``, ``$defs``,
    ``$schema``, a float count...: ``False``, and the metaschema decides). Iterative.
    """
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            return False
        for key, value in node.items():
            if key in _PLAIN_ANY:
                continue
            if key in _PLAIN_STR:
                ok = isinstance(value, str)
            elif key in _PLAIN_BOOL:
                ok = isinstance(value, bool)
            elif key in _PLAIN_COUNT:
                ok = type(value) is int and value >= 0
            elif key in _PLAIN_NUMBER:
                ok = type(value) in (int, float) and math.isfinite(value)
            elif key == "type":
                ok = value in _SIMPLE_TYPES if isinstance(value, str) else _type_list(value)
            elif key == "enum" or key == "examples":
                ok = isinstance(value, list)
            elif key == "required":
                ok = (
                    isinstance(value, list)
                    and all(isinstance(v, str) for v in value)
                    and len(set(value)) == len(value)
                )
            elif key == "properties":
                ok = isinstance(value, dict)
                if ok:
                    stack.extend(value.values())
            elif key in _PLAIN_SUB:
                ok = True
                stack.append(value)
            elif key in _PLAIN_SUBS:
                ok = isinstance(value, list) and len(value) > 0
                if ok:
                    stack.extend(value)
            else:
                return False
            if not ok:
                return False
    return True


def _type_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(v, str) and v in _SIMPLE_TYPES for v in value)
        and len(set(value)) == len(value)
    )


@functools.cache
def _meta_validator(cls: Any) -> Any:
    from jsonschema import validators

    meta_cls = validators.validator_for(cls.META_SCHEMA, default=cls)
    return meta_cls(cls.META_SCHEMA)


# --------------------------------------------------------------------------- patterns


def _compile(pattern: str) -> CompiledPattern | None:
    return compile_pattern(pattern)


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


# --------------------------------------------------------------------------- lenient reading


def _lenient(schema: Mapping[str, Any], cls: Any) -> dict[str, Any]:
    """A copy of ``schema`` the draft's metaschema accepts, refusing at least as much.

    Draft-04 habits become what they meant; whatever is still unreadable is dropped.
    """
    out: dict[str, Any] = copy.deepcopy(dict(schema))
    draft = _draft_name(cls)
    for _path, node, _ in list(_walk(out)):
        assert isinstance(node, dict)
        for bound in _NUMERIC_BOUNDS:
            if isinstance(node.get(bound), str):
                number = _number(node[bound])
                if number is None:
                    del node[bound]
                else:
                    node[bound] = number
        if draft not in ("3", "4"):
            for excl, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
                flag = node.get(excl)
                if isinstance(flag, bool):
                    del node[excl]
                    if flag and isinstance(node.get(plain), int | float):
                        node[excl] = node.pop(plain)
        props = node.get("properties")
        if isinstance(props, dict):
            required = node.get("required")
            names = list(required) if isinstance(required, list) else []
            for name, sub in props.items():
                flag = sub.get("required") if isinstance(sub, dict) else None
                if isinstance(flag, bool):
                    del sub["required"]
                    if flag and name not in names:
                        names.append(name)
            if names:
                node["required"] = names
    for _ in range(500):
        errors = _meta_errors(cls, out)
        if not errors:
            break
        if not _drop(out, tuple(errors[0].path)):
            return {"type": "object"}
    else:  # pragma: no cover - a schema with more than 500 unreadable parts
        return {"type": "object"}
    return out


def _drop(schema: dict[str, Any], path: tuple[Any, ...]) -> bool:
    """Delete what ``path`` points at; ``False`` when it is the root."""
    if not path:
        return False
    parent: Any = schema
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return True


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
