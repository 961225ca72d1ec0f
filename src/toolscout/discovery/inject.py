"""Render shortlisted tools for a model API, count their tokens, pick the tier.

inject never decides relevance: it renders exactly the specs it is given, in
catalog order. Every format gets the same name (:func:`tool_name`, safe for all
APIs: ``^[A-Za-z_][A-Za-z0-9_-]{0,63}$``) and the same description: the card
summary, then a ``Not for: ...`` line when the card has not-for hints.

Formats (:data:`FORMATS`); an empty parameter schema renders as
``{"type": "object", "properties": {}}`` except where noted:

- ``openai``: Chat Completions ``tools``,
  ``{"type": "function", "function": {name, description, parameters}}``.
- ``openai-responses``: Responses API ``tools``,
  ``{"type": "function", name, description, parameters}``.
- ``anthropic``: Messages ``tools``, ``{name, description, input_schema}``.
- ``gemini``: ``function_declarations``, ``{name, description, parameters}`` with the
  schema cut down to Gemini's OpenAPI 3 subset (other keywords dropped, local
  ``$ref`` inlined, ``oneOf`` read as ``anyOf``, ``type: [X, "null"]`` and a
  ``{"type": "null"}`` option read as ``nullable: true``); no ``parameters`` at
  all when the tool takes no arguments.
- ``mcp``: Model Context Protocol ``Tool``, ``{name, description, inputSchema}``,
  ``outputSchema`` when the spec has one, and ``annotations`` from the card's
  risk (``readOnlyHint`` for read, ``destructiveHint`` for destructive).
- ``langchain``: what LangChain's ``convert_to_openai_tool`` returns, i.e. the
  ``openai`` shape.

Rendering is cached per (tool, format, rendered name) for the spec *object* it was
made from (:class:`RenderCache`): the catalog hands out one immutable ``ToolSpec`` per
tool and generation, so a new generation's spec is a new object and misses. The cache
keeps the compact JSON text (what is sent and counted) and hands every caller a fresh
copy parsed from it, so no caller can change another's rendering; a rendering whose
JSON round trip is not exact (values JSON has no form for) is not cached.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from toolscout.cards import CapabilityCard, Risk, ToolSpec
from toolscout.discovery.tokencount import count_items, dumps
from toolscout.errors import CardError, ConfigError, FormatError

FORMATS: tuple[str, ...] = ("openai", "openai-responses", "anthropic", "gemini", "mcp", "langchain")

#: Longest function name every supported API accepts.
MAX_NAME = 64
_HASH_LEN = 8
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")

#: Fewer entitled tools than this: send them all.
ALL_BELOW = 10
#: Up to this many entitled tools: send whole groups; above it: progressive discovery.
GROUPS_UP_TO = 30

GEMINI_KEYWORDS = frozenset(
    {
        "type", "format", "description", "nullable", "enum", "properties", "required",
        "items", "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength",
        "pattern", "anyOf", "title", "default", "propertyOrdering",
    }
)  # fmt: skip


def _with_hash(name: str, tool_id: str) -> str:
    digest = hashlib.sha256(tool_id.encode()).hexdigest()[:_HASH_LEN]
    return f"{name[: MAX_NAME - _HASH_LEN - 1]}_{digest}"


def tool_name(card: CapabilityCard) -> str:
    """The card id as a function name every API accepts (stable; hashed if truncated)."""
    name = _BAD_CHARS.sub("_", card.id)
    if not name or not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")):
        name = "_" + name  # Gemini: must start with a letter or an underscore
    return _with_hash(name, card.id) if len(name) > MAX_NAME else name


def name_table(cards: Sequence[CapabilityCard]) -> dict[str, str]:
    """Tool id → rendered function name, unique over the whole catalog.

    A name that two ids sanitise to, or that equals another tool's id, gets a
    hash suffix (an id that is already a valid name keeps it), so a rendered
    name can never be read back as a different tool.
    """
    ids = {card.id for card in cards}
    base = {card.id: tool_name(card) for card in cards}
    owners: dict[str, set[str]] = {}
    for tool_id, name in base.items():
        owners.setdefault(name, set()).add(tool_id)
    out: dict[str, str] = {}
    for tool_id, name in base.items():
        clash = len(owners[name]) > 1 or (name in ids and name != tool_id)
        out[tool_id] = _with_hash(name, tool_id) if clash and name != tool_id else name
    seen: dict[str, str] = {}
    for tool_id, name in out.items():
        other = seen.setdefault(name, tool_id)
        if other != tool_id or (name in ids and name != tool_id):
            raise CardError(tool_id, "id", f"renders as {name!r}, as does {other!r}")
    return out


def _names(specs: Sequence[ToolSpec]) -> list[str]:
    """Rendered names in order; ids that collide after sanitising get a hash suffix."""
    table = name_table([spec.card for spec in specs])
    return [table[spec.id] for spec in specs]


def name_map(specs: Sequence[ToolSpec]) -> dict[str, str]:
    """Rendered function name → tool id, to map the model's tool calls back."""
    return {name: spec.id for name, spec in zip(_names(specs), specs, strict=True)}


