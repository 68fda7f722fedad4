"""The servers page (``/``): the live table, the charts, adding a server from a pasted mcp.json
entry, enable/disable, restart and remove, and signing in and out."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import RedirectResponse, Response, StreamingResponse

from ..events import sse_stream
from ..problems import FieldError, ProblemError
from .charts import BUCKET_SECONDS, BUCKETS, HEIGHT, MAX_RECORDS, WIDTH, server_charts
from .web import (
    View,
    call_api,
    reply_body,
)

__all__ = [
    "add_server",
    "charts_fragment",
    "events",
    "parse_entry",
    "server_action",
    "servers_fragment",
    "servers_page",
]

_ENTRY_KEYS = frozenset(
    {"type", "command", "args", "env", "cwd", "url", "headers", "auth", "enabled", "description", "era"}
)


async def _servers(view: View) -> list[Any]:
    listed = await call_api(view, "GET", "/servers")
    return list(listed.items)


async def _charts(view: View) -> dict[str, Any]:
    names = [s.name for s in view.service.host.list()]
    return {
        "charts": await server_charts(view.service.store, names),
        "width": WIDTH,
        "height": HEIGHT,
        "bucket_seconds": BUCKET_SECONDS,
        "window_minutes": BUCKETS * BUCKET_SECONDS // 60,
        "max_records": MAX_RECORDS,
    }


async def servers_page(view: View, *, status: int = 200, **context: Any) -> Response:
    context.setdefault("add_name", "")
    context.setdefault("add_entry", "")
    return view.render("servers.html", status=status, servers=await _servers(view), **(await _charts(view)), **context)


async def servers_fragment(view: View) -> Response:
    return view.render("fragments/servers.html", servers=await _servers(view))


async def charts_fragment(view: View) -> Response:
    return view.render("fragments/charts.html", **(await _charts(view)))


def parse_entry(name: str, text: str) -> tuple[str, dict[str, Any]]:
    """The server's name and its entry from the pasted text: an entry, ``{"name": {entry}}`` or
    ``{"mcpServers": {"name": {entry}}}`` (one server).

    Raises:
        ProblemError: 422 whose errors name the field (``name``, or a JSON path in the entry).
    """
    try:
        value = msgspec.json.decode(text.strip().encode() or b"null")
    except msgspec.DecodeError as exc:
        raise _entry_error("$", f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _entry_error("$", "expected a JSON object: one mcp.json server entry")
    for key in ("mcpServers", "servers"):
        if isinstance(value.get(key), dict) and len(value) == 1:
            value = value[key]
            break
    wrapped = len(value) == 1 and not (_ENTRY_KEYS & value.keys()) and isinstance(next(iter(value.values())), dict)
    if wrapped:
        ((given, entry),) = value.items()
        if name and name != given:
            raise ProblemError(
                422,
                f"the name field says {name!r} but the pasted entry is named {given!r}",
                errors=[],
            )
        return (name or str(given)), entry
    if not name:
        raise ProblemError(422, "give the server a name", errors=[])
    return name, value


def _entry_error(path: str, message: str) -> ProblemError:
    error = FieldError(location="body", path=path, message=message)
    return ProblemError(422, f"the entry is invalid: {message}", errors=[error])


async def add_server(view: View) -> Response:
    assert view.form is not None
    name = view.form.get("name").strip()
    text = view.form.get("entry")
    context: dict[str, Any] = {"add_name": name, "add_entry": text}
    try:
        name, entry = parse_entry(name, text)
        reply = await call_api(view, "POST", "/servers", body={**entry, "name": name})
    except ProblemError as exc:
        if exc.status not in (409, 422):
            raise
        errors: dict[str, Any] = {}
        entry_errors = []
        for e in exc.errors:
            if e.path == "$.name":
                errors["name"] = e.message
            else:
                entry_errors.append((e.path, e.message))
        if not exc.errors:
            if "name" in exc.detail:
                errors["name"] = exc.detail
            else:
                entry_errors.append(("$", exc.detail))
        errors["entry"] = entry_errors
        context["add_errors"] = errors
        if view.htmx:
            response = view.render("fragments/add_server.html", status=200, **context)
            response.headers["HX-Retarget"] = "#add-server"
            return response
        return await servers_page(view, status=422, **context)
    added = getattr(reply_body(reply), "name", name)
    if view.htmx:
        response = view.render("fragments/add_server.html", add_name="", add_entry="", added=added)
        response.headers["HX-Trigger"] = "mcp-server"
        return response
    return RedirectResponse("/", status_code=303)


async def server_action(view: View) -> Response:
    name = view.request.path_params["name"]
    action = view.request.path_params["action"]
    params = {"name": name}
    if action in ("enable", "disable"):
        await call_api(view, "PATCH", "/servers/{name}", params=params, body={"enabled": action == "enable"})
        notice = f"{name} {action}d"
    elif action == "restart":
        await call_api(view, "POST", "/servers/{name}/restart", params=params)
        notice = f"{name} is restarting"
    elif action == "remove":
        await call_api(view, "DELETE", "/servers/{name}", params=params)
        notice = f"{name} removed"
    else:
        raise ProblemError(404, f"no action {action!r} on servers")
    if view.htmx:
        return view.render("fragments/servers.html", servers=await _servers(view), notice=notice)
    return RedirectResponse("/", status_code=303)


async def events(view: View) -> Response:
    """The service's event stream for the console's pages (the session cookie stands for the
    bearer token an ``/events`` client sends)."""
    last = view.request.headers.get("last-event-id")
    return StreamingResponse(
        sse_stream(view.service.hub, last),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


