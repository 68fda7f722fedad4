"""``/approvals`` (pending calls, live: approve, deny with a reason, or edit the arguments then
approve; the waiting caller is released by the same decision the API takes) and ``/pins``
(quarantined tool definitions with the old/new diff, approved here)."""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..identity import Role
from ..problems import FieldError, ProblemError
from .web import View, call_api, page

__all__ = ["diff_lines", "routes"]

#: decided approvals shown under the pending ones
RECENT: Final = 20


async def _approvals(view: View) -> dict[str, Any]:
    pending = await call_api(view, "GET", "/approvals", query={"state": "pending", "limit": 100})
    recent = await call_api(view, "GET", "/approvals", query={"limit": RECENT + len(pending.items)})
    decided = [a for a in recent.items if a.state != "pending"][:RECENT]
    return {"pending": pending.items, "decided": decided}


async def approvals_page(view: View) -> Response:
    context = await _approvals(view)
    if view.htmx and view.request.headers.get("hx-target") == "approvals":
        return view.render("fragments/approvals.html", **context)
    return view.render("approvals.html", **context)


def _edited(original: dict[str, Any], text: str) -> dict[str, Any] | None:
    """The arguments to approve with: ``None`` when they were not changed."""
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        error = FieldError(location="body", path="$.arguments", message=f"not valid JSON: {exc}")
        raise ProblemError(422, "the edited arguments are not valid JSON", errors=[error]) from None
    if not isinstance(value, dict):
        error = FieldError(location="body", path="$.arguments", message="expected a JSON object")
        raise ProblemError(422, "the edited arguments must be a JSON object", errors=[error])
    return None if value == original else value


async def decide(view: View) -> Response:
    assert view.form is not None
    approval_id = view.request.path_params["id"]
    decision = view.form.get("decision")
    body: dict[str, Any] = {"decision": decision}
    notice = ""
    try:
        if decision == "approve":
            current = await call_api(view, "GET", "/approvals/{id}", params={"id": approval_id}, query={})
            edited = _edited(current.arguments, view.form.get("arguments"))
            if edited is not None:
                body["arguments"] = edited
        reason = view.form.get("reason").strip()
        if reason:
            body["reason"] = reason
        decided = await call_api(view, "POST", "/approvals/{id}", params={"id": approval_id}, body=body)
        notice = f"{decided.name}: {decided.state}"
        if decided.state == "pending":
            notice += f" ({decided.confirmations} of {decided.confirmations_needed} confirmations)"
    except ProblemError as exc:
        if not view.htmx:
            raise
        context = await _approvals(view)
        return view.render("fragments/approvals.html", problem=exc, problem_for=approval_id, **context)
    if view.htmx:
        return view.render("fragments/approvals.html", notice=notice, **(await _approvals(view)))
    return RedirectResponse("/approvals", status_code=303)


def diff_lines(diff: str | None) -> list[tuple[str, str]]:
    """A unified diff as (kind, line): ``add``, ``del``, ``hunk``, ``file`` or ``same``."""
    out: list[tuple[str, str]] = []
    for line in (diff or "").splitlines():
        if line.startswith(("+++", "---")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        out.append((kind, line))
    return out


async def pins_page(view: View, *, notice: str = "", fragment: bool = False) -> Response:
    pins = (await call_api(view, "GET", "/pins", query={})).items
    quarantined = [p for p in pins if p.state == "quarantined"]
    context: dict[str, Any] = {
        "quarantined": [(p, diff_lines(p.diff)) for p in quarantined],
        "pinned": [p for p in pins if p.state != "quarantined"],
        "notice": notice,
    }
    if fragment or (view.htmx and view.request.headers.get("hx-target") == "pins"):
        return view.render("fragments/pins.html", **context)
    return view.render("pins.html", **context)


async def approve_pin(view: View) -> Response:
    server, tool = view.request.path_params["server"], view.request.path_params["tool"]
    pin = await call_api(view, "POST", "/pins/{server}/{tool}/approve", params={"server": server, "tool": tool})
    if view.htmx:
        notice = f"{pin.server}/{pin.tool}: the new definition is approved"
        return await pins_page(view, notice=notice, fragment=True)
    return RedirectResponse("/pins", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/approvals", page(approvals_page), methods=["GET"]),
        Route("/approvals/{id}", page(decide, role=Role.APPROVER), methods=["POST"]),
        Route("/pins", page(pins_page), methods=["GET"]),
        Route("/pins/{server}/{tool}/approve", page(approve_pin, role=Role.APPROVER), methods=["POST"]),
    ]
