"""Capability cards and tool specs.

A :class:`CapabilityCard` is what search sees: a few dozen tokens per tool. The
full JSON Schema lives in :class:`ToolSpec` beside the card and is read only
when the tool is shortlisted and rendered for the model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from toolscout.errors import CardError

#: Cards above this many tokens are reported as oversized (a warning, not an error).
CARD_TOKEN_WARN = 60

_ID_RE = re.compile(r"^[^\s\x00-\x1f\x7f]{1,200}$")
_SCOPE_RE = re.compile(r"^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.*-]+)*$")


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


def _check_schema(tool_id: str, name: str, schema: Any) -> dict[str, Any]:
    if schema is None:
        return {}
    if not isinstance(schema, Mapping):
        raise CardError(tool_id, name, f"must be a JSON Schema object, got {type(schema).__name__}")
    checked: dict[str, Any] = dict(schema)
    if not checked:
        return checked
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    cls = validators.validator_for(checked, default=validators.Draft202012Validator)
    try:
        cls.check_schema(checked)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise CardError(
            tool_id, name, f"not a valid JSON Schema at {where}: {exc.message}"
        ) from None
    kind = checked.get("type", "object")
    if kind != "object":
        raise CardError(tool_id, name, f"top-level type must be 'object', got {kind!r}")
    return checked


def make_spec(data: Mapping[str, Any], *, default_source: str = "") -> ToolSpec:
    """Build and validate a :class:`ToolSpec` from a card mapping (YAML/JSON card files).

    Raises :class:`CardError` naming the tool and the field.
    """
    if not isinstance(data, Mapping):
        raise CardError("?", "(card)", f"must be a mapping, got {type(data).__name__}")
    raw_id = data.get("id")
    if not isinstance(raw_id, str) or not raw_id.strip():
        raise CardError(str(data.get("name", "?")), "id", "missing or empty")
    tool_id = raw_id.strip()
    if not _ID_RE.match(tool_id):
        raise CardError(tool_id, "id", "must be 1-200 printable characters without spaces")
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
    summary = data.get("summary", data.get("description"))
    if not isinstance(summary, str) or not summary.strip():
        raise CardError(tool_id, "summary", "missing or empty")
    name = data.get("name") or tool_id.rsplit("/", 1)[-1].rsplit(".", 1)[-1]
    if not isinstance(name, str):
        raise CardError(tool_id, "name", "must be a string")
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
    params = _check_schema(tool_id, "parameters", data.get("parameters"))
    output = data.get("output_schema")
    out_schema = _check_schema(tool_id, "output_schema", output) if output is not None else None
    return ToolSpec(card=card, parameters=params, output_schema=out_schema)


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


def card_tokens(card: CapabilityCard) -> int:
    """The card's size in o200k tokens (id, summary, scopes, tags, aliases, not-for)."""
    from toolscout.discovery.tokencount import count_text

    text = " ".join([card.id, card.summary, *card.scopes, *card.tags, *card.aliases, *card.not_for])
    return count_text(text)
