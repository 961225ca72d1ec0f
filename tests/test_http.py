"""The HTTP API: in process through the ASGI app, and over a socket from ``toolscout serve``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fork_kit import toolscout as fork_toolscout
from serve_fixture import AUDIT_KEY, KEY, auth, start_server, stop, token
from toolscout.gateway.auth import issue_token
from toolscout.loader import demo_catalog_dir, read_catalog, read_policy

ROOT = Path(__file__).resolve().parents[1]
ALICE = auth(token(roles=["support_agent"]))
ADMIN = auth(token("root@acme", scopes=["toolscout:admin", "*"]))


#: the part of the demo catalog these tests use (the whole of it only costs embedding time)
DEMO_FILES = ("orders.yaml", "billing.yaml", "cloud.yaml")


def build_demo(path: Path) -> None:
    from support import card_embedder
    from toolscout import Settings, Toolscout

    settings = Settings(db=str(path), jwt_key=KEY, audit_key=AUDIT_KEY)
    with Toolscout.open(settings, embedder=card_embedder()) as ts:
        ts.catalog.set_policy(read_policy(demo_catalog_dir() / "policy.yaml"))
        ts.catalog.add(read_catalog([demo_catalog_dir() / f for f in DEMO_FILES]))


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("http") / "demo.db"
    build_demo(path)
    return path


@pytest.fixture(scope="module")
def client(demo_db: Path) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from toolscout.cli.serve import build_service
    from toolscout.http.app import create_app

    service = build_service(str(demo_db), jwt_key=KEY, audit_key=AUDIT_KEY, dry_run=True)
    app = create_app(service, max_body=64 * 1024)
    with TestClient(app, raise_server_exceptions=False) as c:
        assert app.state.readiness.wait(120), "the app did not warm up"
        yield c
    service.close()


def _error(resp: httpx.Response, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and body["error"]["code"] == code
    assert "Traceback" not in body["error"]["message"] and "\n" not in body["error"]["message"]


# -- in process ---------------------------------------------------------------------------
def test_discover_returns_entitled_shortlist_with_schemas(client: Any) -> None:
    r = client.post("/v1/discover", json={"query": "where is order 94218", "k": 3}, headers=ALICE)
    assert r.status_code == 200, r.text
    body = r.json()
    assert 1 <= len(body["tools"]) <= 10 and len(body["schemas"]) == len(body["tools"])
    assert body["discovery_id"]
    assert body["tokens"]["injected"] <= body["tokens"]["catalog"]
    assert set(body["names"].values()) == {t["id"] for t in body["tools"]}
    assert any("order" in t["id"] for t in body["tools"])


def test_every_v1_route_needs_a_valid_token(client: Any) -> None:
    _error(client.post("/v1/discover", json={"query": "refund"}), 401, "unauthorized")
    bad = auth(issue_token(subject="x", key="another-key-0123456789abcdef0123456"))
    _error(client.post("/v1/discover", json={"query": "refund"}, headers=bad), 401, "unauthorized")
    _error(client.post("/v1/execute", json={"name": "x"}), 401, "unauthorized")
    _error(client.get("/v1/tools/orders.find_order/schema"), 401, "unauthorized")
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["tools"] == 61


def test_schema_only_for_entitled_tools_and_unknown_looks_the_same(client: Any) -> None:
    r = client.get("/v1/tools/orders.find_order/schema?format=anthropic", headers=ALICE)
    assert r.status_code == 200 and "input_schema" in r.json()
    forbidden = client.get("/v1/tools/billing.issue_full_refund/schema", headers=ALICE)
    unknown = client.get("/v1/tools/no.such.tool/schema", headers=ALICE)
    _error(forbidden, 404, "not_found")
    _error(unknown, 404, "not_found")
    assert forbidden.json() == unknown.json() | {
        "error": {**unknown.json()["error"], "message": forbidden.json()["error"]["message"]}
    }


def test_execute_refuses_what_the_token_does_not_allow(client: Any) -> None:
    r = client.post(
        "/v1/execute",
        json={"name": "billing.issue_full_refund", "arguments": {"order_id": "5512"}},
        headers=ALICE,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "refused" and not body["ok"] and body["reason"]


def test_execute_by_the_name_the_model_saw(client: Any) -> None:
    d = client.post(
        "/v1/discover", json={"query": "where is order 94218", "format": "openai"}, headers=ALICE
    ).json()
    name = next(iter(d["names"]))
    r = client.post(
        "/v1/execute",
        json={"name": name, "arguments": {}, "discovery_id": d["discovery_id"]},
        headers=ALICE,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["tool_id"] == d["names"][name]
    assert body["status"] in ("ok", "refused", "error")


def test_feedback_names_only_tools_the_caller_may_use(client: Any) -> None:
    d = client.post("/v1/discover", json={"query": "where is order 94218"}, headers=ALICE).json()
    ok = {"discovery_id": d["discovery_id"], "tool_id": d["tools"][0]["id"]}
    assert client.post("/v1/feedback", json=ok, headers=ALICE).json() == {"ok": True}
    bad = {**ok, "tool_id": "billing.issue_full_refund"}
    _error(client.post("/v1/feedback", json=bad, headers=ALICE), 404, "not_found")
    # another caller (same tenant, same role) cannot speak for Alice's discovery, and an
    # unknown discovery id is refused the same way: feedback feeds learned aliases
    mallory = auth(token("mallory@acme", roles=["support_agent"]))
    _error(client.post("/v1/feedback", json=ok, headers=mallory), 404, "not_found")
    made_up = {**ok, "discovery_id": "d-does-not-exist"}
    _error(client.post("/v1/feedback", json=made_up, headers=ALICE), 404, "not_found")


def test_catalog_writes_need_the_admin_scope_and_refuse_atomically(client: Any) -> None:
    # an untenanted tool is the platform administrator's (tests/test_administration.py
    # covers the tenant level)
    platform = auth(token("root@acme", scopes=["toolscout:platform"]))
    rec = {"id": "http.new_tool", "name": "new_tool", "description": "Frobnicate a widget."}
    _error(
        client.post("/v1/catalog/import", json={"tools": [rec]}, headers=ALICE), 403, "forbidden"
    )
    _error(
        client.post("/v1/catalog/import", json={"tools": [rec]}, headers=ADMIN), 403, "forbidden"
    )
    bad = {"tools": [rec, {"id": "", "name": "broken"}]}
    _error(client.post("/v1/catalog/import", json=bad, headers=platform), 400, "invalid_catalog")
    before = client.get("/readyz").json()["tools"]
    r = client.post("/v1/catalog/import", json={"tools": [rec]}, headers=platform)
    assert r.status_code == 200, r.text
    assert r.json()["added"] == 1
    assert client.get("/readyz").json()["tools"] == before + 1
    r = client.post("/v1/catalog/delete", json={"ids": ["http.new_tool"]}, headers=platform)
    assert r.json()["removed"] == 1
    assert client.get("/readyz").json()["tools"] == before


def test_bad_bodies_get_one_error_shape(client: Any) -> None:
    _error(client.post("/v1/discover", json={"query": ""}, headers=ALICE), 422, "invalid_request")
    _error(client.post("/v1/discover", json={"query": "x", "k": 99}, headers=ALICE), 422,
           "invalid_request")  # fmt: skip
    _error(client.post("/v1/discover", content=b"{not json", headers=ALICE), 422, "invalid_request")
    big = {"query": "x" * 100_000}
    _error(client.post("/v1/discover", json=big, headers=ALICE), 413, "payload_too_large")
    _error(client.get("/v1/nothing", headers=ALICE), 404, "not_found")


def test_metrics_parse_as_prometheus_text(client: Any) -> None:
    client.post("/v1/discover", json={"query": "restart the pod"}, headers=ALICE)
    text = client.get("/metrics").text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {
        "toolscout_discover_seconds",
        "toolscout_shortlist_size",
        "toolscout_tokens_injected",
        "toolscout_tokens_saved",
        "toolscout_denials",
        "toolscout_low_confidence",
        "toolscout_discoveries",
        "toolscout_executions",
    } <= names


def test_a_discovery_answers_the_response_models_fields_only(client: Any) -> None:
    """The discover route writes its own answer: exactly what FastAPI's response model makes
    of it (the service's shortlist carries more than the API shows, e.g. each tool's
    confidence and the pinned tools' tokens)."""
    from toolscout.http.models import DiscoverResponse

    got = client.post("/v1/discover", json={"query": "refund an order", "k": 3}, headers=ALICE)
    assert got.status_code == 200
    assert got.headers["content-type"] == "application/json"
    modelled = DiscoverResponse.model_validate_json(got.content).model_dump_json(by_alias=True)
    assert got.content == modelled.encode()
    assert json.loads(got.content)["tools"], "the demo catalog has tools for a refund"


def _requests_counted(client: Any) -> dict[tuple[str, str], float]:
    text = client.get("/metrics").text
    return {
        (s.labels["route"], s.labels["status"]): s.value
        for f in text_string_to_metric_families(text)
        if f.name == "toolscout_http_requests"
        for s in f.samples
        if s.name == "toolscout_http_requests_total"
    }


def test_every_answered_request_is_counted_by_route_and_status(client: Any) -> None:
    before = _requests_counted(client)
    client.post("/v1/discover", json={"query": "restart the pod"}, headers=ALICE)
    client.post("/v1/discover", json={"query": "restart the pod"}, headers=ALICE)
    client.post("/v1/discover", json={"query": "restart the pod"}, headers={"X": "no token"})
    client.get("/v1/nothing", headers=ALICE)
    client.post("/v1/discover", json={"query": "x", "k": 99}, headers=ALICE)
    after = _requests_counted(client)

    def added(route: str, status: str) -> float:
        return after.get((route, status), 0.0) - before.get((route, status), 0.0)

    assert added("/v1/discover", "200") == 2
    assert added("/v1/discover", "401") == 1
    assert added("/v1/discover", "422") == 1
    assert added("unmatched", "404") == 1
    assert added("/metrics", "200") == 1  # the first scrape, counted once it answered


def test_committed_openapi_document_is_current(client: Any) -> None:
    served = client.get("/openapi.json").json()
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert served == committed, "regenerate: python -m toolscout.http.openapi > docs/openapi.json"


# -- over a real socket ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(demo_db: Path) -> Iterator[str]:
    proc, url = start_server("--db", str(demo_db), "--dry-run")
    yield url
    stop(proc)


def test_served_over_a_socket_with_a_token_and_refused_without(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as http:
        r = http.post("/v1/discover", json={"query": "refund invoice"}, headers=ALICE)
        assert r.status_code == 200 and r.json()["tools"]
        _error(http.post("/v1/discover", json={"query": "refund invoice"}), 401, "unauthorized")
        call = {"name": "orders.find_order", "arguments": {"order_id": "94218"}}
        r = http.post("/v1/execute", json=call, headers=ALICE)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "ok" and r.json()["tool_id"] == "orders.find_order"
        assert r.json()["value"]["arguments"] == {"order_id": "94218"}
        _error(http.post("/v1/execute", json=call), 401, "unauthorized")


def test_serve_refuses_bad_options_in_one_line(tmp_path: Path) -> None:
    r = subprocess.run(
        fork_toolscout("serve", "--db", str(tmp_path / "none.db")),  # forked (fork_kit)
        capture_output=True, text=True, timeout=60, env={**os.environ, "TOOLSCOUT_TOKEN_KEY": KEY},
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr


def test_schemathesis_finds_no_server_error_nor_schema_violation(server: str) -> None:
    st = Path(sys.executable).with_name("schemathesis")
    r = subprocess.run(
        [
            str(st), "run", f"{server}/openapi.json",
            "--header", f"Authorization: {ALICE['Authorization']}",
            "--checks", "not_a_server_error,response_schema_conformance,"
            "status_code_conformance,content_type_conformance",
            "--max-examples", "12", "--seed", "1", "--exclude-path-regex", "^/v1/catalog",
            "--request-timeout", "20",
        ],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def _established(proc: Any, port: int) -> int:
    import psutil

    return sum(
        1
        for c in proc.net_connections("tcp")
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
    )


@pytest.fixture(scope="module")
def two_workers(demo_db: Path) -> Iterator[Callable[[], tuple[subprocess.Popen[bytes], str]]]:
    """``serve --workers 2`` on the demo catalog, shared by the tests below (three fresh
    interpreters and the catalog's warm-up each time it starts): a call gives the running
    server, started on the first call and again if a test stopped it; stopped at the end."""
    running: list[tuple[subprocess.Popen[bytes], str]] = []

    def get() -> tuple[subprocess.Popen[bytes], str]:
        if not running or running[-1][0].poll() is not None:
            running.append(start_server("--db", str(demo_db), "--dry-run", "--workers", "2"))
        return running[-1]

    try:
        yield get
    finally:
        for proc, _ in running:
            if proc.poll() is None:
                stop(proc)


def test_metrics_of_several_workers_are_summed_in_every_scrape(
    two_workers: Callable[[], tuple[subprocess.Popen[bytes], str]],
) -> None:
    """With ``--workers 2`` a scrape reaches one worker, chosen by the kernel; each scrape
    still counts every worker's discoveries (one worker's own counts, before)."""
    proc, url = two_workers()
    try:
        for i in range(20):  # a new connection each: the kernel spreads them over both
            with httpx.Client(base_url=url, timeout=30) as c:
                r = c.post("/v1/discover", json={"query": f"refund invoice {i}"}, headers=ALICE)
                assert r.status_code == 200, r.text
        for _ in range(6):
            with httpx.Client(base_url=url, timeout=30) as c:
                text = c.get("/metrics").text
            counts = {
                s.name: s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
                if s.name == "toolscout_discoveries_total"
            }
            assert counts == {"toolscout_discoveries_total": 20.0}, counts
    except BaseException:
        stop(proc)  # a failed test leaves no server with its requests to the next
        raise


def test_workers_each_listen_and_share_the_connections(
    two_workers: Callable[[], tuple[subprocess.Popen[bytes], str]],
) -> None:
    """``serve --workers 2``: two worker processes, each with its own listening socket on
    the port, so the kernel spreads connections over both (with uvicorn's one shared
    socket, one worker took nearly all of a load generator's keep-alive connections);
    SIGTERM stops them all."""
    import psutil

    proc, url = two_workers()
    clients = [httpx.Client(base_url=url, timeout=10) for _ in range(24)]
    try:
        for c in clients:  # one keep-alive connection each
            assert c.get("/healthz").status_code == 200
        port = int(url.rsplit(":", 1)[1])
        workers = [
            p for p in psutil.Process(proc.pid).children(recursive=True)
            if any(c.laddr and c.laddr.port == port for c in p.net_connections("tcp"))
        ]  # fmt: skip
        held = {p.pid: _established(p, port) for p in workers}
        assert len(held) == 2 and sum(held.values()) == 24, held
        assert all(n > 0 for n in held.values()), held
        # each worker listens itself: the parent holds no shared listening socket
        parent = psutil.Process(proc.pid).net_connections("tcp")
        assert not [c for c in parent if c.laddr and c.laddr.port == port], parent
    finally:
        for c in clients:
            c.close()
        children = psutil.Process(proc.pid).children(recursive=True)
        stop(proc)
    assert proc.returncode is not None
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, alive
