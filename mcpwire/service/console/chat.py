"""The console's chat page: ``/chat`` talks to the agent with a preset of the service's mcp.json.

Theory of operation: the page lists the presets and the stored conversations (newest first; one
opened with ``?conversation=`` shows its messages, and the next message continues it). Sending a
message posts the form, with the session's CSRF token, to ``/chat/runs``, which starts the run as
``POST /api/v1/agent/runs`` does and answers its server-sent events; ``console.js`` reads them and
appends the answer's text and the tool calls as they come, as text nodes (never markup). A call
that needs approval waits in the service's queue like any other: the page links to
``/approvals``, where it is decided.
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
from .web import View, page

__all__ = ["Runs", "routes"]


def _shown(message: Message) -> dict[str, Any]:
    """A stored message as the page prints it (text, calls, results)."""
    return {
        "role": message.role,
        "text": "".join(p.text for p in message.parts if isinstance(p, TextPart)),
        "calls": [(p.name, p.raw_arguments) for p in message.parts if isinstance(p, ToolCall)],
        "results": [
            (p.name, "".join(c.text for c in p.content if isinstance(c, TextPart)), p.is_error)
            for p in message.parts
            if isinstance(p, ToolResultPart)
        ],
    }


class Runs(Protocol):
    """What the page needs of the agent's runs (:class:`~mcpwire.service.agent_runs.AgentRuns`)."""

    @property
    def store(self) -> Store | None: ...

    @property
    def config_path(self) -> str | Path | None: ...

    def presets(self) -> dict[str, Preset]: ...

    async def start(self, body: bytes, state: Mapping[str, object], *, caller: str = "api") -> Response: ...


def routes(runs: Runs) -> list[BaseRoute]:
    """``GET /chat`` and ``POST /chat/runs`` over ``runs`` (which has a store)."""
    store = runs.store
    assert store is not None

    async def chat_page(view: View) -> Response:
        problem = None
        try:
            presets = sorted(runs.presets().items())
        except PresetError as exc:
            presets, problem = [], str(exc)
        wanted = view.request.query_params.get("conversation", "")
        current, messages = None, []
        if wanted:
            current = await store.conversation(wanted)
            found = await load_messages(store, wanted)
            if current is None or found is None:
                raise ProblemError(404, f"no conversation {wanted!r}")
            messages = [_shown(m) for m in found]
        return view.render(
            "chat.html",
            title="Chat",
            presets=presets,
            preset_problem=problem,
            config_path=str(runs.config_path) if runs.config_path is not None else None,
            conversations=await store.conversations(limit=100),
            current=current,
            messages=messages,
            live=False,
        )

    async def chat_run(view: View) -> Response:
        form = view.form
        assert form is not None
        body: dict[str, str] = {"preset": form.get("preset"), "prompt": form.get("prompt")}
        if form.get("conversation"):
            body["conversation"] = form.get("conversation")
        state = view.request.scope.get("state") or {}
        return await runs.start(msgspec.json.encode(body), state, caller="console")

    return [
        Route("/chat", page(chat_page), methods=["GET"]),
        Route("/chat/runs", page(chat_run, role=Role.CALLER), methods=["POST"]),
    ]
