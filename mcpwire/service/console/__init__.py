"""The web console of ``mcpwire serve``: server-rendered pages over the management API.

Pages: ``/`` (servers, live, with charts), ``/tools`` (with each tool's switch, and the list as
OpenAI, Anthropic or Markdown tools), ``/tools/{name}`` (with the try-it form), ``/approvals``,
``/pins``, ``/audit``, ``/checks``, ``/catalog`` (presets of well-known servers, added with their
parameters); ``/login`` when the service has a token. Every page is in English and Simplified
Chinese (:mod:`.i18n`), and its navigation says what needs attention (:mod:`.attention`). The
pages call the API's own operations (:func:`~mcpwire.service.console.web.call_api`), update
themselves from the service's event stream (``/console/events``, the same events as ``/events``)
with htmx (vendored in ``static/``), and carry no inline script. See :mod:`.web` for sessions,
CSRF and the Content-Security-Policy. ``/chat`` (:mod:`.chat`) comes with the agent's routes.
"""

from __future__ import annotations

from typing import Final

from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from . import servers, signin
from .web import STATIC, page

__all__ = ["handles", "routes"]

#: the first path segments the console answers (the API is under /api/v1, the gateway at /mcp)
_SECTIONS: Final = frozenset(
    {"login", "logout", "servers", "tools", "approvals", "pins", "audit", "checks", "catalog", "chat", "console"}
)


def handles(path: str) -> bool:
    """Whether ``path`` is the console's: it checks its own session cookie there, so the service's
    bearer-token check leaves these paths alone."""
    parts = path.split("/", 2)
    return path == "/" or (len(parts) > 1 and parts[0] == "" and parts[1] in _SECTIONS)


def routes() -> list[BaseRoute]:
    from . import audit, checks, frame, oversight, presets, tools

    return [
        Route("/", page(servers.servers_page), methods=["GET"]),
        Route("/login", signin.login, methods=["GET", "POST"]),
        Route("/logout", page(signin.logout), methods=["POST"]),
        Route("/servers", page(servers.add_server), methods=["POST"]),
        Route("/servers/{name}/{action}", page(servers.server_action), methods=["POST"]),
        Route("/console/events", page(servers.events), methods=["GET"]),
        Route("/console/fragments/servers", page(servers.servers_fragment), methods=["GET"]),
        Route("/console/fragments/charts", page(servers.charts_fragment), methods=["GET"]),
        *tools.routes(),
        *oversight.routes(),
        *checks.routes(),
        *audit.routes(),
        *presets.routes(),
        *frame.routes(),
        Mount("/console/static", app=StaticFiles(directory=str(STATIC)), name="console-static"),
    ]
