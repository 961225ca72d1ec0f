"""The HTTP discover route ranks without the query encoder exactly where the library does
(h/http13, round nineteen): the skip is a property of the discovery, not of its caller."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from serve_fixture import AUDIT_KEY, KEY, auth, token
from support import CountingEmbedder, card_embedder
from test_http import build_demo
from toolscout import DryRunExecutor, Settings, Toolscout
from toolscout.http.app import create_app
from toolscout.settings import SearchSettings

ALICE = token(roles=["support_agent"])


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("http_skip") / "demo.db"
    build_demo(path)
    return path


@pytest.mark.parametrize("on", [True, False])
def test_the_http_path_skips_the_encoder_as_the_library_does(demo_db: Path, on: bool) -> None:
    """With ``encoder_skip`` on, a request naming a tool is ranked without the encoder
    over HTTP as in the library, and one that does not is encoded; off (the shipped
    default), every request runs it, over HTTP as in the library."""
    named = "please run orders.find_order for 94218"
    vague = "my parcel never came, what happened to it"
    counting = CountingEmbedder(card_embedder())
    settings = Settings(
        db=str(demo_db), jwt_key=KEY, audit_key=AUDIT_KEY, search=SearchSettings(encoder_skip=on)
    )
    service = Toolscout.open(settings, executors=DryRunExecutor(), embedder=counting)
    try:
        principal = service.verify(ALICE)
        app = create_app(service)
        with TestClient(app) as client:
            assert app.state.readiness.wait(120)
            for text in (named, vague):
                for how in ("library", "http"):
                    counting.texts.clear()
                    query = f"{text} ({how}, {on})"  # a text no query-vector cache holds
                    if how == "library":
                        ids = service.discover(principal, query, k=3).ids
                    else:
                        answer = client.post(
                            "/v1/discover", json={"query": query, "k": 3}, headers=auth(ALICE)
                        )
                        assert answer.status_code == 200, answer.text
                        ids = [t["id"] for t in answer.json()["tools"]]
                    skipped = on and text == named
                    assert (counting.texts == []) == skipped, (on, text, how)
                    if text == named:
                        assert ids[0] == "orders.find_order"
    finally:
        service.close()
