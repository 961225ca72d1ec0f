"""Embeddings: the ``Embedder`` protocol and the default offline model (lazy)."""
