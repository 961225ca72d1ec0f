"""Where files made locally from shipped model data are kept: the encoder's graphs
(:mod:`toolscout.embed.fused`, :mod:`toolscout.embed.session`, :mod:`toolscout.embed.quantise`)
and the decoded token ranks (:mod:`toolscout.discovery.tokencount`), with the check a
made file's sidecar holds (:func:`file_check`). Nothing in it is downloaded.

A module of its own, importing only the standard library, so the token counter finds it
without importing the embedders (and numpy)."""

from __future__ import annotations

import json
import mmap
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
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


def file_check(path: Path) -> str:
    """A made file's check: its size and CRC-32, read through a map of the file (the pages
    ONNX Runtime maps next). A check against damage (a cut-short or changed file), at a
    third of sha256's CPU; whoever can write the user's cache could as well change the
    settings or the environment the process runs with."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
        return f"{len(view)}:{zlib.crc32(view):08x}"


def sidecar(path: Path) -> Path:
    """The JSON file beside a made file that holds its check (``{"check": ...}``)."""
    return path.with_name(path.name + ".json")


def keep_made(target: Path, write: Callable[[Path], object], **meta: object) -> None:
    """Make ``target`` in the cache: ``write`` fills a temporary file beside it, which
    replaces ``target`` atomically; then its sidecar (:func:`write_sidecar`). The graph
    comes first: a sidecar never names a file other than the one in place, and a file
    without a matching sidecar is made again."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with made_in_cache(target) as tmp:
        write(tmp)
        check = file_check(tmp)
    write_sidecar(target, check, **meta)


def write_sidecar(target: Path, check: str, **meta: object) -> None:
    """Write ``target``'s sidecar atomically: its :func:`file_check` and ``meta``."""
    with made_in_cache(sidecar(target)) as tmp_side:
        tmp_side.write_text(json.dumps({"check": check, **meta}))


def sidecar_check(path: Path) -> str | None:
    """The check ``path``'s sidecar holds, or None (no sidecar, or not one this wrote)."""
    try:
        return str(json.loads(sidecar(path).read_text())["check"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def sidecar_holds(path: Path) -> bool:
    """Whether ``path`` exists and its check equals the one its sidecar holds."""
    expected = sidecar_check(path)
    if expected is None:
        return False
    try:
        return file_check(path) == expected
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return False


def cached_or_made(target: Path, make: Callable[[], bytes], **meta: object) -> Path | bytes:
    """``target`` when its sidecar's check holds; else ``make()``'s bytes kept there
    (:func:`keep_made`, with ``meta`` in the sidecar) and ``target`` returned; the bytes
    themselves when the cache cannot be written (this process only: no sidecar is left
    naming a file that is not there)."""
    if sidecar_holds(target):
        return target
    made = make()
    try:
        keep_made(target, lambda tmp: tmp.write_bytes(made), **meta)
    except OSError:
        with suppress(OSError):
            sidecar(target).unlink()
        return made
    return target
