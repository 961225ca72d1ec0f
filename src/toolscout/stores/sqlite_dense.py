"""The SQLite store's dense index, and keeping it beside the SQLite file, memory-mapped.

The index is brute-force cosine over each *distinct* vector once (tenants' copies of one
integration share their texts), with a row per (tool, text) pointing at its vector.
Building it reads every vector blob of the catalog (about a second at 100k tools), so
a process keeps it: the distinct vectors and the row map are written as two ``.npy``
files beside the SQLite file, and a header naming them (their shapes, the model, the
generation they were derived from) is kept in the store's ``derived`` table for that
generation. A new process maps the files (``np.load(mmap_mode="r")``: nothing is read
until a query touches it) instead of building the index. A header of another
generation, model or index version, a file that is missing, or one whose shape or
dtype is not the header's, is never used: the index is built again.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence, Set
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from toolscout.stores.base import KIND_CARD, Hits, Vector

_T = TypeVar("_T")

#: per-allowed-set row subsets and scope filters kept (least recently used out): about
#: one per tenant and role asking now, as the catalog's entitlement cache
SUBSET_CACHE = 512
#: bump when the kept files' layout changes: an older header is then never read
KEPT_VERSION = 1


def _cosines(matrix: npt.NDArray[np.float32], vector: Vector) -> npt.NDArray[np.float32]:
    """``matrix @ vector`` on this thread only.

    OpenBLAS runs a matrix-vector product on all its threads; called once per request,
    those threads are asleep and must be woken, and on a busy 2-core machine (the query
    encoder, other requests) that took 4-8 ms for a 1,853 x 384 product that einsum,
    single-threaded, does in 0.3 ms."""
    out: npt.NDArray[np.float32] = np.einsum("ij,j->i", matrix, vector)
    return out


class _PerAllowed(Generic[_T]):
    """Values derived from one allowed set, cached by the set's identity (an entitlement
    is immutable and reused across requests); the least recently used go past ``size``."""

    def __init__(self, size: int = SUBSET_CACHE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[int, Hashable], tuple[Set[str], _T]] = OrderedDict()

    def get(self, allowed: Set[str], extra: Hashable = None) -> _T | None:
        key = (id(allowed), extra)
        hit = self._items.get(key)
        if hit is None or hit[0] is not allowed:
            return None
        self._items.move_to_end(key)
        return hit[1]

    def put(self, allowed: Set[str], value: _T, extra: Hashable = None) -> _T:
        self._items[(id(allowed), extra)] = (allowed, value)
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return value


class _Subset:
    """The rows of one allowed set (and kinds), grouped by tool for ``np.maximum.reduceat``."""

    __slots__ = (
        "every_tool",
        "identity",
        "local",
        "needed",
        "one_row",
        "rows_u",
        "starts",
        "tools",
    )

    def __init__(
        self,
        tools: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        rows_u: npt.NDArray[np.int64],
        n_unique: int,
        n_tools: int,
    ) -> None:
        self.tools = tools  # positions of the tools that own a row, ascending
        #: every one of the index's ``n_tools`` tools owns a row here (``tools`` is 0, 1,
        #: ..., n - 1: sorted, distinct, in range)
        self.every_tool = len(tools) == n_tools
        self.starts = starts  # where each tool's rows start in ``rows_u``
        self.rows_u = rows_u  # each row's unique-vector index
        #: every tool has exactly one row (no aliases): the rows are the tools
        self.one_row = len(starts) == len(rows_u)
        # the distinct vectors these rows use; when they are few, only they are scored
        needed, local = np.unique(rows_u, return_inverse=True)
        few = len(needed) < n_unique // 2
        self.needed = needed if few else None
        self.local = local.astype(np.int64) if few else rows_u
        #: the rows are the distinct vectors, in order (one tool a vector, no aliases, all
        #: allowed): the cosines need no gathering
        self.identity = (
            not few
            and len(rows_u) == n_unique
            and bool(np.array_equal(rows_u, np.arange(n_unique)))
        )


class _DenseIndex:
    """Each distinct vector once; rows (tool, kind) point at theirs.

    Tenants' copies of one integration share their texts, hence their vectors:
    the matrix holds each distinct vector once and the cosine of a query is taken
    once per distinct vector. A search first narrows to the rows of the caller's
    allowed tools (cached per allowed set), so its cost follows what the caller
    may see, not the size of the catalog."""

    def __init__(
        self,
        ids: list[str],
        matrix: npt.NDArray[np.float32],
        row_u: npt.NDArray[np.int64],
        owner_of: npt.NDArray[np.int64],
        kind: npt.NDArray[np.int32],
        kind_codes: dict[str, int],
    ) -> None:
        self.ids = ids
        self.position = {tid: i for i, tid in enumerate(ids)}
        self.matrix = matrix  # one row per distinct vector (memory-mapped when kept)
        #: the same rows as a plain array (slicing a memmap builds a memmap each time)
        self.plain: npt.NDArray[np.float32] = matrix.view(np.ndarray)
        self.row_u = row_u  # each (tool, text) row's distinct vector
        self.owner_of = owner_of  # each row's tool (position in ``ids``), ascending
        self.kind = kind  # each row's kind as a small integer (one learned kind per tenant)
        self.kind_codes = kind_codes
        card = kind_codes.get(KIND_CARD)
        at = np.nonzero(kind == card)[0] if card is not None else np.zeros(0, np.int64)
        self.card_row = dict(zip(owner_of[at].tolist(), at.tolist(), strict=True))
        self._kinds: OrderedDict[frozenset[str], npt.NDArray[np.bool_]] = OrderedDict()
        self._subsets: _PerAllowed[_Subset] = _PerAllowed()

    @classmethod
    def build(
        cls, ids: list[str], rows: list[tuple[int, str, str, Vector]], dim: int
    ) -> _DenseIndex:
        """From (tool position, kind, text hash, vector) rows: each distinct vector once."""
        rows.sort(key=lambda r: r[0])
        unique: dict[str, int] = {}
        vectors: list[Vector] = []
        row_u = np.empty(len(rows), dtype=np.int64)
        for i, (_, _, text_hash, vec) in enumerate(rows):
            u = unique.get(text_hash)
            if u is None:
                u = unique[text_hash] = len(vectors)
                vectors.append(vec)
            row_u[i] = u
        matrix = np.stack(vectors) if vectors else np.zeros((0, dim), dtype=np.float32)
        owner = np.array([r[0] for r in rows], dtype=np.int64)
        codes: dict[str, int] = {}
        kind = np.array([codes.setdefault(r[1], len(codes)) for r in rows], dtype=np.int32)
        return cls(ids, matrix.astype(np.float32, copy=False), row_u, owner, kind, codes)

    def kind_rows(self, kinds: Set[str]) -> npt.NDArray[np.bool_]:
        """Which rows are of ``kinds`` (a few recent combinations are kept: a caller's
        views, and the learned kinds of the tenants asking now)."""
        key = frozenset(kinds)
        rows = self._kinds.get(key)
        if rows is None:
            wanted = [self.kind_codes[k] for k in key if k in self.kind_codes]
            rows = np.isin(self.kind, wanted) if wanted else np.zeros(len(self.kind), bool)
            self._kinds[key] = rows
            if len(self._kinds) > 16:
                self._kinds.popitem(last=False)
        else:
            self._kinds.move_to_end(key)
        return rows

    def has_kind(self, kind: str) -> bool:
        return kind in self.kind_codes

    def row_cosines(self, sub: _Subset, vector: Vector) -> npt.NDArray[np.float32]:
        """The cosine of ``vector`` to each of the subset's rows, each distinct vector
        scored once (only those the subset uses, when they are few)."""
        matrix = self.plain[sub.needed] if sub.needed is not None else self.plain
        cosines = _cosines(matrix, vector)
        return cosines if sub.identity else cosines[sub.local]

    def vector_of_row(self, row: int) -> Vector:
        vec: Vector = self.plain[self.row_u[row]]
        return vec

    def subset(self, allowed: Set[str], kinds: Set[str]) -> _Subset:
        """The rows of ``kinds`` owned by ``allowed`` tools; cached by the identity of the
        (immutable) allowed set, as an entitlement is reused across requests."""
        hit = self._subsets.get(allowed, frozenset(kinds))
        if hit is not None:
            return hit
        mask = np.zeros(len(self.ids), dtype=bool)
        mask[[self.position[t] for t in allowed if t in self.position]] = True
        rows = np.nonzero(mask[self.owner_of] & self.kind_rows(kinds))[0]
        owners = self.owner_of[rows]  # ascending: rows are sorted by owner
        tools, starts = np.unique(owners, return_index=True)
        sub = _Subset(tools, starts, self.row_u[rows], len(self.matrix), len(self.ids))
        return self._subsets.put(allowed, sub, frozenset(kinds))

    def search(
        self, vector: Vector, allowed: Set[str], limit: int, kinds: Set[str], also: Sequence[str]
    ) -> Hits:
        sub = self.subset(allowed, kinds)
        if not len(sub.tools):
            return Hits()
        cosines = self.row_cosines(sub, vector)
        # a tool of one row: its best row is that row (no reduction to run)
        per_tool = cosines if sub.one_row else np.maximum.reduceat(cosines, sub.starts)
        take = min(limit, len(per_tool))
        if take <= 0:
            return Hits()
        negated = -per_tool
        top = np.argpartition(negated, take - 1)[:take]
        top = top[np.argsort(negated[top], kind="stable")]
        ids = self.ids
        hits = Hits([ids[i] for i in sub.tools[top].tolist()], per_tool[top].tolist())
        self._add_also(hits, sub, per_tool, also)
        return hits

    def _add_also(
        self, hits: Hits, sub: _Subset, per_tool: npt.NDArray[np.float32], also: Sequence[str]
    ) -> None:
        """Append each of ``also`` (the lexical list's ids) the subset holds and ``hits``
        lacks, with its score, in ``also``'s order (one lookup for all of them)."""
        seen = set(hits.ids)
        position = self.position
        wanted = [t for t in dict.fromkeys(also) if t not in seen and t in position]
        if not wanted:
            return
        if sub.every_tool:  # every tool has rows here: a tool's position is its place
            hits.ids.extend(wanted)
            hits.scores.extend(per_tool[[position[t] for t in wanted]].tolist())
            return
        pos = np.fromiter((position[t] for t in wanted), dtype=np.int64, count=len(wanted))
        at = np.minimum(np.searchsorted(sub.tools, pos), len(sub.tools) - 1)
        found = (sub.tools[at] == pos).tolist()
        scores = per_tool[at].tolist()
        for tid, ok, score in zip(wanted, found, scores, strict=True):
            if ok:
                hits.ids.append(tid)
                hits.scores.append(score)


def _neighbours(
    index: _DenseIndex, vector: Vector, allowed: Set[str], kind: str, k: int
) -> list[tuple[str, float]]:
    if not index.has_kind(kind):  # e.g. no usage learned yet: nothing to narrow
        return []
    sub = index.subset(allowed, {kind})
    if not len(sub.rows_u):
        return []
    sims = index.row_cosines(sub, vector)
    take = min(k, len(sims))
    if take <= 0:
        return []
    top = np.argpartition(-sims, take - 1)[:take]
    top = top[np.argsort(-sims[top], kind="stable")]
    # each row's owner: the tool whose run of rows holds it
    owner_at = np.searchsorted(sub.starts, top, side="right") - 1
    return [
        (index.ids[int(sub.tools[o])], float(sims[i])) for i, o in zip(top, owner_at, strict=True)
    ]


# -- kept beside the SQLite file ------------------------------------------------------
def kept_key(model_id: str) -> str:
    """The ``derived`` key of the dense index's header for ``model_id``."""
    return f"dense-index:{KEPT_VERSION}:{model_id}"


def _files(db: Path, model_id: str, token: str) -> tuple[Path, Path]:
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_id)
    stem = f"{db.name}.dense-{slug}-{token}"
    return db.with_name(stem + ".vectors.npy"), db.with_name(stem + ".rows.npy")


