"""The order of a catalog's candidates, chosen from the catalog's own evidence (opt-in).

The learned ranker's pool (lexical ∪ dense candidates, one row of
:data:`~toolscout.discovery.calibrate.FEATURES` each) can be put in order several ways
from the same numbers (:data:`ORDERS`): the learned score plus the blend of the fixed
fusion (``ranker``, the default), the same with BM25 added (``lead``, the lexical lead),
the fixed fusion alone (``fixed``), or BM25 first with the learned score breaking ties
(``bm25``). Which one serves a catalog best is not something the dev sets can tell for a
catalog they have not seen: a catalog of long requests that name several services is
where BM25 keeps each service's words and one dense vector of the whole request averages
them away.

So at index time the calibration measures every order on the catalog's own
pseudo-queries (no real request is seen): the single-tool ones it already writes
(:func:`~toolscout.discovery.calibrate.pseudo_queries`) and requests joined from the
texts of two or three of its tools (:func:`multi_queries`, every one of them gold). A
request read in several parts (:func:`~toolscout.discovery.parts.request_parts`) is
ordered by the order that did best on the multi-tool pseudo-queries, any other by the one
that did best on the single-tool ones; another order than ``ranker`` is taken only when it
beats the ranker by more than a margin (:func:`choose`). A request in parts whose sure
parts all point at one tool is one task told at length and keeps the one-part order
(``search.Retriever.run``). The margin is chosen
leave-one-set-out over the six dev sets (``benchmarks/orders.py``,
``benchmarks/orders_gate.py``); ``None`` (the shipped :data:`ORDER_MARGIN`) keeps the
ranker's order everywhere: held out, the choice did not win (the catalog's pseudo-queries
cannot tell long multi-tool requests from long single-tool ones; docs/history/calibration.md).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from toolscout.cards import ToolSpec
from toolscout.discovery.lexical import words

#: the orders the calibration compares, the default first (it wins ties)
ORDERS: tuple[str, ...] = ("ranker", "lead", "fixed", "bm25")
#: the request shapes an order is chosen for: read whole, or in several parts
SHAPES: tuple[str, ...] = ("single", "multi")
#: multi-tool pseudo-queries written per catalog (each one text to embed at index time)
MULTI_QUERIES = 64
#: the tools one multi-tool pseudo-query is joined from
MULTI_TOOLS = (2, 3)
#: how far another order must beat the ranker's on the catalog's pseudo-queries to be
#: taken (None: never, the ranker orders every request). Not shipped on: see
#: docs/history/calibration.md "This round (h/rank)"
ORDER_MARGIN: float | None = None
#: the joiners of a multi-tool request's clauses
_JOINERS = (". Then ", ", and then ", ". Also ", ". After that, ")


@dataclass(frozen=True, slots=True)
class MultiPseudo:
    """A request joined from several tools' texts; every one of them is gold."""

    text: str
    gold: tuple[str, ...]


def _clause(spec: ToolSpec, rng: random.Random) -> str:
    """A clause about one tool: its summary, the name's words masked, two thirds of it kept."""
    masked = set(words(spec.card.name)) | set(words(spec.id))
    summary = [w for w in spec.card.summary.split() if " ".join(words(w)) not in masked]
    if len(summary) > 8:
        keep = sorted(rng.sample(range(len(summary)), max(6, 2 * len(summary) // 3)))
        summary = [summary[i] for i in keep]
    return " ".join(summary).strip(" .")


def multi_queries(
    specs: Sequence[ToolSpec], seed: int, n: int = MULTI_QUERIES
) -> list[MultiPseudo]:
    """Requests of two or three of the catalog's tools (seeded): each tool's masked summary
    as one clause, the clauses joined as a request of several steps."""
    rng = random.Random(seed + 7)
    usable = [s for s in specs if len(s.card.summary.split()) >= 4]
    if len(usable) < max(MULTI_TOOLS) * 2:
        return []
    out: list[MultiPseudo] = []
    for _ in range(n):
        picks = rng.sample(usable, rng.choice(MULTI_TOOLS))
        clauses = [c for c in (_clause(s, rng) for s in picks) if c]
        if len(clauses) < 2:
            continue
        text = clauses[0]
        for c in clauses[1:]:
            text += rng.choice(_JOINERS) + c
        out.append(MultiPseudo(text + ".", tuple(s.id for s in picks)))
    return out


def choose(evidence: Mapping[str, Mapping[str, float]], shape: str, margin: float | None) -> str:
    """The order for requests of ``shape``: the best of :data:`ORDERS` on the catalog's
    pseudo-queries of that shape when it beats ``ranker`` by more than ``margin``, else
    ``ranker`` (also when there is no evidence, or ``margin`` is None)."""
    got = evidence.get(shape) or {}
    base = got.get("ranker")
    if margin is None or base is None:
        return "ranker"
    rivals = [o for o in ORDERS[1:] if o in got]
    if not rivals:
        return "ranker"
    best = max(rivals, key=lambda o: (got[o], -ORDERS.index(o)))
    return best if round(got[best] - base, 6) > margin else "ranker"


def describe(evidence: Mapping[str, Mapping[str, float]], margin: float | None) -> str:
    """What the choice does with this catalog, in a few words (empty when it is off)."""
    if margin is None or not evidence:
        return ""
    chosen = {shape: choose(evidence, shape, margin) for shape in SHAPES}
    return f"order: one-part requests by {chosen['single']}, several-part by {chosen['multi']}"


# -- the two guards of the ranker's order (opt-in; docs/history/calibration.md, round five) --
#: the safety floor's default: never (the ranker's order stands whatever its probability)
FLOOR = 0.0
#: the coverage rule's default: off (0); otherwise the places the lists' firsts must be in
COVER = 0


def covered(
    order: Sequence[int], score: Sequence[float], must: Sequence[int], at: int
) -> tuple[list[int], list[float]]:
    """``order`` (indices, best first) with every index of ``must`` within its first
    ``at`` places, and ``score`` (log-scale, one per index) adjusted to stay descending.

    The coverage rule: the first hit of the BM25 list and of the dense list each get a
    place in the top ``at`` (a request of several tools whose words BM25 keeps and whose
    gist dense keeps should show both). A missing one takes a place at the end of the
    top ``at``, just after the ranker's own first ``at - len(missing)``, and pushes the
    ranker's last ones down; nothing else moves. Indices not in ``order`` are ignored.
    """
    if at < 1:
        raise ValueError(f"covered needs at >= 1, got {at}")
    present = set(order)
    top = set(order[:at])
    missing = [m for m in dict.fromkeys(must) if m in present and m not in top]
    out = list(score)
    if not missing:
        return list(order), out
    keep = max(at - len(missing), 1)
    moved = set(missing)
    new = [*order[:keep], *missing, *(i for i in order[keep:] if i not in moved)]
    for j in range(keep, len(new)):
        before = out[new[j - 1]]
        if j < keep + len(missing) or out[new[j]] >= before:
            out[new[j]] = before - 1e-6
    return new, out
