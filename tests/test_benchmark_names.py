"""The benchmark scripts' module names shadow no installed package.

Tests that drive a benchmark put ``benchmarks/`` first on ``sys.path``; a script named like
a dependency (``agents.py`` beside the OpenAI Agents SDK's ``agents``) then answers every
later ``import`` of that package in the same worker."""

from __future__ import annotations

from importlib.metadata import packages_distributions
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_no_benchmark_script_is_named_like_an_installed_package() -> None:
    installed = packages_distributions()
    scripts = {p.stem for p in BENCHMARKS.glob("*.py")}
    assert scripts, BENCHMARKS
    clashes = {name: installed[name] for name in sorted(scripts & installed.keys())}
    assert not clashes, f"benchmarks/ scripts named like installed packages: {clashes}"
