"""Reading catalogs from files: YAML/JSON card files and ``tools.jsonl``.

Structural problems — a file that is not UTF-8 text, a line that is not JSON, a
document that is not YAML, a missing or duplicate id — refuse the whole import
with :class:`CatalogFileError` naming the file and, where known, the line:
nothing is stored from a read that fails. Quality problems (an empty
description, an imperfect schema) do not: the tool is read with a
:class:`~toolscout.cards.CardWarning` on ``spec.warnings`` naming where it came
from, unless ``strict``.

YAML is read with PyYAML's safe loader, and a document whose aliases would
expand to more than :data:`YAML_ALIAS_BUDGET` extra nodes (an "alias bomb"), or
that refers to itself, is refused before anything is built from it.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from toolscout.cards import ToolSpec, make_spec
from toolscout.errors import CardError, CatalogFileError, ConfigError
from toolscout.policy import PolicyConfig

CARD_SUFFIXES = (".yaml", ".yml", ".json")
#: how many nodes YAML aliases may add to a document beyond those written out
YAML_ALIAS_BUDGET = 100_000
#: the largest catalog file read
MAX_FILE_BYTES = 512 << 20


def _yaml() -> Any:
    import yaml

    return yaml


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def read_text(path: Path, error: type[CatalogFileError] = CatalogFileError) -> str:
    """A catalog file's text; a binary or non-UTF-8 file is an ``error`` naming the line."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise error(str(path), "not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise error(str(path), f"larger than {MAX_FILE_BYTES >> 20} MiB; split the catalog")
        data = path.read_bytes()
    except OSError as exc:
        raise error(str(path), f"cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise error(str(path), "binary file (NUL byte), not a text catalog", line)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            str(path), f"not UTF-8 text (byte 0x{data[exc.start]:02x}); save it as UTF-8", line
        ) from None


# -- YAML ----------------------------------------------------------------------------


def _children(node: Any) -> list[Any]:
    yaml = _yaml()
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: Any, path: Path) -> None:
    """Refuse a node graph that refers to itself or whose aliases expand too far."""
    size: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            visiting.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in _children(node))
            if size[key] > len(size) + YAML_ALIAS_BUDGET:
                line = node.start_mark.line + 1
                raise CatalogFileError(
                    str(path),
                    f"YAML aliases expand to more than {YAML_ALIAS_BUDGET} extra nodes "
                    "(an alias bomb?); write the repeated parts out",
                    line,
                )
            continue
        if key in size:
            continue
        if key in visiting:
            raise CatalogFileError(
                str(path), "a YAML alias refers to itself", node.start_mark.line + 1
            )
        visiting.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in visiting:
                raise CatalogFileError(
                    str(path), "a YAML alias refers to itself", child.start_mark.line + 1
                )
            if id(child) not in size:
                stack.append((child, False))


