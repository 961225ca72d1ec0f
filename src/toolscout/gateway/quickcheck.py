"""A quick "certainly valid" check for the common, plain JSON Schemas of tool calls.

Every forwarded call validates its arguments against the tool's input schema and its
structured result against the tool's output schema. ``jsonschema``'s validators are
general (dynamic scopes, annotations, error objects, a type checker per keyword) and
cost ~0.1 ms a document even when compiled once; most tool schemas are a flat object
of typed properties. :func:`compile_quick` turns such a schema into a plain Python
check once, and the check answers per document.

The check is *one-sided*: ``True`` means the document is valid under every JSON Schema
draft the schema could be read as (draft-04 to 2020-12; the strict ``integer`` of
:mod:`toolscout.schemas` as much as the SDK's); ``False`` means only "not shown here",
and the caller asks the full validator, which gives the verdict and its message. So a
refusal, its reason and its text are always the full validator's, and a document the
full validator refuses is never accepted here (``tests/test_gateway_quickcheck.py``
compares the two over generated schemas and documents).

What compiles: booleans as schemas, and objects using only ``type`` (a name or a list
of names), ``properties``, ``required`` (a list of strings), ``additionalProperties``
(a boolean or a schema), ``items`` (one schema), ``enum`` of strings, the length and
count bounds (non-negative integers) and ``minimum`` / ``maximum`` (numbers), beside
annotations (``title``, ``description``, ``default``, ``examples``, ``$comment``,
``deprecated``, ``readOnly``, ``writeOnly``; ``$schema`` at the root). Anything else —
``format``, ``pattern``, ``$ref``, combinators, ``const``, a draft-03 ``required``, an
unknown keyword — and :func:`compile_quick` returns ``None``: the full validator for
every document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Check", "compile_quick"]

#: a compiled check: ``True`` only for a document certainly valid
Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
     "writeOnly"}
)  # fmt: skip
_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "minLength",
     "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minimum",
     "maximum"}
) | _ANNOTATIONS  # fmt: skip
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
#: the documents each type name certainly covers (``bool`` is never a number here, an
#: ``integer`` is a Python ``int``: ``3.0`` is left to the full validator)
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}
_MAX_DEPTH = 32


def _always(_: Any) -> bool:
    return True


def _never(_: Any) -> bool:
    return False


def compile_quick(schema: Any) -> Check | None:
    """The quick check for ``schema``, or ``None`` when it uses anything beyond the plain
    subset (see the module docstring)."""
    if isinstance(schema, Mapping) and "$schema" in schema:
        if not isinstance(schema["$schema"], str):
            return None
        schema = {k: v for k, v in schema.items() if k != "$schema"}
    try:
        return _compile(schema, 0)
    except _Unsupported:
        return None


class _Unsupported(Exception):
    """The schema uses something the quick check does not read."""


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise _Unsupported
    return value


def _number(value: Any) -> float | int:
    if type(value) not in (int, float) or value != value:  # no bool, no NaN
        raise _Unsupported
    return value  # type: ignore[no-any-return]


def _compile(schema: Any, depth: int) -> Check:
    if schema is True:
        return _always
    if schema is False:
        return _never
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH or not _KEYWORDS.issuperset(schema):
        raise _Unsupported
    checks: list[Check] = []
    kind = schema.get("type")
    if kind is not None:
        names = [kind] if isinstance(kind, str) else kind
        if not isinstance(names, list) or not names or not all(n in _TYPES for n in names):
            raise _Unsupported
        tests = [_TYPES[n] for n in names]
        checks.append(tests[0] if len(tests) == 1 else lambda v: any(t(v) for t in tests))
    if "enum" in schema:
        options = schema["enum"]
        if not isinstance(options, list) or not options or not all(type(o) is str for o in options):
            raise _Unsupported
        allowed = frozenset(options)
        checks.append(lambda v: type(v) is str and v in allowed)
    checks.extend(_bounds(schema))
    checks.extend(_object(schema, depth))
    if "items" in schema:
        if isinstance(schema["items"], list):
            raise _Unsupported  # a draft-04..07 tuple: not read here
        item = _compile(schema["items"], depth + 1)
        checks.append(lambda v: type(v) is not list or all(item(x) for x in v))
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(check(v) for check in checks)


def _bounds(schema: Mapping[str, Any]) -> list[Check]:
    checks: list[Check] = []
    for key in _COUNTS:
        if key not in schema:
            continue
        checks.append(_size(key, _count(schema[key])))
    if "minimum" in schema:
        low = _number(schema["minimum"])
        checks.append(lambda v: not _TYPES["number"](v) or v >= low)
    if "maximum" in schema:
        high = _number(schema["maximum"])
        checks.append(lambda v: not _TYPES["number"](v) or v <= high)
    return checks


def _size(key: str, n: int) -> Check:
    kind: Any = str if key.endswith("Length") else list if key.endswith("Items") else dict
    low = key.startswith("min")

    def check(v: Any) -> bool:
        if type(v) is not kind:
            return True
        size: int = len(v)
        return size >= n if low else size <= n

    return check


def _object(schema: Mapping[str, Any], depth: int) -> list[Check]:
    checks: list[Check] = []
    props = schema.get("properties", {})
    if not isinstance(props, Mapping) or not all(isinstance(k, str) for k in props):
        raise _Unsupported
    subs = {name: _compile(sub, depth + 1) for name, sub in props.items()}
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(type(r) is str for r in required):
        raise _Unsupported
    need = tuple(required)
    extra: Check | None = None
    if "additionalProperties" in schema:
        extra = _compile(schema["additionalProperties"], depth + 1)
        if extra is _always:
            extra = None

    def check(v: Any) -> bool:
        if type(v) is not dict:
            return True  # the object keywords say nothing of other documents
        for name in need:
            if name not in v:
                return False
        for key, value in v.items():
            sub = subs.get(key)
            if sub is not None:
                if not sub(value):
                    return False
            elif extra is not None and not extra(value):
                return False
        return True

    if subs or need or extra is not None:
        checks.append(check)
    return checks
