"""Tests for toolscout.gateway.auth: JWT verification, claim mapping, the algorithm allow-list."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from _gateway_kit import AUDIENCE, ISSUER, SECRET, expired_token, token, verifier
from toolscout.errors import ConfigError, TokenError
from toolscout.gateway.auth import (
    ClaimsMapping,
    JWTVerifier,
    TokenVerifier,
    check_algorithms,
    issue_token,
)
from toolscout.policy import Principal


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def raw_jwt(header: dict[str, Any], payload: dict[str, Any], key: bytes | None) -> str:
    """A JWT assembled by hand, as an attacker would (PyJWT refuses to make these)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    sig = hmac.new(key, signing_input.encode(), hashlib.sha256).digest() if key else b""
    return f"{signing_input}.{b64(sig)}"


def claims(**extra: Any) -> dict[str, Any]:
    now = int(time.time())
    out = {"sub": "alice", "tenant": "acme", "scope": "a b", "iss": ISSUER, "aud": AUDIENCE}
    out.update(iat=now, exp=now + 600)
    out.update(extra)
    return out


@pytest.fixture(scope="module")
def rsa_pem() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


@pytest.fixture(scope="module")
def ec_pem() -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def refused(v: TokenVerifier, tok: Any) -> str:
    with pytest.raises(TokenError) as err:
        v.verify(tok)
    return err.value.reason


# ------------------------------------------------------------------ accepted tokens


def test_hs256_round_trip_maps_claims() -> None:
    v = verifier()
    assert isinstance(v, TokenVerifier)
    p = v.verify(token("alice", "acme", ["billing:read", "crm:write"], ["support"]))
    assert p == Principal.of("alice", "acme", ["billing:read", "crm:write"], ["support"])


def test_bearer_prefix_is_accepted() -> None:
    assert verifier().verify("Bearer " + token()).subject == "alice"


def test_scp_list_and_scope_string_are_merged() -> None:
    tok = jwt.encode(claims(scp=["c", "d"]), SECRET, algorithm="HS256")
    assert verifier().verify(tok).scopes == frozenset("abcd")


def test_configured_claim_names_and_nested_paths() -> None:
    mapping = ClaimsMapping(
        subject="oid", tenant="tid", scopes=("permissions",), roles="realm_access.roles"
    )
    payload = claims(
        oid="u-1", tid="t-9", permissions=["x:read"], realm_access={"roles": ["admin"]}
    )
    tok = jwt.encode(payload, SECRET, algorithm="HS256")
    p = verifier(claims=mapping).verify(tok)
    assert p == Principal.of("u-1", "t-9", ["x:read"], ["admin"])


def test_claims_mapping_from_dict() -> None:
    m = ClaimsMapping.from_dict({"tenant": "org", "scopes": "scp", "require_tenant": False})
    assert m.tenant == "org" and m.scopes == ("scp",) and not m.require_tenant
    tok = jwt.encode({k: v for k, v in claims().items() if k != "tenant"}, SECRET)
    assert verifier(claims=m).verify(tok).tenant == ""


def test_rs256_with_public_key(rsa_pem: tuple[bytes, bytes]) -> None:
    private, public = rsa_pem
    v = JWTVerifier(key=public, algorithms=["RS256"], issuer=ISSUER, audience=AUDIENCE)
    tok = token(key=private, algorithm="RS256", scopes=["s"])
    assert v.verify(tok) == Principal.of("alice", "acme", ["s"])
    # a private key PEM is accepted too: its public half is used
    v2 = JWTVerifier(key=private, algorithms=["RS256"], issuer=ISSUER, audience=AUDIENCE)
    assert v2.verify(tok).subject == "alice"


def test_es256_with_public_key(ec_pem: tuple[bytes, bytes]) -> None:
    private, public = ec_pem
    v = JWTVerifier(key=public, algorithms=["ES256"], issuer=ISSUER, audience=AUDIENCE)
    assert v.verify(token(key=private, algorithm="ES256")).tenant == "acme"


def _jwks(public_pem: bytes, **fields: Any) -> dict[str, Any]:
    key = serialization.load_pem_public_key(public_pem)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key))
    jwk.update(fields)
    return {"keys": [jwk]}


