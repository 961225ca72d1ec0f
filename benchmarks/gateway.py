"""The execution gateway's added latency per call, p50 and p99.

Everything the gateway does around a tool — token verification, rate limit,
policy, argument validation, audit append — with a no-op async Python tool, so
the tool's own work is ~zero. Measured for HS256, RS256 and ES256 tokens, each
with a fresh token per call ("cold": full signature check) and with a session
reusing its token ("warm": verified-token cache), and once more without the
executor and the audit append (``Gateway.authorize``: verify + limit + policy +
validation only). Target: <= 0.5 ms p50 with HS256.

Writes ``benchmarks/results/gateway.json`` and prints a table.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/gateway.py [--calls N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "gateway.json"
SECRET = "benchmark-secret-0123456789abcdef-0123456789"
ISSUER, AUDIENCE = "https://idp.bench", "toolscout"
ARGS = {"invoice_id": "INV-1024", "reason": "duplicate", "amount_cents": 1250, "note": "dup charge"}


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(name: str, samples_ms: Sequence[float], **extra: Any) -> dict[str, Any]:
    return {
        "scenario": name,
        "calls": len(samples_ms),
        "p50_ms": round(percentile(samples_ms, 0.50), 4),
        "p99_ms": round(percentile(samples_ms, 0.99), 4),
        "mean_ms": round(statistics.fmean(samples_ms), 4),
        **extra,
    }


def private_pem(alg: str) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    key: Any = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if alg.startswith("RS")
        else ec.generate_private_key(ec.SECP256R1())
    )
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def build(alg: str, db: Path) -> tuple[Any, Callable[[int], str]]:
    """A gateway over one tool, and a function minting the i-th distinct token."""
    from toolscout.cards import ToolSpec
    from toolscout.executors.base import PythonExecutor, tool
    from toolscout.gateway.audit import AuditLog
    from toolscout.gateway.auth import JWTVerifier, issue_token
    from toolscout.gateway.core import Gateway
    from toolscout.gateway.limits import Limits
    from toolscout.policy import PolicyConfig

    @tool(id="billing.issue_refund", scopes=["billing:write"], risk="write")
    async def issue_refund(
        invoice_id: Annotated[str, "Invoice id, e.g. INV-1024"],
        reason: Literal["duplicate", "fraudulent", "requested_by_customer"],
        amount_cents: int | None = None,
        note: str = "",
    ) -> None:
        """Refund one invoice in full or in part (a no-op here)."""

    executor = PythonExecutor([issue_refund])
    spec = executor.specs()[0]

    class Tools:
        def spec(self, tool_id: str) -> ToolSpec | None:
            return spec if tool_id == spec.id else None

    key: str | bytes = SECRET if alg.startswith("HS") else private_pem(alg)
    verifier = JWTVerifier(key=key, algorithms=[alg], issuer=ISSUER, audience=AUDIENCE)
    limits = Limits(rate_per_second=1e9, burst=10**9)  # checked on every call, never hit
    gw = Gateway(Tools(), PolicyConfig(), verifier, executor, AuditLog(db), limits=limits)

    def mint(i: int) -> str:
        return issue_token(
            subject=f"agent-{i}", tenant="acme", scopes=["billing:write"], key=key,
            algorithm=alg, issuer=ISSUER, audience=AUDIENCE, extra={"jti": str(i)},
        )  # fmt: skip

    return gw, mint


def run_alg(alg: str, calls: int, db: Path) -> list[dict[str, Any]]:
    gw, mint = build(alg, db)
    cold_tokens = [mint(i) for i in range(calls)]
    warm = mint(-1)

    async def execute(tokens: Sequence[str]) -> tuple[list[float], list[float]]:
        wall, own = [], []
        for tok in tokens[:50]:  # warm up imports, caches, the validator
            await gw.execute(tok, "billing.issue_refund", ARGS)
        for tok in tokens:
            t0 = time.perf_counter()
            result = await gw.execute(tok, "billing.issue_refund", ARGS)
            wall.append((time.perf_counter() - t0) * 1000)
            own.append(result.overhead_ms)
        return wall, own

    def authorize(tokens: Sequence[str]) -> list[float]:
        out = []
        for tok in tokens:
            t0 = time.perf_counter()
            gw.authorize(tok, "billing.issue_refund", ARGS)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    rows = []
    loop = asyncio.new_event_loop()
    try:
        for label, tokens in (("cold", cold_tokens), ("warm", [warm] * calls)):
            gw.verifier._cache.clear()
            wall, own = loop.run_until_complete(execute(tokens))
            rows.append(summary(f"{alg} {label}, full path incl. audit", wall, alg=alg,
                                token=label, audit=True,
                                gateway_share_p50_ms=round(percentile(own, 0.5), 4)))  # fmt: skip
            gw.verifier._cache.clear()
            rows.append(summary(f"{alg} {label}, checks only (no audit)", authorize(tokens),
                                alg=alg, token=label, audit=False))  # fmt: skip
    finally:
        loop.close()
        gw.audit.close()
    return rows


def table(rows: Sequence[dict[str, Any]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover
        for r in rows:
            print(f"{r['scenario']:<45} p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms")
        return
    t = Table(title="gateway added latency per call (no-op tool)")
    for col in ("scenario", "calls", "p50 ms", "p99 ms", "mean ms"):
        t.add_column(col, justify="left" if col == "scenario" else "right")
    for r in rows:
        t.add_row(r["scenario"], str(r["calls"]), f"{r['p50_ms']:.3f}", f"{r['p99_ms']:.3f}",
                  f"{r['mean_ms']:.3f}")  # fmt: skip
    Console().print(t)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per scenario")
    parser.add_argument("--algs", default="HS256,RS256,ES256")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for alg in args.algs.split(","):
            rows += run_alg(alg.strip(), args.calls, Path(tmp) / f"{alg}.db")
    table(rows)
    hs = next(r for r in rows if r["scenario"].startswith("HS256 cold, full"))
    verdict = "meets" if hs["p50_ms"] <= 0.5 else "MISSES"
    print(f"HS256 cold full path p50 {hs['p50_ms']:.3f} ms: {verdict} the 0.5 ms target")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "command": "PYTHONPATH=src .venv/bin/python benchmarks/gateway.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        },
        "note": "per-call wall time of Gateway.execute with a no-op async tool (tool work ~0); "
        "'checks only' is Gateway.authorize: verify + rate limit + policy + validation",
        "results": rows,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
