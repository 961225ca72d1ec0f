"""A catalog's blend from its own multi-tool pseudo-queries (h/blend17, round twenty-three).

Not shipped: the evidence and the choice moved out of the product into
benchmarks/catalog_evidence.py (h/shape19, round twenty-five); the product orders every
catalog at ``ranker.BLEND`` and loads a calibration stored with the evidence."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from support import embedder, spec
from toolscout.discovery import calibrate as cal_mod
from toolscout.discovery import ranker
from toolscout.discovery.calibrate import BLEND, VERSION, Calibration
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.logit import Example
from toolscout.discovery.search import CALIBRATION_META
from toolscout.evaluate.fitting import fit_platt
from toolscout.settings import SearchSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from catalog_evidence import (
    BLENDS,
    blend_recall,
    catalog_blend,
    catalog_runs,
    choose_blend_margin,
    measure,
)

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
    assert catalog_blend(better_low, 0.0) == LOW
    assert catalog_blend(better_low, 0.03) == LOW
    assert catalog_blend(better_low, 0.04) == HIGH  # a difference of exactly the margin
    assert catalog_blend(better_low, 0.05) == HIGH  # not by more than the margin
    assert catalog_blend(tie, 0.0) == HIGH  # a tie is not evidence for the smaller
    assert catalog_blend(tie, -1.0) == LOW  # a margin of -1 always takes it ...
    assert catalog_blend(better_low, 1.0) == HIGH  # ... and of 1 never
    assert catalog_blend({}, -1.0) == HIGH  # no evidence: the larger
    assert catalog_blend({KEY_LOW: 0.5}, -1.0) == HIGH  # half the evidence: none
    assert catalog_blend(better_low, None) == BLEND  # not read: the one blend


#: a calibration as the base code (f2da421, round twenty-four) stored it with the choice on:
#: ``Calibration(fitted=True, n_tools=20, n_pseudo=30, blend_recall={"4": 0.6}).to_json()``
STORED_WITH_EVIDENCE = (
    '{"blend_recall": {"4": 0.6}, "fingerprint": "", "fitted": true, "n_pseudo": 30, '
    '"n_tools": 20, "none_bias": 4.2753, "orders": {}, "prior": [2.9926, 0.0528, 2.6806, '
    '1.7125, 3.8062, 1.1823, 1.3601, 0.6734, -1.2883], "prior_none": 4.2753, '
    '"pseudo_recall": {}, "seconds": 0.0, "version": 4, "weights": [2.9926, 0.0528, 2.6806, '
    "1.7125, 3.8062, 1.1823, 1.3601, 0.6734, -1.2883]}"
)


def test_a_calibration_stored_with_its_blend_evidence_loads_at_this_version() -> None:
    assert VERSION == 4  # the evidence left the product without a refit of any catalog
    loaded = Calibration.from_json(STORED_WITH_EVIDENCE)
    stored = json.loads(STORED_WITH_EVIDENCE)
    assert loaded is not None and loaded.fitted and loaded.version == VERSION
    assert list(loaded.weights) == stored["weights"] and loaded.none_bias == stored["none_bias"]
    assert (loaded.n_tools, loaded.n_pseudo) == (20, 30)
    assert "blend_recall" not in json.loads(loaded.to_json())  # not written again
    assert Calibration.from_json(loaded.to_json()) == loaded
    del stored["blend_recall"]  # as a calibration of this version stored before round 23
    assert Calibration.from_json(json.dumps(stored)) == loaded
    stored["version"] = VERSION - 1
    assert Calibration.from_json(json.dumps(stored)) is None  # another version: refit


def test_the_catalog_blend_reads_its_margin() -> None:
    evidence = {KEY_LOW: 0.53, KEY_HIGH: 0.49}
    assert catalog_blend(evidence, None) == BLEND == ranker.BLEND  # not read: the product's
    assert catalog_blend(evidence, 0.0) == LOW
    assert catalog_blend({}, 0.0) == HIGH  # an unfitted catalog has no evidence
    assert catalog_blend(evidence, 0.1) == HIGH
    # the product no longer reads or prints the evidence (it did only with the choice on)
    fitted = Calibration.from_json(STORED_WITH_EVIDENCE)
    assert fitted is not None and not hasattr(fitted, "blend")
    assert "blend" not in fitted.describe(1.0) and not hasattr(ranker, "BLEND_MARGIN")


def test_indexing_stores_no_evidence_and_the_screen_measures_it(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add([spec(tid, summary) for tid, summary in TOOLS])
        raw = cat.store.meta(CALIBRATION_META) or ""
        stored = Calibration.from_json(raw)
        assert stored is not None and stored.fitted and "blend_recall" not in json.loads(raw)
        got = cat.retriever(SearchSettings()).learned_ranker()
        assert got is not None and got.blend == BLEND  # every catalog: the one blend
        # an explicit blend in the settings wins
        forced = cat.retriever(SearchSettings(ranker_blend=8.0)).learned_ranker()
        assert forced is not None and forced.blend == 8.0
        evidence = measure(cat)["blend_recall"]
        assert set(evidence) == {KEY_LOW, KEY_HIGH}
        assert all(0.0 <= v <= 1.0 for v in evidence.values())
        # the evidence is the fold-0 ranker's (the calibration's start) on the multi-tool
        # pseudo-queries, whose runs leave the single-tool ones' as the calibration has them
        runs = catalog_runs(cat)
        assert runs is not None and len(runs.multis) > 0
        single_only = catalog_runs(cat, multi=False)
        assert single_only is not None and single_only.multis == []
        assert [e.target for e in single_only.examples] == [e.target for e in runs.examples]
        ((w0, _),) = cal_mod.fold_fits(runs.examples, cal_mod.PRIOR, cal_mod.PRIOR_NONE, 1)
        assert evidence == blend_recall(runs.multis, runs.fields, runs.idf, w0)
        assert cat.calibrate().weights == stored.weights  # measuring it refits nothing
        small = Catalog.open(tmp_path / "small.db", embedder=embedder(), log=False)
        with small:
            small.add([spec(tid, summary) for tid, summary in TOOLS[:5]])
            assert catalog_runs(small) is None  # too few tools to calibrate: no evidence
            assert measure(small) == {"blend_recall": {}, "pseudo_recall": {}}


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
