"""The servers page (``/``): the live table, the charts, adding a server from a pasted mcp.json
entry, enable/disable, restart and remove, and signing in and out."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.responses import RedirectResponse, Response, StreamingResponse

from ...host.entries import KNOWN_KEYS
from ..events import sse_stream
from ..identity import Role
from ..problems import FieldError, ProblemError
from .charts import BUCKET_SECONDS, BUCKETS, HEIGHT, MAX_RECORDS, WIDTH, server_charts
from .i18n import english
from .web import (
    Refusal,
    View,
    call_api,
    reply_body,
)

__all__ = [
    "add_entry",
    "add_server",
    "check_entry",
    "entry_problems",
    "charts_fragment",
    "events",
    "parse_entry",
    "server_action",
    "servers_fragment",
    "servers_page",
]


async def _servers(view: View) -> list[Any]:
    listed = await call_api(view, "GET", "/servers")
    return list(listed.items)


async def _charts(view: View) -> dict[str, Any]:
    names = [s.name for s in view.service.host.list()]
    await view.service.audit.flush()  # (what this process journaled, in the store before it is read)
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


def parse_entry(name: str, text: str, gettext: Callable[[str], str] = english) -> tuple[str, dict[str, Any]]:
    """The server's name and its entry from the pasted text: an entry, ``{"name": {entry}}`` or
    ``{"mcpServers": {"name": {entry}}}`` (one server); ``gettext`` translates what it says.

    Raises:
        ProblemError: 422 whose errors name the field (``name``, or a JSON path in the entry).
    """
    try:
        value = json.loads(text.strip() or "null")
    except json.JSONDecodeError as exc:
        where = gettext("not valid JSON at line %(line)d, column %(column)d (%(error)s)")
        raise _entry_error("$", where % {"line": exc.lineno, "column": exc.colno, "error": exc.msg}, gettext) from None
    except RecursionError:
        raise _entry_error("$", gettext("not valid JSON: nested too deeply"), gettext) from None
    if not isinstance(value, dict):
        raise _entry_error("$", gettext("expected a JSON object: one mcp.json server entry"), gettext)
    for key in ("mcpServers", "servers"):
        if isinstance(value.get(key), dict) and len(value) == 1:
            value = value[key]
            break
    wrapped = len(value) == 1 and not (KNOWN_KEYS & value.keys()) and isinstance(next(iter(value.values())), dict)
    if wrapped:
        ((given, entry),) = value.items()
        if name and name != given:
            detail = gettext("the name field says %(name)r but the pasted entry is named %(given)r")
            raise Refusal(422, detail % {"name": name, "given": given})
        return (name or str(given)), entry
    if not name:
        raise Refusal(422, gettext("give the server a name"))
    return name, value


def _entry_error(path: str, message: str, gettext: Callable[[str], str]) -> ProblemError:
    error = FieldError(location="body", path=path, message=message)
    return Refusal(422, gettext("the entry is invalid: %(problem)s") % {"problem": message}, errors=[error])


def check_entry(view: View, name: str, entry: dict[str, Any]) -> None:
    """The config loader's verdict on the entry, before anything is sent: every problem at its
    JSON path in the loader's own words, as ``mcpwire servers`` and the API say them.

    Raises:
        ProblemError: 422 listing each problem.
    """
    view.require(Role.ADMIN)
    view.service.servers.validate(name, entry)


async def add_entry(view: View, name: str, entry: dict[str, Any]) -> str:
    """Adds the server: the loader checks the entry first (:func:`check_entry`), then
    ``POST /api/v1/servers`` adds it. Returns the name it was added under.

    Raises:
        ProblemError: the entry is refused (a 422 listing its problems, a 409 for a taken name).
    """
    check_entry(view, name, entry)
    reply = await call_api(view, "POST", "/servers", body={**entry, "name": name})
    return str(getattr(reply_body(reply), "name", name))


def entry_problems(view: View, exc: ProblemError) -> dict[str, Any]:
    """A refused entry's problems as the form shows them: ``name`` (beside the name field),
    ``entry`` ((JSON path, message) pairs, in order) and ``detail`` (what the whole refusal
    says, when no field is named). Any other problem than a refused entry (a 409 or a 422) is
    raised again."""
    if exc.status not in (409, 422):
        raise exc
    errors: dict[str, Any] = {"entry": []}
    for e in exc.errors:
        if e.path == "$.name":
            errors["name"] = e.message
        else:
            errors["entry"].append((e.path, e.message))
    if not exc.errors:
        errors["detail"] = exc.detail
    # the loader's and the API's words are English wherever they are shown; the console's own
    # are in the page's language
    errors["lang"] = "" if isinstance(exc, Refusal) else "en"
    return errors


async def add_server(view: View) -> Response:
    assert view.form is not None
    name = view.form.get("name").strip()
    text = view.form.get("entry")
    context: dict[str, Any] = {"add_name": name, "add_entry": text}
    try:
        name, entry = parse_entry(name, text, view.gettext)
        added = await add_entry(view, name, entry)
    except ProblemError as exc:
        context["add_errors"] = entry_problems(view, exc)
        if view.htmx:
            response = view.render("fragments/add_server.html", status=200, **context)
            response.headers["HX-Retarget"] = "#add-server"
            return response
        return await servers_page(view, status=422, **context)
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
        if action == "enable":
            notice = view.gettext("%(name)s enabled", name=name)
        else:
            notice = view.gettext("%(name)s disabled", name=name)
    elif action == "restart":
        await call_api(view, "POST", "/servers/{name}/restart", params=params)
        notice = view.gettext("%(name)s is restarting", name=name)
    elif action == "remove":
        await call_api(view, "DELETE", "/servers/{name}", params=params)
        notice = view.gettext("%(name)s removed", name=name)
    else:
        raise Refusal(404, view.gettext("There is no action %(action)r on servers.", action=action))
    if view.htmx:
        return view.render("fragments/servers.html", servers=await _servers(view), notice=notice)
    return RedirectResponse("/", status_code=303)


async def events(view: View) -> Response:
    """The service's event stream for the console's pages (the session cookie stands for the
    bearer token an ``/events`` client sends). A page names the position it was made at
    (``?after=``); a reconnecting browser's ``Last-Event-ID`` comes after it."""
    last = view.request.headers.get("last-event-id") or view.request.query_params.get("after")
    return StreamingResponse(
        sse_stream(view.service.hub, last),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
