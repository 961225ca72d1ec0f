"""Many agents: N concurrent conversations of discover -> execute turns against ``serve``.

    python benchmarks/many_agents.py [--agents 16] [--seconds 60] [--workers 2] [--postgres]

The same server as ``benchmarks/load.py`` (demo catalog, ``toolscout serve --workers N
--dry-run``, SQLite or ``--postgres`` on the embedded PostgreSQL of the tests). Each
agent is its own principal (support agents, engineers and a billing admin of two
tenants) holding one conversation: a turn is ``POST /v1/discover`` with a NEW request
text (the dev sets' queries, seeded order, never repeated in a run), then ``POST
/v1/execute`` of the first tool of the shortlist by the name the model was shown, with
the discovery id and arguments built from its rendered schema (required fields only).
An agent starts its next turn when the previous one ends (closed loop, no think time).

A turn is *successful* when the discovery returned tools and the execution answered
``"status":"ok"``; refusals (a tool that needs a grant, arguments the generator could
not satisfy) are counted by reason. Reports per-turn and per-call p50 / p99 and
successful turns per second, with the 1-minute load average before and after (the
machine may be shared). Writes ``benchmarks/results/agents_<store>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import DEFAULT_BENCH, KEY, ROOT, dev_queries, load_avg, serving

#: (tenant, role) of the agents, in turn
AGENT_KINDS = [
    ("acme", "support_agent"),
    ("acme", "engineer"),
    ("globex", "support_agent"),
    ("acme", "billing_admin"),
]
FORMATS = {
    "date": "2026-01-15",
    "date-time": "2026-01-15T10:00:00Z",
    "email": "jane@example.com",
    "uri": "https://example.com/a",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
}


def _from_regex(pattern: str) -> str:
    """One string the (simple) regular expression matches: first choices, fewest repeats."""

    def walk(items: Any) -> str:
        out = []
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(av))
            elif name == "IN":
                out.append(walk_in(av))
            elif name in ("MAX_REPEAT", "MIN_REPEAT"):
                lo, _hi, sub = av
                out.append(walk(sub) * max(lo, 1))
            elif name == "SUBPATTERN":
                out.append(walk(av[-1]))
            elif name == "BRANCH":
                out.append(walk(av[1][0]))
            elif name == "ANY":
                out.append("a")
            elif name == "CATEGORY":
                out.append(walk_in([(op, av)]))
        return "".join(out)

    def walk_in(items: Any) -> str:
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                return chr(av)
            if name == "RANGE":
                return chr(av[0])
            if name == "CATEGORY":
                return "5" if "DIGIT" in str(av) else "a"
        return "a"

    return walk(sre_parse.parse(pattern))


def value_for(schema: dict[str, Any]) -> Any:
    """A value satisfying a JSON Schema property, as an agent's model would fill it."""
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "string":
        if "pattern" in schema:
            text = _from_regex(schema["pattern"])
        else:
            text = FORMATS.get(schema.get("format", ""), "example")
        return text.ljust(int(schema.get("minLength", 0)), "a")
    if kind in ("integer", "number"):
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "boolean":
        return False
    if kind == "array":
        items = schema.get("items") or {"type": "string"}
        return [value_for(items)] * int(schema.get("minItems", 0))
    if kind == "object":
        return arguments_for(schema)
    return "example"


def arguments_for(parameters: dict[str, Any]) -> dict[str, Any]:
    props = parameters.get("properties") or {}
    return {n: value_for(props.get(n) or {}) for n in parameters.get("required") or []}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


class Run:
    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.next = 0
        self.turns: list[float] = []  # ms, every finished turn
        self.good_turns: list[float] = []
        self.discover_ms: list[float] = []
        self.execute_ms: list[float] = []
        self.outcomes: Counter[str] = Counter()

    def text(self) -> str:
        text = self.texts[self.next % len(self.texts)]
        self.next += 1
        return text