def test_jwks_file_with_kid(tmp_path: Path, rsa_pem: tuple[bytes, bytes]) -> None:
    private, public = rsa_pem
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(_jwks(public, kid="k1", alg="RS256")))
    v = JWTVerifier(jwks=path, algorithms=["RS256"], issuer=ISSUER, audience=AUDIENCE)
    assert v.verify(token(key=private, algorithm="RS256", kid="k1")).subject == "alice"
    assert v.verify(token(key=private, algorithm="RS256")).subject == "alice"  # one key, no kid
    assert refused(v, token(key=private, algorithm="RS256", kid="other")) == "token_unknown_key"


def test_jwks_key_without_alg_takes_allowed_alg(rsa_pem: tuple[bytes, bytes]) -> None:
    private, public = rsa_pem
    v = JWTVerifier(
        jwks=_jwks(public, kid="k1"), algorithms=["RS384"], issuer=ISSUER, audience=AUDIENCE
    )
    assert v.verify(token(key=private, algorithm="RS384", kid="k1")).subject == "alice"
    assert refused(v, token(key=private, algorithm="RS256", kid="k1")) == "token_alg_not_allowed"


def test_from_dict(tmp_path: Path, rsa_pem: tuple[bytes, bytes], monkeypatch: Any) -> None:
    private, public = rsa_pem
    (tmp_path / "pub.pem").write_bytes(public)
    v = JWTVerifier.from_dict(
        {"algorithms": "RS256", "public_key_file": "pub.pem", "issuer": ISSUER,
         "audience": AUDIENCE, "claims": {"tenant": "tenant"}},
        base_dir=tmp_path,
    )  # fmt: skip
    assert v.verify(token(key=private, algorithm="RS256")).subject == "alice"
    monkeypatch.setenv("TS_TEST_SECRET", SECRET)
    v2 = JWTVerifier.from_dict(
        {"secret_env": "TS_TEST_SECRET", "issuer": ISSUER, "audience": AUDIENCE}
    )
    assert v2.verify(token()).subject == "alice"
    monkeypatch.delenv("TS_TEST_SECRET")
    with pytest.raises(ConfigError):
        JWTVerifier.from_dict({"secret_env": "TS_TEST_SECRET"})


def test_leeway() -> None:
    tok = token(now=time.time() - 605, ttl_seconds=600)
    assert refused(verifier(), tok) == "token_expired"
    assert verifier(leeway_seconds=30).verify(tok).subject == "alice"


# ------------------------------------------------------------------ refused tokens


def test_wrong_signature() -> None:
    tok = token(key="another-secret-0123456789abcdef-012345")
    assert refused(verifier(), tok) == "token_bad_signature"


def test_expired() -> None:
    assert refused(verifier(), expired_token()) == "token_expired"


def test_not_yet_valid() -> None:
    tok = token(extra={"nbf": int(time.time()) + 3600})
    assert refused(verifier(), tok) == "token_not_yet_valid"


def test_wrong_audience_and_issuer() -> None:
    assert refused(verifier(), token(audience="someone-else")) == "token_wrong_audience"
    assert refused(verifier(), token(issuer="https://evil.test")) == "token_wrong_issuer"


def test_alg_none() -> None:
    tok = raw_jwt({"alg": "none", "typ": "JWT"}, claims(), None)
    assert refused(verifier(), tok) == "token_alg_not_allowed"
    tok2 = raw_jwt({"alg": "None"}, claims(), None)
    assert refused(verifier(), tok2) == "token_alg_not_allowed"


def test_hs256_signed_with_the_rsa_public_key(rsa_pem: tuple[bytes, bytes]) -> None:
    _, public = rsa_pem
    forged = raw_jwt({"alg": "HS256", "typ": "JWT"}, claims(scope="toolscout:admin"), public)
    v = JWTVerifier(key=public, algorithms=["RS256"], issuer=ISSUER, audience=AUDIENCE)
    assert refused(v, forged) == "token_alg_not_allowed"
    path_jwks = JWTVerifier(
        jwks=_jwks(public), algorithms=["RS256"], issuer=ISSUER, audience=AUDIENCE
    )
    assert refused(path_jwks, forged) == "token_alg_not_allowed"


