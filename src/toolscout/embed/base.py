"""The ``Embedder`` seam and the helpers every embedder shares."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def model_id(self) -> str:
        """Names the model; vectors from different models are never mixed."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, each of unit length."""
        ...


@runtime_checkable
class SpanEmbedder(Protocol):
    """An optional capability of an :class:`Embedder`: a text's vector and, from the same
    encoder run, a vector for each of its character spans ("late chunking": the mean of
    the span's token vectors in the context of the whole text). Discovery reads the parts
    of a long request this way when its embedder can (discovery/queryvectors.py) and
    encodes each part on its own otherwise."""

    def embed_spans(
        self, text: str, spans: Sequence[tuple[int, int]]
    ) -> tuple[Vectors, list[bool]]:
        """Rows: ``text``'s vector (the same as ``embed([text])[0]``), then one per span
        (``text[a:b]``), each of unit length; and per span, whether the encoder read all
        of it (False: the text was cut at the model's length before the span's end, and
        its row is zeros, not to be used)."""
        ...


def span_embedder(embedder: Embedder) -> SpanEmbedder | None:
    """``embedder`` when it has the :class:`SpanEmbedder` capability, else None."""
    return embedder if isinstance(embedder, SpanEmbedder) else None


class Wrapped:
    """Base of an embedder over another one (``inner``): its vectors are in the inner
    model's space, so the model id and the dimension are the inner one's."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim


def normalise(vectors: npt.NDArray[Any]) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out: Vectors = (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)
    return out


def text_hash(model_id: str, text: str) -> str:
    """Cache key of one embedded text: unchanged text under the same model is never re-embedded."""
    return hashlib.sha256(f"{model_id}\x00{text}".encode()).hexdigest()
