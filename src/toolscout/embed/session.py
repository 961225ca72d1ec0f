"""The default encoder's ONNX Runtime session, from a kept optimised graph when there is one.

Creating the session from the shipped file is most of the encoder's load (0.3 s of CPU on
this project's quiet 2-core machine, 0.5 s at load): ONNX Runtime parses the 23 MB graph,
turns its int8 weights into 90 MB of float32 (constant folding), fuses the attention and
normalisation operators, then packs the weights for its matrix kernels. All but the
packing give the same graph every time on one machine, so the first session made there
also writes that optimised graph (``optimized_model_filepath``, in ONNX Runtime's own
flatbuffer format) to the model cache; later processes map that file
(``session.use_memory_mapped_ort_model``, its initializers used in place) with the
optimisations off, as they are already applied — about a third of the CPU
(docs/history/cold-start.md, round six).

A kept graph is used only when it gives the vectors of the graph it was made from (the
shipped file, or the fused graph made from it: ``embed/fused.py``) bit for bit: the
process that writes it runs a probe batch through both sessions and keeps the file only
if every output bit is equal. Its name holds the shipped file's digest, the made graph's
recipe, the ONNX Runtime version, the machine's architecture and a digest of its CPU
features (the optimiser may pick kernels by them), and a bump of :data:`KEPT_VERSION`. It
is written under a temporary name and renamed, with a sidecar holding its size and CRC-32;
a reader checks them (beside the session being created, on a thread of its own) and
throws the session away and removes the file when they differ.
``$TOOLSCOUT_KEPT_SESSION=0`` turns keeping off.
"""

from __future__ import annotations

import hashlib
import os
import platform
import tempfile
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from toolscout.modelcache import file_check, sidecar, sidecar_check, write_sidecar

#: ``0`` turns the kept optimised graph off (every session is made from the shipped file)
KEPT_SESSION_ENV = "TOOLSCOUT_KEPT_SESSION"
#: bumped when what is kept, or how it is loaded, changes: an older file is never read
KEPT_VERSION = 1
#: the probe batch's token ids: two rows of different lengths (the second padded), so the
#: attention mask, the padding and every layer are exercised
_PROBE = (
    [101, 2862, 1996, 2330, 14595, 1998, 17542, 1996, 2197, 1999, 6767, 6610, 102],
    [101, 23818, 1996, 18253, 8241, 102],
)

#: what makes the session's options (a fresh ``SessionOptions`` each call)
Options = Callable[[], Any]


def keeping_enabled() -> bool:
    """Whether :data:`KEPT_SESSION_ENV` leaves keeping on (the default)."""
    return os.environ.get(KEPT_SESSION_ENV, "").strip() != "0"


def _cpu_digest() -> str:
    """A digest of the CPU's feature flags (Linux), else of what ``platform`` says."""
    text = platform.processor()
    with suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                text = line
                break
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def kept_name(source_sha256: str, ort_version: str, recipe: str = "") -> str:
    """The kept graph's file name for a shipped file's digest, an ONNX Runtime version and
    the recipe of a graph made from the shipped file (``""``: the shipped graph itself)."""
    machine = platform.machine() or "unknown"
    made = f"-{recipe}" if recipe else ""
    return (
        f"minilm-{source_sha256[:16]}{made}-opt{KEPT_VERSION}-ort{ort_version}"
        f"-{machine}-{_cpu_digest()}.ort"
    )


def from_kept(ort: Any, path: Path, options: Options) -> Any | None:
    """A session over the kept graph at ``path`` whose check matches its sidecar, else
    None (nothing kept, or a file that is not what was written: then it is removed)."""
    expected = sidecar_check(path)
    if expected is None:
        return None
    try:  # a cut-short file never reaches ONNX Runtime's parser (the CRC comes after)
        whole = path.stat().st_size == int(str(expected).split(":", 1)[0])
    except (OSError, ValueError):
        whole = False
    if not whole:
        _remove(path)
        return None
    digest: list[str] = []

    def check_digest() -> None:
        with suppress(OSError, ValueError):  # ValueError: an empty file cannot be mapped
            digest.append(file_check(path))

    check = threading.Thread(target=check_digest, name="toolscout-kept-digest", daemon=True)
    check.start()  # the CRC releases the interpreter: beside the session being made
    session = None
    with suppress(Exception):  # unreadable: made again from the shipped file
        session = _mapped(ort, path, options)
    check.join()
    if session is None or digest != [expected]:
        _remove(path)
        return None
    return session


def _mapped(ort: Any, path: Path, options: Options) -> Any:
    opts = options()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.add_session_config_entry("session.load_model_format", "ORT")
    opts.add_session_config_entry("session.use_memory_mapped_ort_model", "1")
    opts.add_session_config_entry("session.use_ort_model_bytes_directly", "1")
    opts.add_session_config_entry("session.use_ort_model_bytes_for_initializers", "1")
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def _remove(path: Path) -> None:
    for each in (sidecar(path), path):
        with suppress(OSError):
            each.unlink()


def probe_outputs(session: Any) -> np.ndarray:
    """The session's ``last_hidden_state`` for the probe batch."""
    width = max(len(row) for row in _PROBE)
    ids = np.zeros((len(_PROBE), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(_PROBE):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    (hidden,) = session.run(["last_hidden_state"], feeds)
    return np.asarray(hidden)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two float arrays are equal bit for bit (NaNs and signed zeros included)."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def make_and_keep(
    ort: Any, model: Path | bytes, target: Path, options: Options
) -> tuple[Any, bool]:
    """A session over ``model`` (the shipped file, or a graph made from it: a path or its
    bytes), writing its optimised graph to ``target`` on the way, and whether it was kept:
    only if a session over it gives this session's probe outputs bit for bit (renamed into
    place, then its sidecar). A failure to keep leaves no file."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".making-", suffix=".ort", dir=target.parent)
        os.close(fd)
    except OSError:  # no writable cache: this session only
        return plain(ort, model, options), False
    tmp = Path(tmp_name)
    try:
        opts = options()
        opts.optimized_model_filepath = str(tmp)
        opts.add_session_config_entry("session.save_model_format", "ORT")
        session = ort.InferenceSession(
            _source(model), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        kept = False
        with suppress(Exception):
            kept = _publish(ort, tmp, target, options, probe_outputs(session))
        return session, kept
    finally:
        with suppress(OSError):
            tmp.unlink()


def _publish(ort: Any, tmp: Path, target: Path, options: Options, expected: np.ndarray) -> bool:
    if not same_bits(probe_outputs(_mapped(ort, tmp, options)), expected):
        return False  # this machine's optimised graph does not reproduce the vectors
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep it from other users of a shared cache
    check = file_check(tmp)
    # the graph first, then its sidecar: a reader never finds a sidecar naming another file
    # (one naming an older file of the same name fails the digest check and is made again)
    os.replace(tmp, target)
    write_sidecar(target, check, version=KEPT_VERSION)
    return True


def plain(ort: Any, model: Path | bytes, options: Options) -> Any:
    """A session over ``model`` (a path or the graph's bytes) with ONNX Runtime's default
    optimisations."""
    return ort.InferenceSession(
        _source(model), sess_options=options(), providers=["CPUExecutionProvider"]
    )


def _source(model: Path | bytes) -> str | bytes:
    return model if isinstance(model, bytes) else str(model)


__all__ = [
    "KEPT_SESSION_ENV",
    "KEPT_VERSION",
    "file_check",
    "from_kept",
    "keeping_enabled",
    "kept_name",
    "make_and_keep",
    "plain",
    "probe_outputs",
    "same_bits",
]
