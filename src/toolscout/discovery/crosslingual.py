"""Bringing the catalog's words to a request in another language, with no translator.

A request the catalog's vocabulary barely covers (discovery/coverage.py) shares only its
numbers and names with an English catalog, so BM25 has nothing to say about it. With an
encoder that reads other languages (multilingual-e5-small), the encoder itself can carry
the request's words over: each distinct content word of the catalog's cards (its
*lexicon*, embedded once per catalog generation and model) and each word of the request
are embedded alone, and a request word whose nearest catalog word is at least
:data:`MATCH_COSINE` close is replaced by that word's BM25 term (``prévisions`` ->
``forecast``, ``天気`` -> ``weather``). The English stop words are in the lexicon too: a
request word nearest to one (``le``, ``の``, ``bitte``) brings nothing.

The request's *bridged* query keeps its text (the encoder reads it as written), its
covered terms and identifiers, and takes the carried-over terms: lexical retrieval then
runs on catalog words and the learned ranker reads it as it reads any request. The
request is also read as the coverage rule reads it (the dense path alone), and each tool
keeps the better of its two fused scores plus the other (:func:`merged`,
:data:`MERGE_AGREE`): a wrong word carried over cannot push the dense path's answer down,
and a tool both readings find comes first. A request whose words carry nothing over is
read by the dense path alone, as before. In both readings the request's vector is read
without its language's component (discovery/languagespace.py).

Words of a request: runs of letters (lower-cased, accents kept: the encoder reads them) of
at least :data:`MIN_WORD_LETTERS` (articles and prepositions are left out);
in scripts written without spaces, each run of Han characters of up to
:data:`HAN_WHOLE` characters is one word and a longer one is read as its overlapping
character pairs, a Katakana run is one word (mostly borrowed words), and Hiragana (mostly
particles and endings) is left out.

A store that keeps derived state (SQLite) keeps the lexicon beside the catalog, per
generation, model and version of this module (:func:`kept_key`): a new process reads it
instead of encoding the catalog's words again (seconds to a minute) on its first
carried-over request. A write to the catalog (indexing) starts building the new
generation's lexicon at once, in the background (:func:`prepare`), so no request waits.
What is kept is read as data only (a JSON header and the float
vectors); anything not exactly that shape is built again.

With an encoder that does not read other languages (the English default) nothing here
runs: :func:`bridged` returns the request itself before reading anything.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import unicodedata
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from toolscout.discovery import coverage
from toolscout.discovery.languagespace import language_space
from toolscout.discovery.lexical import STOPWORDS, stem, words
from toolscout.embed.base import Embedder, Vectors

if TYPE_CHECKING:
    from toolscout.discovery.search import Candidate, PhraseIndex, Query, Retrieval, Retriever

#: a request word is carried over to its nearest catalog word when their cosine is at
#: least this (multilingual-e5-small, one word each: a word and its translation ~0.90-0.98,
#: unrelated words ~0.80-0.88). Chosen on one half of the multilingual set and checked on
#: the other, both ways (docs/history/other-languages.md, "This round (h/lang2, round nine)")
MATCH_COSINE = 0.84
#: a request word is left out when a stop word is within this of its nearest content word
STOP_MARGIN = 0.0
#: a word of a script written without spaces (Han, Kana: the Chinese and Japanese pieces of
#: :func:`request_words`) is carried over only when its nearest catalog word also stands
#: out from the crowd: ``2 cos - r_word - r_catalog_word`` (CSLS, the hubness correction
#: of bilingual lexicon induction: ``r`` is a word's mean cosine to its :data:`HUB_K`
#: nearest catalog words) at least this. Character pairs cut across two words (``份城``)
#: sit near many catalog words at once, nearest to "hub" words (``local``, ``one``); a
#: translation stands out (``天气`` -> ``weather``). Fitted on one half of the multilingual
#: set and checked on the other, both ways (docs/history/other-languages.md, "This round (h/lang3,
#: round ten)"); None: no such test
MIN_CSLS_UNSPACED: float | None = 0.04
#: the same floor for words of other scripts (Latin: French, German, Spanish, Portuguese);
#: None, the cosine alone (the two halves of the set disagreed on any floor)
MIN_CSLS: float | None = None
#: neighbours in the hubness correction's mean (the usual choice of CSLS)
HUB_K = 10
#: rank a carried-over request by the better of its two readings per tool (the catalog's
#: words and BM25, the dense path alone) rather than by the first alone
MERGE = True
#: in the merge, each tool's score is the better of its two readings' plus this much of the
#: other (0: the better alone, as before; 1: their sum, so a tool both readings find gains
#: over one that only one finds); a score is relative to its reading's best, in (0, 1].
#: 1: chosen leave-one-language-out with :data:`languagespace.REMOVE` (every one of the six
#: folds; docs/history/other-languages.md, "This round (h/lang5, round twelve)")
MERGE_AGREE = 1.0
#: the most catalog words a lexicon holds (the most frequent first): bounds its one-off
#: encoding (about 10-20 ms a word at one thread) on large catalogs
LEXICON_WORDS = 6000
#: the most words of one request carried over (each is one short encoder input)
REQUEST_WORDS = 24
#: a Han run up to this long is one word; longer runs are read as character pairs
HAN_WHOLE = 3
#: request words' vectors kept between requests (per model)
WORD_VECTOR_CACHE = 8192
#: a word of a spaced script (Latin: French, German, Spanish, Portuguese) shorter than this
#: is not carried over: short words are mostly articles and prepositions (``la``, ``der``,
#: ``une``), which the encoder places by their spelling near crowded catalog words
#: (``labs``, ``tier``, ``one``) rather than by their sense. 4: chosen leave-one-language-out
#: (every one of the six folds chose it over 2; docs/history/other-languages.md,
#: "This round (h/lang4, round eleven)")
MIN_WORD_LETTERS = 4
#: what the encoder reads in the carried-over reading: 0, the request as written; 1, the
#: request followed by the catalog words carried over (``météo à Lisbonne weather``); 2,
#: those catalog words alone (the request's own reading is the merge's other one). 0: no
#: fold chose 1 or 2 (docs/history/other-languages.md, "This round (h/lang4, round eleven)")
REENCODE = 0

_HAN_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f\u3005]+")
_KATAKANA_RE = re.compile("[\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]+")
_HIRAGANA_RE = re.compile("[\u3040-\u309f]+")
_LETTERS_RE = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True, slots=True)
class Lexicon:
    """A catalog's content words, each with its BM25 term and its vector (rows of
    ``vectors``; the English stop words are the rows where ``stop`` is true)."""

    words: tuple[str, ...]
    terms: tuple[str, ...]
    stop: np.ndarray
    vectors: Vectors
    #: each row's mean cosine to its :data:`HUB_K` nearest other content words (0 for stop
    #: words), :func:`hubness`; None: worked out when first needed
    hub: np.ndarray | None = None

    def carry(
        self,
        vectors: Vectors,
        min_cosine: float = MATCH_COSINE,
        stop_margin: float = 0.0,
        min_csls: float | Sequence[float | None] | None = None,
    ) -> list[str]:
        """The term of the catalog word nearest to each of ``vectors`` (request words) when
        it is at least ``min_cosine`` close and more than ``stop_margin`` closer than the
        nearest stop word (a word nearest to a stop word brings nothing: ``le``, ``の``; with
        a margin, neither does one almost as near, ``une`` -> ``one``), and with
        ``min_csls``, when the pair's hubness-corrected score (:data:`MIN_CSLS`) is at least
        that (one floor, or one per row of ``vectors``; None: no floor); in request order,
        each term once."""
        return list(
            dict.fromkeys(
                self.terms[j] for j in self.nearest(vectors, min_cosine, stop_margin, min_csls)
            )
        )

    def nearest(
        self,
        vectors: Vectors,
        min_cosine: float = MATCH_COSINE,
        stop_margin: float = 0.0,
        min_csls: float | Sequence[float | None] | None = None,
    ) -> list[int]:
        """The rows :meth:`carry` takes over (one per request word carried, in order)."""
        content = np.flatnonzero(~self.stop)
        if not len(vectors) or not len(content):
            return []
        sims = vectors @ self.vectors.T
        stops = np.flatnonzero(self.stop)
        hub = self.hub if self.hub is not None else hubness(self.vectors, self.stop)
        k = min(HUB_K, len(content))
        floors = list(min_csls) if isinstance(min_csls, Sequence) else [min_csls] * len(vectors)
        out: list[int] = []
        for row, floor in zip(sims, floors, strict=True):
            own = row[content]
            j = int(content[np.argmax(own)])
            best = float(row[j])
            if len(stops) and float(row[stops].max()) >= best - stop_margin:
                continue
            if best < min_cosine:
                continue
            if floor is not None:
                near = float(np.partition(own, len(own) - k)[-k:].mean())
                if 2 * best - near - float(hub[j]) < floor:
                    continue
            out.append(j)
        return out


def hubness(vectors: Vectors, stop: np.ndarray, k: int = HUB_K, block: int = 1024) -> np.ndarray:
    """Each content row's mean cosine to its ``k`` nearest other content rows (how crowded
    the catalog's vocabulary is around it); 0 for stop rows. In blocks of rows, so a
    6,000-word lexicon never holds its whole similarity matrix."""
    out = np.zeros(len(vectors), dtype=np.float32)
    content = np.flatnonzero(~stop)
    if len(content) < 2:
        return out
    kk = min(k, len(content) - 1)
    own = np.ascontiguousarray(vectors[content], dtype=np.float32)
    for start in range(0, len(own), block):
        sims = own[start : start + block] @ own.T
        rows = np.arange(len(sims))
        sims[rows, rows + start] = -np.inf  # not itself
        out[content[start : start + block]] = np.partition(sims, -kk, axis=1)[:, -kk:].mean(1)
    return out


def catalog_words(texts: Sequence[str], df: Mapping[str, int], limit: int) -> dict[str, str]:
    """BM25 term -> the catalog word it is most often written as, for the content words
    of ``texts`` (letters only, three or more, not stop words, indexed), the ``limit``
    most frequent terms (by document frequency, then alphabetically)."""
    seen: dict[str, Counter[str]] = {}
    for text in texts:
        for w in words(text):
            if len(w) < 3 or w in STOPWORDS or not w.isalpha():
                continue
            term = stem(w) if w.isascii() else w
            if df.get(term, 0) > 0:
                seen.setdefault(term, Counter())[w] += 1
    ranked = sorted(seen, key=lambda t: (-df.get(t, 0), t))[:limit]
    return {t: seen[t].most_common(1)[0][0] for t in sorted(ranked)}


def build_lexicon(texts: Sequence[str], df: Mapping[str, int], embedder: Embedder) -> Lexicon:
    """The lexicon of a catalog whose cards read ``texts`` (``df``: its term counts)."""
    by_term = catalog_words(texts, df, LEXICON_WORDS)
    own = list(by_term.values())
    stop = sorted(STOPWORDS)  # the same for every catalog: kept with the request words
    vectors = np.concatenate(
        [
            np.asarray(embedder.embed(own), np.float32).reshape(len(own), embedder.dim),
            _WORD_VECTORS.of(embedder, stop),
        ]
    )
    flags = np.array([False] * len(own) + [True] * len(stop), dtype=bool)
    return Lexicon((*own, *stop), (*by_term, *stop), flags, vectors, hubness(vectors, flags))


def request_words(text: str, df: Mapping[str, int], limit: int = REQUEST_WORDS) -> list[str]:
    """The words of a request to carry over: those the catalog does not index already
    (its covered words stay as they are), see the module's docstring; at most ``limit``."""
    out: list[str] = []
    for chunk in _LETTERS_RE.findall(unicodedata.normalize("NFC", text)):
        if _HAN_RE.search(chunk) or _KATAKANA_RE.search(chunk) or _HIRAGANA_RE.search(chunk):
            out.extend(_unspaced_words(chunk))
            continue
        w = chunk.casefold()
        short = len(w) < max(2, MIN_WORD_LETTERS)
        if short or w in STOPWORDS or (chunk.isascii() and df.get(stem(w), 0) > 0):
            continue
        out.append(w)
    return list(dict.fromkeys(out))[:limit]


