"""benchmarks/adapter_probe.py: the query-side maps it measures learn what their data
says (a shared rotation of the queries is undone, a strong prior keeps the identity) and
the hub penalty lowers the card that is near many others."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import adapter_probe as probe  # noqa: E402

DIM = 16


def _rotation(seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(DIM, DIM)))
    return q


def _set(tmp: Path, name: str, seed: int, turn: np.ndarray, n_tools: int = 40) -> probe.Set:
    """A catalog whose queries (real and pseudo) are its cards turned by ``turn``, plus noise."""
    rng = np.random.default_rng(seed)
    cards = probe.norm(rng.normal(size=(n_tools, DIM)))
    owner = np.arange(n_tools, dtype=np.int32)
    pseudo_tool = np.repeat(owner, 3)
    pseudo = probe.norm(cards[pseudo_tool] @ turn + 0.05 * rng.normal(size=(len(pseudo_tool), DIM)))
    gold = rng.integers(0, n_tools, size=60).astype(np.int32)
    queries = probe.norm(cards[gold] @ turn + 0.05 * rng.normal(size=(len(gold), DIM)))
    np.savez(
        tmp / f"{name}.npz",
        views=cards, owner=owner, kind=np.zeros(n_tools, np.int32),
        pseudo=pseudo, pseudo_tool=pseudo_tool.astype(np.int32),
        pseudo_kind=np.array(["summary"] * len(pseudo_tool)),
        pseudo_seed=np.zeros(len(pseudo_tool), np.int64),
        queries=queries, gold=gold, gold_off=np.arange(len(gold) + 1, dtype=np.int32),
        n_tools=n_tools,
    )  # fmt: skip
    return probe.Set(tmp / f"{name}.npz")


def test_a_catalog_map_undoes_the_turn_its_pseudo_queries_show(tmp_path: Path) -> None:
    s = _set(tmp_path, "turned", 1, _rotation(7))
    before = s.recall(s.q @ s.cards.T)[0].mean()
    mask = np.ones(len(s.ptool), bool)
    fitted = probe.fit_ridge(s, 0.01, mask)
    after = s.recall(fitted(s.q) @ s.cards.T)[0].mean()
    assert before < 0.5 and after > 0.95
    # a strong pull towards the identity leaves the queries where they were
    kept = probe.fit_ridge(s, 1e6, mask)
    assert np.allclose(kept(s.q), s.q, atol=1e-3)


def test_one_map_fitted_on_other_catalogs_real_queries_carries_to_a_new_one(
    tmp_path: Path,
) -> None:
    turn = _rotation(3)
    train = [_set(tmp_path, f"seen{i}", 10 + i, turn) for i in range(3)]
    new = _set(tmp_path, "new", 99, turn)
    w = probe.fit_global_ridge(train, 0.01)
    before = new.recall(new.q @ new.cards.T)[0].mean()
    after = new.recall(probe.norm(new.q @ w) @ new.cards.T)[0].mean()
    assert before < 0.5 and after > 0.95


def test_the_hub_penalty_is_largest_for_the_card_near_many_others(tmp_path: Path) -> None:
    s = _set(tmp_path, "hubs", 5, np.eye(DIM), n_tools=12)
    hub = probe.norm(s.cards[:6].mean(axis=0, keepdims=True))[0]
    s.cards[0] = hub
    penalty = probe.hub_penalty(s, 5)
    assert int(np.argmax(penalty)) == 0


def test_request_like_pseudo_queries_mask_the_name_and_carry_argument_values(
    tmp_path: Path,
) -> None:
    from toolscout.evaluate.evalset import read_tools

    tool = {
        "id": "weather_forecast",
        "name": "weather_forecast",
        "description": "Gives the weather forecast of a city for some days. Uses a public API.",
        "parameters": {
            "type": "object",
            "properties": {
                "days": {"type": "integer", "description": "how many days"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "city": {"type": "string", "description": "the city"},
            },
        },
    }
    path = tmp_path / "tools.jsonl"
    path.write_text(json.dumps(tool) + "\n", encoding="utf-8")
    specs, _ = read_tools(path)
    [(text, tool_id)] = probe.request_like(specs, seed=1)
    assert tool_id == "weather_forecast"
    assert text.startswith("Gives the of a city for some days with ")
    assert "public" not in text and "city " not in text.split(" with ", 1)[1]
    args = text.split(" with ", 1)[1].split(" and ")
    assert {a.split()[0] for a in args} == {"days", "unit"}
    assert any(a in ("unit celsius", "unit fahrenheit") for a in args)
