"""The tools a run may call: the :class:`ToolSurface` interface, and :class:`HostTools`, the
host's namespaced tools behind it.

Theory of operation: the loop knows tools only through a surface: their specs (name, description,
schema) for the model, where a name leads (server and tool), and a ``call`` that returns a
:class:`ToolOutcome` whatever happens - a tool error, a refusal, an unknown name and a failed
connection are all results for the model, not exceptions for the loop. When a call needs a
decision, the surface asks the run through ``ask`` with an :class:`ApprovalTicket` and gets a
:class:`Decision` back.

:class:`HostTools` takes the specs from the host's registry as its Anthropic export does
(:meth:`~mcpwire.host.registry.ToolRegistry.to_anthropic`: namespaced, provider-legal names that
map back to their server and tool, made again only when the registry's tools change), optionally
narrowed to some servers and tool-name globs, and
calls through :meth:`~mcpwire.host.Host.call_tool`, so the host's policies apply: risk levels,
allow/deny/ask rules, CRITICAL confirmations, the approval timeout, the breaker and the audit log
(each record carries the run's id). Its approver turns each ``ask`` of the host into a ticket;
with a host approval queue the ticket's id is the queue's, so the approval can be decided there
too; the run's answer goes back as a :class:`~mcpwire.host.policies.Verdict`, so the approval
records who decided (the terminal, a person through the service) and a denial's reason.
"""

from __future__ import annotations

import base64
import binascii
import copy
import difflib
import fnmatch
import logging
import secrets
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, runtime_checkable

from ..errors import ApprovalDenied, HostError, MCPWireError, UnknownTool
from ..host import Host, RegisteredTool, ToolQuarantined
from ..host.policies import ApprovalRequest, Verdict
from ..protocol.types import ImageContent, JSONObject
from .messages import ImagePart, ToolSpec

__all__ = [
    "APPROVE_MODES",
    "ApprovalTicket",
    "Ask",
    "Decision",
    "HostTools",
    "Outcome",
    "ToolOutcome",
    "ToolSurface",
]

log = logging.getLogger("mcpwire.agent.tools")

#: image types the providers that take images accept
IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: the largest image (decoded bytes) passed to a model
MAX_IMAGE_BYTES: Final = 5 * 1024 * 1024

Outcome = Literal["ok", "tool_error", "denied", "failed", "unknown_tool", "invalid_arguments", "quarantined"]
#: what a run does with calls that need approval: approve them all, ask, or deny them all (the
#: same words as ``mcpwire call --approve``)
APPROVE_MODES: Final = ("all", "ask", "deny")


def deprecated_none(where: str) -> Literal["deny"]:
    """``deny``, for the old ``none``, with a deprecation warning naming ``where`` it was given."""
    warnings.warn(f"{where}: 'none' is deprecated; it means deny: use 'deny'", DeprecationWarning, stacklevel=3)
    return "deny"


@dataclass(frozen=True, slots=True)
class ApprovalTicket:
    """A call (or a sampling request) waiting for a person: what the run shows and asks about."""

    id: str
    kind: Literal["tool", "sampling"]
    server: str
    tool: str
    name: str
    arguments: JSONObject
    risk: str  #: ``low``, ``medium``, ``high`` or ``critical``
    reason: str  #: why it needs approval
    confirmation: int = 1
    confirmations_needed: int = 1


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's answer: approve (with edited ``arguments``) or deny (with a ``reason``)."""

    approve: bool
    arguments: Mapping[str, object] | None = None
    reason: str | None = None
    by: str | None = None


