"""Behaviour every surface shares: pinned tools, abstention, exact names, cache-stable
tool lists (discovery/pinned.py, abstain.py, named.py; adapters/toollist.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from _adapters_kit import SUPPORT, open_demo
from toolscout import PolicyConfig, Principal, Toolscout
from toolscout.adapters.toollist import ToolList, serialise
from toolscout.discovery.catalog import Catalog
from toolscout.errors import ConfigError
from toolscout.settings import SearchSettings

UNSERVED = "write a haiku about autumn leaves"


@pytest.fixture(scope="module")
def ts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolscout]:
    with open_demo(tmp_path_factory) as opened:
        yield opened


# -- pinned ------------------------------------------------------------------------
def test_pinned_tools_are_sent_and_counted_apart(ts: Toolscout) -> None:
    found = ts.discover(SUPPORT, "where is order 94218", k=3, fmt="anthropic")
    assert found.pinned == ("docs.search_docs",)
    assert [s["name"] for s in found.pinned_schemas] == ["docs_search_docs"]
    assert found.tokens.pinned > 0 and found.names["docs_search_docs"] == "docs.search_docs"
    assert found.to_dict()["tokens"]["pinned"] == found.tokens.pinned


def test_pinning_never_entitles(ts: Toolscout) -> None:
    policy = ts.catalog.policy
    try:
        ts.catalog.set_policy(
            replace(policy, pinned=("billing.issue_full_refund", "docs.search_docs"),
                    pinned_roles={"support_agent": ["orders.find_order"]})
        )  # fmt: skip
        found = ts.discover(SUPPORT, "where is order 94218", k=3)
        assert found.pinned == ("docs.search_docs", "orders.find_order")
        lead = Principal.of("bob", "acme", roles=["billing_admin"])
        # the admin may use the refund tool; it has no docs scope, so no docs pin
        assert ts.discover(lead, "where is order 94218").pinned == ("billing.issue_full_refund",)
    finally:
        ts.catalog.set_policy(policy)


def test_pinned_tools_persist_with_the_policy(tmp_path_factory: pytest.TempPathFactory) -> None:
    db = tmp_path_factory.mktemp("pinned") / "p.db"
    policy = PolicyConfig(roles={"r": ("x:read",)}, pinned=("a.b",), pinned_roles={"r": ("c.d",)})
    with Catalog.open(db) as cat:
        cat.set_policy(policy)
    with Catalog.open(db) as cat:
        assert cat.policy == policy
    assert PolicyConfig.from_dict(policy.to_dict()) == policy
    assert "pinned" not in PolicyConfig().to_dict()  # unchanged for policies without pins


@pytest.mark.parametrize(
    ("doc", "field"),
    [({"pinned": "a.b"}, "'pinned'"), ({"pinned_roles": {"r": "a.b"}}, "'pinned_roles'"),
     ({"pinned": [""]}, "'pinned'")],
)  # fmt: skip
def test_a_bad_pinned_list_is_refused_by_name(doc: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        PolicyConfig.from_dict(doc)


# -- abstention --------------------------------------------------------------------
def test_abstains_with_reason_and_confidence(ts: Toolscout) -> None:
    strict = ts.catalog.settings.but(abstain_below=0.99)
    found = ts.catalog.discover(UNSERVED, SUPPORT, k=5, settings=strict)
    assert found.abstained == "no_tool_fits" and found.tools == () and found.schemas == ()
    assert 0.0 < found.confidence < 0.99 and found.low_confidence
    assert found.pinned == ("docs.search_docs",)  # pinned tools are still sent
    body = found.to_dict()
    assert body["abstained"] == "no_tool_fits" and body["confidence"] == round(found.confidence, 4)
    never = ts.catalog.discover(UNSERVED, SUPPORT, k=5, settings=strict.but(abstain_below=0.0))
    assert never.abstained is None and len(never.tools) == 5


def test_a_named_tool_never_abstains(ts: Toolscout) -> None:
    strict = ts.catalog.settings.but(abstain_below=1.0)
    found = ts.catalog.discover("select:find_order", SUPPORT, settings=strict)
    assert found.abstained is None and found.ids[0] == "orders.find_order"
    mention = ts.catalog.discover("run orders.find_order on 94218", SUPPORT, settings=strict)
    assert mention.abstained is None and "orders.find_order" in mention.ids


def test_nothing_entitled_is_said(ts: Toolscout) -> None:
    found = ts.discover(Principal.of("nobody", "acme"), "where is order 94218")
    assert found.abstained == "nothing_entitled" and found.tools == ()


def test_unmatched_means_no_shown_tool_shares_a_known_word() -> None:
    from toolscout.cards import make_spec
    from toolscout.discovery.abstain import unmatched
    from toolscout.discovery.calibrate import FieldTerms
    from toolscout.discovery.lexical import terms

    cards = [make_spec({"id": i, "name": i, "summary": s}).card for i, s in [
        ("find_order", "Look up an order by its id"),
        ("send_email", "Send an email message to a customer"),
    ]]  # fmt: skip
    fields = FieldTerms.of(cards)
    poem = terms("write a poem message")  # "message" is a word of the catalog
    assert unmatched(poem, ["find_order"], fields, any_language=True)
    assert not unmatched(poem, ["find_order", "send_email"], fields, any_language=True)
    # no word the catalog uses at all: another language, if the model reads others
    french = terms("écris un poème")
    assert not unmatched(french, ["find_order"], fields, any_language=True)
    assert unmatched(french, ["find_order"], fields, any_language=False)
    assert not unmatched([], ["find_order"], fields, any_language=False)


def test_an_unmatched_shortlist_abstains_below_its_own_threshold(
    ts: Toolscout, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolscout.discovery import abstain

    odd = "juggle flaming pineapples blindfolded"  # no demo card has any of these words
    lenient = ts.catalog.settings.but(abstain_below=0.001)  # the confidence alone: never
    monkeypatch.setattr(abstain, "UNMATCHED_BELOW", 0.0)
    found = ts.catalog.discover(odd, SUPPORT, k=5, settings=lenient)
    assert found.abstained is None and len(found.tools) == 5
    monkeypatch.setattr(abstain, "UNMATCHED_BELOW", 1.0)
    found = ts.catalog.discover(odd, SUPPORT, k=5, settings=lenient)
    assert found.abstained == "no_tool_fits" and found.tools == ()
    served = ts.catalog.discover("where is order 94218", SUPPORT, k=5, settings=lenient)
    assert served.abstained is None and served.ids[0] == "orders.find_order"
    off = ts.catalog.discover(odd, SUPPORT, k=5, settings=lenient.but(abstain_below=0.0))
    assert off.abstained is None  # abstention off: off


def test_abstain_below_is_checked() -> None:
    with pytest.raises(ConfigError, match="abstain_below"):
        SearchSettings(abstain_below=1.5)


# -- exact names -------------------------------------------------------------------
@pytest.mark.parametrize(
    "query",
    ["select:find_order", "orders.find_order", "orders_find_order", "find_order",
     "mcp__orders__find_order", "orders__find_order", "SELECT: orders.find_order"],
)  # fmt: skip
def test_exact_names_come_first(ts: Toolscout, query: str) -> None:
    found = ts.discover(SUPPORT, query, k=3)
    assert found.ids[0] == "orders.find_order" and found.confidence == 1.0
    assert found.tools[0].exact == "name"


def test_select_several_and_never_an_unentitled_one(ts: Toolscout) -> None:
    found = ts.discover(SUPPORT, "select:search_customers,find_order", k=3)
    assert found.ids[:2] == ["customers.search_customers", "orders.find_order"]
    refused = ts.discover(SUPPORT, "select:billing.issue_full_refund", k=3)
    assert "billing.issue_full_refund" not in refused.ids


def test_a_name_already_shown_is_returned_again(ts: Toolscout) -> None:
    first = ts.discover(SUPPORT, "select:find_order", conversation="c1")
    again = ts.discover(SUPPORT, "select:find_order", conversation="c1")
    assert first.ids[0] == again.ids[0] == "orders.find_order"


# -- cache-stable tool lists -------------------------------------------------------
def test_tool_list_only_appends_and_keeps_bytes() -> None:
    tools = ToolList()
    assert tools.extend([("a", {"name": "a", "x": [1]}), ("b", {"name": "b"})]) == ["a", "b"]
    before = serialise(tools.tools)
    changed = {"name": "a", "x": [2]}  # a later rendering of a tool already sent
    assert tools.extend([("c", {"name": "c"}), ("a", changed)]) == ["c"]
    after = serialise(tools.tools)
    assert after.startswith(before[:-1]) and after != before
    assert [t["name"] for t in tools.tools] == ["a", "b", "c"] and tools.tools[0]["x"] == [1]
