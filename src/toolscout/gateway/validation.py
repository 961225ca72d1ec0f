"""Argument validation against a tool's JSON Schema, compiled once per schema.

The reading of the schema (declared draft or lenient fallback, local refs only,
ECMA-262 ``pattern``, strict ``integer``, no NaN, bounded depth) is
:func:`toolscout.schemas.make_validator`'s. Unknown parameters are refused
(naming the valid ones) unless the schema is open-ended or the validator was
built with ``allow_unknown``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolscout.cards import ToolSpec
from toolscout.errors import ArgumentError
from toolscout.gateway.quickcheck import Check, compile_quick
from toolscout.schemas import SchemaValidator, check_arguments, make_validator

UNKNOWN_PARAMETER = "unknown_parameter"
SCHEMA_MISMATCH = "schema_mismatch"


def _declared_properties(schema: Mapping[str, Any]) -> tuple[set[str], bool]:
    """(property names the schema declares, whether it explicitly allows others).

    Looks at the top level and at ``allOf``/``anyOf``/``oneOf`` members and
    local ``$ref`` targets one level down.
    """
    names: set[str] = set()
    open_ended = False
    parts: list[Mapping[str, Any]] = [schema]
    for key in ("allOf", "anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list):
            parts.extend(m for m in members if isinstance(m, Mapping))
    for part in list(parts):
        ref = part.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = schema
            for step in ref[2:].split("/"):
                target = target.get(step) if isinstance(target, Mapping) else None
            if isinstance(target, Mapping):
                parts.append(target)
    for part in parts:
        props = part.get("properties")
        if isinstance(props, Mapping):
            names.update(props)
        extra = part.get("additionalProperties", False)
        if extra is not False or part.get("patternProperties") or part.get("unevaluatedProperties"):
            open_ended = True
    return names, open_ended


@dataclass(frozen=True, slots=True)
class _Compiled:
    parameters: Mapping[str, Any]
    validator: SchemaValidator
    known: frozenset[str]
    open_ended: bool
    #: "certainly valid" for a plain schema (:mod:`toolscout.gateway.quickcheck`); else None
    quick: Check | None


class ArgumentValidator:
    """Validates arguments; compiled validators are cached per tool and schema content."""

    def __init__(self, *, allow_unknown: bool = False, cache_size: int = 4096) -> None:
        self.allow_unknown = allow_unknown
        self.cache_size = cache_size
        self._validators: OrderedDict[str, _Compiled] = OrderedDict()
        self._cache_lock = threading.Lock()

    def _compiled(self, spec: ToolSpec) -> _Compiled:
        """The tool's compiled validator, cached per tool and schema content."""
        with self._cache_lock:
            hit = self._validators.get(spec.id)
            if hit is not None and (
                hit.parameters is spec.parameters or hit.parameters == spec.parameters
            ):
                self._validators.move_to_end(spec.id)
                return hit
        validator = make_validator(spec.parameters)
        known, open_ended = _declared_properties(validator.schema)
        quick = None if validator.lenient else compile_quick(validator.schema)
        compiled = _Compiled(spec.parameters, validator, frozenset(known), open_ended, quick)
        with self._cache_lock:
            self._validators[spec.id] = compiled
            while len(self._validators) > self.cache_size:
                self._validators.popitem(last=False)
        return compiled

    def validate(
        self, spec: ToolSpec, arguments: Mapping[str, Any], *, checked: bool = False
    ) -> None:
        """Raise :class:`ArgumentError` unless ``arguments`` fit the tool's schema
        (``checked``: the caller already ran :func:`check_arguments` on them)."""
        if not checked:
            check_arguments(arguments, tool_id=spec.id)
        compiled = self._compiled(spec)
        if not (self.allow_unknown or compiled.open_ended):
            unknown = sorted(k for k in arguments if k not in compiled.known)
            if unknown:
                valid = ", ".join(sorted(compiled.known)) or "(none: the tool takes no parameters)"
                raise ArgumentError(
                    f"{spec.id}: unknown parameter {unknown[0]!r}"
                    + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
                    + f"; valid parameters: {valid}",
                    tool_id=spec.id,
                    reason=UNKNOWN_PARAMETER,
                )
        if compiled.quick is not None and compiled.quick(arguments):
            return  # certainly valid; any doubt, and the full validator decides and says why
        compiled.validator.validate(arguments, tool_id=spec.id)
