"""Compact JWS (RFC 7515) signing with ES256, for ``private_key_jwt`` client assertions.

Theory of operation: signing needs the optional ``cryptography`` package (imported lazily, so
the rest of ``mcpwire.auth`` works without it). An ECDSA signature comes out DER-encoded and is
re-encoded as the fixed-width ``r || s`` JWS form (RFC 7518 §3.4). Keys are read from PKCS#8 or
SEC1 PEM; they are held by the signer closure and never appear in a repr or message.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Callable, Mapping

__all__ = ["client_assertion_claims", "es256_signer", "sign_es256"]

#: Lifetime of a client assertion (RFC 7523 §3: short-lived).
ASSERTION_LIFETIME_SECONDS = 300


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _load_key(private_key_pem: str) -> object:
    try:
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("ES256 signing needs the 'cryptography' package (pip install cryptography)") from exc
    try:
        key = load_pem_private_key(private_key_pem.encode(), password=None)
    except ValueError as exc:
        raise ValueError("the private key is not a valid unencrypted PEM key") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ValueError("ES256 needs a P-256 (secp256r1) EC private key")
    return key


def sign_es256(key: object, header: Mapping[str, object], claims: Mapping[str, object]) -> str:
    """Returns the compact JWS of ``claims`` under ``header`` (``alg`` is set to ES256)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    assert isinstance(key, ec.EllipticCurvePrivateKey)
    head = _b64url(json.dumps({**header, "alg": "ES256"}, separators=(",", ":")).encode())
    body = _b64url(json.dumps(dict(claims), separators=(",", ":")).encode())
    signing_input = f"{head}.{body}".encode("ascii")
    r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    return f"{head}.{body}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def client_assertion_claims(client_id: str, audience: str, now: float | None = None) -> dict[str, object]:
    """RFC 7523 §3 claims for a client assertion: ``iss`` = ``sub`` = client id, ``aud`` = AS."""
    issued = int(time.time() if now is None else now)
    return {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": issued,
        "exp": issued + ASSERTION_LIFETIME_SECONDS,
        "jti": _b64url(secrets.token_bytes(16)),
    }


def es256_signer(private_key_pem: str, *, key_id: str | None = None) -> Callable[[str, str], str]:
    """A ``private_key_jwt`` signer for :class:`~mcpwire.auth.ClientCredentialsProvider`.

    Raises:
        ValueError: the PEM is not an unencrypted P-256 private key.
        RuntimeError: ``cryptography`` is not installed.
    """
    key = _load_key(private_key_pem)
    header: dict[str, object] = {"typ": "JWT"}
    if key_id:
        header["kid"] = key_id

    def sign(client_id: str, audience: str) -> str:
        return sign_es256(key, header, client_assertion_claims(client_id, audience))

    return sign