def _save(path: Path, array: npt.NDArray[Any]) -> None:
    """Write ``array`` as ``.npy`` under a temporary name, then rename it into place."""
    part = path.with_name(path.name + f".{secrets.token_hex(4)}.part")
    with part.open("wb") as f:
        np.save(f, array, allow_pickle=False)
    os.replace(part, path)


def keep(
    index: _DenseIndex,
    db: Path,
    model_id: str,
    generation: int,
    set_derived: Callable[[str, int, bytes], bool],
) -> bool:
    """Write ``index`` beside ``db`` and its header for ``generation`` (only while that
    generation is current, which ``set_derived`` checks); older files of this model are
    removed. False when it was not kept (a moved generation, a read-only directory)."""
    token = f"g{generation}-{secrets.token_hex(6)}"
    vectors, rows = _files(db, model_id, token)
    table = np.stack([index.row_u, index.owner_of, index.kind.astype(np.int64)], axis=1)
    try:
        _save(vectors, np.ascontiguousarray(index.matrix, dtype=np.float32))
        _save(rows, np.ascontiguousarray(table, dtype=np.int64))
    except OSError:
        for path in (vectors, rows):
            path.unlink(missing_ok=True)
        return False
    header = {
        "version": KEPT_VERSION,
        "model": model_id,
        "generation": generation,
        "token": token,
        "vectors": list(index.matrix.shape),
        "rows": list(table.shape),
        "tools": len(index.ids),
        "kinds": index.kind_codes,
    }
    if not set_derived(kept_key(model_id), generation, json.dumps(header).encode()):
        for path in (vectors, rows):
            path.unlink(missing_ok=True)
        return False
    _remove_others(db, model_id, token)
    return True


