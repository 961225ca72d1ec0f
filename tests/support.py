"""Shared test helpers (plain functions; fixtures live in the test modules)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from toolscout.cards import ToolSpec, make_spec
from toolscout.embed.base import Embedder, Wrapped
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.embed.vectorcache import VECTOR_CACHE_ENV, CachedEmbedder, with_vector_cache

FIXTURES = Path(__file__).parent / "fixtures"
BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"


@lru_cache(maxsize=1)
def embedder() -> MiniLMEmbedder:
    """The real default model, loaded once per test process. Without ONNX Runtime's
    spin-waiting and on one thread (the same vectors): the suite runs on several workers
    beside servers and CLI processes, and a spinning thread or a second one takes a core
    from each of them (``conftest.py`` sets the same for the processes the tests start)."""
    return MiniLMEmbedder(spin_wait=False, threads=1)


@lru_cache(maxsize=1)
def card_embedder() -> Embedder:
    """:func:`embedder` answering from the run's vector cache (``$TOOLSCOUT_VECTOR_CACHE``,
    set by ``conftest.py``), for a fixture that indexes a catalog other tests and processes
    index too (the demo's cards): its texts are embedded once per run. The plain model
    when no cache is set."""
    return with_vector_cache(embedder())


@lru_cache(maxsize=1)
def e5_embedder() -> Embedder:
    """The multilingual model (``multilingual-e5-small``), loaded once per test process and
    answering from the run's vector cache, for the tests of discovery over it
    (``test_coverage``, ``test_crosslingual`` and the ``test_lang*`` modules): their catalogs'
    words and requests are encoded again and again (1,295 texts of which 446 distinct, 30 s
    of CPU in one process), and the model's vector of a text does not depend on the texts
    beside it (``test_embed_multilingual`` checks it bit for bit), so a cached vector is the
    one the model gives. The tests of the model itself make their own."""
    from toolscout.embed.e5 import MultilingualE5Embedder

    e5 = with_vector_cache(MultilingualE5Embedder())
    _parallel_texts_in_the_cache(e5)
    return e5


def _parallel_texts_in_the_cache(e5: Embedder) -> None:
    """Put the texts the language space is measured on (``languagespace.PARALLEL``, 168 of
    them, ~6 s of CPU at one thread) in the run's vector cache, one process at a time: the
    first process of the run to get here encodes them and the others wait for it, then find
    them there. Without it the workers whose first e5 tests ran at the same time each
    encoded them (two workers, 8.1 and 6.7 s of CPU, round twenty-two). Each process still
    measures the language space itself from these vectors, as it did when another worker
    had put them there first. Without a run cache, nothing is done."""
    import fcntl
    import os

    where = os.environ.get(VECTOR_CACHE_ENV, "").strip()
    if not where or not isinstance(e5, CachedEmbedder):
        return
    from toolscout.discovery.languagespace import PARALLEL

    texts = [text for lang in PARALLEL for text in PARALLEL[lang]]
    with (Path(where) / "e5-parallel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        e5.embed(texts)


class CountingEmbedder(Wrapped):
    """A real embedder (by default :func:`embedder`) that records what it is asked to
    encode: every text (``texts``) and every call (``calls``: ``"embed N"``)."""

    def __init__(self, inner: Any = None) -> None:
        super().__init__(inner if inner is not None else embedder())
        self.texts: list[str] = []
        self.calls: list[str] = []

    def embed(self, texts: Any) -> Any:
        self.texts.extend(texts)
        self.calls.append(f"embed {len(texts)}")
        return self.inner.embed(texts)


def spec(tool_id: str, summary: str = "Does a thing.", **kw: Any) -> ToolSpec:
    return make_spec({"id": tool_id, "summary": summary, **kw})


class CountingServer(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a JSON schema and counts the requests (``hits``)."""

    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def counting_server() -> Iterator[tuple[str, type[CountingServer]]]:
    """A real HTTP server on 127.0.0.1: (its ``/internal`` URL, the handler with ``hits``)."""
    handler = type("Counter", (CountingServer,), {"hits": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/internal", handler
    finally:
        server.shutdown()
        server.server_close()


def alias_bomb(path: Path) -> Path:
    """A card file of under 1.5 KB whose YAML aliases expand to 9^10 list items."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append("tools:\n  - id: a.b\n    summary: x\n    tags: *a9")
    path.write_text("\n".join(lines) + "\n")
    return path


def retrieved_both_ways(cat: Any, text: str) -> tuple[tuple[Any, Any], str]:
    """``text`` parsed and retrieved by a caller itself, as the console, lint and the fits
    do: by the catalog's retriever and by the pipeline's retrieval stage (an all-scopes
    principal), and the reason the stage skipped the encoder ("" when it ran)."""
    from toolscout.discovery.pipeline import retrieve_or_skip
    from toolscout.discovery.search import parse_query
    from toolscout.policy import Principal

    df, n_docs = cat.store.document_frequency()
    query = parse_query(text, df, n_docs, cat.settings)
    ent = cat.entitle(Principal.of("p"))
    direct = cat.retriever().run(query, ent.ids)
    staged, skipped = retrieve_or_skip(cat, query, ent, cat.settings)
    return (direct, staged), skipped


def copy_catalog(template: Path, into: Path) -> Path:
    """A stored SQLite catalog copied to ``into``: the file and what is kept beside it under
    its name (its write-ahead log, the dense index's ``<name>.dense-*`` files, renamed to
    ``into``'s name). A gateway or command started on the copy starts from a stored
    catalog, as it would after a first start of its own."""
    import shutil

    into.parent.mkdir(parents=True, exist_ok=True)
    names = (template.name, template.name + "-wal")
    for path in template.parent.iterdir():
        if path.name in names or path.name.startswith(template.name + ".dense-"):
            shutil.copyfile(path, into.with_name(into.name + path.name[len(template.name) :]))
    return into


def made_once_per_run(factory: Any, name: str, build: Callable[[Path], None]) -> Path:
    """``shared/NAME/`` in the directory every pytest-xdist worker of this run shares (the
    process's own base in a serial run), filled by ``build`` once per run: the first
    worker to get here builds it under a file lock, the others wait for it. A failed
    build leaves no mark: the next one tries again (in an emptied directory)."""
    import fcntl
    import os
    import shutil

    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    where = root / "shared" / name
    where.mkdir(parents=True, exist_ok=True)
    with (where.parent / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (where.parent / f"{name}.done").exists():
            shutil.rmtree(where)
            where.mkdir()
            build(where)
            (where.parent / f"{name}.done").write_text("ok\n")
    return where


#: a small catalog of distinct tools, enough for a calibration to fit (the evidence tests of
#: round twenty-four: tests/test_joint18_evidence.py, tests/test_xfit18_crossfit.py)
DISTINCT_TOOLS = [
    ("weather.forecast", "Weather forecast for a city: rain, temperature and wind by day."),
    ("weather.alerts", "Severe weather warnings issued for a region and its coast."),
    ("currency.convert", "Convert an amount of money between two currencies at today's rate."),
    ("stocks.quote", "Latest share price and daily change of a listed company."),
    ("maps.directions", "Driving, walking or transit directions between two addresses."),
    ("mail.send", "Send an email message to one or more recipients with attachments."),
    ("mail.search", "Search the mailbox for messages matching sender or subject line."),
    ("calendar.create_event", "Create a calendar event with attendees and a time slot."),
    ("files.upload", "Upload a document to cloud storage and get a share link back."),
    ("tickets.open", "Open a support ticket describing a customer's problem in detail."),
    ("orders.refund", "Refund a customer's order payment in full or in part today."),
    ("hr.payslip", "Download an employee's monthly payslip as a PDF document."),
    ("db.query", "Run a read-only SQL query against the analytics warehouse tables."),
    ("translate.text", "Translate a passage of text into another language for readers."),
    ("recipes.find", "Find cooking recipes by ingredient or dish name and diet."),
    ("flights.search", "Search flights between two airports on a date with prices."),
    ("hotels.book", "Reserve a hotel room for some nights in a chosen city."),
    ("chat.post", "Post a message to a team chat channel for everyone to read."),
]


def fit_calibration(cat: Any, seed: int | None = None) -> Any:
    """The catalog's own calibration (``Retriever.calibrate``) of an open catalog's tools,
    with the default search settings (``seed``: the pseudo-queries'; None, the shipped one)."""
    from toolscout.discovery import calibrate as cal_mod
    from toolscout.settings import SearchSettings

    retriever = cat.retriever(SearchSettings())
    return retriever.calibrate(cat.specs(), cal_mod.SEED if seed is None else seed)
