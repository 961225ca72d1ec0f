"""Key material for token verification: the algorithm allow-list, keys, secrets, JWKS.

What :class:`~toolscout.gateway.auth.JWTVerifier` and
:func:`~toolscout.gateway.auth.issue_token` verify and sign with, checked before any
token is seen: :func:`check_algorithms` (known names, never ``none``, never HMAC mixed
with public-key algorithms: the HS/RS key-confusion attack), :func:`secret_bytes` (an
HMAC secret long enough and not a public or private key in disguise), PEM keys loaded
once (:func:`load_public_key`, :func:`load_private_key`) and checked against the
algorithms of their family (:func:`check_family`), and a local JWKS as kid -> alg -> key
(:func:`jwks_keys`). Errors here are :class:`~toolscout.errors.ConfigError`: a bad key
is the operator's mistake, never the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from toolscout.errors import ConfigError

if TYPE_CHECKING:  # PyJWT (and cryptography) are imported where a key is handled
    import jwt

__all__ = [
    "HMAC_ALGORITHMS",
    "MIN_SECRET_BYTES",
    "PUBLIC_KEY_ALGORITHMS",
    "as_bytes",
    "check_algorithms",
    "check_family",
    "jwks_keys",
    "load_private_key",
    "load_public_key",
    "secret_bytes",
]

MIN_SECRET_BYTES = 32

HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
_FAMILIES: dict[str, frozenset[str]] = {
    "RSA": frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}),
    "EC": frozenset({"ES256", "ES384", "ES512"}),
    "OKP": frozenset({"EdDSA"}),
}
PUBLIC_KEY_ALGORITHMS = frozenset().union(*_FAMILIES.values())
_CANONICAL_ALGS = {a.lower(): a for a in HMAC_ALGORITHMS | PUBLIC_KEY_ALGORITHMS}


def as_bytes(key: str | bytes) -> bytes:
    """A key or secret given as text, as its UTF-8 bytes."""
    return key.encode() if isinstance(key, str) else key


def check_algorithms(algorithms: Sequence[str]) -> tuple[str, ...]:
    """Validate an allow-list: known names (any case: ``eddsa`` is ``EdDSA``), never
    ``none``, never HMAC mixed with public keys."""
    if isinstance(algorithms, str):
        algorithms = [algorithms]
    names = []
    for alg in algorithms:
        if not isinstance(alg, str) or alg.strip().lower() == "none":
            raise ConfigError("algorithm 'none' is never allowed")
        canonical = _CANONICAL_ALGS.get(alg.strip().lower())
        if canonical is None:
            known = ", ".join(sorted(HMAC_ALGORITHMS | PUBLIC_KEY_ALGORITHMS))
            raise ConfigError(f"unknown JWT algorithm {alg!r}; allowed: {known}")
        names.append(canonical)
    algs = tuple(dict.fromkeys(names))
    if not algs:
        raise ConfigError("the algorithm allow-list is empty")
    if any(a in HMAC_ALGORITHMS for a in algs) and any(a in PUBLIC_KEY_ALGORITHMS for a in algs):
        raise ConfigError(
            "HMAC (HS*) and public-key algorithms must not share one verifier (key confusion)"
        )
    return algs


def _is_der_key(raw: bytes) -> bool:
    """Whether ``raw`` is a DER public key, private key or certificate."""
    if not raw.startswith(b"\x30"):  # an ASN.1 SEQUENCE
        return False
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    loaders: tuple[Any, ...] = (
        serialization.load_der_public_key,
        lambda b: serialization.load_der_private_key(b, password=None),
        x509.load_der_x509_certificate,
    )
    for load in loaders:
        try:
            load(raw)
        except (ValueError, TypeError):
            continue
        return True
    # OpenSSL can refuse a good key when another library in the process (libpq, ssl) left
    # errors on its queue; a whole DER structure of a key's shape is refused all the same
    return _der_structure(raw)


def _der_structure(raw: bytes) -> bool:
    """Whether ``raw`` is exactly one DER SEQUENCE opening with a SEQUENCE, an INTEGER or
    an explicit tag, as every public key, private key and certificate does."""
    if len(raw) < 4 or raw[0] != 0x30:
        return False
    first, at = raw[1], 2
    if first < 0x80:
        length = first
    else:
        width = first & 0x7F
        if not 1 <= width <= 4 or len(raw) < 2 + width:
            return False
        length, at = int.from_bytes(raw[2 : 2 + width], "big"), 2 + width
    return at + length == len(raw) and at < len(raw) and raw[at] in (0x30, 0x02, 0xA0)


def _looks_like_a_key(raw: bytes) -> bool:
    """A PEM, SSH, JWK or bare base64/DER key given where an HMAC secret belongs."""
    import base64
    import binascii

    if _is_der_key(raw):  # raw DER before any stripping: its last byte may be 0x20 or 0x0a
        return True
    text = raw.strip()
    if text.startswith((b"-----BEGIN", b"ssh-", b"ecdsa-sha2-")) or b'"kty"' in text:
        return True
    if _is_der_key(text):
        return True
    compact = b"".join(text.split())
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            der = decode(compact + b"=" * (-len(compact) % 4))
        except (binascii.Error, ValueError):
            continue
        if _is_der_key(der):
            return True
    return False


def secret_bytes(key: str | bytes) -> bytes:
    """``key`` as an HMAC secret: at least :data:`MIN_SECRET_BYTES`, and not a key."""
    raw = as_bytes(key)
    if len(raw) < MIN_SECRET_BYTES:
        raise ConfigError(f"an HMAC secret must be at least {MIN_SECRET_BYTES} bytes")
    if _looks_like_a_key(raw):
        raise ConfigError(
            "an HMAC secret must not be a public or private key (PEM, SSH, JWK or base64 DER): "
            "key confusion; use --key-file with an RS*/ES*/EdDSA algorithm instead"
        )
    return raw


def _family(key: object) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    if isinstance(key, rsa.RSAPublicKey | rsa.RSAPrivateKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey):
        return "EC"
    if isinstance(
        key,
        ed25519.Ed25519PublicKey
        | ed25519.Ed25519PrivateKey
        | ed448.Ed448PublicKey
        | ed448.Ed448PrivateKey,
    ):
        return "OKP"
    raise ConfigError(f"unsupported key type {type(key).__name__}")


def check_family(key: object, algorithms: Sequence[str], verb: str) -> None:
    """Refuse ``algorithms`` that ``key``'s family cannot ``verb`` (verify, sign)."""
    family = _family(key)
    wrong = [a for a in algorithms if a not in _FAMILIES[family]]
    if wrong:
        raise ConfigError(f"a {family} key cannot {verb} {', '.join(wrong)}")


