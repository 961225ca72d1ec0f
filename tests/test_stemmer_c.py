"""The lexical path stems with PyStemmer (C), which must give the pure-Python Snowball stems.

An index written by a process without the C stemmer and a request stemmed by one with it
(or the other way round) meet only if both give the same stem for every word."""

from __future__ import annotations

import Stemmer
from snowballstemmer.english_stemmer import EnglishStemmer

from toolscout.discovery import lexical

# words of the kinds tool catalogs and requests hold: inflections, -ies/-ied, doubled
# consonants, Snowball's exceptions, identifiers' pieces, numbers, and non-ASCII words
WORDS = (
    "running runs ran runner searching searched searches search orders ordering ordered "
    "cancelled cancelling cancellation canceling tracking tracked parcels packages "
    "shipping shipped shipment invoices invoiced billing billed refunds refunded "
    "queries queried query replies replied copies copying dying lying tying news skies "
    "generously generous generate generation generator generalize generalise "
    "communism community communication arsenal gently only singly sky "
    "proceed exceed succeed cycling cyclist retrieval retrieving retrieved "
    "repositories repository repos merged merging pulls issues issued labels labelled "
    "databases datetime timezone timestamps utc api apis json xml url urls oauth2 "
    "v2 100k 2024 ids uuid sha256 kubernetes k8s deployments pods namespaces "
    "réservation réservations café naïve façade über straße mañana coração "
    "予約 订单 配送 заказ доставка"
).split()


def test_the_lexical_stemmer_is_the_c_one() -> None:
    assert isinstance(lexical._stemmer(), Stemmer.Stemmer)


def test_the_c_stems_are_the_pure_python_stems() -> None:
    c, pure = lexical._stemmer(), EnglishStemmer()
    differ = {
        w: (c.stemWord(w), pure.stemWord(w))  # type: ignore[attr-defined]
        for w in WORDS
        if c.stemWord(w) != pure.stemWord(w)  # type: ignore[attr-defined]
    }
    assert not differ
    assert lexical.stem("cancelled") == pure.stemWord("cancelled") == "cancel"
