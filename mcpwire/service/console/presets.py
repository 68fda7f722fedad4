"""``/catalog``: the presets of well-known servers (``GET /api/v1/catalog``), each with a form that
asks for its values and adds the server (``POST /api/v1/servers``), checked first by the config
loader as a pasted entry is (:func:`.servers.check_entry`)."""

from __future__ import annotations

from typing import Any

from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ...catalog import PRESETS, CatalogError, Preset, entry_from_preset
from ..api.presets import preset_out
from ..identity import Role
from ..problems import ProblemError
from .servers import add_entry, entry_problems
from .web import Refusal, View, call_api, page

__all__ = ["routes"]


def _values(view: View, preset: Preset) -> list[str]:
    """The preset's values from the form, in its parameters' order (a repeated one: a line
    each; an optional one left empty: none)."""
    assert view.form is not None
    values: list[str] = []
    for param in preset.params:
        raw = view.form.get(f"param-{param.name}")
        if param.repeated:
            values += [line.strip() for line in raw.splitlines() if line.strip()]
        elif raw.strip():
            values.append(raw.strip())
    return values


async def catalog_page(view: View, *, status: int = 200, **context: Any) -> Response:
    listed = await call_api(view, "GET", "/catalog")
    context.setdefault("errors", {})
    context.setdefault("form_for", "")
    return view.render("catalog.html", status=status, presets=listed.items, **context)


async def add_from_preset(view: View) -> Response:
    assert view.form is not None
    wanted = view.request.path_params["name"]
    preset = PRESETS.get(wanted)
    if preset is None:
        raise Refusal(404, view.gettext("There is no preset named %(name)r.", name=wanted))
    name = view.form.get("name").strip() or preset.name
    context: dict[str, Any] = {"form_for": preset.name, "values": view.form, "errors": {}}
    try:
        try:
            entry = entry_from_preset(preset, _values(view, preset))
        except CatalogError as exc:
            raise ProblemError(422, str(exc)) from None
        added = await add_entry(view, name, entry)
    except ProblemError as exc:
        context["errors"] = entry_problems(view, exc)
        if view.htmx:
            response = view.render("fragments/preset_form.html", p=preset_out(preset), **context)
            response.headers["HX-Retarget"] = f"#preset-{preset.name}"
            return response
        return await catalog_page(view, status=422, **context)
    if view.htmx:
        context.update(added=added, errors={}, values=None)
        return view.render("fragments/preset_form.html", p=preset_out(preset), **context)
    return RedirectResponse("/", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/catalog", page(catalog_page), methods=["GET"]),
        Route("/catalog/{name}", page(add_from_preset, role=Role.ADMIN), methods=["POST"]),
    ]
