"""The console's sign-in pages: the token form (and the one-click link ``mcpwire serve`` prints),
the sign-in through the identity provider, and logout. Sessions themselves are
:mod:`.sessions`'s; pages are rendered with :mod:`.web`'s templates, in the language of the
browser or of the switch, like every other page (no session yet: no live updates, no sign-out).

What a refused sign-in says is the console's sentence, translated, with what came from elsewhere
(the identity provider's own error and its description, a claim's name) put in as it is: escaped,
and marked ``translate="no"``."""

from __future__ import annotations

import urllib.parse
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ...redaction import clean_markup
from ..oidc import CALLBACK_PATH, COOKIE, SIGN_IN_S, START_PATH, ConsoleSignIn, SignInError
from . import i18n
from .sessions import SESSION_COOKIE, safe_next, set_session_cookie
from .web import ROLE_NAMES, View, console_of, language_of, read_form, render, secure

__all__ = ["login", "logout", "sign_in_routes"]

#: what the login page says when an address has tried too often (``seconds``: when to try again)
THROTTLED = i18n.N_("Too many sign-in attempts from your address; try again in %(seconds)d s.")
REFUSED = i18n.N_("That token is not accepted here.")


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
    gettext = i18n.translations(language_of(request)).gettext
    error = None
    status = 200
    if given.strip():
        client = request.client
        wait = sessions.attempts.take(client.host if client else "unknown")
        identity = None if wait is not None else await sessions.authenticator.identify(given.strip())
        if wait is not None:
            error, status = Markup.escape(gettext(THROTTLED) % {"seconds": _seconds(wait)}), 429
        elif identity is None:
            error, status = Markup.escape(gettext(REFUSED)), 401
        else:
            session = await sessions.start(identity)
            # the token leaves the address bar at once (it never reaches the next page's URL)
            response = RedirectResponse(next_path, status_code=303)
            set_session_cookie(request, response, session.cookie, sessions.ttl)
            return secure(response)
    page = _login_page(request, next_path, error, status)
    if status == 429:
        page.headers["Retry-After"] = str(_seconds(wait))
    return page


def _seconds(wait: float | None) -> int:
    return max(1, int(wait or 1))


def _page(request: Request, template: str, next_path: str, status: int = 200, **values: Any) -> Response:
    """A page of signing in (no session yet: no live updates, no sign-out), in the browser's
    language. Its language switch comes back to the login page with ``next`` (never with the
    query it was given: that may hold a token, or the provider's code)."""

    query = urllib.parse.urlencode({"next": next_path}) if next_path != "/" else ""
    response = render(
        template,
        lang=language_of(request),
        status=status,
        csrf="",
        live=False,
        token_required=False,
        version=request.app.state.service.version,
        path="/login",
        query=query,
        next=next_path,
        **values,
    )
    return secure(response)


def _login_page(request: Request, next_path: str, error: Markup | None, status: int) -> Response:
    sign_in = _sign_in_of(request)
    label = sign_in.label if sign_in is not None else None
    return _page(request, "login.html", next_path, status, error=error, sign_in=label)


def _said(request: Request, exc: SignInError) -> Markup:
    """``exc``'s sentence in the page's language; what fills it is shown as it came."""
    sentence = Markup.escape(i18n.translations(language_of(request)).gettext(exc.message))
    if not exc.values:
        return sentence
    return sentence % {
        name: Markup('<span translate="no">{}</span>').format(clean_markup(value)) for name, value in exc.values.items()
    }


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
        return _login_page(request, next_path, _said(request, exc), 502)
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
    if wait is not None:
        gettext = i18n.translations(language_of(request)).gettext
        page = _login_page(request, "/", Markup.escape(gettext(THROTTLED) % {"seconds": _seconds(wait)}), 429)
        page.headers["Retry-After"] = str(_seconds(wait))
        page.delete_cookie(COOKIE, path=CALLBACK_PATH)
        return page
    try:
        repeated = [name for name in ("state", "code", "iss", "error") if len(answer.getlist(name)) > 1]
        if repeated:
            # RFC 6749 §3.1: "Request and response parameters MUST NOT be included more than once"
            raise SignInError("The identity provider's answer repeats %(name)s; sign in again.", name=repr(repeated[0]))
        identity, next_path = await sign_in.finish(dict(answer), request.cookies.get(COOKIE))
    except SignInError as exc:
        page = _login_page(request, "/", _said(request, exc), 401)
        page.delete_cookie(COOKIE, path=CALLBACK_PATH)
        return page
    session = await sessions.start(identity)
    response = _page(request, "signed_in.html", next_path, who=identity.describe(), role=ROLE_NAMES[identity.role])
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
