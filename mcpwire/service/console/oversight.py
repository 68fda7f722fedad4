"""``/approvals`` (pending calls, live: approve, deny with a reason, or edit the arguments then
approve; the waiting caller is released by the same decision the API takes; whether the caller
still waits, and through what each was decided) and ``/pins`` (quarantined tool definitions with
the words added and removed, approved here; tools that only reordered their words)."""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..identity import Role
from ..problems import FieldError, ProblemError
from .web import Refusal, View, call_api, page

__all__ = ["routes", "word_changes"]

#: decided approvals shown under the pending ones
RECENT: Final = 20
#: unchanged characters kept on each side of a change in a pin's word diff
CONTEXT_CHARS: Final = 80


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


def _edited(view: View, original: dict[str, Any], text: str) -> dict[str, Any] | None:
    """The arguments to approve with: ``None`` when they were not changed."""
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        message = view.gettext("not valid JSON: %(error)s", error=exc)
        error = FieldError(location="body", path="$.arguments", message=message)
        raise Refusal(422, view.gettext("The edited arguments are not valid JSON."), errors=[error]) from None
    if not isinstance(value, dict):
        error = FieldError(location="body", path="$.arguments", message=view.gettext("expected a JSON object"))
        raise Refusal(422, view.gettext("The edited arguments must be a JSON object."), errors=[error])
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
            edited = _edited(view, current.arguments, view.form.get("arguments"))
            if edited is not None:
                body["arguments"] = edited
        reason = view.form.get("reason").strip()
        if reason:
            body["reason"] = reason
        decided = await call_api(view, "POST", "/approvals/{id}", params={"id": approval_id}, body=body)
        if decided.state == "pending":
            notice = view.gettext(
                "%(name)s: %(done)s of %(needed)s confirmations",
                name=decided.name,
                done=decided.confirmations,
                needed=decided.confirmations_needed,
            )
        elif decided.state == "approved":
            notice = view.gettext("%(name)s: approved", name=decided.name)
        else:
            notice = view.gettext("%(name)s: denied", name=decided.name)
    except ProblemError as exc:
        if not view.htmx:
            raise
        context = await _approvals(view)
        return view.render("fragments/approvals.html", problem=exc, problem_for=approval_id, **context)
    if view.htmx:
        return view.render("fragments/approvals.html", notice=notice, **(await _approvals(view)))
    return RedirectResponse("/approvals", status_code=303)


def word_changes(changes: Any) -> list[tuple[str, list[tuple[str, str]]]]:
    """A pin's word diff as the page shows it: each changed field's pieces, with long unchanged
    stretches cut to their ends (``cut`` pieces say how much was left out)."""
    out: list[tuple[str, list[tuple[str, str]]]] = []
    for change in changes:
        pieces: list[tuple[str, str]] = []
        last = len(change.pieces) - 1
        for index, piece in enumerate(change.pieces):
            text = piece.text
            if piece.op != "same" or len(text) <= 2 * CONTEXT_CHARS:
                pieces.append((piece.op, text))
                continue
            head = text[:CONTEXT_CHARS] if index > 0 else ""
            tail = text[-CONTEXT_CHARS:] if index < last else ""
            if head:
                pieces.append(("same", head))
            # how much was left out (the template says it in the page's language)
            pieces.append(("cut", str(len(text) - len(head) - len(tail))))
            if tail:
                pieces.append(("same", tail))
        out.append((change.field, pieces))
    return out


async def pins_page(view: View, *, notice: str = "", fragment: bool = False) -> Response:
    pins = (await call_api(view, "GET", "/pins", query={})).items
    quarantined = [p for p in pins if p.state == "quarantined"]
    reordered = [p for p in pins if p.state != "quarantined" and p.reordered_at is not None]
    context: dict[str, Any] = {
        "quarantined": [(p, word_changes(p.word_diff)) for p in quarantined],
        "reordered": [(p, word_changes(p.word_diff)) for p in reordered],
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
        notice = view.gettext("%(server)s/%(tool)s: the new definition is approved", server=pin.server, tool=pin.tool)
        return await pins_page(view, notice=notice, fragment=True)
    return RedirectResponse("/pins", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/approvals", page(approvals_page), methods=["GET"]),
        Route("/approvals/{id}", page(decide, role=Role.APPROVER), methods=["POST"]),
        Route("/pins", page(pins_page), methods=["GET"]),
        Route("/pins/{server}/{tool}/approve", page(approve_pin, role=Role.APPROVER), methods=["POST"]),
    ]
