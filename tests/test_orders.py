"""The order chosen per catalog from its own pseudo-queries (discovery/orders.py)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from support import embedder, spec
from toolscout import settings as settings_module
from toolscout.discovery.calibrate import (
    FEATURES,
    PRIOR,
    PRIOR_NONE,
    Calibration,
    FieldTerms,
    Ranker,
    ordered,
)
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.lexical import words
from toolscout.discovery.orders import (
    _JOINERS,
    COVER,
    FLOOR,
    ORDERS,
    choose,
    covered,
    describe,
    multi_queries,
)
from toolscout.discovery.parts import request_parts
from toolscout.discovery.search import Candidate, Retrieval, keep_list_firsts
from toolscout.errors import ConfigError
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits

TOOLS = [
    ("weather.forecast", "Weather forecast for a city: rain, temperature and wind by day."),
    ("currency.convert", "Convert an amount of money between two currencies at today's rate."),
    ("stocks.quote", "Latest share price and daily change of a listed company."),
    ("maps.directions", "Driving, walking or transit directions between two addresses."),
    ("mail.send", "Send an email message to one or more recipients."),
    ("calendar.create_event", "Create a calendar event with attendees and a time slot."),
    ("files.upload", "Upload a document to cloud storage and get a share link."),
    ("tickets.open", "Open a support ticket describing a customer's problem."),
    ("orders.refund", "Refund a customer's order payment in full or in part."),
    ("hr.payslip", "Download an employee's monthly payslip as a document."),
    ("db.query", "Run a read-only SQL query against the analytics warehouse."),
    ("translate.text", "Translate a passage of text into another language."),
    ("news.headlines", "Top news headlines for a country or topic."),
    ("recipes.find", "Find cooking recipes by ingredient or dish name."),
    ("taxi.book", "Book a taxi ride from a pick-up point to a destination."),
    ("flights.search", "Search flights between two airports on a date."),
]


def _specs() -> list:  # type: ignore[type-arg]
    return [spec(tid, summary) for tid, summary in TOOLS]


def test_the_settings_spell_the_same_orders() -> None:
    assert settings_module._ORDERS == ORDERS
    assert SearchSettings(ranker_order="bm25").ranker_order == "bm25"
    assert SearchSettings(ranker_order="ranker/bm25").ranker_order == "ranker/bm25"
    for bad in ("cosine", "ranker/cosine", "ranker/bm25/lead"):
        with pytest.raises(ConfigError, match="ranker_order must be one of"):
            SearchSettings(ranker_order=bad)
    with pytest.raises(ConfigError, match="order_margin must be within"):
        SearchSettings(order_margin=2.0)


def test_multi_tool_pseudo_queries_are_seeded_joined_and_masked() -> None:
    specs = _specs()
    first, again = multi_queries(specs, 1), multi_queries(specs, 1)
    assert first == again and first != multi_queries(specs, 2)
    assert len(first) > 40
    by_id = {s.id: s for s in specs}
    for m in first:
        assert 2 <= len(m.gold) <= 3 and len(set(m.gold)) == len(m.gold)
        text = set(words(m.text))
        for g in m.gold:  # the tools' names are not given away
            assert not set(words(by_id[g].card.name)) & text - set(words(by_id[g].card.summary))
    # one clause a tool, joined as steps
    assert all(sum(m.text.count(j) for j in _JOINERS) == len(m.gold) - 1 for m in first)
    assert multi_queries(specs[:4], 1) == []  # too few tools to join


def test_choose_leaves_the_ranker_only_beyond_the_margin() -> None:
    evidence = {
        "single": {"ranker": 0.80, "lead": 0.81, "fixed": 0.78, "bm25": 0.70},
        "multi": {"ranker": 0.40, "lead": 0.50, "fixed": 0.35, "bm25": 0.55},
    }
    assert choose(evidence, "multi", None) == "ranker"  # off
    assert choose(evidence, "multi", 0.1) == "bm25"
    assert choose(evidence, "multi", 0.15) == "ranker"  # 0.15 is not beaten by more
    assert choose(evidence, "single", 0.0) == "lead"
    assert choose(evidence, "single", 0.02) == "ranker"
    assert choose({}, "single", 0.0) == "ranker"  # no evidence
    tie = {"single": {"ranker": 0.5, "lead": 0.6, "fixed": 0.6}}
    assert choose(tie, "single", 0.0) == "lead"  # on a tie the earlier order
    assert describe(evidence, 0.1) == "order: one-part requests by ranker, several-part by bm25"
    assert describe(evidence, None) == ""


def test_each_order_puts_its_own_signal_first() -> None:
    # three candidates: the first best by BM25, the second by the cosine, the third by
    # the learned score's name match
    x = np.zeros((3, len(FEATURES)))
    col = {f: i for i, f in enumerate(FEATURES)}
    x[:, col["lexical"]] = [1.0, 0.2, 0.1]
    x[:, col["cosine_norm"]] = [0.0, 1.0, 0.5]
    x[:, col["name"]] = [0.0, 0.0, 1.0]
    w = [5.0 if f == "name" else 0.0 for f in FEATURES]
    assert int(np.argmax(ordered(x, w, 0.0, "ranker"))) == 2
    assert int(np.argmax(ordered(x, w, 0.0, "fixed"))) == 1  # 0.7 cosine + 0.3 BM25
    assert int(np.argmax(ordered(x, w, 0.0, "bm25"))) == 0
    assert int(np.argmax(ordered(x, w, 0.0, "lead"))) == 2  # a lead of 4 < the name's 5
    with pytest.raises(ValueError, match="unknown order 'cosine'"):
        ordered(x, w, 0.0, "cosine")


def test_the_calibration_measures_every_order_and_the_retriever_applies_the_choice(
    tmp_path: Path,
) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(_specs())  # the choice off: the orders are not measured (index time)
        assert cat.calibrate().fitted and cat.calibrate().orders == {}
    on_settings = SearchSettings(order_margin=1.0)
    with Catalog.open(
        tmp_path / "o.db", embedder=embedder(), log=False, settings=on_settings
    ) as cat:
        cat.add(_specs())
        cal = cat.calibrate()
        assert cal.fitted and set(cal.orders) >= {"single", "multi", "multi_complete"}
        for shape in ("single", "multi"):
            assert set(cal.orders[shape]) == set(ORDERS)
            assert all(0.0 <= v <= 1.0 for v in cal.orders[shape].values())
        again = Calibration.from_json(cal.to_json())
        assert again is not None and again.orders == cal.orders
        # off by default: the ranker orders, and the label says what the lead does
        assert cat.retriever(SearchSettings()).learned_ranker().orders == ("ranker", "ranker")  # type: ignore[union-attr]
        forced = cat.retriever(SearchSettings(ranker_order="fixed")).learned_ranker()
        assert forced is not None and forced.orders == ("fixed", "fixed") and forced.lead == 0.0
        on = cat.retriever(SearchSettings(order_margin=-1.0)).learned_ranker()
        # a margin of -1 takes the best rival of the ranker's, whatever the ranker scored
        best = {s: max(ORDERS[1:], key=cal.orders[s].__getitem__) for s in ("single", "multi")}
        assert on is not None and on.orders == (best["single"], best["multi"])
        assert "order: one-part requests by" in cal.describe(order_margin=-1.0)
        assert "order:" not in cal.describe()


def test_a_request_in_parts_takes_the_multi_order() -> None:
    from toolscout.discovery.calibrate import FieldTerms

    fields = FieldTerms.of([s.card for s in _specs()])

    def idf(_: str) -> float:
        return 1.0

    lex = Hits(["mail.send", "files.upload"], [9.0, 0.5])
    dense = Hits(["files.upload", "mail.send"], [0.9, 0.1])
    r = Ranker(PRIOR, PRIOR_NONE, fields, idf, blend=4.0, orders=("ranker", "bm25"))
    whole, _ = r.rank(["send"], lex, dense, parts=0)
    several, p = r.rank(["send"], lex, dense, parts=3)
    assert whole[0][0] == "files.upload" and several[0][0] == "mail.send"
    assert 0.0 < p < 1.0


def test_a_request_in_parts_on_one_task_keeps_the_one_part_order(tmp_path: Path) -> None:
    """The parts of a long request that all point at one tool (a task told at length) do
    not switch it to the several-part order; parts that find different tools do."""
    from toolscout.evaluate.harness import eval_principal

    one_task = (
        "My parcel from the online shop has still not arrived after two weeks. I would like "
        "my money back for the order, and a full refund of the payment to my card please."
    )
    several = (
        "Send an email message to my team about the launch. Then upload the slides document "
        "to cloud storage and get a share link, and then book a taxi ride to the airport."
    )
    assert len(request_parts(one_task)) > 1 and len(request_parts(several)) > 1
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(_specs())
        who = eval_principal(cat)

        def ids(query: str, order: str) -> list[str]:
            plain = SearchSettings(ranker_order=order, exact_hits=False, prerequisites=False)
            return list(cat.discover(query, who, k=5, settings=plain).ids)

        assert ids(one_task, "bm25/bm25") != ids(one_task, "ranker")  # the orders differ here
        assert ids(one_task, "ranker/bm25") == ids(one_task, "ranker")
        assert ids(several, "ranker/bm25") == ids(several, "bm25/bm25")


def test_covered_places_each_missing_first_at_the_end_of_the_top() -> None:
    order = [4, 3, 2, 1, 0, 5, 6]
    score = [0.1, 0.5, 0.6, 0.7, 0.9, 0.05, 0.01]  # log-scale, descending along ``order``
    same, kept = covered(order, score, [4, 2], 5)  # both already in the top five
    assert same == order and kept == score
    new, adj = covered(order, score, [6, 5, 6], 5)  # twice the same one counts once
    assert new == [4, 3, 2, 6, 5, 1, 0]
    assert new[:5] == [4, 3, 2, 6, 5] and set(new) == set(order)
    assert all(adj[a] > adj[b] for a, b in pairwise(new))  # descending
    assert adj[4] == score[4] and adj[3] == score[3] and adj[2] == score[2]  # the first kept
    one, _ = covered(order, score, [6, 99], 3)  # an index outside the pool is ignored
    assert one == [4, 3, 6, 2, 1, 0, 5]
    with pytest.raises(ValueError, match="at >= 1"):
        covered(order, score, [6], 0)


def _ranker_case() -> tuple[FieldTerms, Callable[[str], float]]:
    fields = FieldTerms.of([s.card for s in _specs()])

    def idf(_: str) -> float:
        return 1.0

    return fields, idf


def test_the_safety_floor_hands_an_unsure_pool_to_the_fixed_fusion() -> None:
    fields, idf = _ranker_case()
    # BM25 far apart, cosines close: the learned score follows BM25, the fixed fusion's
    # 0.7 × min-max cosine the dense list's first
    lex = Hits(["mail.send", "files.upload"], [1.0, 0.1])
    dense = Hits(["files.upload", "mail.send"], [0.5, 0.45])
    plain = Ranker(PRIOR, PRIOR_NONE, fields, idf)
    ranked, p = plain.rank(["send"], lex, dense)
    assert FLOOR == 0.0 and ranked[0][0] == "mail.send"
    above = Ranker(PRIOR, PRIOR_NONE, fields, idf, floor=p / 2)
    assert above.rank(["send"], lex, dense) == (ranked, p)  # sure enough: unchanged
    below = Ranker(PRIOR, PRIOR_NONE, fields, idf, floor=1.0)
    floored, p_floor = below.rank(["send"], lex, dense)
    assert floored[0][0] == "files.upload"  # the fixed fusion's first
    assert 0.0 < p_floor < p  # the fitted model's probability of the new first
    assert floored[0][1] == 1.0 and all(0.0 < r[1] <= 1.0 for r in floored)


def test_the_coverage_rule_keeps_the_lists_firsts_in_the_top(tmp_path: Path) -> None:
    names = [t for t, _ in TOOLS]
    cands = [Candidate(t, fused=1.0 - i / 20) for i, t in enumerate(names)]
    # BM25's first ranks 9th, dense's first ranks 1st: only BM25's moves, to the 5th place
    out = Retrieval(cands, 0.5, False, 0.7, lexical_ids=[names[8], names[0]],
                    dense_ids=[names[0], names[1]])  # fmt: skip
    got = keep_list_firsts(out, 5)
    assert [c.id for c in got[:5]] == [*names[:4], names[8]]
    assert [c.id for c in got[5:9]] == names[4:8] and len(got) == len(cands)
    assert got[3].fused > got[4].fused > got[5].fused  # it scores just under the 4th
    out.dense_ids = [names[12]]  # two missing: the ranker keeps its first three
    got = keep_list_firsts(out, 5)
    assert [c.id for c in got[:5]] == [*names[:3], names[8], names[12]]
    # the settings reach the retriever; off by default; bad values refused
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(_specs())
        off = cat.retriever(SearchSettings())
        assert off.learned_ranker().floor == FLOOR == 0.0  # type: ignore[union-attr]
        assert off.settings.ranker_cover == COVER == 0
        on = cat.retriever(SearchSettings(ranker_floor=0.3, ranker_cover=5)).learned_ranker()
        assert on is not None and on.floor == 0.3
    with pytest.raises(ConfigError, match="ranker_floor"):
        SearchSettings(ranker_floor=1.5)
    with pytest.raises(ConfigError, match="ranker_cover"):
        SearchSettings(ranker_cover=-1)
