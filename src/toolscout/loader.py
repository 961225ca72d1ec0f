"""Reading catalogs from files: YAML/JSON card files and ``tools.jsonl``.

Every reader either returns every tool of its input or raises
:class:`CatalogFileError` naming the file, the line where one is known, and
what is wrong — nothing is stored from a file that fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from toolscout.cards import ToolSpec, check_unique, make_spec
from toolscout.errors import CardError, CatalogFileError, ConfigError
from toolscout.policy import PolicyConfig

CARD_SUFFIXES = (".yaml", ".yml", ".json")


def _yaml() -> Any:
    import yaml

    return yaml


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
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(str(p), f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise error(str(p), f"not UTF-8 text: {exc.reason}") from None
    records: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(str(p), f"invalid JSON: {exc.msg}", lineno) from None
        if not isinstance(rec, dict):
            raise error(str(p), "each line must be a JSON object", lineno)
        records.append((lineno, rec))
    return records


def read_jsonl(path: Path) -> list[ToolSpec]:
    specs: list[ToolSpec] = []
    for lineno, rec in jsonl_records(path):
        try:
            specs.append(make_spec(from_jsonl_record(rec), default_source=path.stem))
        except CardError as exc:
            raise CatalogFileError(str(path), str(exc), lineno) from None
    return specs


def _card_entries(doc: Any, path: Path) -> Iterator[Mapping[str, Any]]:
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


def read_cards(path: Path) -> list[ToolSpec]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogFileError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text) if path.suffix == ".json" else _yaml().safe_load(text)
    except json.JSONDecodeError as exc:
        raise CatalogFileError(str(path), f"invalid JSON: {exc.msg}", exc.lineno) from None
    except Exception as exc:  # yaml.YAMLError and its subclasses
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise CatalogFileError(str(path), f"invalid YAML: {problem}", line) from None
    service = doc.get("service", "") if isinstance(doc, Mapping) else ""
    specs = []
    for i, entry in enumerate(_card_entries(doc, path)):
        try:
            specs.append(make_spec(entry, default_source=service or path.stem))
        except CardError as exc:
            raise CatalogFileError(str(path), f"tool #{i + 1}: {exc}") from None
    return specs


def _files(path: Path) -> list[Path]:
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


def read_catalog(paths: Iterable[str | Path]) -> list[ToolSpec]:
    """All tools of the given files and directories; duplicate ids are an error."""
    specs: list[ToolSpec] = []
    for raw in paths:
        for f in _files(Path(raw)):
            if f.suffix == ".jsonl":
                specs.extend(read_jsonl(f))
            elif f.suffix in CARD_SUFFIXES:
                specs.extend(read_cards(f))
            else:
                raise CatalogFileError(
                    str(f), "unknown catalog format (use .yaml, .json or .jsonl)"
                )
    try:
        return check_unique(specs)
    except CardError as exc:
        raise CatalogFileError(", ".join(str(p) for p in paths), str(exc)) from None


def read_policy(path: str | Path) -> PolicyConfig:
    p = Path(path)
    try:
        doc = _yaml().safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except Exception as exc:
        raise ConfigError(f"{p}: invalid YAML: {exc}") from None
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{p}: expected a mapping with 'roles' and 'admin_scope'")
    try:
        return PolicyConfig.from_dict(doc)
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None


def demo_catalog_dir() -> Path:
    from importlib import resources

    return Path(str(resources.files("toolscout.data").joinpath("demo_catalog")))