Ask = Callable[[ApprovalTicket], Awaitable[Decision]]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a call gave the model, whatever happened."""

    text: str
    outcome: Outcome
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()
    server: str | None = None
    tool: str | None = None
    risk: str | None = None
    approval: str | None = None  #: allow, approved, approved_modified (or None when not run)
    approval_id: str | None = None
    #: seconds the call itself took (None: not measured here; the run times it)
    latency: float | None = None
    #: seconds it waited for a decision
    approval_wait: float = 0.0


@runtime_checkable
class ToolSurface(Protocol):
    """The tools a run may call."""

    def specs(self) -> list[ToolSpec]:
        """The tools the model is offered now (the list may change between steps)."""
        ...

    def locate(self, name: str) -> tuple[str, str] | None:
        """``(server, tool)`` behind an offered name, or ``None``."""
        ...

    async def call(self, name: str, arguments: JSONObject, *, context: Mapping[str, str], ask: Ask) -> ToolOutcome:
        """Calls a tool; every failure is an outcome. Cancellation: the call is cancelled."""
        ...


@dataclass(slots=True)
class HostTools:
    """The host's tools as a :class:`ToolSurface`.

    Args:
        host: a running :class:`~mcpwire.host.Host`.
        servers: only the tools of these servers.
        allowed: only tools whose namespaced name (or ``server/tool``) matches one of these
            globs.
        timeout: seconds per call instead of each server's configured timeout.
    """

    host: Host
    servers: Sequence[str] | None = None
    allowed: Sequence[str] | None = None
    timeout: float | None = None
    _made_from: list[RegisteredTool] = field(default_factory=list)
    _specs: list[ToolSpec] = field(default_factory=list)

    def _offered(self, name: str, server: str, tool: str) -> bool:
        if self.servers is not None and server not in self.servers:
            return False
        if self.allowed is None:
            return True
        return any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(f"{server}/{tool}", g) for g in self.allowed)

    def specs(self) -> list[ToolSpec]:
        # asked once per step: the specs are made again only when the registry's tools are not
        # the very objects they were made from (a list change or a restart replaces them)
        registry = self.host.registry
        visible = registry.tools()
        if len(visible) != len(self._made_from) or any(
            a is not b for a, b in zip(visible, self._made_from, strict=True)
        ):
            self._specs = [
                ToolSpec(
                    name=reg.name,
                    description=registry.description(reg),
                    input_schema=copy.deepcopy(reg.tool.input_schema),
                )
                for reg in visible
                if self._offered(reg.name, reg.server, reg.tool.name)
            ]
            self._made_from = visible
        return list(self._specs)

    def locate(self, name: str) -> tuple[str, str] | None:
        try:
            reg = self.host.registry.resolve(name)
        except UnknownTool:
            return None
        if reg.quarantined or not self._offered(reg.name, reg.server, reg.tool.name):
            return None
        return reg.server, reg.tool.name

    def _unknown(self, name: str) -> str:
        known = [s.name for s in self.specs()]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        if close:
            hint = f"did you mean {' or '.join(repr(c) for c in close)}?"
        else:
            hint = f"the tools are: {', '.join(known[:20]) or 'none'}"
        return f"no tool named {name!r} is available; {hint}"

    async def call(self, name: str, arguments: JSONObject, *, context: Mapping[str, str], ask: Ask) -> ToolOutcome:
        where = self.locate(name)
        if where is None:
            return ToolOutcome(text=self._unknown(name), outcome="unknown_tool", is_error=True)
        server, tool = where
        denied: list[Decision] = []
        approver = self._approver(ask, denied)
        try:
            result = await self.host.call_tool(
                name, arguments, timeout=self.timeout, approver=approver, context=context
            )
        except ToolQuarantined as exc:
            return ToolOutcome(text=f"not run: {exc}", outcome="quarantined", is_error=True, server=server, tool=tool)
        except ApprovalDenied as exc:
            text = _denial(denied[-1]) if denied else f"not run: {exc}"
            return ToolOutcome(text=text, outcome="denied", is_error=True, server=server, tool=tool)
        except UnknownTool:  # gone since it was located (its server restarted)
            return ToolOutcome(text=self._unknown(name), outcome="unknown_tool", is_error=True)
        except (HostError, MCPWireError) as exc:
            return ToolOutcome(
                text=f"the call failed: {exc}", outcome="failed", is_error=True, server=server, tool=tool
            )
        images = tuple(_images(result.result.content))
        return ToolOutcome(
            text=result.text,
            outcome="tool_error" if result.is_error else "ok",
            is_error=result.is_error,
            images=images,
            server=server,
            tool=tool,
            risk=result.risk.name.lower() if result.risk is not None else None,
            approval=result.approval,
            approval_id=result.approval_id,
            latency=result.latency,
            approval_wait=result.approval_wait,
        )

    def _approver(self, ask: Ask, denied: list[Decision]) -> Callable[[ApprovalRequest], Awaitable[Verdict]]:
        async def approver(request: ApprovalRequest) -> Verdict:
            ticket = ApprovalTicket(
                id=request.id or _local_id(),
                kind="tool",
                server=request.server,
                tool=request.tool,
                name=request.name,
                arguments=dict(request.arguments),  # type: ignore[arg-type]
                risk=request.risk.name.lower(),
                reason=request.reason,
                confirmation=request.confirmation,
                confirmations_needed=request.confirmations_needed,
            )
            decision = await ask(ticket)
            if not decision.approve:
                denied.append(decision)
            arguments = None if decision.arguments is None else dict(decision.arguments)
            # recorded on the approval with who gave it (the terminal, a person) and its reason
            return Verdict(approve=decision.approve, arguments=arguments, reason=decision.reason, by=decision.by)

        return approver


def _denial(decision: Decision) -> str:
    who = f" by {decision.by}" if decision.by else ""
    because = f": {decision.reason}" if decision.reason else ""
    return f"not run: the call was denied{who}{because}"


def _local_id() -> str:
    return "apv_local_" + secrets.token_urlsafe(9)


def _images(content: Sequence[object]) -> list[ImagePart]:
    out: list[ImagePart] = []
    for block in content:
        if not isinstance(block, ImageContent) or block.mime_type not in IMAGE_TYPES:
            continue
        try:
            size = len(base64.b64decode(block.data, validate=True))
        except (binascii.Error, ValueError):
            continue
        if size <= MAX_IMAGE_BYTES:
            out.append(ImagePart(media_type=block.mime_type, data=block.data))
    return out