def description(card: CapabilityCard) -> str:
    """What the model reads: the summary, then a ``Not for:`` line if there are hints."""
    if not card.not_for:
        return card.summary
    hints = "; ".join(hint.rstrip(".") for hint in card.not_for)
    return f"{card.summary}\nNot for: {hints}."


def _plain(value: Any) -> Any:
    """A deep copy with every mapping a dict and every sequence a list."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = _plain(schema)
    out.setdefault("type", "object")
    if out["type"] == "object":
        out.setdefault("properties", {})
    return out


def _resolve(ref: str, root: Mapping[str, Any]) -> Any:
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return {}
        node = node[part]
    return node


def _null_free_types(kind: Any, out: dict[str, Any]) -> None:
    kinds = kind if isinstance(kind, list) else [kind]
    real = [k for k in kinds if k != "null"]
    if len(real) == 1:
        out["type"] = real[0]
    elif real:
        out["anyOf"] = [{"type": k} for k in real]
    if len(real) < len(kinds):
        out["nullable"] = True


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` cut down to the OpenAPI 3 subset Gemini's function declarations accept."""
    plain = _plain(schema)
    return _gemini(plain, plain, frozenset())


def _gemini(node: Any, root: dict[str, Any], seen: frozenset[str]) -> dict[str, Any]:
    if not isinstance(node, dict):
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        if ref in seen:  # recursive type: stop at a plain object
            return {"type": "object"}
        target = _resolve(ref, root)
        node = {**(target if isinstance(target, dict) else {}), **node}
        seen = seen | {ref}
    if isinstance(node.get("const"), str) and "enum" not in node:
        node = {**node, "enum": [node["const"]]}
    out: dict[str, Any] = {}
    options: list[Any] = []
    for key, value in node.items():
        if key in ("anyOf", "oneOf") and isinstance(value, list):
            options.extend(value)
        elif key == "type":
            _null_free_types(value, out)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _gemini(sub, root, seen) for name, sub in value.items()}
        elif key == "items":
            out[key] = _gemini(value, root, seen)
        elif key in GEMINI_KEYWORDS:
            out[key] = value
    real = [opt for opt in options if opt != {"type": "null"}]
    if len(real) < len(options):
        out["nullable"] = True
    converted = [_gemini(opt, root, seen) for opt in real]
    if len(converted) == 1:
        out.update({k: v for k, v in converted[0].items() if k not in out})
    elif converted:
        out["anyOf"] = converted
    return out


def _head(spec: ToolSpec, name: str) -> dict[str, Any]:
    return {"name": name, "description": description(spec.card)}


def _openai(spec: ToolSpec, name: str) -> dict[str, Any]:
    function = {**_head(spec, name), "parameters": _object_schema(spec.parameters)}
    return {"type": "function", "function": function}


def _openai_responses(spec: ToolSpec, name: str) -> dict[str, Any]:
    return {"type": "function", **_head(spec, name), "parameters": _object_schema(spec.parameters)}


def _anthropic(spec: ToolSpec, name: str) -> dict[str, Any]:
    return {**_head(spec, name), "input_schema": _object_schema(spec.parameters)}


def _gemini_tool(spec: ToolSpec, name: str) -> dict[str, Any]:
    out = _head(spec, name)
    params = gemini_schema(_object_schema(spec.parameters))
    if params.get("properties"):
        out["parameters"] = params
    return out


