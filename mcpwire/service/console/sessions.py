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
from typing import TYPE_CHECKING, Final

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..identity import LOCAL, Authenticator, Identity, Role, hash_credential
from ..middleware import RateLimiter
from ..oidc import CALLBACK_PATH, COOKIE, SIGN_IN_S, START_PATH, ConsoleSignIn, SignInError
from ..store import SessionRow, Store

if TYPE_CHECKING:
    from .web import View

__all__ = ["SESSION_COOKIE", "SESSION_IDLE_S", "SESSION_SECONDS", "Sessions", "safe_next", "sign_in_routes"]

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


async def login(request: Request) -> Response:
    """The sign-in page; a token posted to it (or given as ``?token=``) starts a session."""
    from .web import console_of, read_form, secure

    sessions = console_of(request).sessions
    next_path = safe_next(request.query_params.get("next", "/"))
    if not sessions.required:
        return secure(RedirectResponse(next_path, status_code=303))
    given = request.query_params.get("token", "")
    if request.method == "POST":
        form = await read_form(request)
        next_path = safe_next(form.get("next", "/"))
        given = form.get("token")
    error = None
    status = 200
    if given.strip():
        client = request.client
        wait = sessions.attempts.take(client.host if client else "unknown")
        identity = None if wait is not None else await sessions.authenticator.identify(given.strip())
        if wait is not None:
            error, status = f"Too many sign-in attempts from your address; try again in {max(1, int(wait))} s.", 429
        elif identity is None:
            error, status = "That token is not accepted here.", 401
        else:
            session = await sessions.start(identity)
            # the token leaves the address bar at once (it never reaches the next page's URL)
            response = RedirectResponse(next_path, status_code=303)
            set_session_cookie(request, response, session.cookie, sessions.ttl)
            return secure(response)
    page = _login_page(request, next_path, error, status)
    if status == 429:
        page.headers["Retry-After"] = str(max(1, int(wait or 1)))
    return page


def _page(request: Request, template: str, status: int = 200, **values: object) -> Response:
    """A page of signing in (no session yet: no live updates, no sign-out)."""
    from .web import ENV, secure

    html = ENV.get_template(template).render(
        csrf="", live=False, token_required=False, version=request.app.state.service.version, path="/login", **values
    )
    return secure(HTMLResponse(html, status_code=status))


def _login_page(request: Request, next_path: str, error: str | None, status: int) -> Response:
    sign_in = _sign_in_of(request)
    label = sign_in.label if sign_in is not None else None
    return _page(request, "login.html", status, next=next_path, error=error, sign_in=label)


def _sign_in_of(request: Request) -> ConsoleSignIn | None:
    sign_in = getattr(request.app.state, "oidc", None)
    return sign_in if isinstance(sign_in, ConsoleSignIn) else None


def sign_in_routes() -> list[BaseRoute]:
    """The routes of the sign-in through the identity provider."""
    return [
        Route(START_PATH, sign_in_start, methods=["GET"]),
        Route(CALLBACK_PATH, sign_in_callback, methods=["GET"]),
    ]


async def sign_in_start(request: Request) -> Response:
    """Sends the browser to the identity provider, the sign-in's secrets in a cookie."""
    from .web import secure

    sign_in = _sign_in_of(request)
    next_path = safe_next(request.query_params.get("next", "/"))
    if sign_in is None:
        return secure(RedirectResponse("/login", status_code=303))
    try:
        began = await sign_in.begin(next_path)
    except SignInError as exc:
        return _login_page(request, next_path, str(exc), 502)
    response = RedirectResponse(began.url, status_code=303)
    response.set_cookie(
        COOKIE,
        began.cookie,
        max_age=SIGN_IN_S,
        path=CALLBACK_PATH,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return secure(response)


async def sign_in_callback(request: Request) -> Response:
    """The provider's answer: a session for the identity it proves, or the login page saying
    what went wrong."""
    from .web import console_of, secure

    sign_in = _sign_in_of(request)
    if sign_in is None:
        return secure(RedirectResponse("/login", status_code=303))
    sessions = console_of(request).sessions
    client = request.client
    wait = sessions.attempts.take(client.host if client else "unknown")
    answer = request.query_params
    try:
        if wait is not None:
            raise SignInError(f"Too many sign-in attempts from your address; try again in {max(1, int(wait))} s.")
        repeated = [name for name in ("state", "code", "iss", "error") if len(answer.getlist(name)) > 1]
        if repeated:
            # RFC 6749 §3.1: "Request and response parameters MUST NOT be included more than once"
            raise SignInError(f"The identity provider's answer repeats {repeated[0]!r}; sign in again.")
        identity, next_path = await sign_in.finish(dict(answer), request.cookies.get(COOKIE))
    except SignInError as exc:
        page = _login_page(request, "/", str(exc), 429 if wait is not None else 401)
        if wait is not None:
            page.headers["Retry-After"] = str(max(1, int(wait)))
        page.delete_cookie(COOKIE, path=CALLBACK_PATH)
        return page
    session = await sessions.start(identity)
    response = _page(request, "signed_in.html", next=next_path, who=identity.describe(), role=identity.role.label)
    response.headers["Refresh"] = f"0; url={urllib.parse.quote(next_path, safe='/?=&%')}"
    set_session_cookie(request, response, session.cookie, sessions.ttl)
    response.delete_cookie(COOKIE, path=CALLBACK_PATH)
    return response


async def logout(view: View) -> Response:
    """Ends the session on the service (the cookie is dead at once, on every replica)."""
    sessions = view.sessions
    await sessions.end(view.request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/login" if sessions.required else "/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
