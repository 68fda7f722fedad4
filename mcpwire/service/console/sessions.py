"""Signing in to the console: sessions kept by the store, the login and logout pages.

Theory of operation: a session is a random id in an HttpOnly, SameSite=Strict cookie; the store
keeps only its SHA-256 and whose it is (:class:`~mcpwire.service.identity.Identity`: a token's name
and role, a signed-in user, or ``local`` when authentication is off). A session ends when its
owner logs out, when its token is revoked, after ``SESSION_IDLE_S`` without a request, and after
``SESSION_SECONDS`` whatever happens; every replica on the store sees the end within a second
(what a replica has read is believed that long). Its CSRF token is derived from its id, which
only the cookie holds.

Signing in takes any token the service accepts (the admin token, a named token, a JWT of the
identity provider); the link ``/login?token=...`` that ``mcpwire serve`` prints signs in with one
click and drops the token from the address at once. Attempts are limited per client address.

With an identity provider and a console client id configured, the login page also offers "Sign in
with <provider>": ``/login/oidc`` sends the browser to the provider (OpenID Connect, code flow
with PKCE, :mod:`mcpwire.service.oidc`) with the sign-in's secrets in a short-lived cookie
(SameSite=Lax, so it comes back with the provider's redirect), and ``/login/oidc/callback``
turns the provider's answer into a session. That last page is an ordinary page that moves on by
itself: the session cookie is SameSite=Strict, and a browser does not send it on a redirect chain
that began at the provider's site.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import urllib.parse
from dataclasses import dataclass
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from ..identity import LOCAL, Authenticator, Identity, Role, hash_credential
from ..middleware import RateLimiter
from ..store import SessionRow, Store

__all__ = [
    "SESSION_COOKIE",
    "SESSION_IDLE_S",
    "SESSION_SECONDS",
    "Session",
    "Sessions",
    "safe_next",
    "set_session_cookie",
]

SESSION_COOKIE: Final = "mcpwire_console"
#: the longest a console session lasts
SESSION_SECONDS: Final = 12 * 3600
#: a session with no request for this long has ended
SESSION_IDLE_S: Final = 3600
#: a session's last use is written at most this often
_TOUCH_S: Final = 60.0
#: seconds a session read from the store is believed
_CACHE_S: Final = 1.0
#: sign-in attempts per client address: a burst, then one every six seconds
LOGIN_BURST: Final = 10
LOGIN_RATE: Final = 10 / 60


@dataclass(frozen=True, slots=True)
class Session:
    """A live session: its cookie value, whose it is, and its CSRF token."""

    cookie: str
    identity: Identity
    csrf: str


class Sessions:
    """The console's sessions in ``store`` (see the module's theory of operation)."""

    def __init__(
        self,
        store: Store,
        authenticator: Authenticator,
        *,
        ttl: float = SESSION_SECONDS,
        idle: float = SESSION_IDLE_S,
    ) -> None:
        self.store = store
        self.authenticator = authenticator
        self.ttl = ttl
        self.idle = idle
        self.attempts = RateLimiter(rate=LOGIN_RATE, burst=LOGIN_BURST)
        self._cache: dict[str, tuple[float, SessionRow | None]] = {}

    @property
    def required(self) -> bool:
        return self.authenticator.required

    @staticmethod
    def csrf(cookie: str) -> str:
        return hashlib.sha256(b"mcpwire console csrf\0" + cookie.encode()).hexdigest()[:40]

    async def start(self, identity: Identity) -> Session:
        cookie = secrets.token_urlsafe(32)
        row = await self.store.access.start_session(
            hash_credential(cookie), kind=identity.kind, name=identity.name, role=identity.role.label
        )
        self._cache[row.hash] = (time.monotonic(), row)
        return Session(cookie, identity, self.csrf(cookie))

    async def find(self, cookie: str | None) -> Session | None:
        """The live session of ``cookie``, or None (unknown, ended, idle too long, too old)."""
        if not cookie or len(cookie) > 100:
            return None
        key = hash_credential(cookie)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < _CACHE_S:
            row = cached[1]
        else:
            row = await self.store.access.session(key)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = (now, row)
        if row is None or row.ended_at is not None:
            return None
        wall = time.time()
        if wall - row.created_at > self.ttl or wall - row.seen_at > self.idle:
            return None
        try:
            identity = LOCAL if row.kind == "local" else Identity(row.kind, row.name, Role.parse(row.role))
        except ValueError:
            return None
        if wall - row.seen_at > _TOUCH_S:
            await self.store.access.touch_session(key, wall)
            self._cache.pop(key, None)
        return Session(cookie, identity, self.csrf(cookie))

    async def end(self, cookie: str | None) -> None:
        if cookie:
            key = hash_credential(cookie)
            await self.store.access.end_session(key)
            self._cache.pop(key, None)


def safe_next(value: str) -> str:
    """Only a path on this service (no scheme, no host, no ``//``) is followed after signing in."""
    parsed = urllib.parse.urlsplit(value)
    if not value.startswith("/") or value.startswith("//") or parsed.scheme or parsed.netloc or "\\" in value:
        return "/"
    return value


def set_session_cookie(request: Request, response: Response, value: str, ttl: float) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        value,
        max_age=int(ttl),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
