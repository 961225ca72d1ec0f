"""Capability cards and tool specs.

A :class:`CapabilityCard` is what search sees: a few dozen tokens per tool. The
full JSON Schema lives in :class:`ToolSpec` beside the card and is read only
when the tool is shortlisted and rendered for the model.

Real catalogs are messy. :func:`make_spec` refuses what cannot be a tool at all
(no id, a schema that is not an object, a remote ``$ref``, a ``pattern`` that does not
compile or needs a backtracking engine) with :class:`CardError`,
and indexes what is merely imperfect (an empty description, a schema that is not
valid JSON Schema 2020-12) with a :class:`CardWarning` carried on the spec —
unless ``strict``, where each warning is an error.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from toolscout.errors import CardError

#: Cards above this many tokens are reported as oversized (a warning, not an error).
CARD_TOKEN_WARN = 60
#: parameters named in a summary derived for a tool published without a description
DERIVED_SUMMARY_PARAMS = 6

#: printable, no leading/trailing space; inner spaces are allowed: real catalogs name REST
#: endpoints "spotify:GET /me/albums" and APIs "A Bíblia Digital"
_ID_RE = re.compile(
    r"^(?=.{1,200}$)[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f\x85\u2028\u2029]*[^\s\x00-\x1f\x7f])?$"
)
#: characters that show as nothing without being format controls (Hangul fillers,
#: variation selectors, the Mongolian vowel separator)
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u180e" + "".join(map(chr, range(0xFE00, 0xFE10))))
_SCOPE_RE = re.compile(r"^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.*-]+)*$")
_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


class WarningKind(StrEnum):
    """What is imperfect about an imported tool that was indexed anyway."""

    #: no description: a summary was derived from the name and parameters
    EMPTY_SUMMARY = "empty_summary"
    #: the schema is not valid JSON Schema 2020-12; kept as published
    INVALID_SCHEMA = "invalid_schema"

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    WarningKind.EMPTY_SUMMARY: "empty description; a summary was derived from the name and "
    "parameters",
    WarningKind.INVALID_SCHEMA: "schema is not valid JSON Schema 2020-12; kept as published "
    "and validated at execution",
}


@dataclass(frozen=True, slots=True)
class CardWarning:
    """A quality problem of one imported tool; the tool was indexed anyway."""

    tool_id: str
    kind: WarningKind
    #: the card field at fault (``summary``, ``parameters``, ``output_schema``)
    field: str
    message: str
    #: where the tool was read from (``file:line``), when it came from a file
    where: str = ""

    def __str__(self) -> str:
        at = f" ({self.where})" if self.where else ""
        return f"{self.tool_id}{at}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        return {
            "tool_id": self.tool_id,
            "kind": self.kind.value,
            "field": self.field,
            "message": self.message,
            "where": self.where,
        }


class Risk(StrEnum):
    """How dangerous a tool is; admin and destructive tools need the admin scope."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"
    DESTRUCTIVE = "destructive"

    @property
    def privileged(self) -> bool:
        return self in (Risk.ADMIN, Risk.DESTRUCTIVE)


