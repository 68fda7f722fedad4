"""``/tools`` (search across servers) and ``/tools/{name}`` (schema, annotations, pin state, and
the try-it form generated from ``inputSchema``, whose result is shown below it)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..problems import ProblemError
from .forms import Field, arguments_from, fields_of, validate_arguments
from .results import blocks_of, table_of
from .web import View, call_api, page, reply_body

__all__ = ["routes"]


async def tools_page(view: View) -> Response:
    q = view.request.query_params.get("q", "")[:200]
    server = view.request.query_params.get("server", "")
    listed = await call_api(view, "GET", "/tools", query={"q": q, "server": server or None})
    quarantined = [t for t in view.service.host.tools(include_quarantined=True) if t.quarantined]
    context: dict[str, Any] = {
        "tools": listed.items,
        "q": q,
        "server": server,
        "servers": [i.name for i in view.service.host.list()],
        "quarantined": quarantined,
    }
    if view.htmx and view.request.headers.get("hx-target") == "tool-list":
        return view.render("fragments/tool_list.html", **context)
    return view.render("tools.html", **context)


async def _tool(view: View, name: str) -> Any:
    return await call_api(view, "GET", "/tools/{name}", params={"name": name})


async def _pin(view: View, server: str, tool: str) -> Any:
    pins = await call_api(view, "GET", "/pins", query={"server": server})
    return next((p for p in pins.items if p.tool == tool), None)


def _field_errors(fields: list[Field], problems: dict[str, str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Problems at a field's own path go beside it; the others (and those inside JSON fields) in a
    list above the form."""
    ids: dict[str, str] = {}

    def walk(items: list[Field]) -> None:
        for f in items:
            ids[f.json_path] = f.id
            walk(f.children)

    walk(fields)
    beside: dict[str, str] = {}
    above: list[tuple[str, str]] = []
    for path, message in problems.items():
        if path in ids:
            beside[ids[path]] = message
        else:
            above.append((path, message))
    return beside, above


async def tool_page(view: View) -> Response:
    name = view.request.path_params["name"]
    tool = await _tool(view, name)
    fields = fields_of(tool.input_schema)
    context: dict[str, Any] = {
        "tool": tool,
        "fields": fields,
        "pin": await _pin(view, tool.server, tool.tool),
        "errors": {},
        "problems": [],
        "mode": "form",
        "raw": "{}",
        "values": None,
    }
    if view.request.method == "POST":
        context.update(await _call(view, tool, fields))
        if view.htmx:
            return view.render("fragments/tryit.html", **context)
    return view.render("tool.html", **context)


async def _call(view: View, tool: Any, fields: list[Field]) -> dict[str, Any]:
    assert view.form is not None
    arguments, problems = arguments_from(fields, view.form)
    mode = "json" if view.form.get("mode") == "json" else "form"
    out: dict[str, Any] = {"mode": mode, "raw": view.form.get("raw") or "{}", "values": view.form}
    if not problems:
        problems = validate_arguments(tool.input_schema, arguments)
    if problems:
        beside, above = _field_errors(fields, problems)
        out.update(errors=beside, problems=above if mode == "form" else list(problems.items()))
        return out
    try:
        # a person who asks for the call means the call: never an answer from the cache
        body_in = {"arguments": arguments, "fresh": True}
        reply = await call_api(view, "POST", "/tools/{name}/call", params={"name": tool.name}, body=body_in)
    except ProblemError as exc:
        out["failure"] = exc  # refused or failed before the tool answered (not a tool error)
        return out
    body: Any = reply_body(reply)
    if getattr(reply, "status", 200) == 202:
        out["accepted"] = body
        return out
    out["result"] = body
    out["blocks"] = blocks_of(body.content)
    if body.structured_content is not None:
        out["structured_table"] = table_of(body.structured_content)
    return out


def routes() -> list[BaseRoute]:
    return [
        Route("/tools", page(tools_page), methods=["GET"]),
        Route("/tools/{name}", page(tool_page), methods=["GET", "POST"]),
    ]
