"""Approvals and pins as the host sees them (a part of :class:`~mcpwire.host.Host`).

Theory of operation: approval changes in the host's queue become events and audit records; each
listed tool is checked against its pin when the host pins definitions (a changed one is
quarantined, and every change of a pin is an event and an audit record); a quarantined tool's new
definition can be approved, and the quarantine follows pins that another process changed.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Callable
from typing import cast

import msgspec

from ..errors import HostError
from ..protocol.types import JSONObject, Tool
from .approvals import Approval, ApprovalQueue, ApprovalState
from .events import HostEvent
from .pins import Pin, PinChange, PinStore, approved, check_pin, definition_diff
from .policies import ArgumentsMode, AuditRecord, audit_arguments, redact
from .servers import ServerInfo, ServerStatus
from .state import HostState

__all__ = ["Oversight"]

log = logging.getLogger("mcpwire.host")


def redact_arguments(arguments: JSONObject) -> JSONObject:
    return cast("JSONObject", redact(arguments))


class Oversight:
    """Approval events and records, pins and their approval (part of the host).

    It listens to ``approvals`` from the start; :meth:`close` stops listening.
    """

    def __init__(
        self, state: HostState, *, pins: PinStore | None, approvals: ApprovalQueue | None, audit_mode: ArgumentsMode
    ) -> None:
        self._state = state
        self.pins = pins
        self.approvals = approvals
        self._audit_mode = audit_mode
        self._unlisten: builtins.list[Callable[[], None]] = []
        if approvals is not None:
            self._unlisten.append(approvals.on_change(self._approval_event))
            self._unlisten.append(approvals.on_change(self._approval_record, local_only=True))

    def close(self) -> None:
        """Stops listening to the approval queue."""
        for stop in self._unlisten:
            stop()
        self._unlisten.clear()

    def _approval_event(self, approval: Approval) -> None:
        if not self._state.hub.wants("approval"):
            return
        info = self._state.servers.get(approval.server)
        status = info.status.value if info is not None else ServerStatus.DISCONNECTED.value
        # events reach every listener (an API's event stream): arguments under secret-looking
        # keys are redacted there, as in audit records; the queue keeps them whole for the decider
        shown = msgspec.structs.replace(
            approval,
            arguments=redact_arguments(approval.arguments),
            final_arguments=None if approval.final_arguments is None else redact_arguments(approval.final_arguments),
        )
        self._state.hub.emit(HostEvent(server=approval.server, kind="approval", status=status, approval=shown))

    def _approval_record(self, approval: Approval) -> None:
        if approval.state is ApprovalState.PENDING and approval.confirmations == 0:
            return  # opened: the call's own record follows
        context = approval.context
        self._state.record(
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
        """Every pin of the store (see :meth:`Host.pinned`)."""
        return [] if self.pins is None else await self.pins.all()

    async def follow_pins(self) -> None:
        """Brings the quarantine into line with the stored pins (see :meth:`Host.follow_pins`)."""
        if self.pins is None:
            return
        held = {(pin.server, pin.tool) for pin in await self.pins.all() if pin.quarantined}
        for info in builtins.list(self._state.servers.values()):
            changed = False
            for reg in self._state.registry.tools(info.name, include_quarantined=True):
                wanted = (info.name, reg.tool.name) in held
                if wanted != reg.quarantined:
                    self._state.registry.set_quarantined(info.name, reg.tool.name, wanted)
                    changed = True
            if changed:
                info.tool_count = self._state.registry.count(info.name)
                self._state.emit(info, "tools")

    async def approve_pin(self, server: str, tool: str, *, by: str | None = None) -> Pin:
        """Accepts a quarantined tool's changed definition (see :meth:`Host.approve_pin`)."""
        if self.pins is None:
            raise HostError("this host does not pin tool definitions; pass pins=MemoryPins() to the Host")
        pin = await self.pins.get(server, tool)
        if pin is None:
            raise HostError(f"no pinned tool {tool!r} on server {server!r}")
        if not pin.quarantined:
            return pin
        pin = approved(pin)
        await self.pins.put(pin)
        info = self._state.servers.get(server)
        if self._state.registry.set_quarantined(server, tool, False) and info is not None:
            info.tool_count = self._state.registry.count(server)
            self._state.emit(info, "tools")
        if info is not None:
            self.pin_changed(info, pin, "approved", by=by)
        return pin

    async def check_pins(self, info: ServerInfo, tools: builtins.list[Tool]) -> set[str]:
        """Pins first-seen tools and quarantines changed ones; returns the quarantined names.
        Without pins, a changed definition is only logged."""
        if self.pins is None:
            # SEC-10: a tool whose description or schema changes under the same name deserves a look
            before = {r.tool.name: r.tool for r in self._state.registry.tools(info.name, include_quarantined=True)}
            for new in tools:
                old = before.get(new.name)
                if old is not None and (old.description, old.input_schema) != (new.description, new.input_schema):
                    log.warning("%s: tool %r changed its description or inputSchema", info.name, new.name)
            return set()
        quarantined: set[str] = set()
        for tool in tools:
            pin, change = await check_pin(self.pins, info.name, tool)
            if pin.quarantined:
                quarantined.add(tool.name)
            if change != "same" and change != "quarantined":
                self.pin_changed(info, pin, change)
        return quarantined

    def pin_changed(self, info: ServerInfo, pin: Pin, change: PinChange | str, *, by: str | None = None) -> None:
        """Logs a change of one tool's pin, and tells it as an event and an audit record."""
        diff = None
        if change == "changed" and pin.pending_definition is not None:
            diff = definition_diff(pin.definition, pin.pending_definition, label=f"{info.name}/{pin.tool}")
            log.warning(
                "%s: tool %r changed its definition since it was pinned; quarantined until approved",
                info.name,
                pin.tool,
            )
        elif change == "reordered" and pin.reordered_definition is not None:
            diff = definition_diff(pin.definition, pin.reordered_definition, label=f"{info.name}/{pin.tool}")
            log.info(
                "%s: tool %r lists the words of its definition in another order; still pinned", info.name, pin.tool
            )
        elif change in ("reverted", "approved"):
            log.info(
                "%s: tool %r is %s",
                info.name,
                pin.tool,
                "back to its pinned definition" if change == "reverted" else "approved",
            )
        outcome = {
            "pinned": "pinned",
            "changed": "quarantined",
            "reordered": "pinned",
            "reverted": "pinned",
            "approved": "pinned",
        }[change]
        self._state.emit(info, "pin", pin=pin, change=change, diff=diff)
        self._state.record(
            AuditRecord(
                time=time.time(),
                kind="pin",
                server=info.name,
                tool=pin.tool,
                decision=change,
                outcome=outcome,
                diff=diff,
                by=by,
                arguments={"hash": pin.hash, "pending_hash": pin.pending_hash, "reordered_hash": pin.reordered_hash},
            )
        )
