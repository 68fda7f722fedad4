"""What every page has around it: the live navigation (with what needs attention) and the
language switch."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from . import i18n
from .attention import attention_of
from .sessions import safe_next
from .web import View, page, read_form, secure

__all__ = ["routes"]

#: a year: the choice is the browser's to keep
LANG_COOKIE_SECONDS = 365 * 86400


async def nav_fragment(view: View) -> Response:
    """The navigation alone, for the page it is on (``?at=``), with fresh figures."""
    at = safe_next(view.request.query_params.get("at", "/")).split("?", 1)[0]
    view.attention = await attention_of(view.service)
    return view.render("fragments/nav.html", path=at)


async def choose_language(request: Request) -> Response:
    """Remembers the language picked with the switch (a cookie), and goes back to the page. It
    needs no session, so the sign-in page has the switch too; the service refuses a post from
    another origin before it gets here."""
    form = await read_form(request)
    lang = form.get("lang")
    response = RedirectResponse(safe_next(form.get("next", "/")), status_code=303)
    if lang in i18n.LANGUAGES:
        response.set_cookie(
            i18n.LANG_COOKIE,
            lang,
            max_age=LANG_COOKIE_SECONDS,
            path="/",
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
        )
    return secure(response)


def routes() -> list[BaseRoute]:
    return [
        Route("/console/fragments/nav", page(nav_fragment), methods=["GET"]),
        Route("/console/language", choose_language, methods=["POST"]),
    ]
