"""``toolscout lint`` as a user runs it: the demo catalog before and after its fix."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fork_kit import toolscout as fork_toolscout
from support import FIXTURES, alias_bomb
from toolscout.loader import demo_catalog_dir

BEFORE = FIXTURES / "demo_catalog_before_lint"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    argv = fork_toolscout("lint", *args)
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


def assert_clean_error(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One lint index for both runs: the fixed catalog re-embeds only what changed."""
    return tmp_path_factory.mktemp("lint") / "lint-cache.db"


def tools_of(data: dict[str, object], code: str) -> set[str]:
    findings = data["findings"]
    assert isinstance(findings, list)
    return {t for f in findings if f["code"] == code for t in f["tools"]}


def test_the_demo_catalog_before_the_fix_fails_on_its_planted_traps(cache: Path) -> None:
    proc = run(str(BEFORE), "--json", "--fail-on", "error", "--cache", str(cache))
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["tools"] == 205 and data["by_severity"]["error"] >= 1
    # the jargon tool of the article
    assert "orders.query_freight_telemetry" in tools_of(data, "jargon-name")
    # a privileged verb on a tool that does not need the admin scope
    assert "monitoring.override_oncall_shift" in tools_of(data, "privileged-not-gated")
    # cards over the budget
    assert "issue_tracker.create_ticket" in tools_of(data, "card-too-long")
    # overlap is measured for every pair that confused a probe, worst first, with evidence
    pairs = data["overlapping_pairs"]
    assert pairs and all(p["examples"] for p in pairs)
    assert [p["rate"] for p in pairs] == sorted((p["rate"] for p in pairs), reverse=True)
    assert data["probes"] > 3 * data["tools"]


def test_the_fixed_demo_catalog_passes_at_error_level(cache: Path) -> None:
    proc = run(str(demo_catalog_dir()), "--fail-on", "error", "--cache", str(cache))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 errors" in proc.stderr
    assert "overlap-unhinted" not in proc.stdout and "jargon-name" not in proc.stdout
    assert "top overlapping pairs" in proc.stdout


def test_a_clean_catalog_exits_zero_even_on_warnings(tmp_path: Path) -> None:
    card = {
        "id": "weather.get_forecast",
        "summary": "Get the weather forecast for a city.",
        "scopes": ["weather:read"],
        "aliases": ["will it rain tomorrow"],
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    }
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([card]))
    proc = run(str(path), "--fail-on", "warning")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 errors, 0 warnings" in proc.stderr


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    assert_clean_error(run(), "give catalog files to lint, or --db PATH")
    assert_clean_error(run(str(tmp_path / "nope.yaml")), "no such file")
    broken = tmp_path / "broken.yaml"
    broken.write_text("tools: [\n")
    assert_clean_error(run(str(broken)), "invalid YAML")
    good = tmp_path / "ok.json"
    good.write_text("[]")
    assert_clean_error(run(str(good), "--fail-on", "sometimes"), "--fail-on must be one of")
    assert_clean_error(run("--db", str(tmp_path / "missing.db")), "no catalog at")


def test_lint_reads_card_files_as_safely_as_indexing(tmp_path: Path) -> None:
    """Lint reads card files through the loader: a YAML alias bomb (9^10 list items from
    1.5 KB) is refused with one line, as `toolscout index` refuses it, not expanded."""
    assert_clean_error(run(str(alias_bomb(tmp_path / "bomb.yaml"))), "alias bomb")
