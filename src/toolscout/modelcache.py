"""Where files made locally from shipped model data are kept: the query encoder's graphs
(:mod:`toolscout.embed.quantise`, :mod:`toolscout.embed.minilm`) and the decoded token
ranks (:mod:`toolscout.discovery.tokencount`). Nothing in it is downloaded.

A module of its own, without imports, so the token counter finds it without importing
the embedders (and numpy)."""

from __future__ import annotations

import os
from pathlib import Path

#: where made models are kept (default: the user cache directory's ``models``)
CACHE_ENV = "TOOLSCOUT_MODEL_CACHE"


def model_cache_dir() -> Path:
    """``$TOOLSCOUT_MODEL_CACHE``, or the user cache directory's ``toolscout/models``."""
    chosen = os.environ.get(CACHE_ENV, "").strip()
    if chosen:
        return Path(chosen)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("toolscout", appauthor=False)) / "models"