def _unspaced(word: str) -> bool:
    """Whether ``word`` is a piece of a script written without spaces (Han, Kana)."""
    return bool(_HAN_RE.search(word) or _KATAKANA_RE.search(word))


def _unspaced_words(chunk: str) -> list[str]:
    out: list[str] = []
    for m in _HAN_RE.finditer(chunk):
        run = m.group()
        if len(run) <= HAN_WHOLE:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    out.extend(m.group() for m in _KATAKANA_RE.finditer(chunk) if len(m.group()) > 1)
    return out


def kept_key(model_id: str) -> str:
    """The key a catalog's lexicon is kept under: its model and a digest of this module
    (which words it holds and how), so another version never reads it."""
    from toolscout.discovery.kept import code_digest

    return f"crosslingual-lexicon:{model_id}:{code_digest(sys.modules[__name__])}"


def lexicon_blob(lexicon: Lexicon) -> bytes:
    """``lexicon`` as kept: a JSON header's length (8 bytes), the header, the vectors."""
    vectors = np.ascontiguousarray(lexicon.vectors, dtype="<f4")
    header = json.dumps(
        {
            "words": list(lexicon.words),
            "terms": list(lexicon.terms),
            "stop": [bool(x) for x in lexicon.stop],
            "shape": list(vectors.shape),
        },
        ensure_ascii=False,
    ).encode()
    return len(header).to_bytes(8, "little") + header + vectors.tobytes()


