"""The default encoder's load in a new process: from the shipped file against the kept
optimised graph (``embed/session.py``), and a bit-for-bit check of their vectors.

    python benchmarks/encoder_session.py [--runs 5] [--check] [--bench ../shared/bench]

Each run starts two fresh processes, alternately: one loads ``MiniLMEmbedder`` with the
kept graph turned off (the session made from the shipped file, as before), one with it
(mapped from the model cache; the first run makes it when missing). Each reports the wall
and CPU seconds of its load (``time.thread_time``: the loading thread's own CPU) and of the
whole process up to the loaded encoder, and the 1-minute load average.

``--check`` embeds the bundled demo catalog's card views and every bfcl tool's card views
and request with both sessions in one process and compares the vectors bit for bit.
Writes ``benchmarks/results/encoder_session.json`` (a part not run this time is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
t0 = float(sys.argv[1])
from toolscout.embed.minilm import MiniLMEmbedder
emb = MiniLMEmbedder(keep_session=sys.argv[2] == "1")
start, cpu, tcpu = time.time(), time.process_time(), time.thread_time()
emb.load()
out = {"kind": emb.session_kind, "load_s": time.time() - start,
       "load_thread_cpu_s": time.thread_time() - tcpu,
       "load_process_cpu_s": time.process_time() - cpu,
       "loaded_at_s": time.time() - t0, "process_cpu_s": time.process_time()}
print(json.dumps(out))
"""


def card_texts(bench: Path) -> tuple[list[str], int, int]:
    """The demo catalog's card views, every bfcl tool's card views and every bfcl request."""
    from toolscout.cards import make_spec
    from toolscout.discovery.catalog import card_views
    from toolscout.loader import demo_catalog_dir, read_catalog

    demo = [v for spec in read_catalog([demo_catalog_dir()]) for v in card_views(spec)]
    rows = [json.loads(line) for line in (bench / "bfcl" / "tools.jsonl").read_text().splitlines()]
    tools = [v for row in rows for v in card_views(make_spec(_card_row(row)))]
    lines = (bench / "bfcl" / "queries.jsonl").read_text().splitlines()
    queries = [json.loads(line)["query"] for line in lines]
    return demo + tools + queries, len(demo), len(tools)


def _card_row(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "name": row.get("name") or row["id"],
            "summary": row.get("description") or row["id"],
            "parameters": row.get("parameters") or {}}  # fmt: skip


def check(bench: Path) -> dict[str, Any]:
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.embed.session import same_bits

    texts, demo, tools = card_texts(bench)
    with tempfile.TemporaryDirectory() as cache:
        plain = MiniLMEmbedder(keep_session=False)
        first = MiniLMEmbedder(keep_session=True, model_cache=Path(cache))
        first.load()
        kept = MiniLMEmbedder(keep_session=True, model_cache=Path(cache))
        kept.load()
        want = plain.embed(texts)
        out = {"texts": len(texts), "demo_views": demo, "bfcl_views": tools,
               "bfcl_requests": len(texts) - demo - tools,
               "kinds": [first.session_kind, kept.session_kind],
               "same_bits_kept": same_bits(kept.embed(texts), want),
               "same_bits_first": same_bits(first.embed(texts), want)}  # fmt: skip
    print(json.dumps(out))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    args = ap.parse_args()
    path = ROOT / "benchmarks" / "results" / "encoder_session.json"
    result: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    result["cpus"] = os.cpu_count()
    if args.check:
        result["check"] = check(args.bench)
    runs = []
    for i in range(args.runs):
        for keep in ("0", "1"):
            before = round(os.getloadavg()[0], 2)
            t0 = time.time()
            proc = subprocess.run([sys.executable, "-c", CHILD, repr(t0), keep],
                                  capture_output=True, text=True, check=False)  # fmt: skip
            if proc.returncode != 0:
                raise SystemExit(f"the process failed:\n{proc.stderr[-3000:]}")
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            out["load_avg"] = before
            runs.append(out)
            print(f"run {i + 1} ({out['kind']}): load {out['load_s']:.3f} s wall,"
                  f" {out['load_thread_cpu_s']:.3f} s thread CPU, {out['load_process_cpu_s']:.3f}"
                  f" s process CPU; loaded at {out['loaded_at_s']:.3f} s; load avg {before}",
                  flush=True)  # fmt: skip
    if runs or "runs" not in result:  # a --check alone keeps the last runs' figures
        result["runs"] = runs
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
