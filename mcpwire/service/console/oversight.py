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
from .web import View, call_api, page

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
            pieces.append(("cut", f" [… {len(text) - len(head) - len(tail):,} unchanged characters …] "))
            if tail:
                pieces.append(("same", tail))
        out.append((change.field, pieces))
    return out


async def held_badge(view: View) -> Response:
    """The navigation's badge alone: how many tools are quarantined now."""
    return view.render("fragments/held.html")


async def pins_page(view: View, *, notice: str = "", fragment: bool = False) -> Response:
    pins = (await call_api(view, "GET", "/pins", query={})).items
    quarantined = [p for p in pins if p.state == "quarantined"]
    reordered = [p for p in pins if p.state != "quarantined" and p.reordered_at is not None]
    context: dict[str, Any] = {
        "quarantined": [(p, word_changes(p.word_diff)) for p in quarantined],
        "reordered": [(p, word_changes(p.word_diff)) for p in reordered],
        "pinned": [p for p in pins if p.state != "quarantined"],
        "notice": notice,
        "held": len(quarantined),
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
        Route("/pins/held", page(held_badge), methods=["GET"]),
        Route("/pins/{server}/{tool}/approve", page(approve_pin, role=Role.APPROVER), methods=["POST"]),
    ]
