"""Embeddings: the ``Embedder`` protocol (``embed.base``) and the default offline model.

The default model's module (and onnxruntime) is imported only when
:func:`default_embedder` is called.
"""

from __future__ import annotations

from toolscout.embed.base import Embedder


def default_embedder() -> Embedder:
    """all-MiniLM-L6-v2 int8 (from a PyPI package; nothing downloaded), loaded on first use."""
    from toolscout.embed.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


__all__ = ["Embedder", "default_embedder"]
