"""benchmarks/hub_screen.py: the hub score (a card's mean cosine to its k nearest other
cards) from a catalog's stored card vectors, the column appended to a pool's features,
and the product's ranker reading it only inside ``hub_in_product``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.features import FEATURES
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import hub_screen as hs  # noqa: E402


def _unit(*rows: tuple[float, ...]) -> np.ndarray:
    v = np.array(rows, dtype=np.float64)
    out: np.ndarray = v / np.linalg.norm(v, axis=1)[:, None]
    return out


def test_the_hub_score_is_the_mean_cosine_to_the_nearest_other_cards() -> None:
    v = _unit((1, 0, 0), (1, 1, 0), (0, 1, 0), (0, 0, 1))
    cos = v @ v.T
    got1 = hs.hub_scores(v, 1)
    got2 = hs.hub_scores(v * 3.0, 2)  # the score reads directions, not lengths
    for i in range(4):
        others = sorted((cos[i, j] for j in range(4) if j != i), reverse=True)
        assert got1[i] == pytest.approx(others[0], abs=1e-6)
        assert got2[i] == pytest.approx((others[0] + others[1]) / 2, abs=1e-6)
    # the card between two others is the hub; the one orthogonal to all, the least
    assert int(np.argmax(got2)) == 1 and int(np.argmin(got2)) == 3
    # more neighbours than other cards: all of them
    assert hs.hub_scores(v, 50) == pytest.approx(hs.hub_scores(v, 3))


def test_the_hub_score_is_the_same_block_by_block(monkeypatch: pytest.MonkeyPatch) -> None:
    v = np.random.default_rng(3).normal(size=(37, 8))
    whole = hs.hub_scores(v, 5)
    monkeypatch.setattr(hs, "BLOCK", 4)
    assert hs.hub_scores(v, 5) == pytest.approx(whole, abs=1e-6)


def test_bad_card_matrices_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="2-D"):
        hs.hub_scores(np.ones(4), 1)
    with pytest.raises(ValueError, match="at least 2 cards"):
        hs.hub_scores(np.ones((1, 3)), 1)
    with pytest.raises(ValueError, match="k >= 1"):
        hs.hub_scores(np.ones((3, 3)), 0)
    with pytest.raises(ValueError, match="card vector 1 is all zeros"):
        hs.hub_scores(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]), 1)


def test_the_forms_centre_and_scale_the_catalog_s_scores() -> None:
    raw = np.array([0.2, 0.4, 0.9])
    assert hs.hub_form(raw, "raw") == pytest.approx(raw)
    assert hs.hub_form(raw, "centred") == pytest.approx(raw - 0.5)
    z = hs.hub_form(raw, "z")
    assert z.mean() == pytest.approx(0.0, abs=1e-12) and z.std() == pytest.approx(1.0)
    assert hs.hub_form(np.array([0.3, 0.3]), "z") == pytest.approx([0.0, 0.0])
    with pytest.raises(ValueError, match="unknown hub form 'log'"):
        hs.hub_form(raw, "log")


def test_the_column_is_appended_per_candidate_by_id() -> None:
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    got = hs.with_hub(["b", "a"], x, {"a": 0.1, "b": 0.7, "c": 0.9})
    assert got.shape == (2, 4)
    assert got[:, :3] == pytest.approx(x)
    assert got[:, 3] == pytest.approx([0.7, 0.1])
    assert hs.with_hub([], np.zeros((0, 3)), {}).shape == (0, 4)
    with pytest.raises(ValueError, match="no hub score for tool 'z'"):
        hs.with_hub(["a", "z"], x, {"a": 0.1})
    with pytest.raises(ValueError, match="3 candidate ids for a feature matrix of 2 rows"):
        hs.with_hub(["a", "b", "c"], x, {"a": 0.1, "b": 0.2, "c": 0.3})


def test_examples_carry_the_column_and_every_gold_row() -> None:
    rows = [
        {"ids": ["a", "b", "c"], "x": np.ones((3, 2)), "gold": ["c", "a"]},
        {"ids": ["a", "b"], "x": np.zeros((2, 2)), "gold": ["z"]},
    ]
    ex = hs.examples_of(rows, {"a": 0.5, "b": 0.25, "c": 0.0})
    assert [e.target for e in ex] == [2, 0, -1]
    assert ex[0].x[:, -1] == pytest.approx([0.5, 0.25, 0.0])
    assert [e.x.shape[1] for e in hs.examples_of(rows, None)] == [2, 2, 2]


SPECS = [
    spec("mail.send", "Send an email message to one or more recipients."),
    spec("mail.reply", "Reply to an email message in the mailbox."),
    spec("mail.forward", "Forward an email message to another recipient."),
    spec("mail.draft", "Save an email message as a draft to send later."),
    spec("units.temperature", "Convert a temperature between Celsius and Fahrenheit."),
]


def test_a_catalog_s_hub_scores_come_from_its_stored_card_vectors(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(SPECS)
        hubs = hs.catalog_hubs(cat, ks=(1, 3))
        ids = sorted(s.id for s in SPECS)
        vecs = cat.store.card_vectors(ids, cat.embedder.model_id)
        want = hs.hub_scores(np.vstack([vecs[t] for t in ids]), 3)
    assert set(hubs) == {1, 3} and set(hubs[3]) == set(ids)
    assert [hubs[3][t] for t in ids] == pytest.approx(want.tolist())
    # the one tool unlike the others is the least central
    assert min(hubs[3], key=hubs[3].__getitem__) == "units.temperature"


def test_the_product_s_ranker_reads_the_column_only_inside_the_context(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(SPECS)
        hubs = hs.catalog_hubs(cat, ks=(3,))[3]
        lex = Hits([], [])
        ids = [s.id for s in SPECS]
        dense = Hits(ids, [0.5] * len(ids))  # a tie on every signal: the column decides
        before = cat.retriever(SearchSettings()).learned_ranker()
        assert before is not None and len(before.weights) == len(FEATURES)
        with hs.hub_in_product(hubs, -1000.0):
            ranker = cat.retriever(SearchSettings()).learned_ranker()
            assert ranker is not None and len(ranker.weights) == len(FEATURES) + 1
            assert ranker.weights[:-1] == pytest.approx(before.weights)
            assert ranker.weights[-1] == -1000.0
            penalised, _ = ranker.rank([], lex, dense)
        with hs.hub_in_product(hubs, 1000.0):
            ranker = cat.retriever(SearchSettings()).learned_ranker()
            assert ranker is not None
            favoured, _ = ranker.rank([], lex, dense)
        after = cat.retriever(SearchSettings()).learned_ranker()
        assert after is not None and len(after.weights) == len(FEATURES)
        plain, _ = after.rank([], lex, dense)
    assert penalised[0][0] == "units.temperature"
    assert [t for t, *_ in penalised] == sorted(ids, key=hubs.__getitem__)
    assert [t for t, *_ in favoured] == sorted(ids, key=lambda t: -hubs[t])
    assert [t for t, *_ in plain] == ids  # no column: the tie keeps the pool's order
