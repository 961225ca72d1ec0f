"""Skipping the query encoder when the lexical answer is decisive (discovery/skip.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import CountingEmbedder as Counting
from support import spec
from toolscout.discovery import skip
from toolscout.discovery.catalog import Catalog
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits


def test_the_margin_reads_bm25s_first_two_scores() -> None:
    assert skip.lexical_margin(Hits()) == 0.0
    assert skip.lexical_margin(Hits(["a"], [3.0])) == 1.0
    assert skip.lexical_margin(Hits(["a", "b"], [4.0, 1.0])) == pytest.approx(0.75)
    assert skip.lexical_margin(Hits(["a", "b"], [2.0, 2.0])) == 0.0


def test_the_rule_skips_on_a_named_tool_or_a_clear_bm25_winner() -> None:
    rule = skip.SkipRule(on_exact=True, margin=0.6)
    close = Hits(["a", "b"], [2.0, 1.9])
    assert skip.reason({"a": "name"}, close, rule) == "exact"
    assert skip.reason({}, Hits(["a", "b"], [5.0, 1.0]), rule) == "margin"
    assert skip.reason({}, close, rule) == ""
    assert skip.reason({}, Hits(), rule) == ""
    never = skip.SkipRule(on_exact=False, margin=None)
    assert skip.reason({"a": "name"}, Hits(["a"], [5.0]), never) == ""


def test_bm25_runs_first_only_for_a_margin_rule() -> None:
    assert skip.needs_lexical(skip.SkipRule(margin=0.5))
    assert not skip.needs_lexical(skip.SkipRule(on_exact=True, margin=None))


def test_the_rule_is_looked_at_only_when_on_with_both_retrievers_on() -> None:
    assert not skip.applies(SearchSettings())  # off by default (toolbench loses recall)
    assert skip.applies(SearchSettings(encoder_skip=True))
    assert not skip.applies(SearchSettings(encoder_skip=True, dense=False))
    assert not skip.applies(SearchSettings(encoder_skip=True, lexical=False))


TOOLS = [
    spec("billing.refund_invoice", "Refund a paid invoice to the customer's card."),
    spec("billing.send_invoice", "Email an invoice to the customer."),
    spec("crm.find_contact", "Look up a contact in the CRM by name or email."),
    spec("crm.update_contact", "Change a contact's details in the CRM."),
    spec("ops.restart_server", "Restart a server in the staging or production fleet."),
    spec("ops.scale_service", "Change how many instances of a service run."),
    spec("docs.search_pages", "Full-text search over the documentation pages."),
    spec("hr.request_leave", "File a request for paid time off."),
    spec("shop.cancel_order", "Cancel an order that has not shipped yet."),
    spec("shop.track_parcel", "Where a shipped parcel is now."),
    spec("it.reset_password", "Reset a user's password and email a link."),
]


def test_a_request_naming_a_tool_is_answered_without_the_encoder(tmp_path: Path) -> None:
    counting = Counting()
    who = Principal.of("u", scopes=["*"])
    with Catalog.open(tmp_path / "c.db", embedder=counting, log=False, prefetch=False) as cat:
        cat.add(TOOLS)
        counting.texts.clear()
        on = SearchSettings(encoder_skip=True)
        named = cat.discover("please run billing.refund_invoice for order 7", who, settings=on)
        assert named.trace.encoder_skipped == "exact"
        assert named.ids[0] == "billing.refund_invoice"
        assert counting.texts == []  # the encoder never ran
        same = cat.discover("please run billing.refund_invoice for order 9", who)
        assert same.trace.encoder_skipped == "" and counting.texts  # the default runs it
        assert same.ids[0] == "billing.refund_invoice"


def test_an_undecided_request_is_encoded(tmp_path: Path) -> None:
    counting = Counting()
    who = Principal.of("u", scopes=["*"])
    with Catalog.open(tmp_path / "c.db", embedder=counting, log=False, prefetch=False) as cat:
        cat.add(TOOLS)
        counting.texts.clear()
        # no tool's words, so BM25 has nothing decisive: the paraphrase needs the encoder
        on = SearchSettings(encoder_skip=True)
        vague = cat.discover("my package has not arrived, where is it", who, settings=on)
        assert vague.trace.encoder_skipped == ""
        assert counting.texts
