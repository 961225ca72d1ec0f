"""Where files made locally from shipped model data are kept: the query encoder's graphs
(:mod:`toolscout.embed.quantise`, :mod:`toolscout.embed.minilm`) and the decoded token
ranks (:mod:`toolscout.discovery.tokencount`). Nothing in it is downloaded.

A module of its own, importing only the standard library, so the token counter finds it
without importing the embedders (and numpy)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def made_in_cache(target: Path) -> Iterator[Path]:
    """A new temporary file beside ``target`` for the caller to write. Left without an
    error, it replaces ``target`` atomically, readable by every user of a shared cache
    (``mkstemp`` makes it 0600); left by an error, it is removed. Readers of ``target`` see
    the old file or the whole new one, never a part."""
    fd, tmp = tempfile.mkstemp(prefix=".making-", suffix=target.suffix, dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
