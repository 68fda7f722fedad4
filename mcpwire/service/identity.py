"""Who is calling and what they may do: roles, identities, and telling one from a credential.

Theory of operation: every request to the service is made by an :class:`Identity`: a named API
token, a person signed in to the console (with a token, or through an identity provider), or,
only when authentication is off on loopback, ``local``. Each identity has one :class:`Role`, and
each role includes the ones before it:

- ``viewer`` reads the API, the console, the event stream and the metrics;
- ``caller`` also uses the MCP gateway and calls tools, prompts and resources;
- ``approver`` also decides approvals and approves changed tool definitions;
- ``admin`` also manages servers (stdio commands included), tokens and settings.

:class:`Authenticator` turns a bearer credential into an identity: the service's own admin token
(``$MCPWIRE_TOKEN``, ``--token-file``, or the one the service made in its data folder) compared
in constant time, else a token of the store looked up by its SHA-256 (cached for a second, so a
revocation reaches every replica within a second), else a JWT from the configured identity
provider (:mod:`mcpwire.service.oauth`). The credential itself is never kept or logged.
"""

from __future__ import annotations

import enum
import hashlib
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol

from .settings import Secret
from .store import Store

__all__ = [
    "ADMIN_TOKEN_NAME",
    "Authenticator",
    "Identity",
    "LOCAL",
    "Role",
    "TOKEN_NAME",
    "hash_credential",
    "new_token",
]

#: a token name: short, printable, no blanks (it is shown in the audit log and the console)
TOKEN_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}\Z")
#: the name the service's own admin token goes by
ADMIN_TOKEN_NAME: Final = "admin"
#: seconds a token looked up in the store is believed before it is looked up again
TOKEN_CACHE_S: Final = 1.0
#: the most store tokens kept in the cache
MAX_CACHED: Final = 4096
_PREFIX: Final = "mcpw_"


class Role(enum.IntEnum):
    """What an identity may do; each role includes the ones before it."""

    #: read the API, the console, events and metrics
    VIEWER = 1
    #: the MCP gateway and tool, prompt and resource calls
    CALLER = 2
    #: decide approvals and approve changed tool definitions
    APPROVER = 3
    #: servers (stdio commands included), tokens, settings
    ADMIN = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Role:
        """The role named ``text`` (``viewer``, ``caller``, ``approver`` or ``admin``).

        Raises:
            ValueError: no such role.
        """
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(role.label for role in cls)
            raise ValueError(f"unknown role {text!r}: expected one of {names}") from None


@dataclass(frozen=True, slots=True)
class Identity:
    """Who makes a request: ``kind`` is ``token``, ``user`` or ``local``."""

    kind: str
    name: str
    role: Role

    def describe(self) -> str:
        """``token:ci-agent``, ``user:alice@example.com``, ``local``: what audit records name."""
        return "local" if self.kind == "local" else f"{self.kind}:{self.name}"

    def may(self, role: Role) -> bool:
        return self.role >= role


#: the identity of every request when authentication is off (loopback only)
LOCAL: Final = Identity("local", "local", Role.ADMIN)
#: the identity the service's admin token proves
ADMIN: Final = Identity("token", ADMIN_TOKEN_NAME, Role.ADMIN)


def hash_credential(value: str | bytes) -> str:
    """The SHA-256 (hex) a token or a session id is stored and looked up by."""
    data = value.encode() if isinstance(value, str) else value
    return hashlib.sha256(data).hexdigest()


def new_token() -> str:
    """A new random token (256 bits), recognisable by its prefix."""
    return _PREFIX + secrets.token_urlsafe(32)


#: verifies a JWT: the identity it proves, or None when it is no JWT of the configured provider
JwtVerifier = Callable[[str], Awaitable[Identity | None]]


class Challenger(Protocol):
    """Makes the ``WWW-Authenticate`` value of a 401 (``error``: ``invalid_token`` when a token
    was presented)."""

    def __call__(self, *, error: str | None = None) -> str: ...


class Authenticator:
    """Bearer credentials to identities (see the module's theory of operation)."""

    def __init__(
        self,
        admin: Secret | None,
        store: Store | None,
        *,
        jwt: JwtVerifier | None = None,
        challenger: Challenger | None = None,
    ) -> None:
        self.admin = admin
        self.store = store
        self.jwt = jwt
        self.challenger = challenger
        self._cache: dict[str, tuple[float, Identity | None]] = {}

    @property
    def required(self) -> bool:
        """Whether requests must authenticate (False only with authentication off)."""
        return self.admin is not None

    def admin_of(self, credential: str) -> Identity | None:
        """:data:`ADMIN` when ``credential`` is the service's admin token (no wait: the common
        case, checked before :meth:`identify`), else None."""
        if credential and self.admin is not None and self.admin.matches(credential):
            return ADMIN
        return None

    async def identify(self, credential: str) -> Identity | None:
        """The identity ``credential`` proves, or None (unknown, revoked, expired, malformed)."""
        if not credential:
            return None
        if self.admin is not None and self.admin.matches(credential):
            return ADMIN
        if credential.startswith(_PREFIX) and self.store is not None:
            return await self._stored(credential)
        if self.jwt is not None and credential.count(".") == 2:
            return await self.jwt(credential)
        return None

    async def _stored(self, credential: str) -> Identity | None:
        key = hash_credential(credential)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < TOKEN_CACHE_S:
            return cached[1]
        assert self.store is not None
        row = await self.store.access.token_by_hash(key)
        identity = None
        if row is not None and row.revoked_at is None:
            try:
                identity = Identity("token", row.name, Role.parse(row.role))
            except ValueError:
                identity = None
        if len(self._cache) >= MAX_CACHED:
            self._cache.clear()
        self._cache[key] = (now, identity)
        return identity

    def challenge(self, *, presented: bool = False) -> str:
        """The ``WWW-Authenticate`` value of a 401: with an identity provider, where its resource
        metadata is (RFC 9728 §5.1), and ``error="invalid_token"`` when a token was presented
        (RFC 6750 §3.1)."""
        if self.challenger is not None:
            return self.challenger(error="invalid_token" if presented else None)
        return 'Bearer realm="mcpwire"'

    def forget(self) -> None:
        """Drops the cache (a token was revoked here: no second of grace in this process)."""
        self._cache.clear()
