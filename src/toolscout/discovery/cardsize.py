"""Cards' sizes in o200k tokens, kept in the store by card text so a re-index counts only
new texts.

Every ``index`` reports each oversized card of its batch, unchanged ones included. Counting
needs the o200k encoding, whose build is most of a small re-index's CPU (0.3-0.6 s a
process). A card's size is a pure function of its text (:func:`toolscout.cards.card_text`)
and the encoding, so sizes counted once are kept as derived state of the store, under a
key naming the counting module's digest and by a digest of each text: a re-index of
unchanged cards reads them and builds no encoding; the warnings are the same. A store
that keeps no derived state, or a kept blob that is damaged, only means counting again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from toolscout.cards import CapabilityCard, card_text
from toolscout.discovery import tokencount
from toolscout.discovery.kept import code_digest

#: most sizes kept; the batch's own are always kept, older texts' are dropped first
KEPT_CAP = 200_000


def size_key() -> str:
    """The key sizes are kept under: a digest of the counting module's source (its
    encoding and pattern), so a size counted by other code is never read."""
    return f"card-tokens:{code_digest(tokencount)}"


def card_sizes(store: object, cards: Sequence[CapabilityCard]) -> dict[str, int]:
    """Card id → its size in tokens: kept ones read from ``store``, the others counted
    (and kept beside them for the store's current generation)."""
    key = size_key()
    read = getattr(store, "derived", None)
    found = read(key) if callable(read) else None
    kept = _sizes(found[1]) if found is not None else {}
    out: dict[str, int] = {}
    batch: dict[str, int] = {}
    fresh = 0
    for card in cards:
        text = card_text(card)
        digest = tokencount.text_digest(text)
        n = kept.get(digest)
        if n is None:
            n = tokencount.count_text(text)
            fresh += 1
        out[card.id] = batch[digest] = n
    write = getattr(store, "set_derived", None)
    generation = getattr(store, "generation", None)
    if fresh and callable(write) and callable(generation):
        write(key, generation(), _blob(kept, batch))
    return out


def _blob(kept: Mapping[str, int], batch: Mapping[str, int]) -> bytes:
    older = [(d, n) for d, n in kept.items() if d not in batch]
    room = max(KEPT_CAP - len(batch), 0)
    merged = dict(older[max(len(older) - room, 0) :])
    merged.update(batch)
    return json.dumps(merged, separators=(",", ":")).encode()


def _sizes(blob: bytes) -> dict[str, int]:
    """Kept sizes, or none for anything not exactly their shape (counted again)."""
    try:
        data = json.loads(blob)
    except ValueError:
        return {}
    if not isinstance(data, dict) or not all(
        isinstance(d, str) and type(n) is int and n >= 0 for d, n in data.items()
    ):
        return {}
    return data
