"""The confidence a shortlist reports: a calibrated chance that its first tool is right."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from support import embedder
from test_calibrate import _specs
from toolscout.discovery.calibrate import (
    CONFIDENCE,
    CONFIDENCE_INPUTS,
    MAX_SHIFT,
    SHIFT_META,
    ConfidenceShift,
    FieldTerms,
    confidence,
    confidence_inputs,
    fit_confidence,
    fit_shift,
    idf_of,
)
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.confidence import (
    CONFIDENCE_SKIPPED,
    DENSE_INPUTS,
    fit_skipped_confidence,
)
from toolscout.policy import Principal
from toolscout.settings import SearchSettings

ALL = Principal.of("u", scopes=["*"])


@dataclass
class Cand:
    id: str
    fused: float = 1.0
    exact: str = ""
    lexical: float = 1.0
    dense: float = 0.5


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    cat = Catalog.open(tmp_path_factory.mktemp("conf") / "c.db", embedder=embedder(), log=False)
    cat.add(_specs())
    return cat


def test_a_generic_name_mentioned_is_not_a_sure_thing(catalog: Catalog) -> None:
    # three tools are named "search": the mention says little about which one is meant
    got = catalog.discover("search", ALL, k=3)
    assert {t.exact for t in got.tools} == {"name"}
    assert got.confidence < 0.8, got.confidence


def test_an_unambiguous_id_mention_stays_confident(catalog: Catalog) -> None:
    got = catalog.discover("call calendar.create_event for Friday", ALL, k=3)
    assert got.ids[0] == "calendar.create_event" and got.tools[0].exact == "id"
    assert got.confidence > 0.9 and not got.low_confidence


def test_the_fixed_fusions_keep_their_heuristic(catalog: Catalog) -> None:
    got = catalog.discover("search", ALL, k=3, settings=SearchSettings(fusion="weighted"))
    assert got.confidence == 1.0


def test_inputs_of_an_exact_identifier_mention() -> None:
    specs = _specs()
    fields = FieldTerms.of(s.card for s in specs)
    df: dict[str, int] = {}
    for s in specs:
        for t in fields.name[s.id] | fields.summary[s.id]:
            df[t] = df.get(t, 0) + 1
    idf = idf_of(df, len(specs))
    ranked = [Cand("mail.search"), Cand("files.search", fused=math.exp(-2.0))]
    shown = [Cand("mail.search", exact="id"), ranked[1]]
    exact = {"mail.search": "id", "files.search": "name"}
    x = dict(
        zip(
            CONFIDENCE_INPUTS,
            confidence_inputs(
                "run mail.search now", ["run", "mail", "search"], ranked, 0.5, shown, exact,
                fields, idf,
            ),
            strict=True,
        )
    )  # fmt: skip
    assert x["bias"] == 1.0 and x["logit"] == pytest.approx(0.0)
    assert x["exact"] == 1.0 and x["exact_ident"] == 1.0 and x["exact_agrees"] == 1.0
    assert x["shown_gap"] == pytest.approx(0.0)
    assert x["margin"] == pytest.approx(2.0 / 8)
    assert x["mentions"] == pytest.approx(math.log(3))
    # a plain-word mention of the same tool is not an identifier; the ranker preferred another
    x2 = confidence_inputs(
        "search my mail", ["search", "mail"], ranked[::-1], 0.5, shown, exact, fields, idf
    )
    named = dict(zip(CONFIDENCE_INPUTS, x2, strict=True))
    assert named["exact_ident"] == 0.0 and named["exact_agrees"] == 0.0
    assert named["shown_gap"] == pytest.approx(0.0)  # its own fused score is relative to best


def test_nothing_shown_has_no_exact_inputs() -> None:
    fields = FieldTerms.of([])
    x = confidence_inputs("q", [], [], 0.2, [], {}, fields, idf_of({}, 1))
    assert x[0] == 1.0 and x[1] == pytest.approx(math.log(0.2 / 0.8))
    assert all(v == 0.0 for v in x[2:])


def test_the_shipped_model_rises_with_the_ranker_probability() -> None:
    assert len(CONFIDENCE) == len(CONFIDENCE_INPUTS)
    base = [1.0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0.3, 0.5, 0.0, 1.0, 0.7]
    lo = confidence([*base[:1], -3.0, *base[2:]])
    hi = confidence([*base[:1], 3.0, *base[2:]])
    assert 0.0 < lo < 0.3 < 0.7 < hi < 1.0


def test_fit_confidence_recovers_a_known_model() -> None:
    rng = np.random.default_rng(7)
    x = np.c_[np.ones(4000), rng.normal(size=(4000, 2))]
    truth = np.array([-0.5, 2.0, -1.0])
    y = (rng.random(4000) < 1 / (1 + np.exp(-(x @ truth)))).astype(np.float64)
    beta = fit_confidence(x, y, np.ones(4000), l2=0.0)
    assert np.allclose(beta, truth, atol=0.2), beta
    # weights count: the same rows weighted to favour positives move the bias up
    heavier = fit_confidence(x, y, np.where(y > 0, 3.0, 1.0), l2=0.0)
    assert heavier[0] > beta[0] + 0.5


def test_fit_confidence_per_catalog_bias_ships_the_median() -> None:
    """Shared weights, a bias per catalog: an outlier catalog's base rate does not move
    the bias shipped (the median), where a pooled fit is dragged towards it."""
    rng = np.random.default_rng(11)
    biases = (0.5, 0.2, 0.4, -3.0)  # the last: a catalog whose first tool is rarely gold
    xs, ys, gs = [], [], []
    for g, b in enumerate(biases):
        x = np.c_[np.ones(3000), rng.normal(size=(3000, 2))]
        z = b + x[:, 1:] @ np.array([1.5, -0.7])
        xs.append(x)
        ys.append((rng.random(3000) < 1 / (1 + np.exp(-z))).astype(np.float64))
        gs.append(np.full(3000, g))
    x, y, groups = np.vstack(xs), np.concatenate(ys), np.concatenate(gs)
    mixed = fit_confidence(x, y, np.ones(len(y)), l2=0.0, groups=groups)
    assert len(mixed) == 3
    assert abs(mixed[0] - 0.3) < 0.2, mixed  # median of 0.5, 0.2, 0.4, -3.0 is 0.3
    assert np.allclose(mixed[1:], [1.5, -0.7], atol=0.15), mixed
    pooled = fit_confidence(x, y, np.ones(len(y)), l2=0.0)
    assert pooled[0] < mixed[0] - 0.3


def test_fit_shift_recovers_a_known_bias_and_keeps_the_order() -> None:
    rng = np.random.default_rng(3)
    z = rng.normal(size=3000)
    truth = -1.2  # the shared model is over-confident on this catalog by 1.2 logits
    right = rng.random(3000) < 1 / (1 + np.exp(-(z + truth)))
    reported = 1 / (1 + np.exp(-z))
    shift = fit_shift(list(reported), list(right))
    assert abs(shift - truth) < 0.15, shift
    fixed = [confidence([1.0], model=[float(v)], shift=shift) for v in z[:50]]
    assert np.array_equal(np.argsort(fixed), np.argsort(z[:50]))  # the order is kept
    # few outcomes move it little (the prior); none, not at all; mismatched input refused
    assert abs(fit_shift([0.9] * 3, [False] * 3)) < abs(fit_shift([0.9] * 300, [False] * 300))
    assert fit_shift([0.9] * 300, [False] * 300) >= -MAX_SHIFT
    assert fit_shift([], []) == 0.0
    with pytest.raises(ValueError, match="one outcome per confidence"):
        fit_shift([0.5], [])


# -- a ranking made without the query encoder (discovery/skip.py) ----------------------------
SKIPPING = SearchSettings(encoder_skip=True)


def test_an_unambiguous_id_mention_stays_confident_without_the_encoder(catalog: Catalog) -> None:
    """The request that reported 0.35 when ranked lexical only under the hybrid model: with
    the skipped rankings' own model it reports what a named id deserves."""
    got = catalog.discover("call calendar.create_event for Friday", ALL, k=3, settings=SKIPPING)
    assert got.trace.encoder_skipped == "exact"
    assert got.ids[0] == "calendar.create_event" and got.tools[0].exact == "id"
    assert got.confidence > 0.9 and not got.low_confidence