async def agent(client: httpx.AsyncClient, token: str, n: int, run: Run, until: float) -> None:
    hdr = {"Authorization": f"Bearer {token}"}
    conversation = f"bench-agent-{n}"
    while time.monotonic() < until:
        t0 = time.perf_counter()
        d = await client.post(
            "/v1/discover",
            json={"query": run.text(), "k": 3, "conversation": conversation},
            headers=hdr,
        )
        t1 = time.perf_counter()
        run.discover_ms.append((t1 - t0) * 1000)
        found = d.json() if d.status_code == 200 else {}
        if not found.get("tools"):
            run.outcomes[f"discover:{d.status_code}:no tools"] += 1
            run.turns.append((t1 - t0) * 1000)
            continue
        schema = found["schemas"][0]
        name = schema["function"]["name"]
        args = arguments_for(schema["function"].get("parameters") or {})
        e = await client.post(
            "/v1/execute",
            json={
                "name": name,
                "arguments": args,
                "discovery_id": found.get("discovery_id"),
                "conversation": conversation,
            },
            headers=hdr,
        )
        t2 = time.perf_counter()
        run.execute_ms.append((t2 - t1) * 1000)
        run.turns.append((t2 - t0) * 1000)
        answer = e.json() if e.status_code == 200 else {}
        status = answer.get("status", f"http {e.status_code}")
        if status == "ok":
            run.good_turns.append((t2 - t0) * 1000)
            run.outcomes["ok"] += 1
        else:
            run.outcomes[f"execute:{status}:{answer.get('reason')}"] += 1


async def drive(url: str, tokens: list[str], texts: list[str], seconds: float) -> dict[str, Any]:
    run = Run(texts)
    limits = httpx.Limits(max_connections=len(tokens), max_keepalive_connections=len(tokens))
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        started = time.monotonic()
        until = started + seconds
        await asyncio.gather(*(agent(client, t, i, run, until) for i, t in enumerate(tokens)))
        wall = time.monotonic() - started
    return {
        "wall_s": round(wall, 2),
        "turns": len(run.turns),
        "successful_turns": len(run.good_turns),
        "successful_turns_per_s": round(len(run.good_turns) / wall, 2),
        "turn_p50_ms": _pct(run.turns, 0.50),
        "turn_p99_ms": _pct(run.turns, 0.99),
        "successful_turn_p50_ms": _pct(run.good_turns, 0.50),
        "successful_turn_p99_ms": _pct(run.good_turns, 0.99),
        "discover_p50_ms": _pct(run.discover_ms, 0.50),
        "discover_p99_ms": _pct(run.discover_ms, 0.99),
        "execute_p50_ms": _pct(run.execute_ms, 0.50),
        "execute_p99_ms": _pct(run.execute_ms, 0.99),
        "turn_mean_ms": round(statistics.fmean(run.turns), 2) if run.turns else 0.0,
        "outcomes": dict(run.outcomes.most_common()),
        "texts_used": run.next,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--postgres", action="store_true")
    ap.add_argument("--bench", type=Path, default=DEFAULT_BENCH, help="dev sets: the texts")
    args = ap.parse_args()
    if args.agents < 1:
        raise SystemExit("error: --agents must be at least 1")
    from toolscout.gateway.auth import issue_token

    texts = dev_queries(args.bench)
    tokens = []
    for i in range(args.agents):
        tenant, role = AGENT_KINDS[i % len(AGENT_KINDS)]
        subject = f"agent{i}@{tenant}"
        tokens.append(
            issue_token(subject=subject, key=KEY, tenant=tenant, roles=[role], ttl_seconds=3600)
        )
    with serving(args.workers, args.postgres) as srv:
        before = load_avg()
        out = asyncio.run(drive(srv.url, tokens, texts, args.seconds))
        out["load_avg_before"] = before
        out["load_avg_after"] = load_avg()
    result = {
        "store": "postgres" if args.postgres else "sqlite",
        "agents": args.agents,
        "workers": args.workers,
        "seconds": args.seconds,
        "cpus": os.cpu_count(),
        **out,
    }
    path = ROOT / "benchmarks" / "results" / f"agents_{result['store']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{'store':<9} {'agents':>6} {'turns':>6} {'ok turns/s':>10} {'turn p50/p99 ms':>18}"
        f" {'discover p50/p99':>17} {'execute p50/p99':>16}  load avg before -> after"
    )
    print(
        f"{result['store']:<9} {args.agents:>6} {out['turns']:>6}"
        f" {out['successful_turns_per_s']:>10}"
        f" {out['turn_p50_ms']:>8} / {out['turn_p99_ms']:<7}"
        f" {out['discover_p50_ms']:>7} / {out['discover_p99_ms']:<7}"
        f" {out['execute_p50_ms']:>6} / {out['execute_p99_ms']:<7}"
        f"  {out['load_avg_before']} -> {out['load_avg_after']}"
    )
    print("outcomes:", out["outcomes"])
    print(f"written {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