def _remove_others(db: Path, model_id: str, token: str) -> None:
    """Delete this model's kept files other than ``token``'s (a mapping another process
    holds stays valid: the file goes when it is unmapped; elsewhere, a failure is left)."""
    keep_names = {p.name for p in _files(db, model_id, token)}
    prefix = _files(db, model_id, "")[0].name.removesuffix(".vectors.npy")
    try:
        found = [p for p in db.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return
    for path in found:
        if path.name not in keep_names:
            with contextlib.suppress(OSError):
                path.unlink()


def _mapped(path: Path, shape: Sequence[int], dtype: type) -> npt.NDArray[Any] | None:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    if not isinstance(array, np.ndarray) or array.dtype != np.dtype(dtype):
        return None
    return array if list(array.shape) == list(shape) else None


def load(
    db: Path, model_id: str, generation: int, ids: list[str], blob: bytes, dim: int
) -> _DenseIndex | None:
    """The index kept for ``generation`` and ``model_id`` (its header ``blob`` read from the
    ``derived`` table under :func:`kept_key`), memory-mapped; None when anything about it
    is not what the header says or not of this generation, model, layout and catalog."""
    try:
        header = json.loads(blob)
        token = str(header["token"])
        ok = (
            header["version"] == KEPT_VERSION
            and header["model"] == model_id
            and header["generation"] == generation
            and header["tools"] == len(ids)
            and token.startswith(f"g{generation}-")
            and header["vectors"][1:] == [dim]
            and header["rows"][1:] == [3]
        )
        kinds = {str(k): int(v) for k, v in dict(header["kinds"]).items()}
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    if not ok or "/" in token or os.sep in token:
        return None
    vectors_path, rows_path = _files(db, model_id, token)
    matrix = _mapped(vectors_path, header["vectors"], np.float32)
    table = _mapped(rows_path, header["rows"], np.int64)
    if matrix is None or table is None:
        return None
    row_u, owner, kind = (np.ascontiguousarray(table[:, i]) for i in range(3))
    n = len(table)
    in_range = (
        n == 0
        or (
            int(row_u.min()) >= 0 and int(row_u.max()) < len(matrix)
            and int(owner.min()) >= 0 and int(owner.max()) < len(ids)
            and bool(np.all(owner[1:] >= owner[:-1]))
            and set(np.unique(kind).tolist()) <= set(kinds.values())
        )
    )  # fmt: skip
    if not in_range:
        return None
    return _DenseIndex(ids, matrix, row_u, owner, kind.astype(np.int32), kinds)
