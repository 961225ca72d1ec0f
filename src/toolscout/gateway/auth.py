"""Verified identity: turn a caller's token into a :class:`~toolscout.policy.Principal`.

:class:`TokenVerifier` is the seam; :class:`JWTVerifier` is the shipped
implementation (PyJWT). It accepts HS256/384/512 with a shared secret, or
RS*/PS*/ES*/EdDSA with a PEM public key or a local JWKS file, from an explicit
algorithm allow-list that never contains ``none`` and never mixes HMAC with
public-key algorithms (the HS/RS key-confusion attack). ``exp`` is always
required; ``iss`` and ``aud`` are required and checked when configured; ``nbf``
is honoured. Claims become a principal through a :class:`ClaimsMapping`. The key
material (the allow-list, secrets, PEM keys, a JWKS) is checked by
:mod:`toolscout.gateway.keys` before any token is seen.

:func:`issue_token` mints tokens for development and tests.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from toolscout.errors import ConfigError, TokenError
from toolscout.gateway.keys import (
    HMAC_ALGORITHMS,
    as_bytes,
    check_algorithms,
    check_family,
    jwks_keys,
    load_private_key,
    load_public_key,
    secret_bytes,
)
from toolscout.policy import Principal

if TYPE_CHECKING:  # PyJWT (and cryptography) are imported where a token is handled
    import jwt

#: tokens longer than this are refused before any parsing
MAX_TOKEN_BYTES = 8 * 1024

# reason codes of TokenError
MISSING = "token_missing"
TOO_LARGE = "token_too_large"
MALFORMED = "token_malformed"
BAD_SIGNATURE = "token_bad_signature"
EXPIRED = "token_expired"
NOT_YET_VALID = "token_not_yet_valid"
WRONG_AUDIENCE = "token_wrong_audience"
WRONG_ISSUER = "token_wrong_issuer"
ALG_NOT_ALLOWED = "token_alg_not_allowed"
MISSING_CLAIM = "token_missing_claim"
INVALID_CLAIM = "token_invalid_claim"
UNKNOWN_KEY = "token_unknown_key"


@runtime_checkable
class TokenVerifier(Protocol):
    """Turns a bearer token into a verified principal or raises :class:`TokenError`."""

    def verify(self, token: str) -> Principal:
        """The principal the token proves; never trusts an unverified claim."""
        ...


def _lookup(claims: Mapping[str, Any], name: str) -> Any:
    """``claims[name]``, else a dotted path into nested objects (``realm_access.roles``)."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _string_set(value: Any, claim: str) -> list[str]:
    """A space-separated string or a list of strings, as a list."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v]
    raise TokenError(
        f"claim {claim!r} must be a space-separated string or a list of strings",
        reason=INVALID_CLAIM,
    )


@dataclass(frozen=True, slots=True)
class ClaimsMapping:
    """Which claims hold the subject, tenant, scopes and roles.

    Each scope claim may be a space-separated string (OAuth ``scope``) or a
    list (``scp``); all present ones are merged. Names may be dotted paths into
    nested claims (``realm_access.roles``).
    """

    subject: str = "sub"
    tenant: str = "tenant"
    scopes: tuple[str, ...] = ("scope", "scp")
    roles: str = "roles"
    require_tenant: bool = True

    def __post_init__(self) -> None:
        if not self.subject or not self.tenant or not self.scopes or not all(self.scopes):
            raise ConfigError("claim names must not be empty")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClaimsMapping:
        scopes = data.get("scopes", ("scope", "scp"))
        if isinstance(scopes, str):
            scopes = (scopes,)
        try:
            return cls(
                subject=str(data.get("subject", "sub")),
                tenant=str(data.get("tenant", "tenant")),
                scopes=tuple(str(s) for s in scopes),
                roles=str(data.get("roles", "roles")),
                require_tenant=bool(data.get("require_tenant", True)),
            )
        except TypeError as exc:
            raise ConfigError(f"bad claims mapping: {exc}") from None

    def principal(self, claims: Mapping[str, Any]) -> Principal:
        """Map verified claims to a principal; missing or ill-typed claims are refused."""
        subject = _lookup(claims, self.subject)
        if subject is None:
            raise TokenError(f"token has no {self.subject!r} claim", reason=MISSING_CLAIM)
        if not isinstance(subject, str) or not subject.strip():
            raise TokenError(
                f"claim {self.subject!r} must be a non-empty string", reason=INVALID_CLAIM
            )
        tenant = _lookup(claims, self.tenant)
        if tenant is None:
            if self.require_tenant:
                raise TokenError(f"token has no {self.tenant!r} claim", reason=MISSING_CLAIM)
            tenant = ""
        if not isinstance(tenant, str):
            raise TokenError(f"claim {self.tenant!r} must be a string", reason=INVALID_CLAIM)
        scopes: set[str] = set()
        for name in self.scopes:
            value = _lookup(claims, name)
            if value is not None:
                scopes.update(_string_set(value, name))
        raw_roles = _lookup(claims, self.roles)
        roles = _string_set(raw_roles, self.roles) if raw_roles is not None else []
        return Principal(subject, tenant, frozenset(scopes), frozenset(roles))

    def claims_for(
        self, subject: str, tenant: str, scopes: Iterable[str], roles: Iterable[str]
    ) -> dict[str, Any]:
        """The inverse of :meth:`principal`, for :func:`issue_token` (flat claim names only)."""
        out: dict[str, Any] = {self.subject: subject, self.scopes[0]: " ".join(sorted(set(scopes)))}
        if tenant or self.require_tenant:
            out[self.tenant] = tenant
        role_list = sorted(set(roles))
        if role_list:
            out[self.roles] = role_list
        return out


DEFAULT_CLAIMS = ClaimsMapping()

#: the latest NumericDate accepted (9999-12-31): later ``exp``/``nbf``/``iat`` are invalid
MAX_NUMERIC_DATE = 253_402_300_799


def _numeric_dates(claims: Mapping[str, Any]) -> float:
    """Check ``exp``/``nbf``/``iat`` are JSON numbers in range; returns ``exp``."""
    for name in ("exp", "nbf", "iat"):
        if name not in claims:
            continue
        value = claims[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not -MAX_NUMERIC_DATE <= value <= MAX_NUMERIC_DATE
        ):
            raise TokenError(
                f"claim {name!r} must be a number of seconds up to {MAX_NUMERIC_DATE}",
                reason=INVALID_CLAIM,
            )
    return float(claims["exp"])


def _token_error(exc: Exception) -> TokenError:
    """Map a PyJWT exception to a TokenError with a stable reason code."""
    import jwt
    from jwt.exceptions import InvalidJTIError, InvalidSubjectError

    if isinstance(exc, jwt.InvalidSignatureError):
        return TokenError("token signature does not verify", reason=BAD_SIGNATURE)
    if isinstance(exc, jwt.ExpiredSignatureError):
        return TokenError("token has expired", reason=EXPIRED)
    if isinstance(exc, jwt.ImmatureSignatureError):
        return TokenError("token is not yet valid", reason=NOT_YET_VALID)
    if isinstance(exc, jwt.InvalidAudienceError):
        return TokenError("token is not for this audience", reason=WRONG_AUDIENCE)
    if isinstance(exc, jwt.InvalidIssuerError):
        return TokenError("token is from another issuer", reason=WRONG_ISSUER)
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return TokenError("token algorithm is not allowed", reason=ALG_NOT_ALLOWED)
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return TokenError(f"token has no {exc.claim!r} claim", reason=MISSING_CLAIM)
    if isinstance(exc, jwt.InvalidIssuedAtError | InvalidSubjectError | InvalidJTIError):
        return TokenError(f"token has an invalid claim: {exc}", reason=INVALID_CLAIM)
    if isinstance(exc, jwt.InvalidKeyError | jwt.PyJWKError):
        return TokenError("token does not match the verification key", reason=UNKNOWN_KEY)
    return TokenError("token is malformed", reason=MALFORMED)


class JWTVerifier:
    """Verifies JWTs against one key (secret or PEM) or a local JWKS.

    Key objects are parsed once, at construction. Up to ``cache_size`` verified
    tokens are remembered (by their exact text) with their expiry, so a session
    reusing its token skips the signature check; only successfully verified
    tokens are cached, and every hit re-checks ``exp``.
    """

    def __init__(
        self,
        *,
        key: str | bytes | None = None,
        jwks: str | Path | Mapping[str, Any] | None = None,
        algorithms: Sequence[str] = ("HS256",),
        issuer: str | None = None,
        audience: str | Sequence[str] | None = None,
        claims: ClaimsMapping = DEFAULT_CLAIMS,
        leeway_seconds: float = 0.0,
        max_token_bytes: int = MAX_TOKEN_BYTES,
        cache_size: int = 1024,
    ) -> None:
        self.algorithms = check_algorithms(algorithms)
        if (key is None) == (jwks is None):
            raise ConfigError("give exactly one of key (secret or PEM) and jwks")
        self.claims = claims
        self.issuer = issuer
        self.audience = (
            audience if audience is None or isinstance(audience, str) else list(audience)
        )
        self.leeway_seconds = leeway_seconds
        self.max_token_bytes = max_token_bytes
        hmac_mode = self.algorithms[0] in HMAC_ALGORITHMS
        self._key: Any = None
        self._jwks: dict[str, dict[str, jwt.PyJWK]] | None = None
        if jwks is not None:
            if isinstance(jwks, str | Path):
                try:
                    jwks = json.loads(Path(jwks).read_text(encoding="utf-8"))
                except (OSError, ValueError) as exc:
                    raise ConfigError(f"cannot read the JWKS file {jwks}: {exc}") from None
            self._jwks = jwks_keys(jwks, self.algorithms)
        elif hmac_mode:
            assert key is not None
            self._key = secret_bytes(key)
        else:
            assert key is not None
            self._key = load_public_key(as_bytes(key))
            check_family(self._key, self.algorithms, "verify")
        required = ["exp"]
        if issuer is not None:
            required.append("iss")
        if audience is not None:
            required.append("aud")
        self._options: dict[str, Any] = {"require": required, "enforce_minimum_key_length": True}
        # verified tokens -> (principal, exp); a hit re-checks only the expiry
        self._cache: dict[str, tuple[Principal, float]] = {}
        self._cache_size = max(0, cache_size)
        self._cache_lock = threading.Lock()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base_dir: Path | None = None) -> JWTVerifier:
        """Build from configuration: ``algorithms``, one of ``secret`` / ``secret_env`` /
        ``public_key_file`` / ``jwks_file``, ``issuer``, ``audience``, ``claims``,
        ``leeway_seconds``, ``max_token_bytes``."""
        import os

        def path(name: str) -> Path:
            p = Path(str(data[name])).expanduser()
            return p if p.is_absolute() or base_dir is None else base_dir / p

        key: str | bytes | None = None
        jwks: Path | None = None
        if "secret" in data:
            key = str(data["secret"])
        elif "secret_env" in data:
            key = os.environ.get(str(data["secret_env"]))
            if not key:
                raise ConfigError(f"environment variable {data['secret_env']} is not set")
        elif "public_key_file" in data:
            try:
                key = path("public_key_file").read_bytes()
            except OSError as exc:
                raise ConfigError(f"cannot read the public key: {exc}") from None
        elif "jwks_file" in data:
            jwks = path("jwks_file")
        algorithms = data.get("algorithms", ["HS256"])
        if isinstance(algorithms, str):
            algorithms = [algorithms]
        return cls(
            key=key,
            jwks=jwks,
            algorithms=[str(a) for a in algorithms],
            issuer=data.get("issuer"),
            audience=data.get("audience"),
            claims=ClaimsMapping.from_dict(data.get("claims", {})),
            leeway_seconds=float(data.get("leeway_seconds", 0)),
            max_token_bytes=int(data.get("max_token_bytes", MAX_TOKEN_BYTES)),
        )

    def _key_for(self, token: str) -> Any:
        import jwt

        if self._jwks is None:
            return self._key
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise _token_error(exc) from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise TokenError("token algorithm is not allowed", reason=ALG_NOT_ALLOWED)
        kid = header.get("kid")
        if kid is None and len(self._jwks) == 1:
            by_alg = next(iter(self._jwks.values()))
        elif isinstance(kid, str) and kid in self._jwks:
            by_alg = self._jwks[kid]
        else:
            raise TokenError("token names no known key", reason=UNKNOWN_KEY)
        if alg not in by_alg:
            raise TokenError("token algorithm does not match its key", reason=ALG_NOT_ALLOWED)
        return by_alg[alg]

    def verify(self, token: str) -> Principal:
        import jwt

        if not isinstance(token, str) or not token.strip():
            raise TokenError("no token was presented", reason=MISSING)
        if len(token) > self.max_token_bytes:
            raise TokenError(f"token is over {self.max_token_bytes} bytes", reason=TOO_LARGE)
        token = token.strip()
        if token[:7].lower() == "bearer ":
            token = token[7:].strip()
        hit = self._cache.get(token)
        if hit is not None:
            if time.time() < hit[1] + self.leeway_seconds:
                return hit[0]
            self._cache.pop(token, None)
            raise TokenError("token has expired", reason=EXPIRED)
        key = self._key_for(token)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=list(self.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_seconds,
                options=self._options,  # type: ignore[arg-type]
            )
        except OverflowError:
            raise TokenError(
                "token has a numeric claim out of range", reason=INVALID_CLAIM
            ) from None
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise _token_error(exc) from None
        expires = _numeric_dates(claims)
        principal = self.claims.principal(claims)
        if self._cache_size:
            # exp was required and checked, nbf and iat are in the past and stay there
            with self._cache_lock:
                if len(self._cache) >= self._cache_size:
                    self._cache.pop(next(iter(self._cache)), None)
                self._cache[token] = (principal, expires)
        return principal


def issue_token(
    *,
    subject: str,
    key: str | bytes,
    tenant: str = "",
    scopes: Iterable[str] = (),
    roles: Iterable[str] = (),
    algorithm: str = "HS256",
    ttl_seconds: float = 900,
    issuer: str | None = None,
    audience: str | None = None,
    kid: str | None = None,
    claims: ClaimsMapping = DEFAULT_CLAIMS,
    extra: Mapping[str, Any] | None = None,
    now: float | None = None,
) -> str:
    """Mint a token for development: an HMAC secret for HS*, a PEM private key otherwise."""
    import jwt

    (alg,) = check_algorithms([algorithm])
    if not subject:
        raise ConfigError("a token needs a subject")
    if ttl_seconds <= 0:
        raise ConfigError(f"ttl must be positive, got {ttl_seconds}")
    signing_key: Any
    if alg in HMAC_ALGORITHMS:
        signing_key = secret_bytes(key)
    else:
        signing_key = load_private_key(as_bytes(key))
        check_family(signing_key, [alg], "sign")
    issued = int(time.time() if now is None else now)
    payload: dict[str, Any] = claims.claims_for(subject, tenant, scopes, roles)
    payload.update({"iat": issued, "exp": issued + int(ttl_seconds)})
    if issuer is not None:
        payload["iss"] = issuer
    if audience is not None:
        payload["aud"] = audience
    payload.update(extra or {})
    headers = {"kid": kid} if kid else None
    return jwt.encode(payload, signing_key, algorithm=alg, headers=headers)
