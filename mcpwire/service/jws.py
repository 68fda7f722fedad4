"""Verifying the JSON Web Tokens an identity provider signs (RFC 7515, 7517, 7518, 7519): sans-I/O.

Theory of operation: a token is three base64url parts; :func:`decode` checks its shape and sizes
and reads the header and the claims (JSON objects) without trusting either. :func:`verify` then
picks the provider's key by ``kid`` (or, without one, every key of the algorithm's type, a few at
most) and checks the signature with ``cryptography``: RSA (PKCS#1 v1.5 and PSS), ECDSA on the
curve the algorithm names, and Ed25519. Only asymmetric algorithms exist here: ``none`` and the
HMAC family are refused before any key is looked at (an HMAC "signed" with a public key is the
classic forgery). :func:`check_claims` checks ``iss`` (exact string), ``aud`` (one of the
values), ``exp`` (required), ``nbf`` and ``iat`` with a small leeway, and an ID token's ``nonce``
and ``azp``. Every refusal is a :class:`JwtError` whose message says what was wrong and never
repeats the token.

``cryptography`` is imported when keys are read, not with this module.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

__all__ = [
    "ALGORITHMS",
    "JwtError",
    "PublicKey",
    "Token",
    "UnknownKey",
    "check_claims",
    "decode",
    "parse_jwks",
    "verify",
]

#: the longest token read (a JWT access token is a few KiB at most)
MAX_TOKEN_BYTES: Final = 16 * 1024
#: the most keys read from one JWKS document
MAX_KEYS: Final = 64
#: the most keys tried for a token without ``kid``
MAX_TRIED: Final = 8
#: RSA keys shorter than this are not used (RFC 7518 §3.3: "2048 bits or larger MUST be used")
MIN_RSA_BITS: Final = 2048


@dataclass(frozen=True, slots=True)
class _Algorithm:
    kty: str
    hash: str
    #: ``pkcs1``, ``pss``, the curve of ECDSA, or ``ed25519``
    scheme: str
    #: bytes of r and of s in an ECDSA signature
    width: int = 0


#: the signature algorithms accepted, by their JWS ``alg`` name (RFC 7518 §3.1, RFC 8037)
ALGORITHMS: Final[Mapping[str, _Algorithm]] = {
    "RS256": _Algorithm("RSA", "SHA256", "pkcs1"),
    "RS384": _Algorithm("RSA", "SHA384", "pkcs1"),
    "RS512": _Algorithm("RSA", "SHA512", "pkcs1"),
    "PS256": _Algorithm("RSA", "SHA256", "pss"),
    "PS384": _Algorithm("RSA", "SHA384", "pss"),
    "PS512": _Algorithm("RSA", "SHA512", "pss"),
    "ES256": _Algorithm("EC", "SHA256", "P-256", 32),
    "ES384": _Algorithm("EC", "SHA384", "P-384", 48),
    "ES512": _Algorithm("EC", "SHA512", "P-521", 66),
    "EdDSA": _Algorithm("OKP", "", "ed25519"),
}


class JwtError(ValueError):
    """A token is refused; the message says why (never the token itself)."""


class UnknownKey(JwtError):
    """The token names a ``kid`` the key set lacks (the provider may have rotated its keys)."""


@dataclass(frozen=True, slots=True)
class PublicKey:
    """One verification key of a JWKS: its ``kid`` and ``alg`` (when given) and the key itself."""

    kid: str | None
    alg: str | None
    kty: str
    #: the curve of an EC key (``P-256``...), else empty
    crv: str
    key: Any = field(repr=False)


@dataclass(frozen=True, slots=True)
class Token:
    """A token's parts, decoded but not yet trusted."""

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes = field(repr=False)
    signature: bytes = field(repr=False)

    @property
    def alg(self) -> str:
        return str(self.header.get("alg"))

    @property
    def kid(self) -> str | None:
        kid = self.header.get("kid")
        return kid if isinstance(kid, str) else None


