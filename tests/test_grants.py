"""Tests for toolscout.gateway.grants: discovery grants bind subject, tenant and tool ids."""

from __future__ import annotations

import base64
import json

import pytest

from toolscout.errors import ConfigError, GrantError
from toolscout.gateway.grants import GrantSigner
from toolscout.policy import Principal

SECRET = b"k" * 32
ALICE = Principal.of("alice", "acme", ["billing:read"])


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def reason(signer: GrantSigner, grant: str | None, who: Principal, tool_id: str) -> str:
    with pytest.raises(GrantError) as err:
        signer.check(grant, who, tool_id)
    assert err.value.tool_id == tool_id
    return err.value.reason


def test_covers_the_shortlisted_tools_only() -> None:
    signer = GrantSigner(SECRET)
    grant = signer.issue(ALICE, ["billing.invoice.get", "billing.refund.partial"])
    signer.check(grant, ALICE, "billing.invoice.get")
    signer.check(grant, ALICE, "billing.refund.partial")
    assert reason(signer, grant, ALICE, "billing.refund.full") == "grant_tool_not_covered"


def test_scopes_do_not_matter_but_subject_and_tenant_do() -> None:
    signer = GrantSigner(SECRET)
    grant = signer.issue(ALICE, ["t"])
    signer.check(grant, Principal.of("alice", "acme", ["other"]), "t")
    assert reason(signer, grant, Principal.of("mallory", "acme"), "t") == "grant_subject_mismatch"
    assert reason(signer, grant, Principal.of("alice", "globex"), "t") == "grant_tenant_mismatch"


def test_expiry() -> None:
    clock = Clock()
    signer = GrantSigner(SECRET, ttl_seconds=60, clock=clock)
    grant = signer.issue(ALICE, ["t"])
    clock.now += 60
    signer.check(grant, ALICE, "t")
    clock.now += 1
    assert reason(signer, grant, ALICE, "t") == "grant_expired"


def test_bad_signature_and_other_secret() -> None:
    signer = GrantSigner(SECRET)
    grant = signer.issue(ALICE, ["t"])
    other = GrantSigner(b"x" * 32)
    assert reason(other, grant, ALICE, "t") == "grant_bad_signature"
    prefix, body, mac = grant.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=="))
    payload["tools"].append("billing.refund.full")
    forged_body = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    forged = f"{prefix}.{forged_body}.{mac}"
    assert reason(signer, forged, ALICE, "billing.refund.full") == "grant_bad_signature"


@pytest.mark.parametrize(
    "grant", ["", None, "garbage", "tsg1.a.b.c", "jwt.aaaa.bbbb", "tsg1.!!!.???", "tsg1.é.é"]
)
def test_malformed(grant: str | None) -> None:
    signer = GrantSigner(SECRET)
    code = reason(signer, grant, ALICE, "t")
    assert code in ("grant_missing", "grant_malformed", "grant_bad_signature")
    if not grant:
        assert code == "grant_missing"


def test_oversized_grant_refused() -> None:
    signer = GrantSigner(SECRET)
    assert reason(signer, "tsg1." + "a" * 300_000 + ".b", ALICE, "t") == "grant_malformed"


def test_a_token_is_not_a_grant() -> None:
    from _gateway_kit import token

    signer = GrantSigner(SECRET)
    assert reason(signer, token(), ALICE, "t") == "grant_malformed"


def test_config_errors() -> None:
    with pytest.raises(ConfigError):
        GrantSigner(b"short")
    with pytest.raises(ConfigError):
        GrantSigner(SECRET, ttl_seconds=0)
    with pytest.raises(ConfigError, match="at most 20000"):
        GrantSigner(SECRET).issue(ALICE, [f"t{i}" for i in range(20_001)])


def test_a_grant_for_many_tools_covers_them_by_digest() -> None:
    signer = GrantSigner(SECRET)
    ids = [f"crm.tool_{i}" for i in range(3000)]
    grant = signer.issue(ALICE, ids)
    for tool_id in [*ids[::97], ids[-1]]:
        signer.check(grant, ALICE, tool_id)
    assert reason(signer, grant, ALICE, "crm.tool_3000") == "grant_tool_not_covered"
    small = signer.issue(ALICE, ids[:64])
    assert "th" not in json.loads(base64.urlsafe_b64decode(small.split(".")[1] + "=="))


def _respell(part: str) -> str:
    """The same bytes in non-canonical base64url: padded, or with non-zero spare bits."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    if len(part) % 4 in (2, 3):
        last = alphabet.index(part[-1])
        return part[:-1] + alphabet[last | 1]  # set a bit the decoder throws away
    return part + "=="


def test_non_canonical_base64_is_refused() -> None:
    signer = GrantSigner(SECRET)
    grant = signer.issue(ALICE, ["a.tool"])
    prefix, body, mac = grant.split(".")
    for bad in (
        f"{prefix}.{body}=.{mac}",
        f"{prefix}.{body}.{mac}=",
        f"{prefix}.{_respell(body)}.{mac}",
        f"{prefix}.{body}.{_respell(mac)}",
        f"{prefix}.{body[:5]}+{body[6:]}.{mac}",
        f"{prefix}.{body}.{mac[:3]} {mac[3:]}",
    ):
        if bad != grant:
            assert reason(signer, bad, ALICE, "a.tool") == "grant_malformed", bad
    signer.check(grant, ALICE, "a.tool")
