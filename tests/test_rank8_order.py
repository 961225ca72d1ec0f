"""The learned order's own weights: fitted over the fixed fusion, moved by the catalog's
adjustment, used for the order only (the probability keeps the prior's weights)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support import embedder, spec
from toolscout.discovery.calibrate import (
    FEATURES,
    FIXED_MIX,
    PRIOR,
    PRIOR_NONE,
    Calibration,
    Example,
    Ranker,
    fit,
    platt,
    scores,
    top_probability,
)
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.features import features
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits

ZERO = (0.0,) * len(FEATURES)


def _pools(rng: np.random.Generator, n: int = 150) -> list[Example]:
    """Pools where the right row mostly has the highest "lexical" column (with noise, so
    the best weight on it is finite)."""
    out = []
    for _ in range(n):
        x = rng.random((12, len(FEATURES)))
        out.append(Example(x, int(np.argmax(x[:, 0] + rng.normal(0.0, 0.3, 12)))))
    return out


def test_the_fit_over_an_offset_learns_what_the_offset_gets_wrong() -> None:
    examples = _pools(np.random.default_rng(3))
    plain, _ = fit(examples, prior=ZERO, prior_none=0.0, l2=1e-3, steps=300)
    assert plain[0] > 2.0  # alone, the fit learns that "lexical" points at the right row
    # an offset that already leans on "lexical" far more than the data says: the fit over
    # it takes some back, where the plain fit adds
    offset = tuple(3 * plain[0] if f == "lexical" else 0.0 for f in FEATURES)
    residual, _ = fit(examples, prior=ZERO, prior_none=0.0, l2=1e-3, steps=300, offset=offset)
    assert residual[0] < 0.0


def test_the_offset_is_a_fixed_score_not_a_fitted_one() -> None:
    """With a zero offset the fit is the plain fit, number for number."""
    examples = _pools(np.random.default_rng(4), 60)
    plain = fit(examples, prior=ZERO, prior_none=0.0, steps=50)
    zero = fit(examples, prior=ZERO, prior_none=0.0, steps=50, offset=ZERO)
    assert plain == zero


def test_order_weights_keep_the_catalog_adjustment_and_check_their_length() -> None:
    shifted = tuple(w + 1.0 for w in PRIOR)
    cal = Calibration(weights=shifted)
    order = tuple(float(i) for i in range(len(FEATURES)))
    assert cal.order_weights_over(order) == pytest.approx(tuple(o + 1.0 for o in order))
    with pytest.raises(ValueError, match="one per feature"):
        cal.order_weights_over(order[:-1])


def test_the_order_follows_its_own_weights_and_the_probability_the_priors(
    tmp_path: Path,
) -> None:
    specs = [
        spec("mail.search", "Search the mailbox for messages matching sender or subject."),
        spec("files.search", "Find stored documents by name or content."),
        spec("mail.send", "Send an email message to one or more recipients."),
    ]
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(specs)
        index = cat.phrases()
        lex = Hits(["mail.search", "files.search"], [9.0, 0.5])
        dense = Hits(["files.search", "mail.search", "mail.send"], [0.7, 0.5, 0.1])
        # the probability's weights: cosine only; the order's: BM25 only
        cosine = tuple(1.0 if f == "cosine_norm" else 0.0 for f in FEATURES)
        bm25 = tuple(1.0 if f == "lexical" else 0.0 for f in FEATURES)
        plain = Ranker(cosine, 0.0, index.fields, index.idf)
        own = Ranker(cosine, 0.0, index.fields, index.idf, order_weights=bm25)
        ranked, p = plain.rank(["search"], lex, dense)
        ranked_own, p_own = own.rank(["search"], lex, dense)
        assert ranked[0][0] == "files.search"
        assert ranked_own[0][0] == "mail.search"
        # the probability is the prior weights' model's, of the tool the order put first
        ids, x = features(["search"], lex, dense, index.fields, index.idf)
        s = scores(x, cosine)
        assert p_own == pytest.approx(platt(top_probability(s, 0.0, ids.index("mail.search"))))
        assert p == pytest.approx(platt(top_probability(s, 0.0, ids.index("files.search"))))


def test_settings_reach_the_retriever(tmp_path: Path) -> None:
    specs = [spec(f"t.tool{i}", f"Tool number {i} does thing {i}.") for i in range(4)]
    order = tuple(float(i) for i in range(len(FEATURES)))
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(specs)  # too few tools to fit: the calibration is the prior, no adjustment
        off = cat.retriever(SearchSettings(ranker_order_prior=())).learned_ranker()
        on = cat.retriever(SearchSettings(ranker_order_prior=order)).learned_ranker()
        assert off is not None and off.order_weights is None
        assert on is not None and on.order_weights == pytest.approx(order)
        # the fixed fusion's weights are what the order's prior is fitted over
        assert len(FIXED_MIX) == len(order)
        assert on.none_bias == PRIOR_NONE
