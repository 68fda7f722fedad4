"""The console's sign-in pages: the token form (and the one-click link ``mcpwire serve`` prints),
the sign-in through the identity provider, and logout. Sessions themselves are
:mod:`.sessions`'s; pages are rendered with :mod:`.web`'s templates."""

from __future__ import annotations

import urllib.parse

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..oidc import CALLBACK_PATH, COOKIE, SIGN_IN_S, START_PATH, ConsoleSignIn, SignInError
from .sessions import SESSION_COOKIE, safe_next, set_session_cookie
from .web import ENV, View, console_of, read_form, secure

__all__ = ["login", "logout", "sign_in_routes"]


async def login(request: Request) -> Response:
    """The sign-in page; a token posted to it (or given as ``?token=``) starts a session."""

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