@lru_cache(maxsize=64)
def load_public_key(pem: bytes) -> Any:
    """A public key object from a PEM public key, private key or X.509 certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        if b"CERTIFICATE" in pem:
            return x509.load_pem_x509_certificate(pem).public_key()
        if b"PRIVATE KEY" in pem:
            return serialization.load_pem_private_key(pem, password=None).public_key()
        return serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cannot load the PEM key: {exc}") from None


@lru_cache(maxsize=64)
def load_private_key(pem: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    try:
        return serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cannot load the PEM private key: {exc}") from None


def jwks_keys(data: Any, algorithms: tuple[str, ...]) -> dict[str, dict[str, jwt.PyJWK]]:
    """kid -> alg -> key, for every key usable with an allowed algorithm."""
    import jwt

    if not isinstance(data, Mapping) or not isinstance(data.get("keys"), list):
        raise ConfigError("a JWKS must be an object with a 'keys' list")
    out: dict[str, dict[str, jwt.PyJWK]] = {}
    for i, jwk in enumerate(data["keys"]):
        if not isinstance(jwk, Mapping) or jwk.get("use", "sig") != "sig":
            continue
        kid = str(jwk.get("kid", f"#{i}"))
        kty = jwk.get("kty")
        declared = jwk.get("alg")
        family = HMAC_ALGORITHMS if kty == "oct" else _FAMILIES.get(str(kty), frozenset())
        candidates = [declared] if declared else [a for a in algorithms if a in family]
        for alg in candidates:
            if alg not in algorithms or alg not in family:
                continue
            try:
                out.setdefault(kid, {})[alg] = jwt.PyJWK(dict(jwk), algorithm=alg)
            except jwt.PyJWTError as exc:
                raise ConfigError(f"JWKS key {kid!r}: {exc}") from None
    if not out:
        raise ConfigError(f"the JWKS has no signing key for the algorithms {', '.join(algorithms)}")
    return out
