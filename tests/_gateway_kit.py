"""Shared helpers for the gateway tests: a dict-backed tool lookup, keys, tokens.

Also holds the case counters the security suite fills and ``conftest.py``
prints in the terminal summary.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from toolscout.cards import ToolSpec, make_spec
from toolscout.executors.base import Executor
from toolscout.gateway.audit import AuditLog
from toolscout.gateway.auth import JWTVerifier, issue_token
from toolscout.gateway.core import Gateway
from toolscout.gateway.grants import GrantSigner
from toolscout.gateway.limits import Limits
from toolscout.policy import PolicyConfig

SECRET = "test-secret-0123456789abcdef-0123456789"
GRANT_SECRET = b"grant-secret-0123456789abcdef-0123456789"
ISSUER = "https://idp.test"
AUDIENCE = "toolscout"

#: generated cases per property test, printed by conftest.py's terminal summary
CASE_COUNTS: Counter[str] = Counter()
#: audit logs opened through audit_log(); conftest.py closes them after each test
OPEN_LOGS: list[AuditLog] = []


def audit_log(path: str | Path) -> AuditLog:
    log = AuditLog(path)
    OPEN_LOGS.append(log)
    return log


class DictTools:
    """The smallest ToolLookup: specs in a dict."""

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self.specs = {s.id: s for s in specs}

    def spec(self, tool_id: str) -> ToolSpec | None:
        return self.specs.get(tool_id)

    def replace(self, specs: Iterable[ToolSpec]) -> None:
        self.specs = {s.id: s for s in specs}


class RecordingExecutor:
    """An executor that runs nothing and records what it was asked to run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        self.calls.append((spec.id, dict(arguments)))
        return {"ran": spec.id}

    async def aclose(self) -> None:
        return None


def spec(tool_id: str, **fields: Any) -> ToolSpec:
    data: dict[str, Any] = {"id": tool_id, "summary": f"The {tool_id} tool."}
    data.setdefault(
        "parameters",
        {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["order_id"],
        },
    )
    data.update(fields)
    return make_spec(data)


def verifier(**kwargs: Any) -> JWTVerifier:
    return JWTVerifier(key=SECRET, issuer=ISSUER, audience=AUDIENCE, **kwargs)


def token(
    sub: str = "alice",
    tenant: str = "acme",
    scopes: Iterable[str] = (),
    roles: Iterable[str] = (),
    **kwargs: Any,
) -> str:
    kwargs.setdefault("issuer", ISSUER)
    kwargs.setdefault("audience", AUDIENCE)
    kwargs.setdefault("key", SECRET)
    return issue_token(subject=sub, tenant=tenant, scopes=scopes, roles=roles, **kwargs)


def expired_token(**kwargs: Any) -> str:
    return token(now=time.time() - 3600, ttl_seconds=60, **kwargs)


def gateway(
    tmp: Path,
    specs: Iterable[ToolSpec],
    executor: Executor | None = None,
    *,
    policy: PolicyConfig | None = None,
    **kwargs: Any,
) -> tuple[Gateway, RecordingExecutor | Executor, AuditLog]:
    audit = audit_log(tmp / "toolscout.db")
    ex = executor or RecordingExecutor()
    kwargs.setdefault("limits", Limits(rate_per_second=1000, burst=1000))
    gw = Gateway(DictTools(specs), policy or PolicyConfig(), verifier(), ex, audit, **kwargs)
    return gw, ex, audit


def signer() -> GrantSigner:
    return GrantSigner(GRANT_SECRET)
