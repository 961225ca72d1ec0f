"""Embeddings: the ``Embedder`` protocol (``embed.base``) and the default offline model.

The default model's module (and onnxruntime) is imported only when
:func:`default_embedder` is called.
"""

from __future__ import annotations

from toolscout.embed.base import Embedder


def default_embedder(*, spin_wait: bool = True) -> Embedder:
    """all-MiniLM-L6-v2 int8 (from a PyPI package; nothing downloaded), loaded on first use.

    ``spin_wait=False`` for a process that encodes several requests at once (a server):
    see :class:`~toolscout.embed.minilm.MiniLMEmbedder`."""
    from toolscout.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder(spin_wait=spin_wait)


__all__ = ["Embedder", "default_embedder"]
