"""The console's chat page: ``/chat`` talks to the agent with a preset of the service's mcp.json.

Theory of operation: the page lists the presets and the stored conversations (newest first; one
opened with ``?conversation=`` shows its messages, and the next message continues it). Sending a
message posts the form, with the session's CSRF token, to ``/chat/runs``, which starts the run as
``POST /api/v1/agent/runs`` does and answers its server-sent events; ``console.js`` reads them and
shows them as they come, filling the page's ``<template>`` elements (whose words are translated
here) with text nodes, never markup: the answer's text, each tool call as a collapsible item with
its arguments, its result, its own latency and its wait for a decision, and an indicator of what
the model is doing. The conversations list reloads itself when a run starts and ends.

A call that needs approval waits in the service's queue like any other, and is shown in the
conversation where it waits (``/chat/approvals/{id}``): a person with the approver role decides
it there (approve or deny with a reason), through the same API operation as the approvals page;
anyone else sees that it waits for one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import msgspec
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...agent import Message, Preset, PresetError, TextPart, ToolCall, ToolResultPart
from ..agent_conversations import load_messages
from ..identity import Role
from ..problems import ProblemError
from ..store import Store
from .web import Refusal, View, call_api, page

__all__ = ["Runs", "items_of", "routes"]

#: conversations listed beside the chat
LISTED = 100


def items_of(messages: list[Message]) -> list[dict[str, Any]]:
    """Stored messages as the page shows them: text from the user and the model, and each tool
    call with its result (the result is found by the call's id, in a later message)."""
    results = {p.call_id: p for m in messages for p in m.parts if isinstance(p, ToolResultPart)}
    items: list[dict[str, Any]] = []
    for message in messages:
        text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
        if message.role in ("user", "assistant") and text:
            items.append({"kind": message.role, "text": text})
        for part in message.parts:
            if isinstance(part, ToolCall):
                result = results.get(part.id)
                items.append(
                    {
                        "kind": "tool",
                        "name": part.name,
                        "arguments": part.raw_arguments,
                        "result": None if result is None else result.text,
                        "is_error": bool(result and result.is_error),
                    }
                )
    return items


class Runs(Protocol):
    """What the page needs of the agent's runs (:class:`~mcpwire.service.agent_runs.AgentRuns`)."""

    @property
    def store(self) -> Store | None: ...

    @property
    def config_path(self) -> str | Path | None: ...

    def presets(self) -> dict[str, Preset]: ...

    async def start(self, body: bytes, state: Mapping[str, object], *, caller: str = "api") -> Response: ...


async def _approval_card(view: View, approval_id: str, **context: Any) -> Response:
    approval = await call_api(view, "GET", "/approvals/{id}", params={"id": approval_id}, query={})
    return view.render("fragments/chat_approval.html", a=approval, **context)


async def approval_card(view: View) -> Response:
    """The approval a run waits on, as the conversation shows it."""
    return await _approval_card(view, view.request.path_params["id"])


async def decide_in_chat(view: View) -> Response:
    """Approves or denies from the conversation (the approvals page's decision, in place)."""
    assert view.form is not None
    approval_id = view.request.path_params["id"]
    decision = view.form.get("decision")
    if decision not in ("approve", "deny"):
        raise Refusal(422, view.gettext("Choose approve or deny."))
    body: dict[str, Any] = {"decision": decision}
    reason = view.form.get("reason").strip()
    if reason and decision == "deny":
        body["reason"] = reason
    try:
        await call_api(view, "POST", "/approvals/{id}", params={"id": approval_id}, body=body)
    except ProblemError as exc:
        if exc.status not in (403, 404, 409, 422):
            raise
        return await _approval_card(view, approval_id, problem=exc)
    return await _approval_card(view, approval_id)


def routes(runs: Runs) -> list[BaseRoute]:
    """``GET /chat``, ``POST /chat/runs`` and the parts the page reloads, over ``runs`` (which has
    a store)."""
    store = runs.store
    assert store is not None

    async def listing(view: View) -> dict[str, Any]:
        return {"conversations": await store.conversations(limit=LISTED)}

    async def chat_page(view: View) -> Response:
        problem = None
        try:
            presets = sorted(runs.presets().items())
        except PresetError as exc:
            presets, problem = [], str(exc)
        wanted = view.request.query_params.get("conversation", "")
        current, items = None, []
        if wanted:
            current = await store.conversation(wanted)
            found = await load_messages(store, wanted)
            if current is None or found is None:
                raise Refusal(404, view.gettext("There is no conversation %(id)r.", id=wanted))
            items = items_of(found)
        return view.render(
            "chat.html",
            presets=presets,
            preset_problem=problem,
            config_path=str(runs.config_path) if runs.config_path is not None else None,
            current=current,
            items=items,
            **(await listing(view)),
        )

    async def chat_list(view: View) -> Response:
        current = view.request.query_params.get("current", "")
        return view.render("fragments/chat_list.html", current_id=current, **(await listing(view)))

    async def chat_run(view: View) -> Response:
        form = view.form
        assert form is not None
        if not form.get("prompt").strip():
            raise Refusal(422, view.gettext("Write a message first."))
        body: dict[str, str] = {"preset": form.get("preset"), "prompt": form.get("prompt")}
        if form.get("conversation"):
            body["conversation"] = form.get("conversation")
        state = view.request.scope.get("state") or {}
        return await runs.start(msgspec.json.encode(body), state, caller="console")

    return [
        Route("/chat", page(chat_page), methods=["GET"]),
        Route("/chat/conversations", page(chat_list), methods=["GET"]),
        Route("/chat/runs", page(chat_run, role=Role.CALLER), methods=["POST"]),
        Route("/chat/approvals/{id}", page(approval_card), methods=["GET"]),
        Route("/chat/approvals/{id}", page(decide_in_chat, role=Role.APPROVER), methods=["POST"]),
    ]
