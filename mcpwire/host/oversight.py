"""Approvals and pins as the host sees them: approval changes become events and audit records,
and a quarantined tool's new definition can be approved (a part of :class:`~mcpwire.host.Host`)."""

from __future__ import annotations

import builtins
import time
from typing import cast

import msgspec

from ..errors import HostError
from ..protocol.types import JSONObject
from .approvals import Approval, ApprovalState
from .events import EventHub, HostEvent
from .pins import Pin, PinStore, approved
from .policies import ArgumentsMode, AuditRecord, audit_arguments, redact
from .registry import ToolRegistry
from .servers import ServerInfo, ServerStatus
from .supervisor import Supervision

__all__ = ["Oversight"]


def redact_arguments(arguments: JSONObject) -> JSONObject:
    return cast("JSONObject", redact(arguments))


class Oversight(Supervision):
    """Approval events and records, and pin approval (part of the host)."""

    # set by Host.__init__
    registry: ToolRegistry
    pins: PinStore | None
    _servers: dict[str, ServerInfo]
    _hub: EventHub
    _audit_mode: ArgumentsMode

    def _approval_event(self, approval: Approval) -> None:
        if not self._hub.wants("approval"):
            return
        info = self._servers.get(approval.server)
        status = info.status.value if info is not None else ServerStatus.DISCONNECTED.value
        # events reach every listener (an API's event stream): arguments under secret-looking
        # keys are redacted there, as in audit records; the queue keeps them whole for the decider
        shown = msgspec.structs.replace(
            approval,
            arguments=redact_arguments(approval.arguments),
            final_arguments=None if approval.final_arguments is None else redact_arguments(approval.final_arguments),
        )
        self._hub.emit(HostEvent(server=approval.server, kind="approval", status=status, approval=shown))

    def _approval_record(self, approval: Approval) -> None:
        if approval.state is ApprovalState.PENDING and approval.confirmations == 0:
            return  # opened: the call's own record follows
        context = approval.context
        self._record(
            AuditRecord(
                time=time.time(),
                kind="approval",
                server=approval.server,
                tool=approval.tool,
                name=approval.name,
                arguments=audit_arguments(approval.arguments_to_run, self._audit_mode),
                risk=approval.risk.name,
                decision=approval.state.value,
                outcome=approval.state.value,
                error=approval.reason,
                trace_id=context.get("trace_id"),
                run_id=context.get("run_id"),
                caller=context.get("caller"),
                approval_id=approval.id,
                by=approval.decided_by,
            )
        )

    async def pinned(self) -> builtins.list[Pin]:
        """Every pin of the host's store (empty when the host does not pin)."""
        return [] if self.pins is None else await self.pins.all()

    async def follow_pins(self) -> None:
        """Brings the tools' quarantine into line with the pins as stored, when another process on
        the same store quarantined a tool or approved its new definition. It reads and writes
        nothing else: whether this process's own server agrees with a pin is checked, as ever,
        when it lists its tools again (so two processes cannot undo each other's pins in a loop)."""
        if self.pins is None:
            return
        held = {(pin.server, pin.tool) for pin in await self.pins.all() if pin.quarantined}
        for info in builtins.list(self._servers.values()):
            changed = False
            for reg in self.registry.tools(info.name, include_quarantined=True):
                wanted = (info.name, reg.tool.name) in held
                if wanted != reg.quarantined:
                    self.registry.set_quarantined(info.name, reg.tool.name, wanted)
                    changed = True
            if changed:
                info.tool_count = self.registry.count(info.name)
                self._emit(info, "tools")

    async def approve_pin(self, server: str, tool: str, *, by: str | None = None) -> Pin:
        """Accepts the changed definition of a quarantined tool: it becomes the pinned one and
        the tool is listed and callable again.

        Raises:
            HostError: the host does not pin definitions, or has no pin for that tool.
        """
        if self.pins is None:
            raise HostError("this host does not pin tool definitions; pass pins=MemoryPins() to the Host")
        pin = await self.pins.get(server, tool)
        if pin is None:
            raise HostError(f"no pinned tool {tool!r} on server {server!r}")
        if not pin.quarantined:
            return pin
        pin = approved(pin)
        await self.pins.put(pin)
        info = self._servers.get(server)
        if self.registry.set_quarantined(server, tool, False) and info is not None:
            info.tool_count = self.registry.count(server)
            self._emit(info, "tools")
        if info is not None:
            self._pin_changed(info, pin, "approved", by=by)
        return pin