def test_a_generic_name_mentioned_without_the_encoder_is_not_a_sure_thing(
    catalog: Catalog,
) -> None:
    got = catalog.discover("search", ALL, k=3, settings=SKIPPING)
    assert got.trace.encoder_skipped == "exact"
    assert got.confidence < 0.8, got.confidence


def test_a_skipped_ranking_reads_its_own_model() -> None:
    x = [1.0, 0.5, 0.0, 1.0, 1.0, 0.6, 0.5, 1.0, math.log(2), 0.4, 0.0, 0.0, 1.0, 0.5]
    assert confidence(x, encoder_skipped=True) == confidence(x, model=CONFIDENCE_SKIPPED)
    assert confidence(x) == confidence(x, model=CONFIDENCE)
    assert len(CONFIDENCE_SKIPPED) == len(CONFIDENCE_INPUTS)
    # the inputs a ranking without the encoder never has weigh nothing
    for name in DENSE_INPUTS:
        assert CONFIDENCE_SKIPPED[CONFIDENCE_INPUTS.index(name)] == 0.0
    # an explicit model wins; the catalog's correction moves either model the same way
    assert confidence(x, model=CONFIDENCE, encoder_skipped=True) == confidence(x)
    z = math.log(confidence(x, encoder_skipped=True) / (1 - confidence(x, encoder_skipped=True)))
    moved = confidence(x, shift=-1.0, encoder_skipped=True)
    assert moved == pytest.approx(1 / (1 + math.exp(-(z - 1.0))))


