"""Two real ``toolscout serve --postgres`` replicas on one database stay consistent."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pg_fixture import pg_dsn, pg_server  # noqa: F401  (fixtures)
from serve_fixture import AUDIT_KEY, auth, start_server, stop, token
from toolscout.gateway.audit_pg import PostgresAuditLog

ADMIN = auth(token("root@acme", scopes=["toolscout:platform", "ops:*", "crm:*"]))
OPS = auth(token("olga@acme", scopes=["ops:*"]))

SEED = [
    {"id": "ops.restart_service", "name": "restart_service", "scopes": ["ops:write"],
     "summary": "Restart a stuck service on a host.", "parameters": {}},
    {"id": "ops.list_hosts", "name": "list_hosts", "scopes": ["ops:read"],
     "summary": "List the hosts of a cluster.", "parameters": {}},
    {"id": "crm.find_contact", "name": "find_contact", "scopes": ["crm:read"],
     "summary": "Find a customer contact by name or email.", "parameters": {}},
]  # fmt: skip
NEW = {
    "id": "ops.rotate_certificate",
    "name": "rotate_certificate",
    "scopes": ["ops:write"],
    "summary": "Rotate the TLS certificate of a load balancer.",
    "parameters": {},
}


@pytest.fixture
def replicas(pg_dsn: str) -> Iterator[tuple[str, str]]:  # noqa: F811
    """Two `toolscout serve --postgres` processes on one database (no file of their own)."""
    a, url_a = start_server("--postgres", pg_dsn)
    try:
        r = httpx.post(
            f"{url_a}/v1/catalog/import", json={"tools": SEED}, headers=ADMIN, timeout=60
        )
        assert r.status_code == 200, r.text
        b, url_b = start_server("--postgres", pg_dsn)
        try:
            yield url_a, url_b
        finally:
            stop(b)
    finally:
        stop(a)


def _ids(url: str, query: str) -> list[str]:
    r = httpx.post(f"{url}/v1/discover", json={"query": query, "k": 5}, headers=OPS, timeout=30)
    assert r.status_code == 200, r.text
    return [t["id"] for t in r.json()["tools"]]


def _execute(url: str, name: str) -> dict[str, Any]:
    r = httpx.post(f"{url}/v1/execute", json={"name": name}, headers=OPS, timeout=30)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_upsert_through_one_is_found_through_the_other(replicas: tuple[str, str]) -> None:
    a, b = replicas
    assert "ops.rotate_certificate" not in _ids(b, "rotate the tls certificate")
    r = httpx.post(f"{a}/v1/catalog/import", json={"tools": [NEW]}, headers=ADMIN, timeout=60)
    assert r.json()["added"] == 1
    deadline = time.monotonic() + 2.0  # the bound: every request checks the generation
    while "ops.rotate_certificate" not in _ids(b, "rotate the tls certificate"):
        assert time.monotonic() < deadline, "replica B did not see the upsert within 2 s"
        time.sleep(0.05)


def test_delete_and_rescope_are_refused_by_both_on_the_next_call(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    for url in (a, b):
        assert _execute(url, "ops.restart_service")["status"] != "refused"
        assert _execute(url, "ops.list_hosts")["status"] != "refused"
    r = httpx.post(
        f"{a}/v1/catalog/delete", json={"ids": ["ops.restart_service"]}, headers=ADMIN, timeout=60
    )
    assert r.json()["removed"] == 1
    rescoped = {**SEED[1], "scopes": ["crm:read"]}
    body = {"tools": [rescoped]}
    r = httpx.post(f"{b}/v1/catalog/import", json=body, headers=ADMIN, timeout=60)
    assert r.status_code == 409 and r.json()["error"]["code"] == "import_refused"
    body["force"] = True  # a replaced scope is a protected change
    r = httpx.post(f"{b}/v1/catalog/import", json=body, headers=ADMIN, timeout=60)
    assert r.json()["updated"] == 1
    for url in (a, b):
        gone = _execute(url, "ops.restart_service")
        assert gone["status"] == "refused"
        moved = _execute(url, "ops.list_hosts")
        assert moved["status"] == "refused"
        assert "ops.restart_service" not in _ids(url, "restart a stuck service")


def test_both_replicas_audit_into_one_chain(replicas: tuple[str, str], pg_dsn: str) -> None:  # noqa: F811
    """Every attempt through either replica is one row of one verified chain in the database."""
    a, b = replicas
    answers = [_execute((a, b)[i % 2], "ops.list_hosts") for i in range(6)]
    with PostgresAuditLog(pg_dsn, key=AUDIT_KEY) as log:  # `serve` keys it with its own key
        every = log.read()
        # the seeding import is audited first (the platform administrator's rows), then
        # each attempt is one row, in the order the two replicas answered
        seeded = [r for r in every if r.kind == "admin"]
        assert seeded and all(r.subject == "root@acme" for r in seeded)
        rows = [r for r in every if r.kind != "admin"]
        first = len(seeded) + 1
        assert [r.id for r in rows] == [int(x["audit_id"]) for x in answers]
        assert [r.id for r in rows] == list(range(first, first + 6))
        assert [(r.subject, r.tool_id, r.status) for r in rows] == [
            ("olga@acme", "ops.list_hosts", x["status"]) for x in answers
        ]
        assert log.verify().ok