@dataclass(frozen=True, slots=True)
class CapabilityCard:
    """The searchable, lightweight description of one tool."""

    id: str
    name: str
    summary: str
    scopes: tuple[str, ...] = ()
    tenants: tuple[str, ...] = ()  # empty: every tenant
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    not_for: tuple[str, ...] = ()
    group: str = ""
    risk: Risk = Risk.READ
    source: str = ""

    def text(self) -> str:
        """The card as one line of prose, as it is embedded and shown in listings."""
        parts = [f"{self.name}: {self.summary}"]
        if self.aliases:
            parts.append("Use for: " + "; ".join(self.aliases) + ".")
        if self.not_for:
            parts.append("Not for: " + "; ".join(self.not_for) + ".")
        return " ".join(parts)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CapabilityCard:
        """The card :meth:`to_dict` wrote (stored cards: already validated when indexed)."""
        return cls(
            id=d["id"],
            name=d["name"],
            summary=d["summary"],
            scopes=tuple(d["scopes"]),
            tenants=tuple(d["tenants"]),
            tags=tuple(d["tags"]),
            aliases=tuple(d["aliases"]),
            not_for=tuple(d["not_for"]),
            group=d["group"],
            risk=Risk(d["risk"]),
            source=d["source"],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "summary": self.summary,
            "scopes": list(self.scopes),
            "tenants": list(self.tenants),
            "tags": list(self.tags),
            "aliases": list(self.aliases),
            "not_for": list(self.not_for),
            "group": self.group,
            "risk": self.risk.value,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A card plus its full JSON Schema (parameters and optional output schema)."""

    card: CapabilityCard
    parameters: Mapping[str, Any] = field(default_factory=dict)
    output_schema: Mapping[str, Any] | None = None
    #: quality problems found when the spec was built (not stored, not hashed)
    warnings: tuple[CardWarning, ...] = field(default=(), compare=False)

    @property
    def id(self) -> str:
        return self.card.id

    def schema_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"parameters": dict(self.parameters)}
        if self.output_schema is not None:
            out["output_schema"] = dict(self.output_schema)
        return out

    def content_hash(self) -> str:
        """A digest of everything search and injection read; unchanged tools keep it."""
        blob = json.dumps(
            {"card": self.card.to_dict(), **self.schema_dict()}, sort_keys=True, default=str
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def with_aliases(self, aliases: Iterable[str]) -> ToolSpec:
        merged = tuple(dict.fromkeys([*self.card.aliases, *aliases]))
        return replace(self, card=replace(self.card, aliases=merged))


def _strings(tool_id: str, name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise CardError(tool_id, name, "must be a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def _check_schema(
    tool_id: str, name: str, schema: Any, warnings: list[CardWarning]
) -> dict[str, Any]:
    """The schema as published; structural problems raise, quality problems warn."""
    if schema is None:
        return {}
    if not isinstance(schema, Mapping):
        raise CardError(tool_id, name, f"must be a JSON Schema object, got {type(schema).__name__}")
    checked: dict[str, Any] = dict(schema)
    if not checked:
        return checked
    bad = _not_json(checked)
    if bad:
        raise CardError(tool_id, name, f"{bad}: not representable in JSON")
    from toolscout.schemas import invalid_patterns, remote_refs, schema_problems

    remote = remote_refs(checked)
    if remote:
        raise CardError(
            tool_id,
            name,
            f"remote $ref {remote[0]!r} refused: only local references (#/...) are resolved",
        )
    kind = checked.get("type", "object")
    if kind != "object":
        raise CardError(tool_id, name, f"top-level type must be 'object', got {kind!r}")
    refused = invalid_patterns(checked)
    if refused:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise CardError(tool_id, name, f"at {refused[0].path}: {refused[0].message}{more}")
    problems = schema_problems(checked)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        where = first.path or "(root)"
        warnings.append(
            CardWarning(
                tool_id,
                WarningKind.INVALID_SCHEMA,
                name,
                f"{name} is not valid JSON Schema 2020-12 at {where}: {first.message}{more}",
            )
        )
    return checked


def _not_json(value: Any) -> str:
    """Where a value holds what JSON cannot carry (NaN, ±Infinity, non-string keys, objects
    that are not JSON types): ``"/path: what"``, or ``""``. Iterative."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return f"{path or '/'}: {node!r}"
        if isinstance(node, Mapping):
            for key, child in node.items():
                if not isinstance(key, str):
                    return f"{path or '/'}: key {key!r} is not a string"
                stack.append((child, f"{path}/{key}"))
        elif isinstance(node, list | tuple):
            stack.extend((child, f"{path}/{i}") for i, child in enumerate(node))
        elif node is not None and not isinstance(node, str | int | float | bool):
            return f"{path or '/'}: a {type(node).__name__}"
    return ""


def _not_text(value: Any) -> str:
    """Why a card field cannot be stored as UTF-8 text (a lone surrogate, from a JSON
    ``\\ud800`` escape or undecodable bytes), or ``""``. Iterative."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        texts = [node] if isinstance(node, str) else []
        if isinstance(node, Mapping):
            texts = [k for k in node if isinstance(k, str)]
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"holds a lone surrogate ({text[exc.start]!a}), not Unicode text"
    return ""


def _name_words(name: str) -> list[str]:
    return [
        w.lower() for chunk in re.split(r"[^A-Za-z0-9]+", name) for w in _WORD_RE.findall(chunk)
    ]


def param_texts(spec: ToolSpec) -> list[str]:
    """Each parameter's name and, when it has one, its description, in schema order."""
    props = spec.parameters.get("properties", {}) if isinstance(spec.parameters, Mapping) else {}
    out: list[str] = []
    if isinstance(props, Mapping):
        for pname, pschema in props.items():
            out.append(str(pname))
            if isinstance(pschema, Mapping) and isinstance(pschema.get("description"), str):
                out.append(pschema["description"])
    return out


def derived_summary(name: str, parameters: Mapping[str, Any]) -> str:
    """A one-line summary for a tool published without a description: its name in
    words and the parameters it takes (``get_forecast`` → "Get forecast (city, days).")."""
    words = _name_words(name.rsplit(":", 1)[-1]) or [name]
    head = " ".join(words)
    head = head[:1].upper() + head[1:]
    props = parameters.get("properties")
    names = [str(p) for p in props][:DERIVED_SUMMARY_PARAMS] if isinstance(props, Mapping) else []
    if isinstance(props, Mapping) and len(props) > DERIVED_SUMMARY_PARAMS:
        names.append("...")
    return f"{head} ({', '.join(names)})." if names else f"{head}."


def _normal_id(tool_id: str) -> str:
    """``tool_id`` in NFKC form (fullwidth ``ｏｒｄｅｒｓ`` is ``orders``), or a
    :class:`CardError` when it holds a character that makes it read as something it is
    not: a bidirectional control (U+202E), an invisible one (U+200B, U+FEFF, U+00AD) or a
    filler (U+3164)."""
    for ch in tool_id:
        if unicodedata.category(ch) == "Cf" or ch in _FILLERS:
            raise CardError(
                tool_id,
                "id",
                f"contains U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')}), an invisible or "
                "bidirectional control character: an id must read as what it is",
            )
    return unicodedata.normalize("NFKC", tool_id).strip()


def make_spec(
    data: Mapping[str, Any], *, default_source: str = "", strict: bool = False
) -> ToolSpec:
    """Build and validate a :class:`ToolSpec` from a card mapping (YAML/JSON card files).

    Structural problems raise :class:`CardError` naming the tool and the field.
    Quality problems (an empty description, a schema that is not valid JSON Schema
    2020-12) are kept on ``spec.warnings``; with ``strict`` the first one raises.
    """
    if not isinstance(data, Mapping):
        raise CardError("?", "(card)", f"must be a mapping, got {type(data).__name__}")
    raw_id = data.get("id")
    if not isinstance(raw_id, str) or not raw_id.strip():
        raise CardError(str(data.get("name", "?")), "id", "missing or empty")
    tool_id = raw_id.strip()
    for key, value in data.items():
        bad = _not_text(value)
        if bad:
            raise CardError(tool_id, str(key), bad)
    tool_id = _normal_id(tool_id)
    if not _ID_RE.match(tool_id):
        raise CardError(
            tool_id, "id", "must be 1-200 printable characters, not starting or ending in space"
        )
    known = {
        "id",
        "name",
        "summary",
        "description",
        "scopes",
        "tenants",
        "tags",
        "aliases",
        "not_for",
        "group",
        "risk",
        "source",
        "parameters",
        "output_schema",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise CardError(
            tool_id, unknown[0], f"unknown field; known fields: {', '.join(sorted(known))}"
        )
    summary = data.get("summary")
    if summary is None or (isinstance(summary, str) and not summary.strip()):
        summary = data.get("description")
    if summary is not None and not isinstance(summary, str):
        raise CardError(tool_id, "summary", f"must be a string, got {type(summary).__name__}")
    name = data.get("name") or tool_id.rsplit("/", 1)[-1].rsplit(".", 1)[-1]
    if not isinstance(name, str):
        raise CardError(tool_id, "name", "must be a string")
    warnings: list[CardWarning] = []
    params = _check_schema(tool_id, "parameters", data.get("parameters"), warnings)
    output = data.get("output_schema")
    out_schema = (
        _check_schema(tool_id, "output_schema", output, warnings) if output is not None else None
    )
    if not summary or not summary.strip():
        summary = derived_summary(name.strip() or tool_id, params)
        warnings.insert(
            0,
            CardWarning(
                tool_id,
                WarningKind.EMPTY_SUMMARY,
                "summary",
                f"empty description; summary derived from the name and parameters: {summary!r}",
            ),
        )
    if strict and warnings:
        first = warnings[0]
        raise CardError(tool_id, first.field, f"{first.message} (strict mode)")
    scopes = _strings(tool_id, "scopes", data.get("scopes"))
    for scope in scopes:
        if not _SCOPE_RE.match(scope) or "*" in scope:
            raise CardError(
                tool_id, "scopes", f"{scope!r} is not a concrete scope like 'billing:write'"
            )
    risk_raw = data.get("risk", "read")
    try:
        risk = Risk(risk_raw)
    except ValueError:
        choices = ", ".join(r.value for r in Risk)
        raise CardError(tool_id, "risk", f"{risk_raw!r} is not one of: {choices}") from None
    group = data.get("group") or ""
    source = data.get("source") or default_source
    if not isinstance(group, str) or not isinstance(source, str):
        raise CardError(
            tool_id, "group" if not isinstance(group, str) else "source", "must be a string"
        )
    card = CapabilityCard(
        id=tool_id,
        name=name.strip(),
        summary=" ".join(summary.split()),
        scopes=scopes,
        tenants=_strings(tool_id, "tenants", data.get("tenants")),
        tags=_strings(tool_id, "tags", data.get("tags")),
        aliases=_strings(tool_id, "aliases", data.get("aliases")),
        not_for=_strings(tool_id, "not_for", data.get("not_for")),
        group=group,
        risk=risk,
        source=source,
    )
    return ToolSpec(
        card=card, parameters=params, output_schema=out_schema, warnings=tuple(warnings)
    )


def check_unique(specs: Iterable[ToolSpec]) -> list[ToolSpec]:
    """Reject duplicate ids within one batch."""
    seen: set[str] = set()
    out = []
    for spec in specs:
        if spec.id in seen:
            raise CardError(spec.id, "id", "duplicate id in this catalog")
        seen.add(spec.id)
        out.append(spec)
    return out


def card_text(card: CapabilityCard) -> str:
    """The text a card's size is counted on (id, summary, scopes, tags, aliases, not-for)."""
    return " ".join([card.id, card.summary, *card.scopes, *card.tags, *card.aliases, *card.not_for])


def card_tokens(card: CapabilityCard) -> int:
    """The card's size in o200k tokens (:func:`card_text`)."""
    from toolscout.discovery.tokencount import count_text

    return count_text(card_text(card))
