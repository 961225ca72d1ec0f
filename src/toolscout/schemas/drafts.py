"""Which JSON Schema draft a schema declares, and what that draft's metaschema says of it.

``$schema`` names the draft (:func:`_draft_class`; 2020-12 when it declares none, or
one this module does not know). :func:`_meta_errors` is the metaschema's verdict, answered
cheaply for the plain schemas most tools publish (:func:`_plainly_valid`): the metaschema
itself costs ~3 ms a schema (docs/history/test-suite-time.md, h/suite round seven).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

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
