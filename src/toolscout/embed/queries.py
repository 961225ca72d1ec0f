"""An embedder whose query texts are encoded by a cheaper graph of the same model.

A catalog stores its cards' vectors under one model id; a request's text is encoded on
every discovery. :class:`QuerySide` pairs the embedder the cards were (and are) indexed
with and a second one for requests, such as the int8 graph of the same weights
(``embed/quantise.py``): ``embed`` is the cards' side, ``query_side`` the requests'. The
catalog's retriever encodes requests with :func:`query_embedder` of its embedder, so a
plain embedder serves both sides as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolscout.embed.base import Embedder, Vectors, Wrapped
from toolscout.errors import ConfigError


class QuerySide(Wrapped):
    """Cards through ``cards``, requests through ``queries``: one model id, one vector space."""

    def __init__(self, cards: Embedder, queries: Embedder) -> None:
        if cards.model_id != queries.model_id or cards.dim != queries.dim:
            raise ConfigError(
                f"the query encoder ({queries.model_id}, {queries.dim} dimensions) must be a"
                f" graph of the cards' model ({cards.model_id}, {cards.dim} dimensions)"
            )
        super().__init__(cards)
        self.query_side = queries

    @property
    def cards(self) -> Embedder:
        """The embedder the catalog's cards are indexed with."""
        return self.inner

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self.cards.embed(texts)

    def load(self) -> None:
        """Load both sides now (otherwise each on its first ``embed``)."""
        for side in (self.cards, self.query_side):
            load = getattr(side, "load", None)
            if callable(load):
                load()


def query_embedder(embedder: Embedder) -> Embedder:
    """The embedder that encodes requests for ``embedder``'s catalog (itself, unless it
    has a distinct query side)."""
    side = getattr(embedder, "query_side", None)
    # (None first: a protocol's isinstance check reads every member, ~20 µs a discovery)
    return side if side is not None and isinstance(side, Embedder) else embedder


__all__ = ["QuerySide", "query_embedder"]
