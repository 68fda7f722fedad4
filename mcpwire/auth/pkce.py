"""PKCE (RFC 7636) with ``S256`` only, and ``state`` values.

2025-11-25 basic/authorization: "MCP clients MUST use the S256 code challenge method when
technically capable" (AU-09); Python always is, so ``plain`` is never produced.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field

__all__ = ["PKCE", "new_state", "s256"]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def s256(verifier: str) -> str:
    """``BASE64URL(SHA256(verifier))`` (RFC 7636 §4.2)."""
    return _b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def new_state() -> str:
    """An unguessable ``state`` value (AU-20)."""
    return _b64url(secrets.token_bytes(24))


@dataclass(frozen=True, slots=True)
class PKCE:
    """A fresh verifier (64 random bytes: 86 characters, within 43..128) and its challenge."""

    verifier: str = field(default_factory=lambda: _b64url(secrets.token_bytes(64)), repr=False)

    @property
    def challenge(self) -> str:
        return s256(self.verifier)

    method = "S256"