def test_the_stored_correction_applies_to_a_skipped_ranking(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A catalog's correction stored before skipped rankings had a model of their own (the
    same JSON in the store's meta) is read and applied to them."""
    path = tmp_path_factory.mktemp("conf_shift") / "c.db"
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add(_specs())
        request = "call calendar.create_event for Friday"
        before = cat.discover(request, ALL, k=3, settings=SKIPPING).confidence
        cat.store.set_meta(SHIFT_META, '{"outcomes": 40, "shift": -1.5, "ts": 1.0}')
        cat.refresh()
        assert cat.confidence_shift == ConfidenceShift(-1.5, 40, 1.0)
        after = cat.discover(request, ALL, k=3, settings=SKIPPING).confidence
    z = math.log(before / (1 - before))
    assert after == pytest.approx(1 / (1 + math.exp(-(z - 1.5))), abs=1e-6)


def test_fit_skipped_confidence_leaves_the_dense_inputs_out() -> None:
    rng = np.random.default_rng(5)
    n = len(CONFIDENCE_INPUTS)
    rows, ys, gs = [], [], []
    for g, bias in enumerate((0.4, 0.0, -0.4)):
        x = np.c_[np.ones(2000), rng.normal(size=(2000, n - 1))]
        # the dense columns carry the signal in this data, but a skipped ranking never has them
        z = bias + 1.5 * x[:, 1] - 1.0 * x[:, 9] + 2.0 * x[:, CONFIDENCE_INPUTS.index("cosine")]
        rows.append(x)
        ys.append((rng.random(2000) < 1 / (1 + np.exp(-z))).astype(np.float64))
        gs.append(np.full(2000, g))
    x, y, groups = np.vstack(rows), np.concatenate(ys), np.concatenate(gs)
    beta = fit_skipped_confidence(x, y, np.ones(len(y)), groups, l2=0.0)
    assert len(beta) == n
    for name in DENSE_INPUTS:
        assert beta[CONFIDENCE_INPUTS.index(name)] == 0.0
    assert beta[1] > 0.8 and beta[9] < -0.5, beta  # the others still learned
    assert abs(beta[0]) < 0.3, beta  # the median of the sets' biases
    with pytest.raises(ValueError, match="14 confidence inputs"):
        fit_skipped_confidence(x[:, :5], y, np.ones(len(y)), groups)
    with pytest.raises(ValueError, match="one outcome, weight and group per row"):
        fit_skipped_confidence(x, y[:-1], np.ones(len(y)), groups)
