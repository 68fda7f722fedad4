"""``/api/v1/agent``: runs of the agent over the service's host, and their stored conversations.

The run's work is :class:`~mcpwire.service.agent_runs.AgentRuns` (the console's chat page starts
runs through it too); these operations declare its request and answers, so the OpenAPI document
describes them like every other operation. A service made without the agent answers 404.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from starlette.responses import Response

from ..agent_conversations import runs_of
from ..agent_runs import AgentRuns, RunRequest
from ..identity import Role
from ..problems import ProblemError
from ..store import ConversationRow
from .core import API, PREFIX, service_of
from .routing import Ctx, ResponseSpec

__all__ = ["ConversationList", "ConversationOut", "ConversationSummary"]

TAGS = ("agent",)


class ConversationQuery(msgspec.Struct, frozen=True, kw_only=True):
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 50


class _Conversation(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    #: the first prompt, shortened
    title: str
    preset: str | None
    created_at: float
    updated_at: float
    #: the last run's: running, final, failed or cancelled
    outcome: str | None
    run_id: str | None


class ConversationSummary(_Conversation, frozen=True, kw_only=True):
    """A stored conversation, and how its last run went."""

    #: how many runs it had
    runs: int


class ConversationList(msgspec.Struct, frozen=True, kw_only=True):
    items: list[ConversationSummary]


class ConversationOut(_Conversation, frozen=True, kw_only=True):
    """A conversation with its runs and messages (``mcpwire.agent.Message`` values)."""

    runs: list[dict[str, Any]]
    messages: list[dict[str, Any]]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _head(row: ConversationRow) -> dict[str, Any]:
    data = row.data
    return {
        "id": row.id,
        "title": row.title,
        "preset": _text(data.get("preset")),
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "outcome": _text(data.get("outcome")),
        "run_id": _text(data.get("run_id")),
    }


def _runs(ctx: Ctx) -> AgentRuns:
    runs = getattr(service_of(ctx), "agent", None)
    if not isinstance(runs, AgentRuns):
        raise ProblemError(404, "this service runs no agent (mcpwire serve has one, with the presets of its mcp.json)")
    return runs


@API.operation(
    "POST",
    f"{PREFIX}/agent/runs",
    role=Role.CALLER,
    summary="Run the agent",
    tags=TAGS,
    body=RunRequest,
    responses={
        200: ResponseSpec(
            "The run's events as server-sent events: first `run` (its id, and the conversation's), then one "
            "event per step (`event:` its type, `id:` its place, `data:` its JSON), the last `final` or "
            "`failed`, then `messages` with the conversation to continue.",
            media="text/event-stream",
        )
    },
)
async def start_run(ctx: Ctx) -> Response:
    """A preset of the service's mcp.json (provider, model, servers, tools, system prompt) and a
    prompt, or a whole conversation (``messages``), or a stored ``conversation`` to continue with
    a prompt. ``servers`` and ``tools`` (globs of namespaced names) choose what this run may use
    instead of the preset's. The run's calls go through the host's policies: a call that needs
    approval waits in ``GET /api/v1/approvals``. Closing the stream cancels the run."""
    state = ctx.request.scope.get("state") or {}
    return await _runs(ctx).run(ctx.body_as(RunRequest), state)


@API.operation(
    "GET",
    f"{PREFIX}/agent/conversations",
    summary="List the agent's conversations",
    tags=TAGS,
    query=ConversationQuery,
    responses={200: ResponseSpec("The conversations, the most recently updated first.", ConversationList)},
)
async def list_conversations(ctx: Ctx) -> ConversationList:
    rows = await service_of(ctx).store.conversations(limit=ctx.query_as(ConversationQuery).limit)
    return ConversationList(items=[ConversationSummary(**_head(row), runs=len(runs_of(row))) for row in rows])


@API.operation(
    "GET",
    f"{PREFIX}/agent/conversations/{{conversation_id}}",
    summary="One conversation, with its messages",
    tags=TAGS,
    responses={200: ResponseSpec("The conversation.", ConversationOut)},
)
async def get_conversation(ctx: Ctx) -> ConversationOut:
    store = service_of(ctx).store
    conversation_id = ctx.path["conversation_id"]
    row = await store.conversation(conversation_id)
    if row is None:
        raise ProblemError(404, f"no conversation {conversation_id!r}", title="Unknown conversation")
    messages = [m.content for m in await store.messages(conversation_id)]
    return ConversationOut(**_head(row), runs=runs_of(row), messages=messages)
