"""Text normalisation shared by every lexical step: indexing, querying, exact hits.

Identifiers are split the way people read them: ``query_freight_telemetry``,
``queryFreightTelemetry``, ``billing.issue_refund`` and ``github/create-issue``
all become plain words. Words are lower-cased, stop words dropped and stemmed
(Snowball English), so "refunds" finds "refund".

Any script is tokenised, not only ASCII: words are runs of Unicode letters and
digits; accents and other combining marks are folded away (``Crêpes`` ->
``crepes``, as the stores' FTS5 ``unicode61 remove_diacritics 2`` tokenizer
does) and full-width forms are unified (NFKD). Scripts written without spaces
(Chinese, Japanese, Korean) are cut into overlapping character bigrams
(``天気予報`` -> ``天気 気予 予報``), the usual segmenter-free indexing of CJK text:
a two-character word in a query matches the same two characters in a card.
Cards and queries pass through the same functions, so both sides agree.

Text whose letters and digits are all ASCII takes the original path unchanged.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache

_WORD_RE = re.compile(r"[A-Za-z0-9]+")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_IDENT_RE = re.compile(
    r"[A-Za-z][A-Za-z0-9]*(?:[_./:-][A-Za-z0-9]+)+"  # snake_case, dotted.names, paths/ids
    r"|[a-z]+[A-Z][A-Za-z0-9]*"  # camelCase
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"  # PascalCase
)
#: scripts written without spaces between words: Han (with its extensions and
#: compatibility forms), Hiragana, Katakana (with the prolonged sound mark), Hangul,
#: the CJK iteration marks; cut into character bigrams
_UNSPACED = (
    "\u3005-\u3007\u3021-\u3029\u3031-\u3035\u303b\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_UNSPACED_RE = re.compile(f"[{_UNSPACED}]+")
#: a run of Unicode letters and digits (what FTS5's unicode61 keeps as one token)
_UNICODE_WORD_RE = re.compile(r"[^\W_]+")
#: letters with no decomposition that FTS5's diacritic folding also maps to a base letter
_FOLD_TABLE = str.maketrans({"ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D"})

STOPWORDS = frozenset(
    (
        "a about above after again against all am an and any are as at be because been before "
        "being below between both but by can could did do does doing down during each few for "
        "from further had has have having he her here hers herself him himself his how i if in "
        "into is it its itself just let me more most my myself no nor not now of off on once only "
        "or other our ours ourselves out over own please same she should so some such than that "
        "the their theirs them themselves then there these they this those through to too under "
        "until up very was we were what when where which while who whom why will with would you "
        "your yours yourself yourselves want need like get give tell show help could would also "
        "using use"
    ).split()
)


@lru_cache(maxsize=1)
def _stemmer() -> object:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


#: the stemmer keeps the word it works on in itself: two threads stemming at once each
#: read the other's word (an IndexError, or a wrong stem that the cache below then keeps)
_STEM_LOCK = threading.Lock()


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    with _STEM_LOCK:
        return str(_stemmer().stemWord(word))  # type: ignore[attr-defined]


def fold(text: str) -> str:
    """Compatibility forms unified and combining marks removed (``é`` -> ``e``); case kept.

    Every mark goes except the kana voicing marks (``が`` stays ``が``): FTS5's unicode61
    tokenizer treats marks as separators, so a word that kept them would be cut apart in
    the store but not in the document frequencies; without them it stays whole on both.
    """
    if text.isascii():
        return text
    out: list[str] = []
    kana = False
    for ch in unicodedata.normalize("NFKD", text):
        if unicodedata.category(ch)[0] == "M":
            if kana:
                out.append(ch)
            continue
        kana = "\u3040" <= ch <= "\u30ff"
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out)).translate(_FOLD_TABLE)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _unicode_words(text: str) -> list[str]:
    out: list[str] = []
    for chunk in _UNICODE_WORD_RE.findall(fold(text)):
        pos = 0
        for m in _UNSPACED_RE.finditer(chunk):
            out.extend(_spaced_words(chunk[pos : m.start()]))
            out.extend(_bigrams(m.group()))
            pos = m.end()
        out.extend(_spaced_words(chunk[pos:]))
    return out


def _spaced_words(chunk: str) -> list[str]:
    if not chunk:
        return []
    if chunk.isascii():
        return _ascii_words(chunk)
    return [chunk.casefold()]


def _ascii_words(text: str) -> list[str]:
    out: list[str] = []
    for chunk in _WORD_RE.findall(text):
        if chunk.islower():  # no capital in it: one word, already lower-case
            out.append(chunk)
        else:
            out += [p.lower() for p in _CAMEL_RE.findall(chunk)]
    return out


def _ascii_only_words(text: str) -> bool:
    """Whether every letter and digit of ``text`` is ASCII (typographic quotes, dashes and
    emoji around English words do not make it another language)."""
    return text.isascii() or not any(ch.isalnum() for ch in text if not ch.isascii())


#: texts whose words and terms are kept (least recently used out): one request's text is
#: read by several steps (its terms, its parts, its exact mentions, the encoder's text)
TEXT_CACHE = 1024


@lru_cache(maxsize=TEXT_CACHE)
def _words(text: str) -> tuple[str, ...]:
    return tuple(_ascii_words(text) if _ascii_only_words(text) else _unicode_words(text))


def words(text: str) -> list[str]:
    """Lower-cased words, identifiers split (``findOrder`` -> ``find order``), accents
    folded, CJK as character bigrams; no stemming."""
    return list(_words(text))


def _keep(word: str) -> bool:
    if word in STOPWORDS:
        return False
    return len(word) > 1 or word.isdigit() or not word.isascii()


@lru_cache(maxsize=TEXT_CACHE)
def _terms(text: str) -> tuple[str, ...]:
    return tuple(stem(w) if w.isascii() else w for w in _words(text) if _keep(w))


def terms(text: str) -> list[str]:
    """Index/query terms: :func:`words` minus stop words, stemmed (English stemming is
    applied to ASCII words only: it has nothing to say about other scripts)."""
    return list(_terms(text))


def identifiers(text: str) -> list[str]:
    """Tokens of the query that look like code identifiers (snake, camel, dotted, paths)."""
    return _IDENT_RE.findall(text)


def phrase_key(text: str) -> str:
    """The canonical form under which names and aliases are matched exactly."""
    return " ".join(_words(text))


def encoder_text(text: str, max_words: int | None = None) -> str:
    """What the sentence encoder reads of a text: its first ``max_words`` words.

    Text whose letters are all ASCII is read as :func:`words` (identifiers split,
    punctuation dropped: what the English model was measured with); any other text
    is given as written (only white space collapsed), since the encoder's own
    tokenizer handles Unicode and folding or splitting it here would only lose
    meaning. Scripts without spaces are capped by characters instead (four a word).
    "" when the text has no word at all.
    """
    if _ascii_only_words(text):
        return " ".join(_words(text)[:max_words])  # the ASCII reading (as words() gives)
    kept = " ".join(text.split()[:max_words])
    if max_words is not None and _UNSPACED_RE.search(kept):
        kept = kept[: max_words * 4]
    return kept if _UNICODE_WORD_RE.search(kept) else ""


#: sentence ends (Latin, and CJK ones that need no space after them) and line breaks
_SENTENCE_RE = re.compile(r"(?<=[.!?;。！？])\s+|(?<=[。！？])|\n+")


def sentences(text: str) -> list[str]:
    """``text`` cut at sentence ends and line breaks (pieces may be empty: callers strip);
    the one splitter the request's parts and intents share (their clause rules differ)."""
    return _SENTENCE_RE.split(text)
