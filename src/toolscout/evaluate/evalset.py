"""Evaluation sets: ``tools.jsonl`` + ``queries.jsonl``, seeded samples and the warm split.

Formats (those of the sets under ``../shared/bench/``): ``tools.jsonl`` one
``{"id","name","description","parameters","source","group"}`` per line,
``queries.jsonl`` one ``{"id","query","gold":[tool ids],"source"}`` per line.
Bad input raises :class:`~toolscout.errors.CatalogFileError` (tools) or
:class:`QueryFileError` (queries), naming the file and line.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscout.cards import ToolSpec, check_unique, make_spec
from toolscout.errors import CardError, CatalogFileError, ConfigError, QueryFileError
from toolscout.loader import from_jsonl_record, jsonl_records

#: seeds of the ``--limit`` sample and of the warm history/test split
LIMIT_SEED = 20261129
WARM_SEED = 20261129


@dataclass(frozen=True, slots=True)
class EvalQuery:
    id: str
    query: str
    gold: tuple[str, ...]
    source: str = ""


def _query(rec: Any, path: Path, line: int) -> EvalQuery:
    def fail(reason: str) -> QueryFileError:
        return QueryFileError(str(path), reason, line)

    if not isinstance(rec, dict):
        raise fail("each line must be a JSON object")
    qid, text, gold = rec.get("id"), rec.get("query"), rec.get("gold")
    if not isinstance(qid, str) or not qid.strip():
        raise fail("'id' must be a non-empty string")
    if not isinstance(text, str) or not text.strip():
        raise fail(f"query {qid}: 'query' must be a non-empty string")
    if not isinstance(gold, list) or not gold or not all(isinstance(g, str) and g for g in gold):
        raise fail(f"query {qid}: 'gold' must be a non-empty list of tool ids")
    source = rec.get("source") or ""
    if not isinstance(source, str):
        raise fail(f"query {qid}: 'source' must be a string")
    return EvalQuery(qid, text, tuple(dict.fromkeys(gold)), source)


def read_queries(path: str | Path) -> list[EvalQuery]:
    """Every query of a ``queries.jsonl``, or :class:`QueryFileError` naming the line."""
    p = Path(path)
    out: list[EvalQuery] = []
    seen: set[str] = set()
    for lineno, rec in jsonl_records(p, QueryFileError):
        q = _query(rec, p, lineno)
        if q.id in seen:
            raise QueryFileError(str(p), f"duplicate query id {q.id!r}", lineno)
        seen.add(q.id)
        out.append(q)
    if not out:
        raise QueryFileError(str(p), "no queries in this file")
    return out


def _escaped(raw: str, taken: Set[str]) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.:/@-]", "_", raw).lstrip("_.:/@-")[:180] or "tool"
    if safe in taken:
        safe = f"{safe}-{hashlib.sha256(raw.encode()).hexdigest()[:8]}"
    return safe


def read_tools(path: str | Path) -> tuple[list[ToolSpec], dict[str, str]]:
    """The tools of a ``tools.jsonl`` and the ids renamed because the card rules reject them.

    Any other problem raises :class:`CatalogFileError` naming the file and line.
    """
    p = Path(path)
    records = jsonl_records(p)
    raw_ids = {str(r.get("id")) for _, r in records}
    specs: list[ToolSpec] = []
    renamed: dict[str, str] = {}
    for lineno, rec in records:
        fields = from_jsonl_record(rec)
        try:
            try:
                spec = make_spec(fields, default_source=p.stem)
            except CardError as exc:
                raw = fields.get("id")
                if exc.field != "id" or not isinstance(raw, str) or not raw.strip():
                    raise
                new = _escaped(raw.strip(), raw_ids | set(renamed.values()))
                spec = make_spec({**fields, "id": new, "name": fields.get("name") or raw})
                renamed[raw.strip()] = new
        except CardError as exc:
            raise CatalogFileError(str(p), str(exc), lineno) from None
        specs.append(spec)
    try:
        return check_unique(specs), renamed
    except CardError as exc:
        raise CatalogFileError(str(p), str(exc)) from None


def sample(
    queries: Sequence[EvalQuery], limit: int | None, seed: int = LIMIT_SEED
) -> list[EvalQuery]:
    """The first ``limit`` queries after a seeded shuffle, back in file order (all if None)."""
    if limit is None or limit >= len(queries):
        return list(queries)
    if limit < 1:
        raise ConfigError(f"limit must be at least 1, got {limit}")
    order = list(range(len(queries)))
    random.Random(seed).shuffle(order)
    return [queries[i] for i in sorted(order[:limit])]


def _norm(text: str) -> str:
    return " ".join(text.split())


def split_history(
    queries: Sequence[EvalQuery], seed: int = WARM_SEED
) -> tuple[list[EvalQuery], list[EvalQuery]]:
    """(history, test): a seeded half split, both in file order.

    A history query whose text also occurs in the test half is dropped, so no
    test text can be learned.
    """
    order = list(range(len(queries)))
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    test = [queries[i] for i in sorted(order[half:])]
    test_texts = {_norm(q.query) for q in test}
    history = [queries[i] for i in sorted(order[:half])]
    return [q for q in history if _norm(q.query) not in test_texts], test