@pytest.mark.parametrize(
    ("drop", "code"),
    [("sub", "token_missing_claim"), ("tenant", "token_missing_claim"),
     ("exp", "token_missing_claim"), ("iss", "token_missing_claim"),
     ("aud", "token_missing_claim")],
)  # fmt: skip
def test_missing_claims(drop: str, code: str) -> None:
    payload = {k: v for k, v in claims().items() if k != drop}
    assert refused(verifier(), jwt.encode(payload, SECRET, algorithm="HS256")) == code


@pytest.mark.parametrize(
    "bad",
    [{"sub": ""}, {"sub": 42}, {"tenant": 7}, {"scope": 5}, {"scp": [1, 2]}, {"roles": {"a": 1}}],
)
def test_ill_typed_claims(bad: dict[str, Any]) -> None:
    tok = jwt.encode(claims(**bad), SECRET, algorithm="HS256")
    assert refused(verifier(), tok) in ("token_invalid_claim", "token_malformed")


def test_tenant_swapped_in_payload() -> None:
    header, _, sig = token(tenant="acme").split(".")
    swapped = b64(json.dumps(claims(tenant="globex")).encode())
    assert refused(verifier(), f"{header}.{swapped}.{sig}") == "token_bad_signature"


def test_oversized_token() -> None:
    tok = token(extra={"pad": "x" * 10_000})
    assert refused(verifier(), tok) == "token_too_large"
    assert verifier(max_token_bytes=64 * 1024).verify(tok).subject == "alice"


@pytest.mark.parametrize(
    ("tok", "code"),
    [("", "token_missing"), ("   ", "token_missing"), (None, "token_missing"),
     ("abc", "token_malformed"), ("a.b.c", "token_malformed"),
     ("Bearer ", "token_malformed"), ("é.é.é", "token_malformed")],
)  # fmt: skip
def test_garbage(tok: Any, code: str) -> None:
    assert refused(verifier(), tok) == code


# ------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    "algs",
    [[], ["none"], ["NONE"], ["HS256", "RS256"], ["HS256", "ES256"], ["XX999"]],
)
def test_bad_allow_lists(algs: list[str]) -> None:
    with pytest.raises(ConfigError):
        check_algorithms(algs)


def test_key_configuration_errors(rsa_pem: tuple[bytes, bytes]) -> None:
    _, public = rsa_pem
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        JWTVerifier(key="short")
    with pytest.raises(ConfigError, match="PEM"):
        JWTVerifier(key=public + b"padding" * 10, algorithms=["HS256"])
    with pytest.raises(ConfigError, match="cannot verify ES256"):
        JWTVerifier(key=public, algorithms=["ES256"])
    with pytest.raises(ConfigError, match="exactly one"):
        JWTVerifier(algorithms=["RS256"])
    with pytest.raises(ConfigError):
        JWTVerifier(key=b"-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n",
                    algorithms=["RS256"])  # fmt: skip
    with pytest.raises(ConfigError, match="no signing key"):
        JWTVerifier(jwks={"keys": []}, algorithms=["RS256"])


def test_issue_token_refusals(rsa_pem: tuple[bytes, bytes]) -> None:
    private, _ = rsa_pem
    with pytest.raises(ConfigError):
        issue_token(subject="a", key=SECRET, algorithm="none")
    with pytest.raises(ConfigError):
        issue_token(subject="a", key="short")
    with pytest.raises(ConfigError):
        issue_token(subject="a", key=private, algorithm="ES256")
    with pytest.raises(ConfigError):
        issue_token(subject="", key=SECRET)
    with pytest.raises(ConfigError):
        issue_token(subject="a", key=SECRET, ttl_seconds=0)


def test_verified_tokens_are_cached_but_still_expire(monkeypatch: Any) -> None:
    v = verifier()
    tok = token(ttl_seconds=600)
    first = v.verify(tok)
    assert v.verify(tok) is first  # a cache hit
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 601)
    assert refused(v, tok) == "token_expired"
    monkeypatch.setattr(time, "time", real)
    assert refused(v, tok[:-2] + ("AA" if not tok.endswith("AA") else "BB")) in (
        "token_bad_signature", "token_malformed",
    )  # fmt: skip


