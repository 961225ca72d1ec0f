"""A short soak (benchmarks/soak.py): two `serve` replicas on the embedded PostgreSQL, agents
discovering and executing while a replica is SIGKILLed, PostgreSQL restarts and the catalog
is re-imported — every answer reconciled with the audit chain, nothing lost or doubled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_short_soak_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    # the replicas' logs in the test's own directory: pytest keeps the last runs' (a failed
    # run's logs to read) and removes older ones
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--seconds", "20",
         "--agents", "8", "--workers", "1", "--out", str(out), "--logs", str(tmp_path / "logs")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["failures"] == [], proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [f["name"] for f in result["faults"]] == ["replica_kill", "postgres_restart", "reimport"]
    assert (
        result["ok"] > 0
        and result["audit_rows"]
        >= result["executes_answered"] - (result["refused_unrecorded_audit_down"])
    )
    assert (result["duplicated"], result["answers_without_row"], result["ok_without_row"]) == (
        0,
        0,
        0,
    )
    assert result["chain_ok"] and result["catalog_identical_after_reimport"]
    assert all(f["recovery_s"] is not None for f in result["faults"])
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["serve-A.log", "serve-B.log"]
