"""A ``toolscout serve`` worker's CPU per new-text discover, split: the encoder and the rest.

    PYTHONPATH=src python benchmarks/serve_cpu.py [--requests 200]
    TOOLSCOUT_QUERY_ENCODER=int8 PYTHONPATH=src python benchmarks/serve_cpu.py
    PYTHONPATH=src python benchmarks/serve_cpu.py --cached           # the encoder idle
    PYTHONPATH=src python benchmarks/serve_cpu.py --profile out.pstats

In one process, without sockets: the demo catalog ``load.py`` serves, the worker's own
service (``cli.serve.build_service``, so ``$TOOLSCOUT_QUERY_ENCODER`` and
``$TOOLSCOUT_EMBED_THREADS`` apply as in ``serve``) and app (``http.app.create_app``),
driven through Starlette's test client with ``load.py``'s new request texts and
principals, one request at a time. Reports the process's CPU per request and the
thread CPU spent inside the request encoder's runs (texts encoded per request beside it:
a request whose parts are pooled from its own run counts one); the
rest is everything else a request costs (HTTP and JSON in process, JWT, retrieval, the
ranker, rendering, the log) and the test client's own work (it runs in this process).
Also the share of requests ranked without the encoder (``encoder_skipped_share``: the
skip of ``SearchSettings.encoder_skip``, which ``serve`` leaves off as the library does).
CPU, not wall time: steadier on a shared machine.

``--profile`` drives the app on the main thread instead (httpx's ASGI transport, sync
routes run inline rather than on worker threads), so that cProfile sees all of it; its
figures carry the profiler's overhead and are for finding costs, not for comparing.
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
    ap.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="also profile the measured requests (cProfile; pstats written here, the top"
        " functions by own time printed to stderr)",
    )
    ap.add_argument(
        "--cached",
        action="store_true",
        help="post load.py's 16 cached request texts instead of new ones (the encoder never"
        " runs after warm-up: what is left is the HTTP layer and discovery's own work)",
    )
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
        spent = {"cpu": 0.0, "texts": 0, "skipped": 0}
        embed = runs.embed

        def timed(texts: Sequence[str]) -> Any:
            start = time.thread_time()
            try:
                return embed(texts)
            finally:
                spent["cpu"] += time.thread_time() - start
                spent["texts"] += len(texts)

        runs.embed = timed
        embed_spans = getattr(runs, "embed_spans", None)

        def timed_spans(text: str, spans: Any) -> Any:
            start = time.thread_time()
            try:
                return embed_spans(text, spans)  # type: ignore[misc]
            finally:
                spent["cpu"] += time.thread_time() - start
                spent["texts"] += 1  # one text read; its parts pooled from the same run

        if embed_spans is not None:  # a request in parts, its parts pooled (embed/coalesce.py)
            runs.embed_spans = timed_spans
        discover = service.discover

        def noted(*args: Any, **kwargs: Any) -> Any:
            shortlist = discover(*args, **kwargs)
            spent["skipped"] += bool(shortlist.trace.encoder_skipped)
            return shortlist

        service.discover = noted  # counts the requests ranked without the encoder
        texts = load.dev_queries(load.DEFAULT_BENCH)
        tokens = [load.discover_agent(i) for i in range(load.DISCOVER_PRINCIPALS)]
        app = create_app(service)
        warm = [
            ({"query": load.QUERIES[i % len(load.QUERIES)], "k": 3}, tokens[0]) for i in range(20)
        ]
        n = args.requests
        said = load.QUERIES if args.cached else texts
        asks = [({"query": said[i % len(said)], "k": 3}, tokens[i % len(tokens)]) for i in range(n)]
        if args.profile is None:
            with TestClient(app) as client:
                _post(client.post, warm)  # warm: the model, the caches
                spent.update(cpu=0.0, texts=0, skipped=0)
                start = time.process_time()
                _post(client.post, asks)
                cpu = time.process_time() - start
        else:
            cpu = _profiled(app, warm, asks, spent, args.profile)
        service.close()
    n = args.requests
    out = {
        "texts": "cached" if args.cached else "new",
        "query_encoder": os.environ.get("TOOLSCOUT_QUERY_ENCODER", "") or "(default)",
        "requests": n,
        "cpu_ms_per_request": round(1000 * cpu / n, 2),
        "encoder_cpu_ms_per_request": round(1000 * spent["cpu"] / n, 2),
        "rest_cpu_ms_per_request": round(1000 * (cpu - spent["cpu"]) / n, 2),
        "encoded_texts_per_request": round(spent["texts"] / n, 2),
        # requests the discovery ranked without the encoder (SearchSettings.encoder_skip)
        "encoder_skipped_share": round(spent["skipped"] / n, 4),
        "load_avg": load.load_avg(),
    }
    print(json.dumps(out))
    return 0


Ask = tuple[dict[str, Any], str]


def _post(post: Any, asks: Sequence[Ask]) -> None:
    for i, (body, token) in enumerate(asks):
        got = post("/v1/discover", json=body, headers={"Authorization": f"Bearer {token}"})
        if got.status_code != 200:
            raise SystemExit(f"request {i} answered {got.status_code}: {got.text}")


def _profiled(
    app: Any, warm: Sequence[Ask], asks: Sequence[Ask], spent: dict[str, Any], path: Path
) -> float:
    """The process CPU of ``asks`` (after ``warm``), profiled with cProfile: the app is
    driven on this thread (httpx's ASGI transport, and a sync route run inline instead of
    on a worker thread), since cProfile sees only the thread that enabled it."""
    import asyncio
    import cProfile

    import anyio.to_thread
    import httpx

    async def inline(func: Any, *args: Any, **kwargs: Any) -> Any:
        return func(*args)

    anyio.to_thread.run_sync = inline  # type: ignore[assignment]

    async def drive() -> float:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:

            async def each(batch: Sequence[Ask]) -> None:
                for i, (body, token) in enumerate(batch):
                    got = await client.post(
                        "/v1/discover", json=body, headers={"Authorization": f"Bearer {token}"}
                    )
                    if got.status_code != 200:
                        raise SystemExit(f"request {i} answered {got.status_code}: {got.text}")

            await each(warm)
            spent.update(cpu=0.0, texts=0, skipped=0)
            profiler = cProfile.Profile(time.thread_time)  # CPU, not wall: a shared machine
            profiler.enable()
            start = time.process_time()
            await each(asks)
            cpu = time.process_time() - start
            profiler.disable()
            _report(profiler, path)
            return cpu

    return asyncio.run(drive())


def _report(profiler: Any, path: Path) -> None:
    """Write the profile to ``path`` and print its top functions by own time."""
    import pstats

    profiler.dump_stats(str(path))
    stats = pstats.Stats(str(path), stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    raise SystemExit(main())