def _mcp(spec: ToolSpec, name: str) -> dict[str, Any]:
    out = {**_head(spec, name), "inputSchema": _object_schema(spec.parameters)}
    if spec.output_schema is not None:
        out["outputSchema"] = _object_schema(spec.output_schema)
    risk = spec.card.risk
    out["annotations"] = {
        "readOnlyHint": risk is Risk.READ,
        "destructiveHint": risk is Risk.DESTRUCTIVE,
    }
    return out


_RENDERERS: dict[str, Callable[[ToolSpec, str], dict[str, Any]]] = {
    "openai": _openai,
    "openai-responses": _openai_responses,
    "anthropic": _anthropic,
    "gemini": _gemini_tool,
    "mcp": _mcp,
    "langchain": _openai,
}


class RenderCache:
    """Compact JSON of one tool's rendering per (id, format, name), for one spec object."""

    def __init__(self, size: int = 8192) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str, str], tuple[ToolSpec, str | None]] = OrderedDict()
        self._lock = threading.Lock()

    def text(self, spec: ToolSpec, fmt: str, name: str) -> str | None:
        """The rendering as compact JSON, or None if it has no exact JSON form."""
        key = (spec.id, fmt, name)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] is spec:
                self._items.move_to_end(key)
                return hit[1]
        text = _exact_json(_RENDERERS[fmt](spec, name))
        with self._lock:
            self._items[key] = (spec, text)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return text

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def _exact_json(rendered: dict[str, Any]) -> str | None:
    try:
        text = dumps(rendered)
    except (TypeError, ValueError):
        return None
    return text if json.loads(text) == rendered else None


#: the process's rendering cache (renderings are pure functions of spec, format and name)
CACHE = RenderCache()


def _texts(
    specs: Sequence[ToolSpec], fmt: str, names: Mapping[str, str] | None
) -> list[str | None]:
    if fmt not in _RENDERERS:
        raise FormatError(fmt, FORMATS)
    rendered = [names[s.id] for s in specs] if names is not None else _names(specs)
    return [CACHE.text(spec, fmt, name) for spec, name in zip(specs, rendered, strict=True)]


def render(
    specs: Sequence[ToolSpec], fmt: str, names: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The full schemas of ``specs``, in order, as the ``fmt`` API expects its tool list.

    ``names`` (tool id → name, from :func:`name_table` over the whole catalog) keeps
    names stable and unambiguous across shortlists; without it names are made
    unique within ``specs``. Every call returns new objects the caller may change."""
    texts = _texts(specs, fmt, names)
    if all(t is not None for t in texts):
        return [json.loads(t) for t in texts if t is not None]
    renderer = _RENDERERS[fmt]
    rendered = [names[s.id] for s in specs] if names is not None else _names(specs)
    return [renderer(spec, name) for spec, name in zip(specs, rendered, strict=True)]


def schema_tokens(
    specs: Sequence[ToolSpec], fmt: str = "openai", names: Mapping[str, str] | None = None
) -> int:
    """o200k tokens of the rendered tool list, serialised compactly (from the cached
    renderings and their cached per-tool token parts)."""
    texts = _texts(specs, fmt, names)
    if all(t is not None for t in texts):
        return count_items([t for t in texts if t is not None])
    return count_items([dumps(r) for r in render(specs, fmt, names)])


class Tier(StrEnum):
    """How much of the entitled catalog the model is shown up front."""

    ALL = "all"
    GROUPS = "groups"
    PROGRESSIVE = "progressive"


def _parse_tier(value: Tier | str) -> Tier:
    if isinstance(value, Tier):
        return value
    try:
        return Tier(value.strip().lower())
    except ValueError:
        allowed = ", ".join(tier.value for tier in Tier)
        raise ConfigError(f"unknown tier {value!r}; expected one of: {allowed}") from None


def choose_tier(n_entitled: int, override: Tier | str | None = None) -> Tier:
    """ALL below :data:`ALL_BELOW` tools, GROUPS up to :data:`GROUPS_UP_TO`, else PROGRESSIVE."""
    if override is not None:
        return _parse_tier(override)
    if n_entitled < ALL_BELOW:
        return Tier.ALL
    if n_entitled <= GROUPS_UP_TO:
        return Tier.GROUPS
    return Tier.PROGRESSIVE


def group_members(specs: Sequence[ToolSpec], groups: Iterable[str]) -> list[ToolSpec]:
    """The specs whose card is in one of ``groups``, in catalog order."""
    wanted = set(groups)
    return [spec for spec in specs if spec.card.group in wanted]
