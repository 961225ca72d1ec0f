"""The HTTP API's gate: bad-token callers throttled and audited, discovery budgets, body
limits decided before the body is read, discovery ids owned, ids with a slash."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from serve_fixture import AUDIT_KEY, KEY, auth, token
from toolscout.gateway.limits import Limits

TOOLS = [
    {"id": "orders.find_order", "name": "find_order", "summary": "Find an order by its id.",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
    {"id": "files/read_file", "name": "read_file", "summary": "Read a file of the workspace.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
]  # fmt: skip
DISCOVERIES = 4  # the discovery burst of the app under test


@pytest.fixture(scope="module")
def app_and_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    from fastapi.testclient import TestClient

    from support import embedder
    from toolscout import DryRunExecutor, Settings, Toolscout
    from toolscout.cards import make_spec
    from toolscout.http.app import create_app

    db = tmp_path_factory.mktemp("guard") / "tools.db"
    settings = Settings(db=str(db), jwt_key=KEY, audit_key=AUDIT_KEY)
    limits = Limits(
        rate_per_second=0.01,  # a budget that does not refill during the test
        burst=DISCOVERIES,
        unauthenticated_rate_per_second=0.01,
        unauthenticated_burst=5,
    )
    service = Toolscout.open(
        settings, embedder=embedder(), executors=DryRunExecutor(), limits=limits
    )
    service.catalog.add([make_spec(t) for t in TOOLS])
    app = create_app(service, max_body=64 * 1024)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert app.state.readiness.wait(120), "the app did not warm up"
        yield client, service
    service.close()


@pytest.fixture
def client(app_and_service: tuple[Any, Any]) -> Any:
    return app_and_service[0]


def test_bad_token_callers_are_audited_then_throttled(app_and_service: tuple[Any, Any]) -> None:
    client, service = app_and_service
    before = len(service.audit.read())
    statuses = []
    for bad in ["forged.token.value", None, "Bearer-less"] * 4:
        headers = {"Authorization": f"Bearer {bad}"} if bad else {}
        r = client.post("/v1/discover", json={"query": "find order"}, headers=headers)
        statuses.append(r.status_code)
    assert statuses[:5] == [401] * 5, statuses
    assert set(statuses[5:]) == {429}, statuses  # over the client's budget: throttled
    assert r.headers["Retry-After"] and r.json()["error"]["code"] == "rate_limited"
    rows = service.audit.read()[before:]
    assert len(rows) == 5  # each refusal within the budget, none over it
    assert {(r.decision, r.status, r.subject) for r in rows} == {("denied", "refused", "")}
    assert {r.reason for r in rows} >= {"token_missing"}
    assert all("/v1/discover from testclient" in r.detail for r in rows)


def test_discovery_has_a_budget_per_principal(client: Any) -> None:
    mine = auth(token("dora@acme", scopes=["*"]))
    codes = [
        client.post("/v1/discover", json={"query": "find order"}, headers=mine).status_code
        for _ in range(DISCOVERIES + 2)
    ]
    assert codes == [200] * DISCOVERIES + [429, 429]
    other = auth(token("eve@acme", scopes=["*"]))  # another principal has its own budget
    assert client.post("/v1/discover", json={"query": "x"}, headers=other).status_code == 200


def test_an_unauthenticated_body_is_small_and_an_authenticated_one_is_not(client: Any) -> None:
    from toolscout.http.app import UNAUTHENTICATED_BODY

    tools = [{"id": f"t.tool_{i}", "summary": "x" * 100} for i in range(300)]  # ~40 KB
    forged = {"Authorization": "Bearer forged.token.value"}
    for headers in (forged, {}):
        r = client.post("/v1/catalog/import", json={"tools": tools}, headers=headers)
        assert r.status_code == 413, r.text
        assert str(UNAUTHENTICATED_BODY) in r.json()["error"]["message"]
    reader = auth(token("fred@acme", scopes=["orders:read"]))  # verified: past the body limit
    r = client.post("/v1/catalog/import", json={"tools": tools}, headers=reader)
    assert r.status_code == 403, r.text
    r = client.post("/v1/discover", json={"query": "order"}, headers=forged)  # small: 401
    assert r.status_code in (401, 429)


def test_a_chunked_oversize_body_is_413(client: Any) -> None:
    who = auth(token("gina@acme", scopes=["*"]))

    def chunks() -> Iterator[bytes]:
        yield b'{"query": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'

    r = client.post(
        "/v1/discover", content=chunks(), headers={**who, "Content-Type": "application/json"}
    )
    assert r.status_code == 413, r.text
    assert r.json()["error"]["code"] == "payload_too_large"

    def small() -> Iterator[bytes]:
        yield b'{"query": "find '
        yield b'order"}'

    r = client.post(
        "/v1/discover", content=small(), headers={**who, "Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text


def test_execute_refuses_another_callers_discovery_id(client: Any) -> None:
    alice = auth(token("alice@acme", scopes=["*"]))
    mallory = auth(token("mallory@acme", scopes=["*"]))
    did = client.post("/v1/discover", json={"query": "find an order"}, headers=alice).json()[
        "discovery_id"
    ]
    assert did
    call = {"name": "orders.find_order", "arguments": {"order_id": "1"}, "discovery_id": did}
    r = client.post("/v1/execute", json=call, headers=mallory)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
    r = client.post("/v1/execute", json={**call, "discovery_id": "d-unknown"}, headers=alice)
    assert r.status_code == 404
    r = client.post("/v1/execute", json=call, headers=alice)
    assert r.status_code == 200 and r.json()["discovery_id"] == did, r.text


def test_schema_of_an_id_with_a_slash(client: Any) -> None:
    who = auth(token("hank@acme", scopes=["*"]))
    r = client.get("/v1/tools/files/read_file/schema", headers=who)
    assert r.status_code == 200, r.text
    assert "path" in str(r.json())
    r = client.get("/v1/tools/files/nothing/schema", headers=who)
    assert r.status_code == 404
