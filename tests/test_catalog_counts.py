"""Token counts kept beside the catalog: a new process counts what an earlier one counted
without loading the tokenizer, and gets the same figures."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pytest

from support import embedder, spec
from toolscout.cards import ToolSpec
from toolscout.discovery import derived, tokencount
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.kepttokens import token_key, token_parts, tool_tokens
from toolscout.policy import Principal

WHO = Principal.of("p", scopes=["*"])
QUERIES = ["refund an order", "find the weather in a city", "send an email to a customer"]
FORMATS = ("openai", "mcp", "anthropic")


def _tools() -> list[ToolSpec]:
    return [
        spec("shop.refund_order", "Refund an order by its number."),
        spec("shop.find_order", "Find an order by its number or the customer's email."),
        spec("weather.forecast", "The weather forecast of a city for the next days."),
        spec("mail.send", "Send an email to a customer.", aliases=["write to a customer"]),
        spec("mail.read", "Read the emails of the inbox."),
    ]


def _new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new process starts with: no tokenizer, nothing counted or known."""
    monkeypatch.setattr(tokencount, "_encoding", None)
    monkeypatch.setattr(tokencount, "_parts", OrderedDict())
    monkeypatch.setattr(tokencount, "_joins", {})
    monkeypatch.setattr(tokencount, "_known", {})


def _figures(cat: Catalog) -> list[tuple[list[str], int, int]]:
    out = []
    for q in QUERIES:
        for fmt in FORMATS:
            s = cat.discover(q, WHO, k=3, fmt=fmt, record=False)
            out.append((s.ids, s.tokens.catalog, s.tokens.injected))
    return out


def test_a_new_process_counts_from_kept_counts_without_the_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "c.db"
    _new_process(monkeypatch)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as first:
        first.add(_tools())
        counted = _figures(first)
        assert tokencount._encoding is not None  # this process counted them
        assert not first.counts_kept
    # closing kept them (a generation-free cache: counts are a function of the text)
    _new_process(monkeypatch)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as second:
        assert second.counts_kept
        assert _figures(second) == counted
        assert tokencount._encoding is None  # never loaded: every text was known
        assert not second.keep_token_counts()  # nothing new to keep


def test_kept_counts_equal_counting_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "c.db"
    _new_process(monkeypatch)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as first:
        first.add(_tools())
        _figures(first)
    _new_process(monkeypatch)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as second:
        kept = _figures(second)
    _new_process(monkeypatch)
    (tmp_path / "fresh").mkdir()
    with Catalog.open(tmp_path / "fresh" / "c.db", embedder=embedder(), log=False) as fresh:
        fresh.add(_tools())
        assert _figures(fresh) == kept


@pytest.mark.parametrize(
    "blob",
    [
        b"not json",
        b"[]",
        b'{"parts": [], "joins": {}}',
        b'{"parts": {"ab": [1, "x"]}, "joins": {}}',
        b'{"parts": {"ab": ["1", "x", "y"]}, "joins": {}}',
        b'{"parts": {}, "joins": {"x": "3"}}',
        b'{"parts": {"ab": [true, "x", "y"]}, "joins": {}}',
    ],
)
def test_damaged_kept_counts_are_counted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blob: bytes
) -> None:
    assert token_parts(blob) is None
    db = tmp_path / "c.db"
    _new_process(monkeypatch)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as first:
        first.add(_tools())
        counted = _figures(first)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as cat:
        assert cat.store.set_derived(token_key(), cat.generation, blob)  # type: ignore[attr-defined]
    _new_process(monkeypatch)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as second:
        assert not second.counts_kept
        assert _figures(second) == counted
        assert tokencount._encoding is not None  # counted again
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as third:
        assert third.counts_kept  # the second process kept good ones again


def test_kept_parts_are_found_by_their_exact_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept parts are found by a digest of the exact text: another text is counted."""
    _new_process(monkeypatch)
    tokencount.preload({tokencount.text_digest('{"a":"x"}'): (999, '{"', '"}')}, {})
    assert tokencount.count_json([{"a": "x"}]) > 999
    assert tokencount.count_json([{"a": "y"}]) < 999


def _sampled_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The figure a large entitlement gets (its size times a sample's mean count), here
    for five tools: sampled above two entitled tools, four at a time."""
    monkeypatch.setattr(derived, "EXACT_CATALOG_TOKENS", 2)
    monkeypatch.setattr(derived, "CATALOG_TOKEN_SAMPLE", 4)


def test_a_new_process_takes_the_catalog_figure_from_kept_per_tool_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new tenant's catalog figure counts a sample of its tools' renderings: kept per
    tool for the generation, a new process reads neither their schemas nor loads the
    tokenizer for it (its second request at 100k waited for both)."""
    _sampled_figures(monkeypatch)
    db = tmp_path / "c.db"
    _new_process(monkeypatch)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as first:
        first.add(_tools())
        figures = {fmt: first.entitled_tokens(WHO, fmt) for fmt in FORMATS}
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as cat:
        # the texts' parts forgotten: only the per-tool counts can answer
        assert cat.store.set_derived(token_key(), cat.generation, b'{"parts":{},"joins":{}}')  # type: ignore[attr-defined]
    _new_process(monkeypatch)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as second:
        assert {fmt: second.entitled_tokens(WHO, fmt) for fmt in FORMATS} == figures
        assert tokencount._encoding is None
        specs_read: list[str] = []
        monkeypatch.setattr(second, "specs_of", lambda ids: specs_read.extend(ids) or [])
        second.refresh().catalog_tokens.clear()
        assert second.entitled_tokens(WHO, "openai") == figures["openai"]
        assert specs_read == []  # no schema read for the sample


def test_per_tool_counts_of_another_generation_are_counted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sampled_figures(monkeypatch)
    db = tmp_path / "c.db"
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as first:
        first.add(_tools()[:4])
        first.entitled_tokens(WHO, "openai")
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as writer:
        writer.add(_tools())  # a write: names and schemas may differ now
    _new_process(monkeypatch)
    with Catalog.open(db, embedder=embedder(), log=False, prefetch=False) as second:
        figure = second.entitled_tokens(WHO, "openai")
        assert tokencount._encoding is not None  # counted: the kept counts were not used
        assert second.refresh().tool_tokens_kept == 0
    (tmp_path / "fresh").mkdir()
    with Catalog.open(tmp_path / "fresh" / "c.db", embedder=embedder(), log=False) as fresh:
        fresh.add(_tools())
        assert fresh.entitled_tokens(WHO, "openai") == figure


@pytest.mark.parametrize(
    "blob", [b"not json", b"[]", b'{"openai": []}', b'{"openai": {"a": "3"}}', b'{"x": {"a": -1}}']
)
def test_damaged_per_tool_counts_are_not_read(blob: bytes) -> None:
    assert tool_tokens(blob) is None
    assert tool_tokens(b'{"openai": {"a": 3}}') == {("a", "openai"): 3}
