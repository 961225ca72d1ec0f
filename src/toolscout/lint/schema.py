"""Checks on a tool's parameter schema: what the model needs to fill it in right."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from toolscout.discovery.lexical import words
from toolscout.lint.findings import Finding
from toolscout.lint.source import LintTool


def check_schemas(tools: Iterable[LintTool]) -> list[Finding]:
    out: list[Finding] = []
    for t in tools:
        schema = t.parameters
        if schema is None or schema == {}:
            continue
        out += _validity(t, schema)
        if not isinstance(schema, Mapping):
            continue
        out += _structure(t, schema)
    return out


def _validity(tool: LintTool, schema: Any) -> list[Finding]:
    problems = _problems(schema)
    if not problems:
        return []
    return [
        Finding.of(
            "schema-invalid",
            [tool.id],
            f"{tool.id}: the parameter schema is not valid JSON Schema 2020-12: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            "fix the schema so a 2020-12 validator accepts it; until then arguments are "
            "validated leniently and the model may be shown a schema it misreads",
            problems=problems[:10],
        )
    ]


def _problems(schema: Any) -> list[str]:
    if not isinstance(schema, Mapping):
        return [f"the schema is a {type(schema).__name__}, not an object"]
    from jsonschema import Draft202012Validator

    meta = Draft202012Validator(Draft202012Validator.META_SCHEMA)
    out = []
    for err in meta.iter_errors(dict(schema)):
        where = "/" + "/".join(str(p) for p in err.absolute_path)
        out.append(f"{where}: {err.message[:160]}")
    if schema.get("type", "object") != "object":
        out.append(f"/type: parameters must be an object schema, not {schema['type']!r}")
    return out


def _objects(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every object-like subschema with its JSON pointer (properties, items, $defs...)."""
    yield path, schema
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for name, sub in props.items():
            if isinstance(sub, Mapping):
                yield from _objects(sub, f"{path}/properties/{name}")
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if isinstance(sub, Mapping):
            yield from _objects(sub, f"{path}/{key}")
    for key in ("$defs", "definitions"):
        defs = schema.get(key)
        if isinstance(defs, Mapping):
            for name, sub in defs.items():
                if isinstance(sub, Mapping):
                    yield from _objects(sub, f"{path}/{key}/{name}")
    for key in ("anyOf", "oneOf", "allOf"):
        subs = schema.get(key)
        if isinstance(subs, list):
            for i, sub in enumerate(subs):
                if isinstance(sub, Mapping):
                    yield from _objects(sub, f"{path}/{key}/{i}")


def _structure(tool: LintTool, schema: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    undescribed: list[str] = []
    for path, sub in _objects(schema):
        if "enum" in sub and (not isinstance(sub["enum"], list) or not sub["enum"]):
            out.append(
                Finding.of(
                    "enum-empty",
                    [tool.id],
                    f"{tool.id}: {path or '/'} has an enum with no values; no argument can pass",
                    "list the allowed values, or drop the enum",
                    path=path,
                )
            )
        props = sub.get("properties")
        props = props if isinstance(props, Mapping) else {}
        required = sub.get("required")
        if isinstance(required, list):
            missing = [r for r in required if isinstance(r, str) and r not in props]
            if missing and (props or sub.get("type") == "object" or path == ""):
                out.append(
                    Finding.of(
                        "required-not-property",
                        [tool.id],
                        f"{tool.id}: {path or '/'} requires {', '.join(missing)}, which "
                        f"{'is' if len(missing) == 1 else 'are'} not among its properties",
                        "add the property with a type and description, or remove it from required",
                        path=path,
                        fields=missing,
                    )
                )
        if path == "":
            undescribed += [
                name
                for name, p in props.items()
                if not (isinstance(p, Mapping) and str(p.get("description", "")).strip())
            ]
    if undescribed:
        out.append(
            Finding.of(
                "param-undescribed",
                [tool.id],
                f"{tool.id}: parameters without a description: {', '.join(undescribed)}",
                "describe each parameter: what it is, its format and an example value",
                parameters=undescribed,
            )
        )
    out += _unmentioned(tool, schema)
    return out


def _unmentioned(tool: LintTool, schema: Mapping[str, Any]) -> list[Finding]:
    """Required parameters whose names the tool's description never mentions."""
    props = schema.get("properties")
    required = schema.get("required")
    if not isinstance(props, Mapping) or not isinstance(required, list):
        return []
    said = set(words(tool.spec.card.summary))
    missing = [
        r for r in required if isinstance(r, str) and r in props and not (set(words(r)) & said)
    ]
    if not missing:
        return []
    return [
        Finding.of(
            "param-unmentioned",
            [tool.id],
            f"{tool.id}: the description never mentions required "
            f"{'parameter' if len(missing) == 1 else 'parameters'} {', '.join(missing)}",
            "say in the summary what the tool needs to be called (e.g. 'by order id')",
            parameters=missing,
        )
    ]