def lexicon_of(blob: bytes, dim: int) -> Lexicon | None:
    """A kept lexicon, or None for anything not exactly its shape (built again)."""
    try:
        size = int.from_bytes(blob[:8], "little")
        header = json.loads(blob[8 : 8 + size])
        words_, terms_, stop, shape = (
            header["words"],
            header["terms"],
            header["stop"],
            header["shape"],
        )
        rows = len(words_)
        ok = (
            shape == [rows, dim]
            and len(terms_) == rows == len(stop)
            and all(isinstance(x, str) for x in (*words_, *terms_))
            and all(isinstance(x, bool) for x in stop)
            and len(blob) == 8 + size + rows * dim * 4
        )
        if not ok:
            return None
        vectors = np.frombuffer(blob, dtype="<f4", offset=8 + size).reshape(rows, dim)
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    flags, rows_ = np.array(stop, dtype=bool), vectors.astype(np.float32)
    return Lexicon(tuple(words_), tuple(terms_), flags, rows_, hubness(rows_, flags))


def _kept(store: Any, model_id: str, dim: int, generation: int) -> Lexicon | None:
    read = getattr(store, "derived", None)
    kept = read(kept_key(model_id)) if callable(read) else None
    if kept is None or kept[0] != generation:
        return None
    return lexicon_of(kept[1], dim)


