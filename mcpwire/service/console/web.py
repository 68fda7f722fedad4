"""The console's plumbing: templates, sessions and CSRF tokens, security headers, and calls into
the management API's own operations.

Theory of operation: every page handler is wrapped by :func:`page`. It finds the browser's session
(a signed cookie, HttpOnly and SameSite=Strict), sends a browser without one to the login page
when the service has a token (or gives it a session at once on a loopback service without one),
checks the CSRF token of every request that changes something, renders the template and adds the
security headers: a Content-Security-Policy that allows scripts from the console's own static
folder only (no inline script, no inline style, no eval), no framing, no referrer.

Data comes from the API's operations themselves (:func:`call_api` decodes a body or query into the
operation's Struct exactly as the HTTP route does and calls its handler), so the console shows and
does what the API shows and does, with the same validation and the same errors.

Everything a server sends is hostile: templates autoescape, and every value printed also has its
control characters (ANSI escapes, bidi overrides) made visible by :func:`mcpwire.redaction.clean_markup`.
"""

from __future__ import annotations

import hmac
import json
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
from jinja2 import Environment, FileSystemLoader, pass_context, select_autoescape
from jinja2.runtime import Context
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ...redaction import clean_markup, shorten
from ..api import API, PREFIX, map_error
from ..api.routing import Ctx, Operation, Reply, run_operation
from ..identity import LOCAL, Authenticator, Identity, Role
from ..problems import ProblemError, validation_error
from . import i18n
from .attention import attention_of
from .sessions import SESSION_COOKIE, Sessions, set_session_cookie

__all__ = [
    "CSP",
    "SESSION_COOKIE",
    "Refusal",
    "STATIC",
    "Form",
    "Sessions",
    "View",
    "call_api",
    "console_of",
    "language_of",
    "page",
    "render",
    "secure",
]

TEMPLATES: Final = Path(__file__).with_name("templates")
STATIC: Final = Path(__file__).with_name("static")
CSRF_FIELD: Final = "csrf_token"
CSRF_HEADER: Final = "x-csrf-token"
#: the pages' policy: scripts and styles from the console's own files only, nothing inline
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)
#: the longest JSON shown in a page before it is cut (the API has it all)
MAX_JSON_CHARS: Final = 20_000


class Refusal(ProblemError):
    """A problem the console itself found: its words are the console's, in the page's language
    (a problem from the API or the config loader keeps their one wording, in English)."""


@dataclass(slots=True)
class ConsoleState:
    sessions: Sessions
    #: per-page extras kept by other console modules (the charts' recorder...)
    extras: dict[str, Any] = field(default_factory=dict)


def console_of(request: Request) -> ConsoleState:
    state = getattr(request.app.state, "console", None)
    if state is None:
        service = request.app.state.service
        authenticator = service.authenticator or Authenticator(service.settings.token, service.store)
        state = ConsoleState(sessions=Sessions(service.store, authenticator))
        request.app.state.console = state
    assert isinstance(state, ConsoleState)
    return state


