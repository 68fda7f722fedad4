"""The JWT verifier (mcpwire.service.jws) on tokens made here: every algorithm it accepts, and the
forgeries and malformations it must refuse, each with the message it gives."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from mcpwire.service.jws import JwtError, UnknownKey, check_claims, decode, parse_jwks, verify

NOW = 1_800_000_000.0


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def num(value: int, width: int | None = None) -> str:
    return b64(value.to_bytes(width or (value.bit_length() + 7) // 8, "big"))


RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_SMALL = rsa.generate_private_key(public_exponent=65537, key_size=1024)
P256 = ec.generate_private_key(ec.SECP256R1())
P384 = ec.generate_private_key(ec.SECP384R1())
ED = ed25519.Ed25519PrivateKey.generate()


def jwk(key: Any, kid: str, **extra: Any) -> dict[str, Any]:
    if isinstance(key, rsa.RSAPrivateKey):
        n = key.public_key().public_numbers()
        return {"kty": "RSA", "kid": kid, "n": num(n.n), "e": num(n.e), **extra}
    if isinstance(key, ec.EllipticCurvePrivateKey):
        n = key.public_key().public_numbers()
        width = (key.curve.key_size + 7) // 8
        crv = {"secp256r1": "P-256", "secp384r1": "P-384"}[key.curve.name]
        return {"kty": "EC", "kid": kid, "crv": crv, "x": num(n.x, width), "y": num(n.y, width), **extra}
    raw = key.public_key().public_bytes_raw()
    return {"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64(raw), **extra}


def sign(key: Any, alg: str, claims: dict[str, Any], **header: Any) -> str:
    head = {"alg": alg, "typ": "JWT", **header}
    data = f"{b64(json.dumps(head).encode())}.{b64(json.dumps(claims).encode())}".encode()
    digest = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}.get(alg[-3:])
    if alg.startswith("RS"):
        signature = key.sign(data, padding.PKCS1v15(), digest)
    elif alg.startswith("PS"):
        signature = key.sign(data, padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size), digest)
    elif alg.startswith("ES"):
        width = (key.curve.key_size + 7) // 8
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(digest)))
        signature = r.to_bytes(width, "big") + s.to_bytes(width, "big")
    elif alg == "EdDSA":
        signature = key.sign(data)
    else:  # HS256 with whatever bytes are given as the key
        signature = hmac.new(key, data, hashlib.sha256).digest()
    return f"{data.decode()}.{b64(signature)}"


KEYS = parse_jwks(
    json.dumps(
        {
            "keys": [
                jwk(RSA, "rsa", alg="RS256", use="sig"),
                jwk(RSA, "pss"),
                jwk(P256, "p256", alg="ES256"),
                jwk(P384, "p384"),
                jwk(ED, "ed"),
            ]
        }
    ).encode()
)
CLAIMS = {"iss": "https://idp.example", "aud": "https://gw.example/mcp", "sub": "alice", "iat": NOW, "exp": NOW + 60}


@pytest.mark.parametrize(
    ("key", "alg", "kid"),
    [
        (RSA, "RS256", "rsa"),
        (RSA, "PS256", "pss"),
        (RSA, "RS512", "pss"),
        (P256, "ES256", "p256"),
        (P384, "ES384", "p384"),
        (ED, "EdDSA", "ed"),
    ],
)
def test_each_algorithm_verifies_with_the_key_it_names(key: Any, alg: str, kid: str) -> None:
    token = decode(sign(key, alg, CLAIMS, kid=kid))
    assert verify(token, KEYS).kid == kid
    assert token.claims["sub"] == "alice"


def test_without_a_kid_every_key_of_the_type_is_tried() -> None:
    assert verify(decode(sign(P256, "ES256", CLAIMS)), KEYS).kid == "p256"


@pytest.mark.parametrize("alg", ["none", "HS256", "HS512", "RSA1_5", "", None])
def test_none_and_hmac_are_refused_before_any_key(alg: str | None) -> None:
    header = {"alg": alg} if alg is not None else {}
    data = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(CLAIMS).encode())}"
    with pytest.raises(JwtError, match=r"^the token's algorithm .* is not accepted \(only RS256, "):
        decode(data + ".c2ln")


def test_an_hmac_made_with_the_public_key_is_refused() -> None:
    # the classic forgery: HS256 keyed with the provider's public key bytes
    public = jwk(RSA, "rsa")["n"].encode()
    with pytest.raises(JwtError, match=r"^the token's algorithm 'HS256' is not accepted"):
        decode(sign(public, "HS256", CLAIMS, kid="rsa"))


def test_a_changed_payload_breaks_the_signature() -> None:
    head, _, signature = sign(P256, "ES256", CLAIMS, kid="p256").split(".")
    changed = f"{head}.{b64(json.dumps({**CLAIMS, 'sub': 'mallory'}).encode())}.{signature}"
    with pytest.raises(JwtError, match=r"^the token's signature does not verify with the provider's key$"):
        verify(decode(changed), KEYS)


def test_another_key_under_a_known_kid_is_refused() -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(JwtError, match=r"^the token's signature does not verify"):
        verify(decode(sign(other, "ES256", CLAIMS, kid="p256")), KEYS)


def test_an_unknown_kid_is_its_own_error() -> None:
    with pytest.raises(
        UnknownKey, match=r"^the token is signed with key 'rotated', which the provider does not publish$"
    ):
        verify(decode(sign(P256, "ES256", CLAIMS, kid="rotated")), KEYS)


def test_a_key_is_used_only_for_its_algorithm() -> None:
    # the RSA key declared RS256 cannot verify PS256, nor the P-256 key ES384
    with pytest.raises(JwtError, match=r"^the provider's key 'rsa' is not a key for PS256$"):
        verify(decode(sign(RSA, "PS256", CLAIMS, kid="rsa")), KEYS)
    with pytest.raises(JwtError, match=r"^the provider's key 'p256' is not a key for ES384$"):
        verify(decode(sign(P384, "ES384", CLAIMS, kid="p256")), KEYS)


def test_an_ecdsa_signature_in_der_form_is_refused() -> None:
    data = f"{b64(json.dumps({'alg': 'ES256', 'kid': 'p256'}).encode())}.{b64(json.dumps(CLAIMS).encode())}"
    der = P256.sign(data.encode(), ec.ECDSA(hashes.SHA256()))
    with pytest.raises(JwtError, match=r"^the token's signature does not verify"):
        verify(decode(f"{data}.{b64(der)}"), KEYS)


ES256_HEAD = b64(b'{"alg":"ES256"}')
CRIT_HEAD = b64(b'{"alg":"ES256","crit":["x"]}')


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("a.b", r"^the token is not a signed JWT \(three dot-separated parts\)$"),
        ("a.b.c.d", r"^the token is not a signed JWT"),
        ("!!.e30.c2ln", r"^the token's header is not base64url$"),
        (f"{b64(b'[1]')}.e30.c2ln", r"^the token's header is not a JSON object$"),
        (f"{b64(b'{')}.e30.c2ln", r"^the token's header is not JSON$"),
        (f"{ES256_HEAD}.{b64(b'nope')}.c2ln", r"^the token's claims is not JSON$"),
        (f"{ES256_HEAD}.e30.", r"^the token's signature is not base64url$"),
        (f"{CRIT_HEAD}.e30.c2ln", r"^the token's header has 'crit' extensions"),
        ("é.e30.c2ln", r"^the token is not ASCII$"),
        ("a" * 20000, r"^the token is longer than 16384 bytes$"),
    ],
)
def test_malformed_tokens_say_what_is_wrong(token: str, message: str) -> None:
    with pytest.raises(JwtError, match=message):
        decode(token)


def test_the_key_set_keeps_only_signature_keys_it_can_use() -> None:
    document = {
        "keys": [
            jwk(RSA, "enc", use="enc"),
            jwk(RSA, "small-ops", key_ops=["encrypt"]),
            jwk(RSA_SMALL, "short"),
            {"kty": "oct", "kid": "secret", "k": "c2VjcmV0"},
            {"kty": "EC", "kid": "bad-point", "crv": "P-256", "x": num(1, 32), "y": num(2, 32)},
            {"kty": "EC", "kid": "odd-curve", "crv": "secp256k1", "x": "AA", "y": "AA"},
            "not a key",
            jwk(P256, "good"),
        ]
    }
    assert [k.kid for k in parse_jwks(json.dumps(document).encode())] == ["good"]
    with pytest.raises(JwtError, match=r"^the key set has no 'keys' list$"):
        parse_jwks(b'{"key": []}')
    with pytest.raises(JwtError, match=r"^the key set is not JSON$"):
        parse_jwks(b"<html>")


def check(claims: dict[str, Any], **expect: Any) -> None:
    check_claims(
        claims,
        issuer=expect.pop("issuer", "https://idp.example"),
        audience=expect.pop("audience", "https://gw.example/mcp"),
        now=expect.pop("now", NOW),
        leeway=30,
        **expect,
    )


def test_claims_that_hold() -> None:
    check(CLAIMS)
    check({**CLAIMS, "aud": ["https://other.example", "https://gw.example/mcp"]})
    check({**CLAIMS, "exp": NOW - 29, "nbf": NOW + 29})  # within the leeway


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"iss": "https://idp.example/"}, r"^the token's issuer is 'https://idp.example/', not 'https://idp.example'$"),
        ({"iss": None}, r"^the token's issuer is None, not"),
        (
            {"aud": "https://gw.example"},
            r"^the token is for the audience 'https://gw.example', not 'https://gw.example/mcp'$",
        ),
        ({"aud": ["a", "b"]}, r"^the token is for the audience 'a', 'b', not"),
        ({"aud": None}, r"^the token is for the audience none, not"),
        ({"exp": None}, r"^the token has no expiry \('exp'\)$"),
        ({"exp": NOW - 31}, r"^the token expired 31 s ago$"),
        ({"exp": "soon"}, r"^the token's 'exp' is not a number of seconds$"),
        ({"exp": True}, r"^the token's 'exp' is not a number of seconds$"),
        ({"nbf": NOW + 100}, r"^the token is not valid before 100 s from now$"),
        ({"iat": NOW + 100}, r"^the token was issued in the future \('iat'\)$"),
    ],
)
def test_claims_that_do_not(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(JwtError, match=message):
        check({k: v for k, v in {**CLAIMS, **changes}.items() if v is not None})


def test_an_id_token_needs_its_nonce_and_its_client() -> None:
    token = {**CLAIMS, "aud": "console", "nonce": "n1"}
    check(token, audience="console", nonce="n1")
    with pytest.raises(JwtError, match=r"^the ID token's nonce is not the one this sign-in sent$"):
        check(token, audience="console", nonce="n2")
    with pytest.raises(JwtError, match=r"^the ID token was issued to another client \('azp'\)$"):
        check({**token, "aud": ["console", "other"], "azp": "other"}, audience="console", nonce="n1")
    with pytest.raises(JwtError, match=r"^the ID token has no 'iat'$"):
        check({k: v for k, v in token.items() if k != "iat"}, audience="console", nonce="n1")