def _keep(store: Any, model_id: str, generation: int, lexicon: Lexicon) -> None:
    write = getattr(store, "set_derived", None)
    if callable(write):  # a cache: a failed write only means building it again
        write(kept_key(model_id), generation, lexicon_blob(lexicon))


class _Lexicons:
    """One lexicon per catalog generation (its phrase index, rebuilt when the generation
    moves) and model; read from the store when kept there, else built on first use and
    kept, under a lock."""

    def __init__(self) -> None:
        self._built: weakref.WeakKeyDictionary[PhraseIndex, dict[str, Lexicon]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self, retriever: Retriever, df: Mapping[str, int]) -> Lexicon:
        model = retriever.embedder.model_id
        with self._lock:
            found = self._built.get(retriever.phrases, {}).get(model)
            if found is not None:
                return found
            store, embedder = retriever.store, retriever.embedder
            generation = store.generation()
            built = _kept(store, model, embedder.dim, generation)
            if built is None:
                texts = [" ".join((c.name, c.summary, *c.tags, *c.aliases)) for c in store.cards()]
                built = build_lexicon(texts, df, embedder)
                _keep(store, model, generation, built)
            self._built.setdefault(retriever.phrases, {})[model] = built
            return built


_LEXICONS = _Lexicons()


def prepare(catalog: Any) -> threading.Thread | None:
    """After a write to ``catalog`` (a :class:`~toolscout.discovery.catalog.Catalog`), with
    an encoder that reads other languages: build the lexicon of its new generation on a
    background thread and keep it in the store, so the first carried-over request of this
    process or of the next one (a server opening the catalog ``toolscout index`` wrote)
    reads it instead of waiting seconds to a minute for it; and the encoder's language
    space (discovery/languagespace.py: once per model and process, a few seconds). The
    thread is one of the catalog's background keeps (its ``close`` waits for it). None
    when nothing here runs (the English default, lexical or dense search off)."""
    if not coverage.may_lead(catalog.settings, catalog.embedder):
        return None
    retriever = catalog.retriever()

    def job() -> None:
        try:
            df, _ = retriever.store.document_frequency()
            _LEXICONS.get(retriever, df)
            language_space(retriever.embedder, retriever.store)  # once per model and process
        except Exception:  # a cache: a request builds it again
            return

    thread = threading.Thread(target=job, name="toolscout-lexicon", daemon=False)
    with catalog._keeping_lock:
        catalog._keeping.append(thread)
    thread.start()
    return thread


