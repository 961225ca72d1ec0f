"""A :class:`ToolSpec` derived from a Python function's signature and docstring.

The summary is the docstring's first line; parameter descriptions come from a
Google-style ``Args:`` section or Sphinx ``:param name:`` lines; the JSON Schema
comes from the type hints: ``str``/``int``/``float``/``bool``, ``list[X]``,
``tuple[X, ...]``, ``set[X]``, ``dict[str, X]``, ``X | None``/``Optional[X]``,
unions, ``Literal[...]``, ``Enum`` subclasses and ``Annotated[X, "description"]``.
Defaults become ``default`` and make a parameter optional. The schema sets
``additionalProperties: false`` unless the function takes ``**kwargs``.
"""

from __future__ import annotations

import collections.abc as cabc
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

from toolscout.cards import Risk, ToolSpec, make_spec
from toolscout.errors import CardError

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARRAYS = {list, set, frozenset, cabc.Sequence, cabc.MutableSequence, cabc.Set, cabc.Iterable}
_OBJECTS = {dict, cabc.Mapping, cabc.MutableMapping}
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$")
_ARG_LINE = re.compile(r"^(\s*)\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


class _Unsupported(Exception):
    pass


def _json_type(values: Sequence[Any]) -> str | None:
    kinds = {_SCALARS.get(type(v)) or ("null" if v is None else "?") for v in values}
    return kinds.pop() if len(kinds) == 1 and "?" not in kinds else None


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str) and set(schema) <= {"type", "description", "items", "format"}:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def type_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of one type hint; raises ``_Unsupported`` for anything else."""
    if tp is Any or tp is inspect.Parameter.empty or tp is object:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        out: dict[str, Any] = {"enum": values}
        kind = _json_type(values)
        return {"type": kind, **out} if kind else out
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        schema = type_schema(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": notes[0]} if notes else schema
    if origin is typing.Literal:
        kind = _json_type(args)
        return {"type": kind, "enum": list(args)} if kind else {"enum": list(args)}
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        inner = (
            type_schema(members[0])
            if len(members) == 1
            else {"anyOf": [type_schema(m) for m in members]}
        )
        return _nullable(inner) if len(members) < len(args) else inner
    if tp in _ARRAYS or origin in _ARRAYS:
        schema = {"type": "array"}
        if args:
            schema["items"] = type_schema(args[0])
        if tp in (set, frozenset) or origin in (set, frozenset, cabc.Set):
            schema["uniqueItems"] = True
        return schema
    if tp is tuple or origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": type_schema(args[0])}
        return {
            "type": "array",
            "prefixItems": [type_schema(a) for a in args],
            "items": False,
            "minItems": len(args),
        }
    if tp in _OBJECTS or origin in _OBJECTS:
        if args and args[0] is not str:
            raise _Unsupported("dict keys must be str")
        return (
            {"type": "object", "additionalProperties": type_schema(args[1])}
            if args
            else {"type": "object"}
        )
    raise _Unsupported(f"unsupported annotation {tp!r}")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(first line, {parameter: description}) from a Google or Sphinx docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary = next((ln.strip() for ln in lines if ln.strip()), "")
    params: dict[str, str] = {}
    in_args, indent, current = False, -1, ""
    for line in lines:
        sphinx = _SPHINX.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if _SECTION.match(line):
            in_args, indent, current = True, -1, ""
            continue
        if not in_args:
            continue
        if not line.strip():
            continue
        lead = len(line) - len(line.lstrip())
        m = _ARG_LINE.match(line)
        if m and (indent < 0 or lead == indent):
            indent, current = lead, m.group(2)
            params[current] = m.group(3).strip()
        elif current and lead > indent >= 0:
            params[current] = (params[current] + " " + line.strip()).strip()
        elif lead <= max(indent, 0) and line.strip().endswith(":"):
            in_args = False
    return summary, params


def _default(tool_id: str, name: str, value: Any) -> Any:
    value = value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, tuple | frozenset | set):
        value = list(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise CardError(tool_id, f"parameters.{name}", "default is not JSON-serialisable") from None
    return value


def parameters_schema(fn: Callable[..., Any], tool_id: str, docs: dict[str, str]) -> dict[str, Any]:
    """The JSON Schema object of ``fn``'s keyword-callable parameters."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise CardError(tool_id, "parameters", f"cannot resolve type hints: {exc}") from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    open_ended = False
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind is param.VAR_KEYWORD:
            open_ended = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            if param.kind is param.POSITIONAL_ONLY and param.default is param.empty:
                raise CardError(
                    tool_id, f"parameters.{name}", "positional-only parameters cannot be passed"
                )
            continue
        try:
            schema = type_schema(hints.get(name, Any))
        except _Unsupported as exc:
            raise CardError(tool_id, f"parameters.{name}", str(exc)) from None
        if name in docs and "description" not in schema:
            schema = {**schema, "description": docs[name]}
        if param.default is param.empty:
            required.append(name)
        else:
            schema = {**schema, "default": _default(tool_id, name, param.default)}
        properties[name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = open_ended
    return out


def spec_from_function(
    fn: Callable[..., Any],
    *,
    id: str | None = None,
    name: str | None = None,
    summary: str | None = None,
    scopes: Sequence[str] = (),
    risk: Risk | str = Risk.READ,
    tenants: Sequence[str] = (),
    tags: Sequence[str] = (),
    aliases: Sequence[str] = (),
    not_for: Sequence[str] = (),
    group: str = "",
) -> ToolSpec:
    """Derive and validate a tool spec from a function (see the module docstring)."""
    if not callable(fn) or not hasattr(fn, "__name__"):
        raise CardError(str(id or fn), "(function)", "a tool must be a named function")
    tool_id = id or f"{fn.__module__}.{fn.__name__}"
    first_line, docs = parse_docstring(inspect.getdoc(fn))
    text = summary or first_line
    if not text:
        raise CardError(tool_id, "summary", "give the function a docstring or pass summary=")
    return make_spec(
        {
            "id": tool_id,
            "name": name or fn.__name__,
            "summary": text,
            "scopes": list(scopes),
            "tenants": list(tenants),
            "tags": list(tags),
            "aliases": list(aliases),
            "not_for": list(not_for),
            "group": group,
            "risk": risk.value if isinstance(risk, Risk) else risk,
            "source": "python",
            "parameters": parameters_schema(fn, tool_id, docs),
        }
    )
