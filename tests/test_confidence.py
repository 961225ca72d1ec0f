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
    FieldTerms,
    confidence,
    confidence_inputs,
    fit_confidence,
    fit_shift,
    idf_of,
)
from toolscout.discovery.catalog import Catalog
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
