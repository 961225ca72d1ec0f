"""Reading a catalog for lint: leniently, so that every problem is a finding.

Indexing refuses a catalog with duplicate ids or an unreadable card; lint must
instead name each of those problems and go on checking the rest. Files that
cannot be parsed at all (not YAML/JSON, not UTF-8) are still errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolscout.cards import ToolSpec, make_spec
from toolscout.errors import CardError, CatalogFileError
from toolscout.lint.findings import Finding
from toolscout.loader import (
    CARD_SUFFIXES,
    card_document,
    catalog_files,
    from_jsonl_record,
    jsonl_records,
)

_LEGAL_ID = re.compile(r"[\s\x00-\x1f\x7f]+")


@dataclass(frozen=True, slots=True)
class LintTool:
    """One tool as lint sees it: its spec, the schema as published, where it came from."""

    spec: ToolSpec
    where: str = ""
    parameters: Any = None  # the published schema, before any repair
    annotations: Mapping[str, Any] = field(default_factory=dict)  # MCP tool annotations
    described: bool = True  # False: the published description was empty
    #: False: the published card declares no risk (it was given the default, read); an
    #: indexed catalog no longer knows, so its tools count as declared
    risk_declared: bool = True

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass(slots=True)
class LintInput:
    tools: list[LintTool] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def from_specs(specs: Iterable[ToolSpec], where: str = "") -> LintInput:
    """Lint input from specs already validated (an indexed catalog)."""
    return LintInput([LintTool(s, where, dict(s.parameters)) for s in specs])


def read(paths: Sequence[str | Path]) -> LintInput:
    """Every tool of the given files and directories, problems as findings."""
    out = LintInput()
    for raw in paths:
        for path in _files(Path(raw)):
            for where, record in _records(path):
                _add(out, record, where, default_source=path.stem)
    return out


def _files(path: Path) -> list[Path]:
    """The loader's catalog files; a single file must also be a catalog format lint reads."""
    if not path.is_dir():
        if not path.is_file():
            raise CatalogFileError(str(path), "no such file")
        if path.suffix not in (*CARD_SUFFIXES, ".jsonl"):
            raise CatalogFileError(str(path), "unknown catalog format (use .yaml, .json or .jsonl)")
    return catalog_files(path)


def _records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(location, card mapping) for each tool in one file."""
    if path.suffix == ".jsonl":
        return [
            (f"{path}:{line}", {**from_jsonl_record(rec), "_annotations": rec.get("annotations")})
            for line, rec in jsonl_records(path)
        ]
    # the loader's own safe reading (size, binary, UTF-8, YAML alias and depth limits)
    service, entries, _ = card_document(path)
    out = []
    for i, entry in enumerate(entries, 1):
        rec = dict(entry) if isinstance(entry, Mapping) else {"_not_a_mapping": entry}
        rec.setdefault("source", service or path.stem)
        rec["_annotations"] = rec.pop("annotations", None)
        out.append((f"{path}#{i}", rec))
    return out


def _invalid(exc: CardError, where: str) -> Finding:
    return Finding.of(
        "card-invalid",
        [exc.tool_id],
        f"{where}: {exc}",
        f"fix field {exc.field!r} of this card; indexing refuses it",
    )


def _add(out: LintInput, record: dict[str, Any], where: str, default_source: str) -> None:
    annotations = record.pop("_annotations", None)
    annotations = dict(annotations) if isinstance(annotations, Mapping) else {}
    if "_not_a_mapping" in record:
        out.findings.append(
            Finding.of(
                "card-invalid", [where], f"{where}: a card must be a mapping", "write it as a map"
            )
        )
        return
    published = record.get("parameters")
    repaired = dict(record)
    # problems lint reports under their own codes are repaired here so the card can be checked
    summary = repaired.get("summary", repaired.get("description"))
    if not isinstance(summary, str) or not summary.strip():
        repaired.pop("description", None)
        repaired["summary"] = str(repaired.get("name") or repaired.get("id") or "?")
        repaired["_empty"] = True
    for _attempt in range(3):
        empty = bool(repaired.pop("_empty", False))
        try:
            spec = make_spec(repaired, default_source=default_source)
        except CardError as exc:
            repaired["_empty"] = empty
            if exc.field in ("parameters", "output_schema") and repaired.get(exc.field):
                # an invalid schema is named by the schema checks; check the card anyway
                repaired[exc.field] = {} if exc.field == "parameters" else None
                continue
            raw_id = repaired.get("id")
            if exc.field == "id" and isinstance(raw_id, str) and raw_id.strip():
                # name the bad id, then check the rest of the card under a legal one
                out.findings.append(_invalid(exc, where))
                repaired["id"] = _LEGAL_ID.sub("_", raw_id.strip())[:200]
                repaired.setdefault("name", raw_id.strip())
                continue
            out.findings.append(_invalid(exc, where))
            return
        if empty:
            out.findings.append(
                Finding.of(
                    "description-empty",
                    [spec.id],
                    f"{spec.id} has no description: search can match only its name",
                    "write a one-sentence summary in the words users use for this task",
                )
            )
        declared = record.get("risk") is not None
        out.tools.append(LintTool(spec, where, published, annotations, not empty, declared))
        return
