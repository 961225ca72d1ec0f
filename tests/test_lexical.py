from __future__ import annotations

from toolscout.discovery.lexical import identifiers, phrase_key, terms, words


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
