"""Discovery grants: a short-lived, signed list of the tools discovery surfaced.

In strict mode the gateway runs a tool only if the call carries a grant, issued
by discovery for the same subject and tenant, that names the tool. A model (or
an instruction injected into its context) then cannot call a tool that was
never shortlisted in this conversation, even one the principal is entitled to.

Format: ``tsg1.<base64url(JSON payload)>.<base64url(HMAC-SHA256)>``. The MAC is
computed over a domain-separation prefix plus the payload, so a grant is never
a valid token and a token is never a valid grant, even under one secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from toolscout.errors import ConfigError, GrantError
from toolscout.policy import Principal

PREFIX = "tsg1"
_DOMAIN = b"toolscout-grant-v1\x00"
MIN_SECRET_BYTES = 32
MAX_GRANT_BYTES = 16 * 1024
MAX_TOOLS = 64

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
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


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
        if len(ids) > MAX_TOOLS:
            raise ConfigError(f"a grant covers at most {MAX_TOOLS} tools, got {len(ids)}")
        now = int(self._clock())
        payload = {
            "sub": principal.subject,
            "ten": principal.tenant,
            "tools": ids,
            "iat": now,
            "exp": now + self.ttl_seconds,
        }
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
        tools = payload.get("tools")
        if not isinstance(tools, list) or tool_id not in tools:
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
