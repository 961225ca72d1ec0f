"""Walking a schema: every subschema in schema position, its JSON pointer, and its
references that point outside it (:func:`remote_refs`, refused at import).

The walk is iterative and stops at :data:`MAX_SCHEMA_DEPTH` (:func:`_too_deep` tells):
no schema can make it recurse.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

from toolscout.schemas.drafts import _draft_class, _draft_name

#: deepest nesting of a schema this module walks
MAX_SCHEMA_DEPTH = 64
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
