"""``/audit``: the audit log, newest first, paged by cursor, filtered by kind (tool calls by
default, so the pins recorded at start-up do not drown them), server, tool, outcome, trace and
age; each row opens to its arguments, its result, its trace id and the full (already redacted)
record."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any, Final

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from .i18n import N_
from .web import View, call_api, page

__all__ = ["KINDS", "OUTCOMES", "routes"]

#: the outcomes a record may have, and how the page names them
OUTCOMES: Final = {
    "ok": N_("ok"),
    "tool_error": N_("tool error"),
    "error": N_("error"),
    "denied": N_("denied"),
    "cache_hit": N_("cache hit"),
    "cancelled": N_("cancelled"),
    "approved": N_("approved"),
    "expired": N_("expired"),
    "abandoned": N_("abandoned"),
    "pinned": N_("pinned"),
    "quarantined": N_("quarantined"),
}
#: the kind filter's choices: (value, label, the record kinds it shows; None: every kind)
KINDS: Final = (
    ("calls", N_("calls (tools, resources, prompts)"), frozenset({"tool", "resource", "prompt"})),
    ("tool", N_("tool calls"), frozenset({"tool"})),
    ("approval", N_("approval decisions"), frozenset({"approval"})),
    ("pin", N_("tool definitions (pins)"), frozenset({"pin"})),
    ("all", N_("every kind"), None),
)
#: how each kind of record is named in a row
KIND_NAMES: Final = {
    "tool": N_("tool"),
    "resource": N_("resource"),
    "prompt": N_("prompt"),
    "approval": N_("approval"),
    "pin": N_("pin"),
}
#: the age filter's choices: (minutes, label)
AGES: Final = ((5, N_("last 5 minutes")), (60, N_("last hour")), (1440, N_("last day")))
PAGE: Final = 25
#: records read from the API at a time while looking for the kind asked for
READ: Final = 200
#: the most records read for one page: past them, the page ends early and links further
MAX_READ: Final = 5000


async def _records(
    view: View, filters: dict[str, str], kinds: frozenset[str] | None, cursor: int | None
) -> tuple[list[Any], int | None]:
    """A page of the records of ``kinds``, and the cursor of the next (the API filters by
    everything else; the kind is picked here, a few hundred records at a time)."""
    found: list[Any] = []
    read = 0
    while True:
        limit = PAGE if kinds is None else READ
        listed = await call_api(view, "GET", "/audit", query={**filters, "cursor": cursor, "limit": limit})
        for row in listed.items:
            read += 1
            if kinds is None or row.kind in kinds:
                found.append(row)
                if len(found) == PAGE:
                    return found, row.id
        cursor = listed.next_cursor
        if cursor is None:
            return found, None
        if read >= MAX_READ:
            return found, cursor


async def audit_page(view: View) -> Response:
    params = view.request.query_params
    filters = {key: params.get(key, "").strip()[:200] for key in ("server", "tool", "outcome", "trace_id")}
    kind = params.get("kind", "calls")
    kinds = next((k[2] for k in KINDS if k[0] == kind), KINDS[0][2])
    since_minutes = params.get("since", "")
    raw_cursor = params.get("cursor", "")
    cursor = int(raw_cursor) if raw_cursor.isdigit() and len(raw_cursor) < 19 else None
    items, next_cursor = await _records(view, {k: v for k, v in filters.items() if v}, kinds, cursor)
    if since_minutes.isdigit():
        # the log is newest first: what is older than the window ends the listing
        since = time.time() - int(since_minutes) * 60
        kept = [r for r in items if r.time >= since]
        if len(kept) < len(items):
            next_cursor = None
        items = kept
    keep = {k: v for k, v in {**filters, "kind": kind if kind != "calls" else "", "since": since_minutes}.items() if v}
    context: dict[str, Any] = {
        "records": items,
        "filters": filters,
        "kind": kind,
        "kinds": [(value, label) for value, label, _ in KINDS],
        "kind_names": KIND_NAMES,
        "since": since_minutes,
        "ages": AGES,
        "outcomes": OUTCOMES,
        "servers": [i.name for i in view.service.host.list()],
        "older": "/audit?" + urllib.parse.urlencode({**keep, "cursor": next_cursor}) if next_cursor else None,
        "newest": ("/audit?" + urllib.parse.urlencode(keep) if keep else "/audit") if cursor else None,
        "paged": cursor is not None,
        "query_now": urllib.parse.urlencode(keep),
    }
    if view.htmx and view.request.headers.get("hx-target") == "audit-log":
        return view.render("fragments/audit_log.html", **context)
    return view.render("audit.html", **context)


def routes() -> list[BaseRoute]:
    return [Route("/audit", page(audit_page), methods=["GET"])]
