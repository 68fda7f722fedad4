"""DPoP (RFC 9449): proof-of-possession for access tokens, ES256 keys only.

Theory of operation: a :class:`DPoPKey` is a fresh P-256 key pair held in memory for the life of
the provider. Each HTTP request that uses a DPoP-bound token, and each token request, carries a
new proof JWT (``typ`` ``dpop+jwt``, the public key as ``jwk``) naming the method (``htm``), the
URL without query or fragment (``htu``), a unique ``jti``, ``iat``, and, towards the resource
server, ``ath`` (the token's SHA-256). A server-supplied ``DPoP-Nonce`` goes into later proofs
(RFC 9449 §8, §9). Because the key lives only in memory, DPoP-bound tokens written to a
:class:`~mcpwire.auth.FileTokenStorage` are useless to another process: it re-authorizes.

Needs the optional ``cryptography`` package.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from urllib.parse import urlsplit, urlunsplit

from mcpwire.auth.jwt import sign_es256

__all__ = ["DPoPKey", "htu"]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def htu(url: str) -> str:
    """RFC 9449 §4.2: "The HTTP target URI ... without query and fragment parts"."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class DPoPKey:
    """An in-memory ES256 key that signs DPoP proofs. Its private half is never exported."""

    __slots__ = ("_key", "jwk")

    def __init__(self) -> None:
        try:
            from cryptography.hazmat.primitives.asymmetric import ec
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise RuntimeError("DPoP needs the 'cryptography' package (pip install cryptography)") from exc
        self._key = ec.generate_private_key(ec.SECP256R1())
        numbers = self._key.public_key().public_numbers()
        #: The public JWK (RFC 7518 §6.2.1), members in thumbprint order.
        self.jwk: dict[str, str] = {
            "crv": "P-256",
            "kty": "EC",
            "x": _b64url(numbers.x.to_bytes(32, "big")),
            "y": _b64url(numbers.y.to_bytes(32, "big")),
        }

    def __repr__(self) -> str:
        return f"DPoPKey(thumbprint={self.thumbprint!r})"

    @property
    def thumbprint(self) -> str:
        """RFC 7638 JWK thumbprint (SHA-256), what a bound token's ``cnf.jkt`` names."""
        canonical = json.dumps(self.jwk, separators=(",", ":"), sort_keys=True).encode()
        return _b64url(hashlib.sha256(canonical).digest())

    def proof(self, method: str, url: str, *, access_token: str | None = None, nonce: str | None = None) -> str:
        """A fresh proof for one request (RFC 9449 §4.2)."""
        claims: dict[str, object] = {
            "jti": _b64url(secrets.token_bytes(16)),
            "htm": method.upper(),
            "htu": htu(url),
            "iat": int(time.time()),
        }
        if access_token is not None:
            claims["ath"] = _b64url(hashlib.sha256(access_token.encode("ascii")).digest())
        if nonce is not None:
            claims["nonce"] = nonce
        return sign_es256(self._key, {"typ": "dpop+jwt", "jwk": self.jwk}, claims)
