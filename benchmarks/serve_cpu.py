"""A ``toolscout serve`` worker's CPU per new-text discover, split: the encoder and the rest.

    PYTHONPATH=src python benchmarks/serve_cpu.py [--requests 200]
    TOOLSCOUT_QUERY_ENCODER=int8 PYTHONPATH=src python benchmarks/serve_cpu.py

In one process, without sockets: the demo catalog ``load.py`` serves, the worker's own
service (``cli.serve.build_service``, so ``$TOOLSCOUT_QUERY_ENCODER`` and
``$TOOLSCOUT_EMBED_THREADS`` apply as in ``serve``) and app (``http.app.create_app``),
driven through Starlette's test client with ``load.py``'s new request texts and
principals, one request at a time. Reports the process's CPU per request and the
thread CPU spent inside the request encoder's runs (texts per request beside it); the
rest is everything else a request costs (HTTP and JSON in process, JWT, retrieval, the
ranker, rendering, the log). CPU, not wall time: steadier on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import load  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args(argv)
    from starlette.testclient import TestClient

    from toolscout.cli.serve import build_service
    from toolscout.embed.queries import query_embedder
    from toolscout.http.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "demo.db")
        load.build_catalog(db, str(Path(tmp) / "build.audit.db"))
        service = build_service(
            db,
            jwt_key=load.KEY,
            audit_key=load.AUDIT_KEY,
            audit=str(Path(tmp) / "audit.db"),
            dry_run=True,
        )
        encoder: Any = query_embedder(service.catalog.embedder)
        runs = getattr(encoder, "inner", encoder)  # the coalescing wrapper's model
        spent = {"cpu": 0.0, "texts": 0}
        embed = runs.embed

        def timed(texts: Sequence[str]) -> Any:
            start = time.thread_time()
            try:
                return embed(texts)
            finally:
                spent["cpu"] += time.thread_time() - start
                spent["texts"] += len(texts)

        runs.embed = timed
        texts = load.dev_queries(load.DEFAULT_BENCH)
        tokens = [load.discover_agent(i) for i in range(load.DISCOVER_PRINCIPALS)]
        with TestClient(create_app(service)) as client:
            for i in range(20):  # warm: the model, the caches
                client.post(
                    "/v1/discover",
                    json={"query": load.QUERIES[i % len(load.QUERIES)], "k": 3},
                    headers={"Authorization": f"Bearer {tokens[0]}"},
                )
            spent.update(cpu=0.0, texts=0)
            start = time.process_time()
            for i in range(args.requests):
                got = client.post(
                    "/v1/discover",
                    json={"query": texts[i], "k": 3},
                    headers={"Authorization": f"Bearer {tokens[i % len(tokens)]}"},
                )
                if got.status_code != 200:
                    raise SystemExit(f"request {i} answered {got.status_code}: {got.text}")
            cpu = time.process_time() - start
        service.close()
    n = args.requests
    out = {
        "query_encoder": os.environ.get("TOOLSCOUT_QUERY_ENCODER", "") or "(default)",
        "requests": n,
        "cpu_ms_per_request": round(1000 * cpu / n, 2),
        "encoder_cpu_ms_per_request": round(1000 * spent["cpu"] / n, 2),
        "rest_cpu_ms_per_request": round(1000 * (cpu - spent["cpu"]) / n, 2),
        "encoded_texts_per_request": round(spent["texts"] / n, 2),
        "load_avg": load.load_avg(),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
