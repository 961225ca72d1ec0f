"""Opening a catalog, and what a new process loads first.

:meth:`Opening.open` opens the store at a path, picks the embedder the catalog was
indexed with, and — when the store holds a catalog — starts loading the query encoder and
the stemmer, reading the lexical scope tokens and mapping the dense index on background
threads while the catalog's state is read, so a new process's first discovery waits for
none of them in turn (``benchmarks/coldstart.py --timeline`` shows the order).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Self, cast

from toolscout.discovery import lexical, tokencount
from toolscout.discovery.indexing import EMBEDDER_META
from toolscout.discovery.search import Reformulator
from toolscout.embed.base import Embedder
from toolscout.policy import PolicyConfig
from toolscout.settings import QUERY_TEXT_DAYS, SearchSettings
from toolscout.stores.base import Store


def stored_embedder(store: Store, *, spin_wait: bool = True) -> Embedder:
    """The embedder the catalog in ``store`` was indexed with (one toolscout knows by
    its model id), else the default: queries must be embedded by the model that
    embedded the cards."""
    from toolscout.embed import EMBEDDERS, make_embedder

    model = store.meta(EMBEDDER_META)
    known = model if model in EMBEDDERS.values() else None
    return make_embedder(known, spin_wait=spin_wait)


def prefetch_models(
    embedder: Embedder | None, *, tokens: bool = True, stemmer: bool = False
) -> list[threading.Thread]:
    """Load ``embedder``'s model (when it can be loaded ahead: a ``load`` method), the
    token counter (unless ``tokens`` is false) and the query stemmer (when ``stemmer``) on
    background threads, so a new process's first discovery does not wait for them in turn
    (each is loaded once: a later call finds it loaded). A failure is left for the first
    use to report. The threads are not daemons: a process that ends while ONNX Runtime is
    still building its session would abort ("terminate called without an active
    exception"), so the interpreter waits for them."""
    load = getattr(embedder, "load", None)
    jobs: list[Callable[[], object]] = [tokencount.encoding] if tokens else []
    if callable(load):
        jobs.insert(0, load)
    if stemmer:  # importing snowballstemmer's 30 languages: ~0.1 s, before any query's terms
        jobs.append(lexical._stemmer)  # not stem(): its cache may hold the word already
    threads = [
        threading.Thread(target=_quietly, args=(job,), name="toolscout-prefetch", daemon=False)
        for job in jobs
    ]
    for thread in threads:
        thread.start()
    return threads


def _read_ahead(job: object) -> None:
    """Run ``job`` (an optional store method, e.g. ``prepare_lexical``: reading what a new
    process's first search needs) on a prefetch thread, when the store has it."""
    if callable(job):
        name = "toolscout-prefetch"
        threading.Thread(target=_quietly, args=(job,), name=name, daemon=False).start()


def _quietly(job: Callable[[], object]) -> None:
    with suppress(Exception):  # reported by the first use, which loads it again
        job()


class Opening:
    """:meth:`open`: a catalog over a path (a part of
    :class:`~toolscout.discovery.catalog.Catalog`)."""

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        embedder: Embedder | None = None,
        policy: PolicyConfig | None = None,
        settings: SearchSettings | None = None,
        log: bool = True,
        reformulator: Reformulator | None = None,
        query_log: str = "text",
        query_text_days: float | None = QUERY_TEXT_DAYS,
        prefetch: bool = True,
    ) -> Self:
        """A catalog over the store at ``path`` (a SQLite file, ``:memory:``, or a DSN).

        ``query_log`` says what the discovery log keeps of each query: its ``text``, a
        ``hash``, or ``none``; text is reduced to its hash after ``query_text_days``
        (``None``: kept until the row is pruned). ``prefetch``: a store that holds a
        catalog starts loading the query encoder, the stemmer and its dense index in the
        background while its state is read. The token counter is not loaded ahead: building
        it holds the interpreter for a few tenths of a second, which stalled whichever
        request ran beside it; a discovery whose counts are not kept (per tool or per text)
        builds it when it needs it."""
        from toolscout.stores import open_store

        store = open_store(path)
        chosen = embedder or stored_embedder(store)
        prefetch = prefetch and store.generation() > 0
        if prefetch:  # the encoder and the stemmer first: the first discovery needs both
            prefetch_models(chosen, tokens=False, stemmer=True)
        dlog = None
        if log and isinstance(path, str | Path):
            from toolscout.telemetry.log import open_log

            dlog = open_log(path, query_log=query_log, query_text_days=query_text_days)
        # the catalog's own constructor (this class is a part of it, and does not restate
        # its signature)
        make = cast("Callable[..., Self]", cls)
        catalog = make(
            store,
            embedder=chosen,
            policy=policy,
            settings=settings,
            log=dlog,
            reformulator=reformulator,
        )
        prepare = getattr(store, "prepare_dense", None)
        if prefetch:  # the lexical scope tokens (a thread of its own: not beside the ids)
            _read_ahead(getattr(store, "prepare_lexical", None))
        if prefetch and callable(prepare):  # the dense index, mapped while the encoder loads
            _read_ahead(lambda: prepare(chosen.model_id))
        return catalog