def test_cache_is_bounded_and_can_be_off() -> None:
    v = verifier(cache_size=3)
    for i in range(10):
        v.verify(token(sub=f"user{i}"))
    assert len(v._cache) == 3
    off = verifier(cache_size=0)
    tok = token()
    assert off.verify(tok) == off.verify(tok) and not off._cache


# ------------------------------------------------------------------ hardening


def test_a_bare_base64_public_key_is_not_an_hmac_secret(
    rsa_pem: tuple[bytes, bytes], ec_pem: tuple[bytes, bytes]
) -> None:
    for _, public in (rsa_pem, ec_pem):
        der = serialization.load_pem_public_key(public).public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        for text in (
            base64.b64encode(der),
            base64.urlsafe_b64encode(der).rstrip(b"="),
            b"".join(public.strip().splitlines()[1:-1]),  # the PEM body without its lines
            der,
        ):
            with pytest.raises(ConfigError, match="key confusion"):
                JWTVerifier(key=text, algorithms=["HS256"])
    JWTVerifier(key=base64.b64encode(b"a random shared secret of 32+ bytes!"))


def test_a_der_public_key_ending_in_a_whitespace_byte_is_not_an_hmac_secret() -> None:
    """About one EC key in forty ends its DER in a byte that is ASCII whitespace (0x20,
    0x0a...): the check must read the bytes as given, not stripped (a full run's random
    key once passed as a secret)."""
    for _ in range(5000):
        der = (
            ec.generate_private_key(ec.SECP256R1())
            .public_key()
            .public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        if der[-1:].isspace():
            break
    assert der[-1:].isspace()
    with pytest.raises(ConfigError, match="key confusion"):
        JWTVerifier(key=der, algorithms=["HS256"])


@pytest.mark.parametrize("name", ["exp", "nbf", "iat"])
@pytest.mark.parametrize("value", [10**400, 10**20, -(10**400), "9999999999", True, 1e308])
def test_out_of_range_or_ill_typed_dates_are_invalid_claims(name: str, value: Any) -> None:
    payload = claims(**{name: value})
    if name != "exp":
        payload["exp"] = int(time.time()) + 600
    tok = jwt.encode(payload, SECRET, algorithm="HS256")
    with pytest.raises(TokenError) as err:
        verifier().verify(tok)
    assert err.value.reason in ("token_invalid_claim", "token_expired", "token_not_yet_valid")
    if value in (10**400, 10**20, "9999999999", 1e308) and name == "exp":
        assert err.value.reason == "token_invalid_claim"


def test_algorithm_names_are_case_insensitive_and_eddsa_works() -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    assert check_algorithms(["eddsa", "EDDSA"]) == ("EdDSA",)
    assert check_algorithms(["hs256"]) == ("HS256",)
    private = ed25519.Ed25519PrivateKey.generate()
    priv_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )  # fmt: skip
    pub_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    tok = issue_token(subject="a", tenant="t", key=priv_pem, algorithm="EDDSA")
    assert JWTVerifier(key=pub_pem, algorithms=["EdDSA"]).verify(tok).subject == "a"
    with pytest.raises(ConfigError, match=r"allowed: .*EdDSA"):
        check_algorithms(["Ed25519"])


def test_a_der_key_is_recognised_by_its_structure_alone(
    rsa_pem: tuple[bytes, bytes], ec_pem: tuple[bytes, bytes]
) -> None:
    """When OpenSSL refuses a good key (errors another library left on its queue), the
    DER structure alone still marks it as a key; a random secret is not one."""
    from toolscout.gateway.keys import _der_structure

    for _, public in (rsa_pem, ec_pem):
        der = serialization.load_pem_public_key(public).public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        assert _der_structure(der)
        assert not _der_structure(der[:-1]) and not _der_structure(der + b"\x00")
    assert not _der_structure(b"0 a random shared secret of 32+ bytes!")
    assert not _der_structure(b"\x30\x03\x04\x01\x00")  # a SEQUENCE, but of an OCTET STRING
