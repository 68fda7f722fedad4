"""The API object every handler module registers on, and how host errors become problems."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from ...errors import (
    ApprovalDenied,
    CircuitOpen,
    ConfigError,
    HostError,
    MCPWireError,
    RequestTimeout,
    RPCError,
    ServerGone,
    ToolExecutionError,
    UnknownTool,
)
from ..problems import ProblemError
from ..store import StoreError
from .routing import Api, Ctx, ResponseSpec

if TYPE_CHECKING:
    from ..state import Service

__all__ = ["API", "PREFIX", "map_error", "named", "service_of"]

log = logging.getLogger("mcpwire.service.api")

PREFIX: Final = "/api/v1"

API = Api(
    title="mcpwire service",
    version="1",
    description="Manage the MCP servers of a running mcpwire host: their status, tools, prompts and "
    "resources, tool calls with approvals, the audit log and events. The MCP gateway itself is at /mcp.",
)

NO_CONTENT = {204: ResponseSpec("Done; no body.")}


def service_of(ctx: Ctx) -> Service:
    return ctx.service  # type: ignore[no-any-return]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


def named(items: Iterable[N], name: str, what: str, *, listing: str | None = None) -> N:
    """The item called ``name`` (from a request's path), or a 404 saying there is no such
    ``what`` (and which ``GET`` lists them)."""
    for item in items:
        if item.name == name:
            return item
    hint = f"; GET {PREFIX}/{listing} lists them" if listing is not None else ""
    raise ProblemError(404, f"no {what} named {name!r}{hint}")


def map_error(exc: BaseException) -> ProblemError | None:
    """The problem for an error a handler let through; ``None`` for a bug (answered 500)."""
    name = type(exc).__name__
    text = str(exc)
    if isinstance(exc, UnknownTool):
        return ProblemError(404, text)
    if name == "ToolQuarantined":
        server, tool = getattr(exc, "server", ""), getattr(exc, "tool", "")
        return ProblemError(
            409,
            f"tool {tool!r} on server {server!r} is quarantined: its definition changed since it was pinned, and the "
            f"change awaits review (GET {PREFIX}/pins?state=quarantined shows it; POST "
            f"{PREFIX}/pins/{server}/{tool}/approve accepts it)",
            title="Tool quarantined",
        )
    if name in ("UnknownApproval", "UnknownPrompt", "UnknownResource"):
        return ProblemError(404, text)
    if name in ("ApprovalNotPending", "ApprovalConflict"):
        return ProblemError(409, text)
    if isinstance(exc, ApprovalDenied):
        return ProblemError(403, text, title="Approval denied")
    if isinstance(exc, CircuitOpen):
        return ProblemError(503, text, headers={"Retry-After": "5"}, title="Circuit open")
    if isinstance(exc, ConfigError):
        return ProblemError(422, text)
    if isinstance(exc, ToolExecutionError):
        cause = exc.__cause__
        if isinstance(cause, RequestTimeout):
            return ProblemError(504, text)
        if isinstance(cause, ServerGone):
            return ProblemError(503, text, title="Server unavailable")
        if isinstance(cause, RPCError):
            # a well-formed refusal by the server (bad arguments, a capability we lack): the
            # request cannot be carried out as it is, which is not a failure of the server
            return ProblemError(422, text, title="Refused by the server")
        return ProblemError(502, text, title="Server failed")
    if isinstance(exc, RequestTimeout):
        return ProblemError(504, text)
    if isinstance(exc, ServerGone):
        return ProblemError(503, text, title="Server unavailable")
    if isinstance(exc, StoreError):
        log.error("store: %s", exc)
        return ProblemError(503, "the service's database is failing; try again later", title="Store unavailable")
    if isinstance(exc, HostError):
        if text.startswith("no server named"):
            return ProblemError(404, text)
        return ProblemError(409, text)
    if isinstance(exc, MCPWireError):
        return ProblemError(502, text, title="Server failed")
    return None
