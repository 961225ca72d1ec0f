"""One generation's cards, read from the store as they are needed.

Opening a 100k-tool catalog used to read and parse every card before anything else
(2.5 s on a quiet machine), though a discovery looks at a tenant's share of them and a
shortlist's few. A :class:`CardTable` reads the ids at once (no card parsed), each card
the first time it is asked for, a tenant's share from the store's own index of who is
offered what, and every card only when something needs them all (building the phrase
index or the name table, lint, the console). A store that cannot read cards one at a
time has them all read at once, as before.

Cards read later than the generation was (the ids are read with it) come from the store
as it is then: a write in between means the catalog moves to the new generation on its
next refresh; a card removed meanwhile reads as unknown, never as another tool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from typing import Any

from toolscout.cards import CapabilityCard

__all__ = ["CardTable"]


class CardTable:
    """A generation's tool ids, and their cards read on demand (then held)."""

    def __init__(self, store: Any) -> None:
        ids: Callable[[], list[str]] | None = getattr(store, "card_ids", None)
        self._of: Callable[[Sequence[str]], dict[str, CapabilityCard]] | None = getattr(
            store, "cards_of", None
        )
        self._share: Callable[[str], list[str]] | None = getattr(store, "tenant_share", None)
        self._share_cards: _ShareCards | None = getattr(store, "tenant_cards", None)
        self._store = store
        self._lock = threading.Lock()
        self._all: tuple[CapabilityCard, ...] | None = None
        if ids is None or self._of is None:
            self._all = tuple(store.cards())
            self.ids: tuple[str, ...] = tuple(c.id for c in self._all)
            self._held: dict[str, CapabilityCard] = {c.id: c for c in self._all}
        else:
            self.ids = tuple(ids())
            self._held = {}
        self.known = frozenset(self.ids)
        self.by_id: Mapping[str, CapabilityCard] = _ById(self)

    def __len__(self) -> int:
        return len(self.ids)

    def all(self) -> tuple[CapabilityCard, ...]:
        """Every card, in catalog order (read once, when first needed)."""
        if self._all is None:
            with self._lock:
                if self._all is None:
                    read = {c.id: c for c in self._store.cards() if c.id in self.known}
                    read.update(self._held)  # a card already handed out stays the same object
                    self._held = read
                    self._all = tuple(read[t] for t in self.ids if t in read)
        return self._all

    def get(self, tool_id: str) -> CapabilityCard | None:
        hit = self._held.get(tool_id)
        if hit is None and tool_id in self.known and self._all is None:
            found = self.many([tool_id])
            return found[0] if found else None
        return hit

    def many(self, ids: Sequence[str]) -> list[CapabilityCard]:
        """The cards of ``ids`` in that order (unknown ones left out); one read for misses."""
        missing = [t for t in ids if t not in self._held and t in self.known]
        if missing and self._all is None and self._of is not None:
            read = self._of(missing)
            with self._lock:
                for tid, card in read.items():
                    self._held.setdefault(tid, card)
        held = self._held
        return [held[t] for t in ids if t in held]

    def share(self) -> Callable[[str], Sequence[CapabilityCard]] | None:
        """What reads the cards a tenant is offered (catalog order), when the store can say
        without reading every card; None when it cannot."""
        if self._share is None or self._of is None:
            return None
        if self._share_cards is not None and self._all is None:
            return self._offered
        share = self._share

        def offered(tenant: str) -> Sequence[CapabilityCard]:
            return self.many([t for t in share(tenant) if t in self.known])

        return offered

    def _offered(self, tenant: str) -> Sequence[CapabilityCard]:
        """A tenant's share read with its cards in one pass (the held ones not parsed again)."""
        assert self._share_cards is not None
        rows = self._share_cards(tenant, self._held)
        with self._lock:
            for tid, card in rows:
                if card is not None and tid in self.known:
                    self._held.setdefault(tid, card)
        held = self._held
        return [held[t] for t, _ in rows if t in held]


#: a store's reader of a tenant's share with its cards (``None`` for the held ids)
_ShareCards = Callable[[str, Container[str]], list[tuple[str, CapabilityCard | None]]]


class _ById(Mapping[str, CapabilityCard]):
    """Tool id → card, over a :class:`CardTable` (membership without reading any card)."""

    def __init__(self, table: CardTable) -> None:
        self._table = table

    def __getitem__(self, tool_id: str) -> CapabilityCard:
        card = self._table.get(tool_id)
        if card is None:
            raise KeyError(tool_id)
        return card

    def get(self, tool_id: str, default: Any = None) -> Any:
        card = self._table.get(tool_id)
        return default if card is None else card

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._table.known

    def __iter__(self) -> Iterator[str]:
        return iter(self._table.ids)

    def __len__(self) -> int:
        return len(self._table.ids)
