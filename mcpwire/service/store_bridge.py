"""The store behind the host: approvals, pins and audit records kept where every replica sees them.

Theory of operation: the host asks for three things by protocol (:class:`ApprovalBackend`,
:class:`PinStore`, :class:`AuditSink`); these adapters give it the service's :class:`Store`.
Approvals are saved with their version checked in the same transaction, so when two replicas
decide one approval at once the second save is refused (:class:`ApprovalConflict`) and its caller
told; the change feed (``changed_since``) is the store's ordered sequence, which a queue polls to
see decisions made elsewhere. Audit records go through the :class:`AuditWriter` (batched, and
durable before a response is acknowledged).
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from ..host import Approval, ApprovalConflict, ApprovalQueue, AuditRecord, Host, HostConfig, Pin
from .audit import AuditWriter
from .metrics import CallMetrics
from .settings import Settings
from .store import ApprovalRow, AuditIn, PinRow, Store

__all__ = ["StoreApprovals", "StoreAudit", "StorePins", "service_host"]

log = logging.getLogger("mcpwire.service")


def _row(approval: Approval) -> ApprovalRow:
    data: dict[str, Any] = approval.to_dict()
    return ApprovalRow(
        id=approval.id,
        state=approval.state.value,
        server=approval.server,
        tool=approval.tool,
        created_at=approval.created_at,
        expires_at=approval.expires_at,
        decided_at=approval.decided_at,
        data=data,
    )


def approval_of(row: ApprovalRow) -> Approval:
    return Approval.from_dict(row.data)


class StoreApprovals:
    """:class:`~mcpwire.host.ApprovalBackend` on the store (shared by every replica on it)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def save(self, approval: Approval) -> None:
        saved = await self.store.save_approval(_row(approval), expect_version=approval.version - 1)
        if saved is None:
            current = await self.store.approval(approval.id)
            stored = 0 if current is None else current.data.get("version")
            raise ApprovalConflict(
                f"approval {approval.id} changed elsewhere (stored version {stored}, saving {approval.version})"
            )

    async def load(self, id: str) -> Approval | None:
        row = await self.store.approval(id)
        return None if row is None else approval_of(row)

    async def pending(self) -> list[Approval]:
        return [approval_of(r) for r in await self.store.approvals(state="pending", limit=500)]

    async def changed_since(self, cursor: str | None) -> tuple[list[Approval], str]:
        if cursor is None:
            return [], str(await self.store.approvals_cursor())
        rows, after = await self.store.approvals_changed_since(int(cursor))
        return [approval_of(r) for r in rows], str(after)


class StorePins:
    """:class:`~mcpwire.host.PinStore` on the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def get(self, server: str, tool: str) -> Pin | None:
        row = await self.store.pin(server, tool)
        return None if row is None else Pin.from_dict(row.data)

    async def put(self, pin: Pin) -> None:
        data: dict[str, Any] = pin.to_dict()
        row = PinRow(
            server=pin.server, tool=pin.tool, hash=pin.hash, state=pin.state.value, changed_at=pin.changed_at, data=data
        )
        await self.store.put_pin(row)

    async def all(self) -> list[Pin]:
        return [Pin.from_dict(r.data) for r in await self.store.pins()]


class StoreAudit:
    """:class:`~mcpwire.host.AuditSink` queuing records for the store (see :class:`AuditWriter`);
    ``metrics``, when set, sees every record too."""

    def __init__(self, writer: AuditWriter, metrics: CallMetrics | None = None) -> None:
        self.writer = writer
        self.metrics = metrics

    def write(self, record: AuditRecord) -> None:
        if self.metrics is not None:
            self.metrics.observe(
                record.kind, record.server, record.tool, record.outcome, record.latency_ms, record.approval_wait_ms
            )
        data: dict[str, Any] = msgspec.to_builtins(record)
        self.writer.add(
            AuditIn(
                time=record.time,
                server=record.server,
                kind=record.kind,
                tool=record.tool,
                name=record.name,
                outcome=record.outcome,
                trace_id=record.trace_id,
                run_id=record.run_id,
                caller=record.caller,
                record=data,
            )
        )

    def __repr__(self) -> str:
        return f"StoreAudit({self.writer.location})"


def service_host(config: HostConfig, store: Store, settings: Settings, **options: Any) -> Host:
    """A host whose approvals, pins and audit records live in ``store``. It starts without
    waiting for its servers (the service reports them as they come up)."""
    writer = AuditWriter(store, journal=True)
    queue = ApprovalQueue(StoreApprovals(store), poll_interval=settings.approval_poll)
    options.setdefault("start_timeout", 0.0)
    options.setdefault("approval_timeout", settings.approval_timeout)
    return Host(config, approvals=queue, pins=StorePins(store), audit=StoreAudit(writer), **options)
