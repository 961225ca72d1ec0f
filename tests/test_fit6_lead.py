"""The shipped lexical lead margin (round fourteen's full-set fit, ranker.LEAD_MARGIN): a
catalog whose pseudo-queries put BM25 only slightly above the learned ranker (as
toolalpaca's +0.036) is ordered by the ranker; a clearly larger gap still leads."""

from __future__ import annotations

from toolscout.discovery.calibrate import Calibration, leads_lexical


def test_a_small_pseudo_query_gap_no_longer_hands_the_order_to_bm25() -> None:
    slight = {"bm25": 0.893, "dense": 0.75, "ranker": 0.857}
    assert not leads_lexical(slight)
    fitted = Calibration(fitted=True, n_pseudo=10, n_tools=20, pseudo_recall=slight)
    assert not fitted.leads_lexical()
    assert "the learned ranker orders" in fitted.describe()


def test_a_clear_gap_still_leads_by_default() -> None:
    clear = {"bm25": 0.72, "dense": 0.42, "ranker": 0.66}
    assert leads_lexical(clear)
    fitted = Calibration(fitted=True, n_pseudo=10, n_tools=20, pseudo_recall=clear)
    assert fitted.leads_lexical() and "leans lexical (BM25 leads" in fitted.describe()
