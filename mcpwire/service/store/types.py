"""The rows a :class:`~mcpwire.service.store.Store` keeps, as frozen Structs.

Each kind of record has a few typed columns the store filters and orders on, and the rest of the
record as a JSON object (``data``, ``record``, ``entry``...). The host's own types (approvals, pins,
audit records) are converted to and from these rows by :mod:`mcpwire.service.store_bridge`, so the store
depends on nothing above the protocol's JSON types.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ...errors import MCPWireError
from ...protocol.types import JSONValue

__all__ = [
    "ApprovalRow",
    "AuditIn",
    "AuditPage",
    "AuditRow",
    "CheckRunRow",
    "ConversationRow",
    "JSONObject",
    "MessageRow",
    "PinRow",
    "ServerRow",
    "StoreError",
]

JSONObject = dict[str, JSONValue]


class StoreError(MCPWireError):
    """The store cannot be opened, migrated, read or written; the message says which and why."""


class ServerRow(msgspec.Struct, frozen=True, kw_only=True):
    """A server registered or edited through the API.

    ``entry`` is the mcp.json entry of a server added through the API, as given (placeholders
    unexpanded). A server of the config file has no entry here (its file is never rewritten): an
    edit of it is kept as ``patch`` (the fields changed), and ``removed`` is a tombstone hiding it.
    """

    name: str
    entry: JSONObject | None = None
    patch: JSONObject | None = None
    removed: bool = False
    updated_at: float = 0.0


class AuditIn(msgspec.Struct, frozen=True, kw_only=True):
    """One audit record to append (the store assigns its id)."""

    time: float
    server: str
    kind: str = "tool"
    tool: str = ""
    name: str | None = None
    outcome: str = ""
    trace_id: str | None = None
    run_id: str | None = None
    caller: str | None = None
    record: JSONObject = msgspec.field(default_factory=dict)


class AuditRow(msgspec.Struct, frozen=True, kw_only=True):
    """A stored audit record; ids grow with time (a page is ordered by id, newest first)."""

    id: int
    time: float
    server: str
    kind: str
    tool: str
    name: str | None
    outcome: str
    trace_id: str | None
    run_id: str | None
    caller: str | None
    record: JSONObject


class AuditPage(msgspec.Struct, frozen=True, kw_only=True):
    """A page of audit records, newest first; ``next_cursor`` continues with older ones."""

    items: list[AuditRow]
    next_cursor: int | None = None


ApprovalStateName = Literal["pending", "approved", "denied", "expired"]


class ApprovalRow(msgspec.Struct, frozen=True, kw_only=True):
    """An approval: its state and times as columns, the whole approval in ``data``.

    ``seq`` is assigned by the store on every save; readers poll ``approvals_changed_since``.
    """

    id: str
    state: str
    server: str
    tool: str
    created_at: float
    expires_at: float | None = None
    decided_at: float | None = None
    data: JSONObject = msgspec.field(default_factory=dict)
    seq: int = 0


class PinRow(msgspec.Struct, frozen=True, kw_only=True):
    """A pinned tool definition (``state`` is ``pinned`` or ``quarantined``); the rest in ``data``."""

    server: str
    tool: str
    hash: str
    state: str
    changed_at: float | None = None
    data: JSONObject = msgspec.field(default_factory=dict)


class CheckRunRow(msgspec.Struct, frozen=True, kw_only=True):
    """One ``mcpwire check`` run kept for the console."""

    id: str
    target: str
    started_at: float
    finished_at: float | None = None
    status: str = "running"
    summary: JSONObject = msgspec.field(default_factory=dict)
    report: JSONObject | None = None


class ConversationRow(msgspec.Struct, frozen=True, kw_only=True):
    """An agent conversation (its messages are :class:`MessageRow`)."""

    id: str
    title: str = ""
    created_at: float
    updated_at: float
    data: JSONObject = msgspec.field(default_factory=dict)


class MessageRow(msgspec.Struct, frozen=True, kw_only=True):
    conversation_id: str
    seq: int
    role: str
    created_at: float
    content: JSONObject = msgspec.field(default_factory=dict)
