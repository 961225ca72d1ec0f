"""Opening a stored catalog loads the query encoder in the background (the token counter
only when a count needs it)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from support import embedder, spec
from toolscout.discovery import lexical, tokencount
from toolscout.discovery.catalog import Catalog, prefetch_models
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.embed.vectorcache import VECTOR_CACHE_ENV
from toolscout.policy import Principal


def _wait_loaded(model: MiniLMEmbedder, seconds: float = 120.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if model._session is not None:
            return True
        time.sleep(0.05)
    return False


def _prefetch_done(seconds: float = 120.0) -> bool:
    """Every prefetch thread of the process has ended (``Catalog.open``'s included: the
    encoder, the stemmer, the stored indexes read ahead)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(t.name == "toolscout-prefetch" for t in threading.enumerate()):
            return True
        time.sleep(0.05)
    return False


def test_prefetch_loads_the_model_and_the_token_counter() -> None:
    model = MiniLMEmbedder()
    for thread in prefetch_models(model):
        thread.join(timeout=120)
    assert model._session is not None and tokencount._encoding is not None


def test_prefetch_imports_the_stemmer_when_asked() -> None:
    lexical._stemmer.cache_clear()
    for thread in prefetch_models(None, tokens=False):
        thread.join(timeout=120)
    assert lexical._stemmer.cache_info().currsize == 0  # not asked: not loaded
    for thread in prefetch_models(None, tokens=False, stemmer=True):
        thread.join(timeout=120)
    assert lexical._stemmer.cache_info().currsize == 1


def test_opening_a_stored_catalog_prefetches_but_an_empty_one_does_not(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    empty = MiniLMEmbedder()
    with Catalog.open(path, embedder=empty, log=False):
        time.sleep(0.2)
        assert empty._session is None  # nothing stored yet: nothing to discover over
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add([spec("a.find_order", "Find an order by its number.")])
    before = path.read_bytes()
    with Catalog.open(path, embedder=MiniLMEmbedder(), log=False) as cat:
        assert _prefetch_done()  # what opening reads ahead has been read
        assert cat.store._dense is None  # no dense index kept yet: opening maps nothing  # type: ignore[attr-defined]
    assert path.read_bytes() == before
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        found = cat.discover("find my order", Principal.of("u"), tier="progressive")
        assert found.ids == ["a.find_order"]  # a search builds the dense index and keeps it
    stored = MiniLMEmbedder()
    with Catalog.open(path, embedder=stored, log=False) as cat:
        assert _wait_loaded(stored)  # no embed call made it load
        deadline = time.monotonic() + 120
        while cat.store._dense is None and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.05)
        assert cat.store._dense is not None  # type: ignore[attr-defined]  # mapped, no search made
        while cat.store._scopes is None and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.05)
        scopes = cat.store._scopes  # type: ignore[attr-defined]  # read for the first search
        assert scopes is not None and set(scopes.of) == {"a.find_order"}
        found = cat.discover("find my order", Principal.of("u"), tier="progressive")
        assert found.ids == ["a.find_order"] and cat.store._scopes is scopes  # type: ignore[attr-defined]
    off = MiniLMEmbedder()
    with Catalog.open(path, embedder=off, log=False, prefetch=False):
        time.sleep(0.2)
        assert off._session is None


def test_a_process_that_ends_while_the_models_load_exits_cleanly(tmp_path: Path) -> None:
    """A short command (``toolscout call``) opens a stored catalog and ends at once: it
    must not end while ONNX Runtime builds its session (an abort, exit -6, "terminate
    called without an active exception")."""
    import os
    import subprocess
    import sys

    path = tmp_path / "c.db"
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add([spec("a.find_order", "Find an order by its number.")])
    code = (
        "import sys, time; from toolscout.discovery.catalog import Catalog; "
        "c = Catalog.open(sys.argv[1], log=False); time.sleep(float(sys.argv[2])); c.close()"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    env.pop(VECTOR_CACHE_ENV, None)  # with the suite's cache the model is not loaded ahead
    for pause in (0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4):  # ending at moments of the load
        done = subprocess.run(
            [sys.executable, "-c", code, str(path), str(pause)],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        assert done.returncode == 0 and "terminate" not in done.stderr, done.stderr


def test_the_token_counter_is_not_built_for_a_discovery_whose_counts_are_kept(
    tmp_path: Path,
) -> None:
    """Building the o200k encoding holds the interpreter for a few tenths of a second:
    started after a new process's first answer, it stalled the process's second request
    (0.77-0.96 s at 100k tools) whether that one needed it or not. It is built only by
    a count the kept counts do not answer."""
    import os
    import subprocess
    import sys

    path = tmp_path / "c.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    env.pop(VECTOR_CACHE_ENV, None)  # with the suite's cache the model is not loaded ahead
    # built and asked in a process of its own, which keeps on close what it counted
    build = r"""
import sys
from toolscout.discovery.catalog import Catalog
from toolscout.cards import make_spec
from toolscout.policy import Principal
with Catalog.open(sys.argv[1], log=False) as cat:
    cat.add([make_spec({"id": f"a.tool_{i}", "summary": f"Does thing number {i}."})
             for i in range(3)])
    for q in ("does thing number 2", "does thing number 1"):
        cat.discover(q, Principal.of("u"), tier="progressive")
"""
    built = subprocess.run(
        [sys.executable, "-c", build, str(path)], capture_output=True, text=True, timeout=300,
        env=env,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    code = r"""
import sys, threading
from toolscout.discovery import tokencount
from toolscout.discovery.catalog import Catalog
from toolscout.policy import Principal
cat = Catalog.open(sys.argv[1], log=False)
for q in ("does thing number 2", "does thing number 1"):
    cat.discover(q, Principal.of("u"), tier="progressive")
for thread in threading.enumerate():  # whatever was started in the background, finished
    # (not the BM25 pool's workers: they wait for work as long as the process lives)
    if thread is not threading.current_thread() and not thread.name.startswith("toolscout-bm25"):
        thread.join(timeout=120)
print(tokencount._encoding is None)
cat.close()
"""
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "True"


def test_the_lexical_maps_read_ahead_are_of_the_generation_seen(tmp_path: Path) -> None:
    """``prepare_lexical`` reads the scope column on a connection of its own: what it read
    is used only at the generation the store has seen; a write by another process in
    between leaves it to the first search, which reads the new state."""
    from toolscout.stores.sqlite import SQLiteStore

    path = tmp_path / "c.db"
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add([spec("a.find_order", "Find an order by its number.")])
    store = SQLiteStore(path)
    store.generation()
    store.prepare_lexical()
    assert store._scopes is not None and set(store._scopes.of) == {"a.find_order"}
    store.close()
    store = SQLiteStore(path)
    store.generation()
    with Catalog.open(path, embedder=embedder(), log=False, prefetch=False) as other:
        other.add([spec("b.refund_invoice", "Refund an invoice.")])  # another process writes
    store.prepare_lexical()
    assert store._scopes is None  # read at a later generation than this store has seen
    store.generation()  # sees the write
    store.prepare_lexical()
    assert store._scopes is not None
    assert set(store._scopes.of) == {"a.find_order", "b.refund_invoice"}
    store.close()