class Form:
    """An ``application/x-www-form-urlencoded`` body (every value of every name, in order)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    def get(self, name: str, default: str = "") -> str:
        for key, value in self.pairs:
            if key == name:
                return value
        return default

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.pairs if key == name]

    def __contains__(self, name: str) -> bool:
        return any(key == name for key, _ in self.pairs)


async def read_form(request: Request) -> Form:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await request.body()
    if not raw:
        return Form([])
    if kind != "application/x-www-form-urlencoded":
        raise ProblemError(415, f"send the form as application/x-www-form-urlencoded, not {kind or 'nothing'}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProblemError(400, "the form is not UTF-8") from None
    return Form(urllib.parse.parse_qsl(text, keep_blank_values=True, max_num_fields=5000))


# -- templates ------------------------------------------------------------------------------------


def _finalize(value: object) -> object:
    """Every printed value: ``None`` prints nothing, text gets its control characters made visible
    (autoescaping then escapes the markup)."""
    if value is None:
        return ""
    if isinstance(value, str) and not isinstance(value, Markup):
        return clean_markup(value)
    return value


def _translations(context: Context) -> Any:
    """The catalogue the page is rendered with (English when the page gave none)."""
    return context.get("translations") or i18n.translations(i18n.DEFAULT)


@pass_context
def _gettext(context: Context, message: str) -> str:
    text: str = _translations(context).gettext(message)
    return text


@pass_context
def _ngettext(context: Context, singular: str, plural: str, n: int) -> str:
    text: str = _translations(context).ngettext(singular, plural, n)
    return text


@pass_context
def _pgettext(context: Context, where: str, message: str) -> str:
    text: str = _translations(context).pgettext(where, message)
    return text


def duration_text(gettext: Callable[[str], str], seconds: float | None) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 10 min``, ``4 d 1 h`` in the page's language."""
    if seconds is None:
        return ""
    seconds = float(seconds)
    if seconds < 60:
        return gettext("%(s)d s") % {"s": round(seconds)}
    if seconds < 3600:
        return gettext("%(m)d min %(s)d s") % {"m": seconds // 60, "s": seconds % 60}
    if seconds < 86400:
        return gettext("%(h)d h %(m)d min") % {"h": seconds // 3600, "m": seconds % 3600 // 60}
    return gettext("%(d)d d %(h)d h") % {"d": seconds // 86400, "h": seconds % 86400 // 3600}


@pass_context
def _duration(context: Context, seconds: float | None) -> str:
    return duration_text(_translations(context).gettext, seconds)


@pass_context
def _ago(context: Context, epoch: float | None) -> str:
    if not epoch:
        return ""
    gettext = _translations(context).gettext
    return str(gettext("%(time)s ago")) % {"time": duration_text(gettext, max(0.0, time.time() - epoch))}


def _clock(epoch: float | None) -> str:
    if not epoch:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + " UTC"


def _pretty(value: object) -> str:
    """JSON for reading: indented, cut past :data:`MAX_JSON_CHARS`."""
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return shorten(text, MAX_JSON_CHARS)


def _compact(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return shorten(text, 300)


ENV: Final = Environment(
    extensions=["jinja2.ext.i18n"],
    loader=FileSystemLoader(str(TEMPLATES)),
    autoescape=select_autoescape(["html", "svg"], default_for_string=True, default=True),
    finalize=_finalize,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters.update(ago=_ago, duration=_duration, clock=_clock, pretty=_pretty, compact=_compact, shorten=shorten)
# ``problem is refusal``: its words are the console's own (translated), not the API's or the loader's
ENV.tests["refusal"] = lambda value: isinstance(value, Refusal)
ENV.install_gettext_callables(  # type: ignore[attr-defined]  # added by the i18n extension
    gettext=_gettext, ngettext=_ngettext, pgettext=_pgettext, newstyle=True
)


@dataclass(slots=True)
class View:
    """What a page handler gets: the request, the service, who is signed in, the session's CSRF
    token, and the language of the page."""

    request: Request
    service: Any
    csrf: str
    identity: Identity = LOCAL
    sessions: Any = None
    form: Form | None = None
    lang: str = i18n.DEFAULT
    #: what needs the operator's attention (for the navigation; full pages only)
    attention: Any = None
    #: the service's event stream's position when the request came in: the page's live parts
    #: hear every event after it, none published while the page was made is lost
    events_after: str = ""

    @property
    def translations(self) -> Any:
        return i18n.translations(self.lang)

    def gettext(self, message: str, /, **values: object) -> str:
        """``message`` in the page's language, with ``%(name)s`` filled from ``values``."""
        text: str = self.translations.gettext(message)
        return text % values if values else text

    def ngettext(self, singular: str, plural: str, n: int, /, **values: object) -> str:
        text: str = self.translations.ngettext(singular, plural, n)
        return text % {"n": n, **values}

    def may(self, role: Role) -> bool:
        return self.identity.may(role)

    def require(self, role: Role) -> None:
        """Raises a 403 problem unless the signed-in identity has ``role``."""
        if not self.identity.may(role):
            raise Refusal(403, self.forbidden(role))

    def forbidden(self, role: Role) -> str:
        """Why the signed-in identity may not do what needs ``role``."""
        return self.gettext(
            "This needs the %(needed)s role; you are signed in as %(who)s, a %(role)s.",
            needed=self.gettext(ROLE_NAMES[role]),
            who=self.identity.describe(),
            role=self.gettext(ROLE_NAMES[self.identity.role]),
        )

    @property
    def htmx(self) -> bool:
        """The request came from htmx (answer with the fragment, not the whole page)."""
        return self.request.headers.get("hx-request") == "true"

    def render(self, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("path", self.request.url.path)
        context.setdefault("query", self.request.url.query)
        return render(
            template,
            lang=self.lang,
            status=status,
            csrf=self.csrf,
            identity=self.identity,
            token_required=self.service.settings.token is not None,
            version=self.service.version,
            can={
                "call": self.may(Role.CALLER),
                "approve": self.may(Role.APPROVER),
                "admin": self.may(Role.ADMIN),
            },
            attention=self.attention,
            events_after=self.events_after,
            **context,
        )


def language_of(request: Request) -> str:
    """The language to answer ``request`` in: the switch's cookie, else the browser's."""
    return i18n.negotiate(request.headers.get("accept-language"), request.cookies.get(i18n.LANG_COOKIE))


def render(template: str, *, lang: str, status: int = 200, **context: Any) -> HTMLResponse:
    """``template`` in ``lang``: its catalogue, the language switch, the ``lang`` attribute and the
    headers saying which language the page is in (every page, signed in or not, is made here)."""
    html = ENV.get_template(template).render(
        translations=i18n.translations(lang),
        lang=lang,
        languages=i18n.LANGUAGES,
        role_names=ROLE_NAMES,
        status_titles=i18n.STATUS_TITLES,
        **context,
    )
    response = HTMLResponse(html, status_code=status)
    response.headers["Content-Language"] = lang
    response.headers["Vary"] = "Accept-Language, Cookie"
    return response


#: the roles' names as the console shows them
ROLE_NAMES: Final = {
    Role.VIEWER: i18n.N_("viewer"),
    Role.CALLER: i18n.N_("caller"),
    Role.APPROVER: i18n.N_("approver"),
    Role.ADMIN: i18n.N_("admin"),
}


def secure(response: Response, *, csp: str = CSP, frame: str = "DENY") -> Response:
    """The console's security headers (a handler that set its own policy or framing keeps it)."""
    response.headers.setdefault("Content-Security-Policy", csp)
    response.headers["X-Content-Type-Options"] = "nosniff"
    # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on form posts,
    # which the service refuses as a foreign origin
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers.setdefault("X-Frame-Options", frame)
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _error_page(view: View, exc: ProblemError) -> Response:
    template = "fragments/problem.html" if view.htmx else "problem.html"
    response = view.render(template, status=exc.status, problem=exc)
    if view.htmx:
        # show the problem where the answer would have gone, whatever the status
        response.headers["HX-Reswap"] = "innerHTML"
    return response


def _next_path(request: Request) -> str:
    path = request.url.path
    if request.url.query:
        path += "?" + request.url.query
    return path


PageHandler = Callable[[View], Awaitable[Response]]


def page(
    handler: PageHandler, *, public: bool = False, role: Role = Role.VIEWER
) -> Callable[[Request], Awaitable[Response]]:
    """A starlette endpoint for ``handler``: session, role, CSRF, errors as pages, security
    headers. ``role`` is the least role that may use it (what it does through the API's
    operations is checked again against theirs)."""

    async def endpoint(request: Request) -> Response:
        sessions = console_of(request).sessions
        session = await sessions.find(request.cookies.get(SESSION_COOKIE))
        fresh = None
        lang = language_of(request)
        if session is None and sessions.required and not public:
            if request.method == "GET" and request.headers.get("hx-request") != "true":
                target = "/login?" + urllib.parse.urlencode({"next": _next_path(request)})
                return secure(RedirectResponse(target, status_code=303))
            ended = i18n.translations(lang).gettext("Your console session has ended; sign in again.")
            return secure(Response(ended, status_code=401, media_type="text/plain; charset=utf-8"))
        if session is None:  # authentication is off (or a public page): a session for the CSRF token
            session = fresh = await sessions.start(LOCAL)
        view = View(
            request=request,
            service=request.app.state.service,
            csrf=session.csrf,
            identity=session.identity,
            sessions=sessions,
            lang=lang,
        )
        state = request.scope.setdefault("state", {})
        state["identity"] = session.identity
        try:
            view.require(role)
            if request.method not in ("GET", "HEAD"):
                view.form = await read_form(request)
                given = request.headers.get(CSRF_HEADER) or view.form.get(CSRF_FIELD)
                if not given or not hmac.compare_digest(given.encode(), view.csrf.encode()):
                    stale = view.gettext("The form's CSRF token is missing or stale; reload the page and try again.")
                    raise Refusal(403, stale)
            elif not view.htmx:
                view.events_after = view.service.hub.position
                view.attention = await attention_of(view.service)
            response = await handler(view)
        except ProblemError as exc:
            response = _error_page(view, exc)
        if fresh is not None:
            set_session_cookie(request, response, fresh.cookie, sessions.ttl)
        return secure(response)

    return endpoint


# -- the API's operations ----------------------------------------------------------------------------

_OPERATIONS: Final[dict[tuple[str, str], Operation]] = {(op.method, op.path): op for op in API.operations}


async def call_api(
    view: View,
    method: str,
    path: str,
    *,
    params: Mapping[str, str] | None = None,
    query: Mapping[str, object] | None = None,
    body: object = None,
) -> Any:
    """Runs the API operation ``method path`` (its path under ``/api/v1`` as declared, e.g.
    ``/tools/{name}``) as its route would: ``query`` and ``body`` are converted into the
    operation's types (a 422 naming the bad field when they do not fit), and errors become the
    same problems. Returns what the handler returned (a Struct, or a :class:`Reply`)."""
    op = _OPERATIONS.get((method, PREFIX + path)) or _OPERATIONS[(method, path)]
    view.require(op.role)
    parsed_query: object | None = None
    if op.query is not None:
        try:
            parsed_query = msgspec.convert(
                {k: v for k, v in (query or {}).items() if v not in (None, "")}, op.query, strict=False
            )
        except msgspec.ValidationError as exc:
            raise validation_error(exc, "query") from None
    parsed_body: object | None = None
    if op.body is not None:
        try:
            parsed_body = msgspec.convert(body, op.body)
        except msgspec.ValidationError as exc:
            raise validation_error(exc, "body") from None
    state = view.request.scope.get("state") or {}
    ctx = Ctx(
        request=view.request,
        service=view.service,
        path=dict(params or {}),
        query=parsed_query,
        body=parsed_body,
        trace_id=state.get("trace_id"),
        caller=f"console {state.get('caller') or 'unknown'} {view.identity.describe()}",
    )
    return await run_operation(op, ctx, map_error)


def reply_body(value: object) -> object:
    """The body of what an operation returned (it returns a :class:`Reply` or the body itself)."""
    return value.body if isinstance(value, Reply) else value
