"""``/tools`` (search across servers, each tool's switch, the tools a server's ``disabled_tools``
keeps off), ``/tools/export`` (the list as OpenAI, Anthropic or Markdown tools, as
``mcpwire export`` writes it) and ``/tools/{name}`` (schema, annotations, pin state, and the try-it
form generated from ``inputSchema``, whose result is shown below it).

A tool is switched off or on through the API (``PATCH /api/v1/servers/{name}`` with the server's
``disabled_tools``), which restarts the server with its new list."""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..identity import Role
from ..problems import ProblemError
from .forms import Field, arguments_from, fields_of, validate_arguments
from .results import blocks_of, table_of
from .web import Refusal, View, call_api, page, reply_body

__all__ = ["routes"]


#: the export formats: (query value, label)
FORMATS: Final = (("openai", "OpenAI"), ("anthropic", "Anthropic"), ("markdown", "Markdown"))


def _switched_off(view: View, server: str, q: str) -> list[tuple[str, str]]:
    """(server, tool) of each tool a server's ``disabled_tools`` keeps off, matching the search."""
    out: list[tuple[str, str]] = []
    for info in view.service.host.list():
        if server and info.name != server:
            continue
        for tool in info.config.disabled_tools:
            if not q or q.lower() in tool.lower():
                out.append((info.name, tool))
    return out


async def tools_page(view: View, *, notice: str = "") -> Response:
    q = view.request.query_params.get("q", "")[:200]
    server = view.request.query_params.get("server", "")
    listed = await call_api(view, "GET", "/tools", query={"q": q, "server": server or None})
    quarantined = [t for t in view.service.host.tools(include_quarantined=True) if t.quarantined]
    context: dict[str, Any] = {
        "tools": listed.items,
        "off": _switched_off(view, server, q),
        "q": q,
        "server": server,
        "servers": [i.name for i in view.service.host.list()],
        "quarantined": quarantined,
        "formats": FORMATS,
        "notice": notice,
    }
    if view.htmx and view.request.headers.get("hx-target") == "tool-list":
        return view.render("fragments/tool_list.html", **context)
    return view.render("tools.html", **context)


async def switch_tool(view: View) -> Response:
    """Turns one tool of a server off or on (``on=false``/``on=true``)."""
    assert view.form is not None
    server, tool = view.request.path_params["server"], view.request.path_params["tool"]
    info = next((i for i in view.service.host.list() if i.name == server), None)
    if info is None:
        raise Refusal(404, view.gettext("There is no server named %(name)r.", name=server))
    on = view.form.get("on") == "true"
    disabled = [t for t in info.config.disabled_tools if t != tool]
    if not on:
        disabled.append(tool)
    await call_api(view, "PATCH", "/servers/{name}", params={"name": server}, body={"disabled_tools": disabled})
    if on:
        notice = view.gettext("%(tool)s of %(server)s is on; the server restarts with it.", tool=tool, server=server)
    else:
        notice = view.gettext(
            "%(tool)s of %(server)s is off; the server restarts without it.", tool=tool, server=server
        )
    if view.htmx:
        return await tools_page(view, notice=notice)
    return RedirectResponse("/tools", status_code=303)


async def export_page(view: View) -> Response:
    """The tool list as a provider takes it (``mcpwire export``)."""
    chosen = view.request.query_params.get("format", "openai")
    if chosen not in dict(FORMATS):
        raise Refusal(404, view.gettext("There is no export format %(name)r.", name=chosen))
    registry = view.service.host.registry
    if chosen == "markdown":
        text = registry.to_markdown()
    else:
        exported = registry.to_anthropic() if chosen == "anthropic" else registry.to_openai()
        text = json.dumps(exported, indent=2, ensure_ascii=False)
    return view.render("tools_export.html", formats=FORMATS, chosen=chosen, text=text, count=len(registry))


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
    arguments, problems = arguments_from(fields, view.form, view.gettext)
    mode = "json" if view.form.get("mode") == "json" else "form"
    out: dict[str, Any] = {"mode": mode, "raw": view.form.get("raw") or "{}", "values": view.form}
    if not problems:
        # jsonschema's words, in English wherever they are shown
        problems = validate_arguments(tool.input_schema, arguments)
        out["problems_lang"] = "en"
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


async def _tools_page(view: View) -> Response:
    return await tools_page(view)


def routes() -> list[BaseRoute]:
    return [
        Route("/tools", page(_tools_page), methods=["GET"]),
        Route("/tools/export", page(export_page), methods=["GET"]),
        Route("/tools/{server}/{tool}/switch", page(switch_tool, role=Role.ADMIN), methods=["POST"]),
        Route("/tools/{name}", page(tool_page), methods=["GET", "POST"]),
    ]
