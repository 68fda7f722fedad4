"""The agent's conversations in the service's store, and ``GET /api/v1/agent/conversations``.

Theory of operation: a run started through ``POST /api/v1/agent/runs`` keeps its conversation in
the store's ``conversations`` table (title, preset, the runs made in it and how the last one
ended) and its messages in the ``messages`` table, one row per :class:`~mcpwire.agent.Message`
in order. The row is written before the run starts (its outcome ``running``) and again when the
run is over (``final``, ``failed``, or ``cancelled`` when its stream was closed), with the
messages the run added. A later run names the conversation to continue it: its stored messages,
then the new prompt. ``GET /api/v1/agent/conversations`` lists them, most recent first, and
``GET /api/v1/agent/conversations/{id}`` shows one with its messages (their operations are the
API's: :mod:`mcpwire.service.api.agent`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any, Final

import msgspec
import trio

from ..agent import Message
from ..agent.events import Failed
from ..redaction import shorten
from .store import ConversationRow, Store

__all__ = ["CONVERSATIONS_PATH", "ConversationKeeper", "load_messages", "runs_of"]

log = logging.getLogger("mcpwire.service.agent")

CONVERSATIONS_PATH: Final = "/api/v1/agent/conversations"
#: how long saving a run's end may take (it runs shielded when the stream was closed)
SAVE_TIMEOUT: Final = 10.0
#: the longest title kept (the first prompt, shortened)
TITLE_CHARS: Final = 80


async def load_messages(store: Store, conversation_id: str) -> list[Message] | None:
    """The stored conversation's messages, or ``None`` when there is no such conversation."""
    if await store.conversation(conversation_id) is None:
        return None
    return [msgspec.convert(row.content, Message) for row in await store.messages(conversation_id)]


def runs_of(row: ConversationRow) -> list[dict[str, Any]]:
    """The runs recorded in a conversation row (each a JSON object)."""
    runs = row.data.get("runs")
    return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []


class ConversationKeeper:
    """Saves one run's conversation: :meth:`begin` before the run, :meth:`finish` after it."""

    def __init__(self, store: Store, *, preset: str, conversation_id: str | None, stored: int) -> None:
        self.store = store
        self.preset = preset
        self.id = conversation_id or "conv_" + secrets.token_urlsafe(12)
        #: how many of the run's messages are already in the store
        self.stored = stored
        self.row: ConversationRow | None = None

    async def begin(self, messages: Sequence[Message], run_id: str) -> None:
        """Writes the conversation (new, or the one continued) as ``running`` with ``messages``."""
        now = time.time()
        old = await self.store.conversation(self.id)
        if old is None:
            first = next((m.text for m in messages if m.role == "user" and m.text), "")
            old = ConversationRow(
                id=self.id, title=shorten(first, TITLE_CHARS), created_at=now, updated_at=now, data={"runs": []}
            )
        runs = [*runs_of(old), {"run_id": run_id, "started_at": now, "outcome": "running"}]
        data = {**old.data, "preset": self.preset, "runs": runs, "run_id": run_id, "outcome": "running"}
        self.row = msgspec.structs.replace(old, updated_at=now, data=data)
        await self.store.put_conversation(self.row)
        await self._append(messages)

    async def finish(self, messages: Sequence[Message], outcome: Any) -> None:
        """Writes what the run added and how it ended (bounded, and shielded from the stream's
        cancellation, so a closed stream still leaves a ``cancelled`` conversation)."""
        if self.row is None:
            return
        with trio.CancelScope(shield=True, deadline=trio.current_time() + SAVE_TIMEOUT) as scope:
            ended: dict[str, Any] = {"outcome": "cancelled"}
            if isinstance(outcome, Failed):
                ended = {"outcome": "failed", "reason": outcome.reason}
            elif outcome is not None:
                ended = {"outcome": "final"}
            runs = runs_of(self.row)
            if runs:
                runs[-1] = {**runs[-1], **ended, "ended_at": time.time()}
            kept = {k: v for k, v in self.row.data.items() if k != "reason"}
            data = {**kept, "runs": runs, **ended}
            self.row = msgspec.structs.replace(self.row, updated_at=time.time(), data=data)
            await self._append(messages)
            await self.store.put_conversation(self.row)
        if scope.cancelled_caught:
            log.warning("saving conversation %s took longer than %ss", self.id, SAVE_TIMEOUT)

    async def _append(self, messages: Sequence[Message]) -> None:
        snapshot = list(messages)  # a running run's list grows while this awaits
        for message in snapshot[self.stored :]:
            await self.store.append_message(self.id, message.role, msgspec.to_builtins(message))
        self.stored = max(self.stored, len(snapshot))