def load_yaml(
    text: str, path: Path, error: type[CatalogFileError] = CatalogFileError
) -> tuple[Any, Any]:
    """(document, its root node) of one YAML document, read safely (see the module doc)."""
    yaml = _yaml()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_expansion(node, path)
        return loader.construct_document(node), node
    except CatalogFileError:
        raise
    except RecursionError:
        raise error(str(path), "invalid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(str(path), f"invalid YAML: {_one_line(problem)}", line) from None
    finally:
        loader.dispose()


def _entry_lines(node: Any) -> list[int] | None:
    """The line of each card in a card file, in :func:`_card_entries` order."""
    yaml = _yaml()
    if isinstance(node, yaml.SequenceNode):
        return [n.start_mark.line + 1 for n in node.value]
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == "tools":
                if isinstance(v, yaml.SequenceNode):
                    return [n.start_mark.line + 1 for n in v.value]
                return None
        return [node.start_mark.line + 1]
    return None


# -- tools.jsonl ---------------------------------------------------------------------


def from_jsonl_record(rec: Mapping[str, Any]) -> dict[str, Any]:
    """Map a ``tools.jsonl`` record (id, name, description, parameters, source, group)
    to card fields."""
    out: dict[str, Any] = {
        "id": rec.get("id"),
        "name": rec.get("name"),
        "summary": rec.get("description"),
        "parameters": rec.get("parameters") or {},
        "source": rec.get("source") or "",
        "group": rec.get("group") or "",
    }
    for extra in ("scopes", "tenants", "tags", "aliases", "not_for", "risk", "output_schema"):
        if extra in rec:
            out[extra] = rec[extra]
    return out


def jsonl_records(
    path: str | Path, error: type[CatalogFileError] = CatalogFileError
) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; ``error`` names the file and line."""
    p = Path(path)
    text = read_text(p, error)
    records: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(str(p), f"invalid JSON: {exc.msg}", lineno) from None
        except RecursionError:
            raise error(str(p), "invalid JSON: nested too deeply", lineno) from None
        if not isinstance(rec, dict):
            raise error(str(p), "each line must be a JSON object", lineno)
        records.append((lineno, rec))
    return records


def _located(spec: ToolSpec, where: str) -> ToolSpec:
    if not spec.warnings:
        return spec
    return replace(spec, warnings=tuple(replace(w, where=where) for w in spec.warnings))


def _jsonl_specs(path: Path, strict: bool) -> list[tuple[ToolSpec, int | None]]:
    out: list[tuple[ToolSpec, int | None]] = []
    for lineno, rec in jsonl_records(path):
        try:
            spec = make_spec(from_jsonl_record(rec), default_source=path.stem, strict=strict)
        except CardError as exc:
            raise CatalogFileError(str(path), str(exc), lineno) from None
        out.append((_located(spec, f"{path}:{lineno}"), lineno))
    return out


def read_jsonl(path: Path, *, strict: bool = False) -> list[ToolSpec]:
    """The tools of one ``tools.jsonl``."""
    return [spec for spec, _ in _jsonl_specs(path, strict)]


# -- card files ----------------------------------------------------------------------


def _card_entries(doc: Any, path: Path) -> Iterator[Any]:
    if isinstance(doc, Mapping) and "tools" in doc:
        tools = doc["tools"]
    elif isinstance(doc, list):
        tools = doc
    elif isinstance(doc, Mapping) and "id" in doc:
        tools = [doc]
    else:
        raise CatalogFileError(str(path), "expected a 'tools:' list, a list of cards or one card")
    if not isinstance(tools, list):
        raise CatalogFileError(str(path), "'tools' must be a list")
    yield from tools


def card_document(path: Path) -> tuple[str, list[Any], list[int] | None]:
    """One YAML or JSON card file read safely: its service name, its tool entries as
    written, and each entry's line (None when unknown). Indexing and lint both read
    card files through this."""
    text = read_text(path)
    lines: list[int] | None = None
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CatalogFileError(str(path), f"invalid JSON: {exc.msg}", exc.lineno) from None
        except RecursionError:
            raise CatalogFileError(str(path), "invalid JSON: nested too deeply") from None
    else:
        doc, node = load_yaml(text, path)
        lines = _entry_lines(node)
    service = doc.get("service", "") if isinstance(doc, Mapping) else ""
    if not isinstance(service, str):
        raise CatalogFileError(str(path), "'service' must be a string")
    entries = list(_card_entries(doc, path))
    if lines is not None and len(lines) != len(entries):
        lines = None
    return service, entries, lines


def _card_specs(path: Path, strict: bool) -> list[tuple[ToolSpec, int | None]]:
    service, entries, lines = card_document(path)
    out: list[tuple[ToolSpec, int | None]] = []
    for i, entry in enumerate(entries):
        line = lines[i] if lines is not None else None
        try:
            spec = make_spec(entry, default_source=service or path.stem, strict=strict)
        except CardError as exc:
            raise CatalogFileError(str(path), f"tool #{i + 1}: {exc}", line) from None
        where = f"{path}:{line}" if line is not None else f"{path} tool #{i + 1}"
        out.append((_located(spec, where), line))
    return out


def read_cards(path: Path, *, strict: bool = False) -> list[ToolSpec]:
    """The tools of one YAML or JSON card file."""
    return [spec for spec, _ in _card_specs(path, strict)]


# -- catalogs ------------------------------------------------------------------------


def catalog_files(path: Path) -> list[Path]:
    """The catalog files a path names: a directory's card and tools files, or the file."""
    if path.is_dir():
        found = sorted(
            p
            for p in path.iterdir()
            if (p.suffix in CARD_SUFFIXES or p.suffix == ".jsonl") and p.stem != "policy"
        )
        if not found:
            raise CatalogFileError(str(path), "no .yaml, .yml, .json or .jsonl catalog files here")
        return found
    if not path.exists():
        raise CatalogFileError(str(path), "no such file or directory")
    return [path]


def read_catalog(paths: Iterable[str | Path], *, strict: bool = False) -> list[ToolSpec]:
    """All tools of the given files and directories, or :class:`CatalogFileError`.

    A duplicate id names both places. Quality problems ride on ``spec.warnings``
    (see :func:`toolscout.imports.import_warnings`); ``strict`` makes them errors.
    """
    specs: list[ToolSpec] = []
    first: dict[str, str] = {}
    for raw in paths:
        for f in catalog_files(Path(raw)):
            if f.suffix == ".jsonl":
                read = _jsonl_specs(f, strict)
            elif f.suffix in CARD_SUFFIXES:
                read = _card_specs(f, strict)
            else:
                raise CatalogFileError(
                    str(f), "unknown catalog format (use .yaml, .json or .jsonl)"
                )
            if not read:
                raise CatalogFileError(str(f), "no tools in this file")
            for spec, line in read:
                where = f"{f}:{line}" if line is not None else str(f)
                if spec.id in first:
                    raise CatalogFileError(
                        str(f), f"duplicate id {spec.id!r} (first at {first[spec.id]})", line
                    )
                first[spec.id] = where
                specs.append(spec)
    return specs


def read_policy(path: str | Path) -> PolicyConfig:
    p = Path(path)
    try:
        doc, _ = load_yaml(read_text(p), p)
    except CatalogFileError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{p}: expected a mapping with 'roles' and 'admin_scope'")
    try:
        return PolicyConfig.from_dict(doc)
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None


def demo_catalog_dir() -> Path:
    from importlib import resources

    return Path(str(resources.files("toolscout.data").joinpath("demo_catalog")))
