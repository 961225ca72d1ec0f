from __future__ import annotations

from toolscout.discovery.lexical import (
    encoder_text,
    identifiers,
    phrase_key,
    sentences,
    terms,
    words,
)


def test_identifiers_split_like_words() -> None:
    for form in ("query_freight_telemetry", "queryFreightTelemetry", "query-freight.telemetry"):
        assert words(form) == ["query", "freight", "telemetry"]
    assert words("HTTPServer getURL2Path") == ["http", "server", "get", "url", "2", "path"]


def test_terms_drop_stopwords_and_stem() -> None:
    assert terms("Why is my parcel late? Refunding orders") == ["parcel", "late", "refund", "order"]


def test_identifiers_found_in_prose() -> None:
    text = "call billing.issue_refund, then findOrder or ApexMap; not Paris."
    assert identifiers(text) == ["billing.issue_refund", "findOrder", "ApexMap"]


def test_phrase_key() -> None:
    assert phrase_key("terminate_batch_process") == phrase_key("Terminate batch process")


def test_accents_fold_the_same_for_cards_and_queries() -> None:
    assert words("Crêpes à Paris") == ["crepes", "a", "paris"]
    assert terms("Réserver des crêpes") == terms("reserver des crepes")
    assert words("ÉtatCivil Łódź Ørsted") == ["etat", "civil", "lodz", "orsted"]
    assert words("ＡＰＩ") == ["api"]  # full-width forms unified


def test_other_scripts_are_words_not_dropped() -> None:
    assert words("Привет мир") == ["привет", "мир"]
    assert words("Ελληνικά") == ["ελληνικα"]
    # marks FTS5 would cut words at are folded away, so the word stays whole on both sides
    assert len(words("नमस्ते दुनिया")) == 2


def test_cjk_becomes_character_bigrams() -> None:
    assert words("1000円以下") == ["1000", "円以", "以下"]
    assert words("天気予報") == ["天気", "気予", "予報"]
    assert words("查询 天") == ["查询", "天"]  # a lone character is kept as itself
    assert words("がぎ") == ["がぎ"]  # kana voicing marks are meaning, not accents
    assert words("한국어") == ["한국", "국어"]
    assert terms("東京の天気") and set(terms("天気")) <= set(terms("東京の天気"))


def test_a_cjk_name_is_found_inside_a_request() -> None:
    assert phrase_key("注文検索") in phrase_key("注文検索をしたい")


def test_ascii_text_is_unchanged_by_the_unicode_path() -> None:
    text = "Find orders by customer_email, then getURL2Path"
    assert words(text) == words(text + " é")[:-1]


def test_the_encoder_reads_non_ascii_text_as_written() -> None:
    assert encoder_text("Réserver un vol, s'il vous plaît", 64) == (
        "Réserver un vol, s'il vous plaît"
    )
    assert encoder_text("東京の天気を教えて", 64) == "東京の天気を教えて"
    assert encoder_text("findOrder by id", 64) == "find order by id"
    assert encoder_text("a b c", 2) == "a b"
    assert len(encoder_text("天" * 1000, 64)) == 256
    assert encoder_text("?!", 64) == "" and encoder_text("«»", 64) == ""


def test_lexical_terms_agree_with_fts5_unicode61() -> None:
    """The stores index these terms with FTS5 unicode61 (remove_diacritics 2): every term
    must survive that tokenizer as one token, or document frequencies disagree."""
    import sqlite3

    texts = ["1000円以下で東京の天気予報", "Crêpes à Paris", "नमस्ते दुनिया", "Straße Łódź", "ёж"]
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(a, tokenize='unicode61 remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'row')")
    for text in texts:
        db.execute("INSERT INTO f(a) VALUES (?)", (" ".join(terms(text)),))
    vocab = {row[0] for row in db.execute("SELECT term FROM v")}
    assert vocab == {t for text in texts for t in terms(text)}
    db.close()


def test_sentences_cut_at_latin_and_cjk_ends_and_line_breaks_only() -> None:
    pieces = [
        p
        for p in sentences("Book a flight. Then pay; done!\n明日の天気。東京の株価？ v1.2 ok")
        if p
    ]
    assert pieces == [
        "Book a flight.",
        "Then pay;",
        "done!",
        "明日の天気。",
        "東京の株価？",
        "v1.2 ok",
    ]


def test_words_stemmed_by_several_threads_at_once_get_their_own_stems() -> None:
    """The stemmer holds the word it works on: `serve`'s request threads stemming new words
    at once raised IndexError (an HTTP 500 in the soak) or kept another word's stem."""
    import random
    import string
    import sys
    import threading

    import snowballstemmer

    from toolscout.discovery import lexical

    rng = random.Random(7)
    endings = ["ing", "ed", "ational", "ization", "fulness", "iveness", "ly", "ies", "ement"]
    batches = [
        [
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
            + rng.choice(endings)
            for _ in range(5_000)
        ]
        for _ in range(4)
    ]
    errors: list[BaseException] = []

    def stem_all(words: list[str]) -> None:
        try:
            for word in words:
                lexical.stem(word)
        except BaseException as exc:  # reported below
            errors.append(exc)

    lexical.stem.cache_clear()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads change hands as often as they can
    try:
        threads = [threading.Thread(target=stem_all, args=(words,)) for words in batches]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    own = snowballstemmer.stemmer("english")
    assert errors == []
    wrong = [w for words in batches for w in words if lexical.stem(w) != own.stemWord(w)]
    assert wrong == []
    lexical.stem.cache_clear()
