"""benchmarks/quality.py: a heavy step's result is kept by its inputs and found again, so a
full run can be made in pieces; the printed command leaves out where things were kept."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402


def test_a_step_is_computed_once_per_inputs_and_found_again(tmp_path: Path) -> None:
    calls: list[str] = []

    def make(tag: str) -> dict[str, object]:
        calls.append(tag)
        return {"tag": tag, "rows": [1.0, 0.5]}

    stages = quality.Stages(tmp_path / "stages", limit=None)
    first = stages.get("grid", "bfcl", {"prior": [1.0, 2.0]}, lambda: make("a"))
    again = quality.Stages(tmp_path / "stages", limit=None).get(
        "grid", "bfcl", {"prior": [1.0, 2.0]}, lambda: make("b")
    )
    assert first == again == {"tag": "a", "rows": [1.0, 0.5]}
    assert calls == ["a"]
    # other inputs, another set, another limit: computed afresh
    stages.get("grid", "bfcl", {"prior": [1.0, 2.5]}, lambda: make("c"))
    stages.get("grid", "metatool", {"prior": [1.0, 2.0]}, lambda: make("d"))
    quality.Stages(tmp_path / "stages", limit=100).get(
        "grid", "bfcl", {"prior": [1.0, 2.0]}, lambda: make("e")
    )
    assert calls == ["a", "c", "d", "e"]
    assert not list((tmp_path / "stages").glob("*.tmp"))


def test_without_a_directory_nothing_is_kept(tmp_path: Path) -> None:
    calls: list[int] = []

    def make() -> int:
        calls.append(1)
        return len(calls)

    stages = quality.Stages(None, limit=None)
    assert [stages.get("grid", "bfcl", None, make) for _ in range(2)] == [1, 2]
    assert not list(tmp_path.iterdir())


def test_the_printed_command_leaves_out_the_cache_and_the_stages() -> None:
    args = ["--cache", "/c", "--stages=/s", "--blends", "4,32", "--stages", "/t", "--no-progress"]
    assert quality.shown_args(args) == ["--blends", "4,32"]