class _WordVectors:
    """Request words' vectors by (model id, word), least recently used out."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def snapshot(self) -> dict[tuple[str, str], np.ndarray]:
        """The vectors kept now (a benchmark times a request cold, then puts them back)."""
        with self._lock:
            return dict(self._items)

    def restore(self, items: Mapping[tuple[str, str], np.ndarray]) -> None:
        with self._lock:
            for key, vec in items.items():
                self._items.setdefault(key, vec)

    def of(self, embedder: Embedder, ws: Sequence[str]) -> Vectors:
        model = embedder.model_id
        with self._lock:
            missing = [w for w in ws if (model, w) not in self._items]
        if missing:
            got = embedder.embed(missing)
            with self._lock:
                for w, v in zip(missing, got, strict=True):
                    self._items[(model, w)] = v
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        with self._lock:
            rows = []
            for w in ws:
                v = self._items.get((model, w))
                if v is None:  # pushed out by another thread's words meanwhile
                    v = embedder.embed([w])[0]
                rows.append(v)
        return (
            np.stack(rows).astype(np.float32) if rows else np.zeros((0, embedder.dim), np.float32)
        )


_WORD_VECTORS = _WordVectors(WORD_VECTOR_CACHE)


def bridged(retriever: Retriever, query: Query, min_cosine: float | None = None) -> Query:
    """``query`` with the catalog words its own words carry over as its lexical terms, when
    the coverage rule would read it by the dense path alone (an encoder that reads other
    languages, both paths on, coverage below :data:`coverage.LOW_COVERAGE`) and some word
    carries over; else ``query``
    itself (the same object; with the English default, returned before reading anything)."""
    if not coverage.may_lead(retriever.settings, retriever.embedder):
        return query
    df, n_docs = retriever.store.document_frequency()
    if coverage.coverage((*query.terms, *query.dropped), df) >= coverage.LOW_COVERAGE:
        return query
    own = request_words(query.text, df)
    if not own:
        return query
    lexicon = _LEXICONS.get(retriever, df)
    rows = lexicon.nearest(
        _WORD_VECTORS.of(retriever.embedder, own),
        MATCH_COSINE if min_cosine is None else min_cosine,
        stop_margin=STOP_MARGIN,
        min_csls=[MIN_CSLS_UNSPACED if _unspaced(w) else MIN_CSLS for w in own],
    )
    if not rows:
        return query
    carried = list(dict.fromkeys(lexicon.terms[j] for j in rows))
    from toolscout.discovery.query import Query, prune_frequent

    known = (t for t in (*query.terms, *query.dropped) if df.get(t, 0) > 0)
    # frequent terms pruned as :func:`query.parse_query` prunes a request's own
    kept, dropped = prune_frequent(list(dict.fromkeys((*known, *carried))), df, n_docs)
    text = query.text
    if REENCODE:  # the carried catalog words after the request (1) or alone (2)
        carried_words = dict.fromkeys(lexicon.words[j] for j in rows)
        text = " ".join((text, *carried_words) if REENCODE == 1 else carried_words)
    return Query(text, kept, dropped, query.identifiers)


def merged(bridged_out: Retrieval, dense_led: Callable[[], Retrieval]) -> Retrieval:
    """The retrieval of a carried-over request: ``bridged_out`` (BM25 on the catalog's
    words, fused), or with :data:`MERGE` each tool at the better of its fused scores there
    and in the dense path's own reading (``dense_led``, run only then) plus
    :data:`MERGE_AGREE` times the other, as the reformulation keeps the better of its two
    passes."""
    if not MERGE:
        return bridged_out
    other = dense_led()
    ours = {c.id: c for c in bridged_out.candidates}
    theirs = {c.id: c for c in other.candidates}
    best: dict[str, Candidate] = {}
    for tid in ours.keys() | theirs.keys():
        a = ours[tid].fused if tid in ours else 0.0
        b = theirs[tid].fused if tid in theirs else 0.0
        top = ours[tid] if a >= b and tid in ours else theirs[tid]
        score = max(a, b) + MERGE_AGREE * min(a, b)
        best[tid] = top if score == top.fused else top.rescored(score)
    bridged_out.candidates = sorted(best.values(), key=lambda c: (-c.fused, c.id))
    bridged_out.confidence = max(bridged_out.confidence, other.confidence)
    bridged_out.low_confidence = bridged_out.low_confidence and other.low_confidence
    return bridged_out
