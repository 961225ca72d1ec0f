"""A catalog's blend from its own multi-tool pseudo-queries (h/blend17, round twenty-three)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import embedder, spec
from toolscout.discovery import ranker
from toolscout.discovery.calibrate import (
    BLEND,
    BLENDS,
    VERSION,
    Calibration,
)
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.logit import Example
from toolscout.discovery.search import CALIBRATION_META
from toolscout.evaluate.fitting import choose_blend_margin, fit_platt
from toolscout.settings import SearchSettings

LOW, HIGH = BLENDS
KEY_LOW, KEY_HIGH = f"{LOW:g}", f"{HIGH:g}"

TOOLS = [
    ("weather.forecast", "Weather forecast for a city: rain, temperature and wind by day."),
    ("weather.alerts", "Severe weather warnings issued for a region and its coast."),
    ("currency.convert", "Convert an amount of money between two currencies at today's rate."),
    ("stocks.quote", "Latest share price and daily change of a listed company."),
    ("maps.directions", "Driving, walking or transit directions between two addresses."),
    ("maps.geocode", "Latitude and longitude of a street address in any country."),
    ("mail.send", "Send an email message to one or more recipients with attachments."),
    ("mail.search", "Search the mailbox for messages matching sender or subject."),
    ("calendar.create_event", "Create a calendar event with attendees and a time slot."),
    ("calendar.free_busy", "Find free time slots shared by several people this week."),
    ("files.upload", "Upload a document to cloud storage and get a share link."),
    ("files.search", "Find stored documents by name or content of the text."),
    ("tickets.open", "Open a support ticket describing a customer's problem."),
    ("tickets.close", "Close a resolved support ticket with a resolution note."),
    ("orders.track", "Where a customer's parcel is and when it will arrive."),
    ("orders.refund", "Refund a customer's order payment in full or in part."),
]


def test_the_smaller_blend_only_when_the_evidence_exceeds_the_margin() -> None:
    better_low = {KEY_LOW: 0.53, KEY_HIGH: 0.49}
    tie = {KEY_LOW: 0.89, KEY_HIGH: 0.89}
    assert ranker.catalog_blend(better_low, 0.0) == LOW
    assert ranker.catalog_blend(better_low, 0.03) == LOW
    assert ranker.catalog_blend(better_low, 0.04) == HIGH  # a difference of exactly the margin
    assert ranker.catalog_blend(better_low, 0.05) == HIGH  # not by more than the margin
    assert ranker.catalog_blend(tie, 0.0) == HIGH  # a tie is not evidence for the smaller
    assert ranker.catalog_blend(tie, -1.0) == LOW  # a margin of -1 always takes it ...
    assert ranker.catalog_blend(better_low, 1.0) == HIGH  # ... and of 1 never
    assert ranker.catalog_blend({}, -1.0) == HIGH  # no evidence: the larger
    assert ranker.catalog_blend({KEY_LOW: 0.5}, -1.0) == HIGH  # half the evidence: none
    assert ranker.catalog_blend(better_low, None) == BLEND  # not read: the one blend


def test_a_calibration_keeps_its_blend_evidence_and_one_stored_without_it_loads() -> None:
    cal = Calibration(fitted=True, n_tools=20, n_pseudo=30, blend_recall={KEY_LOW: 0.6})
    back = Calibration.from_json(cal.to_json())
    assert back == cal and back is not None and back.blend_recall == {KEY_LOW: 0.6}
    stored_before = json.loads(cal.to_json())
    del stored_before["blend_recall"]  # as a calibration of this version stored before it
    loaded = Calibration.from_json(json.dumps(stored_before))
    assert loaded is not None and loaded.blend_recall == {} and loaded.weights == cal.weights
    stored_before["version"] = VERSION - 1
    assert Calibration.from_json(json.dumps(stored_before)) is None  # another version: refit


def test_the_catalog_blend_reads_the_shipped_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    evidence = {KEY_LOW: 0.53, KEY_HIGH: 0.49}
    fitted = Calibration(fitted=True, n_tools=20, n_pseudo=30, blend_recall=evidence)
    unfitted = Calibration(blend_recall=evidence)
    monkeypatch.setattr(ranker, "BLEND_MARGIN", None)
    assert fitted.blend() == BLEND
    monkeypatch.setattr(ranker, "BLEND_MARGIN", 0.0)
    assert fitted.blend() == LOW
    assert unfitted.blend() == HIGH and Calibration().blend() == HIGH
    assert "blend 4 (multi-tool pseudo recall@5 0.53 at 4, 0.49 at 32)" in fitted.describe(1.0)
    monkeypatch.setattr(ranker, "BLEND_MARGIN", 0.1)
    assert fitted.blend() == HIGH


def test_indexing_measures_the_evidence_and_the_retriever_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        monkeypatch.setattr(ranker, "BLEND_MARGIN", None)  # off: nothing measured, one blend
        cat.add([spec(tid, summary) for tid, summary in TOOLS])
        off = Calibration.from_json(cat.store.meta(CALIBRATION_META) or "")
        assert off is not None and off.fitted and off.blend_recall == {}
        got = cat.retriever(SearchSettings()).learned_ranker()
        assert got is not None and got.blend == BLEND
        monkeypatch.setattr(ranker, "BLEND_MARGIN", 0.0)  # on: indexing measures it
        cal = cat.calibrate()
        assert cal.fitted and cal.weights == off.weights  # the fit itself does not read it
        assert set(cal.blend_recall) == {KEY_LOW, KEY_HIGH}
        assert all(0.0 <= v <= 1.0 for v in cal.blend_recall.values())
        for margin in (-1.0, 1.0):
            monkeypatch.setattr(ranker, "BLEND_MARGIN", margin)
            got = cat.retriever(SearchSettings()).learned_ranker()
            assert got is not None and got.blend == (LOW if margin < 0 else HIGH)
        # an explicit blend in the settings wins over the catalog's evidence
        forced = cat.retriever(SearchSettings(ranker_blend=8.0)).learned_ranker()
        assert forced is not None and forced.blend == 8.0


Pair = tuple[float, float]


def _grid(values: dict[Pair, float], n: int = 4) -> dict[Pair, list[float]]:
    return {pair: [v] * n for pair, v in values.items()}


def test_the_margin_is_chosen_for_the_worst_set_then_the_mean_then_smaller() -> None:
    # "low" gains at the smaller blend and its evidence says so; "high" loses at it and its
    # evidence is a tie; "mid" gains a little at the smaller blend, evidence +0.02
    grids = {
        "low": _grid({(LOW, 0.5): 0.9, (HIGH, 0.5): 0.8}),
        "high": _grid({(LOW, 0.5): 0.7, (HIGH, 0.5): 0.8}),
        "mid": _grid({(LOW, 0.5): 0.82, (HIGH, 0.5): 0.8}),
    }
    parts = {n: [0.75] * 4 for n in grids}
    evidence = {
        "low": {KEY_LOW: 0.6, KEY_HIGH: 0.5},
        "high": {KEY_LOW: 0.5, KEY_HIGH: 0.5},
        "mid": {KEY_LOW: 0.52, KEY_HIGH: 0.5},
    }
    margins = (-1.0, 0.0, 0.01, 0.05, 1.0)
    # every set: "high" must stay at the larger blend (-1 would cost it 0.05 below its
    # part); 0 and 0.01 both keep it, 0 has the larger mean (mid at the smaller blend)
    assert choose_blend_margin(grids, parts, evidence, None, margins, (0.5,)) == (0.0, 0.5)
    # without "high", every margin that gives both others the smaller blend ties: the smallest
    assert choose_blend_margin(grids, parts, evidence, "high", margins, (0.5,)) == (-1.0, 0.5)
    with pytest.raises(ValueError, match="no blend evidence for \\['mid'\\]"):
        choose_blend_margin(grids, parts, {"low": {}, "high": {}}, None, margins, (0.5,))
    with pytest.raises(ValueError, match="at least one set besides"):
        choose_blend_margin({"low": grids["low"]}, parts, evidence, "low", margins, (0.5,))


def test_the_platt_step_takes_each_sets_own_blend() -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    by_set = {
        name: [Example(rng.normal(size=(6, len(ranker.FIXED_MIX))), int(t % 6)) for t in range(40)]
        for name in ("a", "b")
    }
    w, b = tuple(rng.normal(size=len(ranker.FIXED_MIX))), 1.0
    same = fit_platt(by_set, None, w, b, {"a": LOW, "b": LOW})
    assert same == fit_platt(by_set, None, w, b, LOW)
    assert fit_platt(by_set, None, w, b, {"a": LOW, "b": HIGH}) != same
