"""Discovery grants: a short-lived, signed list of the tools discovery surfaced.

In strict mode the gateway runs a tool only if the call carries a grant, issued
by discovery for the same subject and tenant, that names the tool. A model (or
an instruction injected into its context) then cannot call a tool that was
never shortlisted in this conversation, even one the principal is entitled to.

Format: ``tsg1.<base64url(JSON payload)>.<base64url(HMAC-SHA256)>``, unpadded
canonical base64url only (any other spelling of the same bytes is refused). The
MAC is computed over a domain-separation prefix plus the payload, so a grant is
never a valid token and a token is never a valid grant, even under one secret.

A grant names up to :data:`MAX_TOOLS` tools by id; a larger shortlist (a
``tier='all'`` discovery) is covered by 64-bit digests of the ids instead
(``th``: packed, base64url), up to :data:`MAX_HASHED_TOOLS` tools.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from toolscout.errors import ConfigError, GrantError
from toolscout.gateway.keys import MIN_SECRET_BYTES
from toolscout.policy import Principal

PREFIX = "tsg1"
_DOMAIN = b"toolscout-grant-v1\x00"
#: tools named by id in a grant; more are covered by digests
MAX_TOOLS = 64
#: tools one grant can cover at all (by digest)
MAX_HASHED_TOOLS = 20_000
_DIGEST_BYTES = 8
MAX_GRANT_BYTES = 512 + (MAX_HASHED_TOOLS * _DIGEST_BYTES * 4) // 3 + 64
_B64URL = re.compile(r"[A-Za-z0-9_-]*")

#: reason codes of :class:`GrantError`
MISSING = "grant_missing"
MALFORMED = "grant_malformed"
BAD_SIGNATURE = "grant_bad_signature"
EXPIRED = "grant_expired"
SUBJECT_MISMATCH = "grant_subject_mismatch"
TENANT_MISMATCH = "grant_tenant_mismatch"
NOT_COVERED = "grant_tool_not_covered"


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    """Strict, canonical, unpadded base64url: anything else is a ``ValueError``."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not canonical base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64e(data) != text:  # non-zero padding bits: another spelling of the same bytes
        raise ValueError("not canonical base64url")
    return data


def _tool_digest(tool_id: str) -> bytes:
    return hashlib.sha256(tool_id.encode("utf-8", "surrogatepass")).digest()[:_DIGEST_BYTES]


class GrantSigner:
    """Issues and checks discovery grants with a shared secret (HMAC-SHA256)."""

    def __init__(
        self,
        secret: bytes,
        ttl_seconds: int = 300,
        *,
        leeway_seconds: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
            raise ConfigError(f"the grant secret must be at least {MIN_SECRET_BYTES} bytes")
        if ttl_seconds < 1:
            raise ConfigError(f"grant ttl_seconds must be at least 1, got {ttl_seconds}")
        self._secret = secret
        self.ttl_seconds = ttl_seconds
        self._leeway = leeway_seconds
        self._clock = clock

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._secret, _DOMAIN + body, hashlib.sha256).digest()

    def issue(self, principal: Principal, tool_ids: Iterable[str]) -> str:
        """A grant letting ``principal`` call the given tools for ``ttl_seconds``."""
        ids = sorted(set(tool_ids))
        if len(ids) > MAX_HASHED_TOOLS:
            raise ConfigError(f"a grant covers at most {MAX_HASHED_TOOLS} tools, got {len(ids)}")
        now = int(self._clock())
        payload: dict[str, Any] = {
            "sub": principal.subject,
            "ten": principal.tenant,
            "iat": now,
            "exp": now + self.ttl_seconds,
        }
        if len(ids) <= MAX_TOOLS:
            payload["tools"] = ids
        else:
            payload["th"] = _b64e(b"".join(sorted({_tool_digest(i) for i in ids})))
        body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
        return f"{PREFIX}.{_b64e(body)}.{_b64e(self._mac(body))}"

    def check(self, grant: str | None, principal: Principal, tool_id: str) -> None:
        """Raise :class:`GrantError` unless ``grant`` lets ``principal`` call ``tool_id`` now."""
        payload = self._open(grant, tool_id)
        exp = payload.get("exp")
        if not isinstance(exp, int) or isinstance(exp, bool):
            raise GrantError("grant has no valid expiry", tool_id=tool_id, reason=MALFORMED)
        if self._clock() > exp + self._leeway:
            raise GrantError("grant has expired", tool_id=tool_id, reason=EXPIRED)
        if payload.get("sub") != principal.subject:
            raise GrantError(
                "grant was issued to another subject", tool_id=tool_id, reason=SUBJECT_MISMATCH
            )
        if payload.get("ten") != principal.tenant:
            raise GrantError(
                "grant was issued for another tenant", tool_id=tool_id, reason=TENANT_MISMATCH
            )
        if not _covers(payload, tool_id):
            raise GrantError(
                f"tool {tool_id!r} was not surfaced by discovery in this grant",
                tool_id=tool_id,
                reason=NOT_COVERED,
            )

    def _open(self, grant: str | None, tool_id: str) -> dict[str, Any]:
        """Check the format and the MAC; return the payload."""
        if not grant:
            raise GrantError(
                "strict mode: a discovery grant is required", tool_id=tool_id, reason=MISSING
            )
        if not isinstance(grant, str) or len(grant) > MAX_GRANT_BYTES:
            raise GrantError("grant is malformed or too large", tool_id=tool_id, reason=MALFORMED)
        parts = grant.split(".")
        if len(parts) != 3 or parts[0] != PREFIX:
            raise GrantError("grant is malformed", tool_id=tool_id, reason=MALFORMED)
        try:
            body = _b64d(parts[1])
            mac = _b64d(parts[2])
        except (binascii.Error, ValueError):
            raise GrantError(
                "grant is not valid base64url", tool_id=tool_id, reason=MALFORMED
            ) from None
        if not hmac.compare_digest(mac, self._mac(body)):
            raise GrantError(
                "grant signature does not verify", tool_id=tool_id, reason=BAD_SIGNATURE
            )
        try:
            payload = json.loads(body)
        except ValueError:
            raise GrantError(
                "grant payload is not JSON", tool_id=tool_id, reason=MALFORMED
            ) from None
        if not isinstance(payload, dict):
            raise GrantError("grant payload is not an object", tool_id=tool_id, reason=MALFORMED)
        return payload


def _covers(payload: dict[str, Any], tool_id: str) -> bool:
    """Whether the grant's tool list (ids, or packed id digests) holds ``tool_id``."""
    tools = payload.get("tools")
    if isinstance(tools, list):
        return tool_id in tools
    packed = payload.get("th")
    if not isinstance(packed, str):
        return False
    try:
        data = _b64d(packed)
    except (binascii.Error, ValueError):
        return False
    want = _tool_digest(tool_id)
    return any(data[i : i + _DIGEST_BYTES] == want for i in range(0, len(data), _DIGEST_BYTES))
