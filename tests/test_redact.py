"""toolscout.redact: secrets out of stored text, and out of the audit detail end to end."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from _gateway_kit import gateway, spec, token
from toolscout.cards import ToolSpec
from toolscout.errors import GatewayError
from toolscout.redact import MASK, redact

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXZhbHVl"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("could not connect to postgresql://app:s3cr3t-pw@db:5432/prod", "s3cr3t-pw"),
        ("mysql://root:hunter2@10.0.0.5/x refused", "hunter2"),
        ("host=db user=app password=hunter2 dbname=x", "hunter2"),
        ("upstream said 401 for Authorization: Bearer abcdef0123456789", "abcdef0123456789"),
        ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"),
        (f"token was {JWT}", JWT),
        ('{"user": "bob", "client_secret": "c-s-3"}', "c-s-3"),
        ("GET https://api.example.com/v1?q=1&api_key=KEY123456 failed", "KEY123456"),
        ("X-Api-Key: 0123456789abcdef", "0123456789abcdef"),
        ("key sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX was refused", "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX"),
        ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\n-----END PRIVATE KEY-----", "MIIEvQIBADAN"),
    ],
)
def test_secrets_are_masked_and_the_rest_kept(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out and MASK in out


def test_text_without_secrets_is_unchanged() -> None:
    for text in (
        "order 94218 not found",
        "max_tokens: 5 exceeded; used 12 tokens",
        "ValueError: amount must be positive",
        "https://example.com/path?q=refund",
        "",
    ):
        assert redact(text) == text
    assert redact("postgresql://app:pw@db/x") == f"postgresql://app:{MASK}@db/x"


class LeakyExecutor:
    """A tool that fails with its connection string (and a token) in the message."""

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        raise ConnectionError(
            "could not connect to postgresql://svc:Pa55w0rd!@db.internal/prod "
            f"(Authorization: Bearer {JWT})"
        )

    async def aclose(self) -> None:
        return None


def test_a_tools_exception_text_is_stored_redacted(tmp_path: Path) -> None:
    gw, _, audit = gateway(tmp_path, [spec("db.query")], LeakyExecutor())

    async def go() -> GatewayError:
        with pytest.raises(GatewayError) as err:
            await gw.execute(token(), "db.query", {"order_id": "1"})
        return err.value

    err = asyncio.run(go())
    assert "Pa55w0rd" not in str(err) and JWT not in str(err)
    (outcome,) = [r for r in audit.read() if r.kind == "outcome"]
    assert "ConnectionError" in outcome.detail and "postgresql://svc:" in outcome.detail
    assert "Pa55w0rd" not in outcome.detail and JWT not in outcome.detail
    assert audit.verify().ok
