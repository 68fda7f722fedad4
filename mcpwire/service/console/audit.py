"""``/audit``: the audit log, newest first, paged by cursor, filtered by server, tool, outcome and
age; each row opens to the full (already redacted) record."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any, Final

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from .web import View, call_api, page

__all__ = ["routes"]

OUTCOMES: Final = (
    "ok",
    "tool_error",
    "error",
    "denied",
    "cache_hit",
    "cancelled",
    "approved",
    "expired",
    "pinned",
    "quarantined",
)
#: the age filter's choices: (minutes, label)
AGES: Final = ((5, "last 5 minutes"), (60, "last hour"), (1440, "last day"))
PAGE: Final = 25


async def audit_page(view: View) -> Response:
    params = view.request.query_params
    filters = {key: params.get(key, "").strip()[:200] for key in ("server", "tool", "outcome")}
    since_minutes = params.get("since", "")
    cursor = params.get("cursor", "")
    listed = await call_api(view, "GET", "/audit", query={**filters, "cursor": cursor or None, "limit": PAGE})
    items = list(listed.items)
    next_cursor = listed.next_cursor
    if since_minutes.isdigit():
        # the log is newest first: what is older than the window ends the listing
        since = time.time() - int(since_minutes) * 60
        kept = [r for r in items if r.time >= since]
        if len(kept) < len(items):
            next_cursor = None
        items = kept
    keep = {k: v for k, v in {**filters, "since": since_minutes}.items() if v}
    context: dict[str, Any] = {
        "records": items,
        "filters": filters,
        "since": since_minutes,
        "ages": AGES,
        "outcomes": OUTCOMES,
        "servers": [i.name for i in view.service.host.list()],
        "older": "/audit?" + urllib.parse.urlencode({**keep, "cursor": next_cursor}) if next_cursor else None,
        "newest": ("/audit?" + urllib.parse.urlencode(keep) if keep else "/audit") if cursor else None,
        "paged": bool(cursor),
    }
    if view.htmx and view.request.headers.get("hx-target") == "audit-log":
        return view.render("fragments/audit_log.html", **context)
    return view.render("audit.html", **context)


def routes() -> list[BaseRoute]:
    return [Route("/audit", page(audit_page), methods=["GET"])]