def _b64decode(part: str, what: str) -> bytes:
    if not part or "=" in part:
        raise JwtError(f"the token's {what} is not base64url")
    try:
        # validate=True: characters outside the alphabet are an error, not skipped
        return base64.b64decode(part + "=" * (-len(part) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise JwtError(f"the token's {what} is not base64url") from None


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError:
        raise JwtError(f"the token's {what} is not JSON") from None
    if not isinstance(value, dict):
        raise JwtError(f"the token's {what} is not a JSON object")
    return value


def decode(token: str) -> Token:
    """The parts of a compact JWS, checked for shape only (nothing is trusted yet).

    Raises:
        JwtError: not three base64url parts, too long, a header or claims that are not JSON
            objects, an algorithm that is not an asymmetric signature, or a ``crit`` header.
    """
    if len(token) > MAX_TOKEN_BYTES:
        raise JwtError(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
    if not token.isascii():
        raise JwtError("the token is not ASCII")
    parts = token.split(".")
    if len(parts) != 3:
        raise JwtError("the token is not a signed JWT (three dot-separated parts)")
    header = _json_object(_b64decode(parts[0], "header"), "header")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        shown = alg if isinstance(alg, str) else type(alg).__name__
        # none and HS256 land here: only the provider's public keys can sign for it
        raise JwtError(f"the token's algorithm {shown[:20]!r} is not accepted (only {', '.join(ALGORITHMS)})")
    if "crit" in header:
        # RFC 7515 §4.1.11: extensions the recipient does not understand make the JWS invalid
        raise JwtError("the token's header has 'crit' extensions, which are not supported")
    claims = _json_object(_b64decode(parts[1], "claims"), "claims")
    signature = _b64decode(parts[2], "signature")
    return Token(header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), signature)


def _int(value: object, what: str) -> int:
    if not isinstance(value, str):
        raise ValueError(f"{what} is not a string")
    data = _b64decode(value, what)
    return int.from_bytes(data, "big")


def _load(jwk: Mapping[str, Any]) -> Any:
    """The ``cryptography`` public key of ``jwk``, or None for a key this module cannot use."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    curves: dict[str, Callable[[], ec.EllipticCurve]] = {
        "P-256": ec.SECP256R1,
        "P-384": ec.SECP384R1,
        "P-521": ec.SECP521R1,
    }
    kty = jwk.get("kty")
    if kty == "RSA":
        key = rsa.RSAPublicNumbers(_int(jwk.get("e"), "e"), _int(jwk.get("n"), "n")).public_key()
        return key if key.key_size >= MIN_RSA_BITS else None
    if kty == "EC":
        curve = curves.get(str(jwk.get("crv")))
        if curve is None:
            return None
        numbers = ec.EllipticCurvePublicNumbers(_int(jwk.get("x"), "x"), _int(jwk.get("y"), "y"), curve())
        return numbers.public_key()  # raises ValueError for a point not on the curve
    if kty == "OKP" and jwk.get("crv") == "Ed25519":
        x = jwk.get("x")
        if not isinstance(x, str):
            return None
        return ed25519.Ed25519PublicKey.from_public_bytes(_b64decode(x, "x"))
    return None


def parse_jwks(body: bytes) -> list[PublicKey]:
    """The signature keys of a JWKS document (RFC 7517 §5); keys it cannot use are skipped
    (encryption keys, symmetric keys, unknown types and curves, RSA under 2048 bits).

    Raises:
        JwtError: the document is not a JSON object with a ``keys`` list.
        RuntimeError: ``cryptography`` is not installed.
    """
    try:
        document = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise JwtError("the key set is not JSON") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise JwtError("the key set has no 'keys' list")
    try:
        import cryptography  # noqa: F401
    except ImportError:  # pragma: no cover - depends on the environment
        raise RuntimeError("verifying tokens needs the 'cryptography' package: pip install 'mcpwire[auth]'") from None
    found: list[PublicKey] = []
    for jwk in keys[:MAX_KEYS]:
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        ops = jwk.get("key_ops")
        if isinstance(ops, list) and "verify" not in ops:
            continue
        try:
            key = _load(jwk)
        except (ValueError, TypeError):
            key = None  # a malformed key is skipped: the others may still be good
        if key is None:
            continue
        kid, alg = jwk.get("kid"), jwk.get("alg")
        found.append(
            PublicKey(
                kid if isinstance(kid, str) else None,
                alg if isinstance(alg, str) else None,
                str(jwk["kty"]),
                str(jwk.get("crv", "")) if jwk["kty"] == "EC" else "",
                key,
            )
        )
    return found


def _fits(key: PublicKey, alg: str) -> bool:
    spec = ALGORITHMS[alg]
    if key.kty != spec.kty or (key.alg is not None and key.alg != alg):
        return False
    return spec.kty != "EC" or key.crv == spec.scheme


def _check_signature(key: PublicKey, alg: str, data: bytes, signature: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    spec = ALGORITHMS[alg]
    try:
        if spec.kty == "OKP":
            key.key.verify(signature, data)
            return True
        digest: hashes.HashAlgorithm = getattr(hashes, spec.hash)()
        if spec.kty == "RSA":
            if spec.scheme == "pss":
                pad: padding.AsymmetricPadding = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            else:
                pad = padding.PKCS1v15()
            key.key.verify(signature, data, pad, digest)
            return True
        # RFC 7518 §3.4: R and S, each exactly as wide as the curve's order
        if len(signature) != 2 * spec.width:
            return False
        r = int.from_bytes(signature[: spec.width], "big")
        s = int.from_bytes(signature[spec.width :], "big")
        key.key.verify(encode_dss_signature(r, s), data, ec.ECDSA(digest))
        return True
    except InvalidSignature:
        return False


def verify(token: Token, keys: Sequence[PublicKey]) -> PublicKey:
    """Checks the signature of ``token`` with the key it names; returns that key.

    Raises:
        UnknownKey: the token's ``kid`` is not in ``keys``.
        JwtError: no key fits the algorithm, or the signature does not verify.
    """
    alg = token.alg
    if token.kid is not None:
        named = [k for k in keys if k.kid == token.kid]
        if not named:
            raise UnknownKey(f"the token is signed with key {token.kid[:60]!r}, which the provider does not publish")
        candidates = [k for k in named if _fits(k, alg)]
        if not candidates:
            raise JwtError(f"the provider's key {token.kid[:60]!r} is not a key for {alg}")
    else:
        candidates = [k for k in keys if _fits(k, alg)][:MAX_TRIED]
        if not candidates:
            raise UnknownKey(f"the provider publishes no key for {alg}")
    for key in candidates:
        if _check_signature(key, alg, token.signing_input, token.signature):
            return key
    raise JwtError("the token's signature does not verify with the provider's key")


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JwtError(f"the token's {name!r} is not a number of seconds")
    return float(value)


def check_claims(
    claims: Mapping[str, Any],
    *,
    issuer: str,
    audience: str,
    now: float,
    leeway: float,
    nonce: str | None = None,
) -> None:
    """Checks the registered claims of a verified token (RFC 7519 §4.1; OpenID Connect Core
    §3.1.3.7 for an ID token, whose ``nonce`` is given).

    Raises:
        JwtError: the issuer, audience, times or nonce are not what was expected.
    """
    iss = claims.get("iss")
    if iss != issuer:
        shown = iss[:200] if isinstance(iss, str) else iss if iss is None else type(iss).__name__
        raise JwtError(f"the token's issuer is {shown!r}, not {issuer!r}")
    aud = claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if audience not in audiences:
        shown_aud = ", ".join(repr(str(a)[:200]) for a in audiences[:3]) or "none"
        raise JwtError(f"the token is for the audience {shown_aud}, not {audience!r}")
    exp = _number(claims, "exp")
    if exp is None:
        raise JwtError("the token has no expiry ('exp')")
    if now > exp + leeway:
        raise JwtError(f"the token expired {int(now - exp)} s ago")
    nbf = _number(claims, "nbf")
    if nbf is not None and now + leeway < nbf:
        raise JwtError(f"the token is not valid before {int(nbf - now)} s from now")
    iat = _number(claims, "iat")
    if iat is not None and now + leeway < iat:
        raise JwtError("the token was issued in the future ('iat')")
    if nonce is not None:
        if iat is None:
            raise JwtError("the ID token has no 'iat'")
        if claims.get("nonce") != nonce:
            raise JwtError("the ID token's nonce is not the one this sign-in sent")
        # OpenID Connect Core §3.1.3.7: with several audiences, azp names the client
        azp = claims.get("azp")
        if (len(audiences) > 1 or azp is not None) and azp != audience:
            raise JwtError("the ID token was issued to another client ('azp')")
