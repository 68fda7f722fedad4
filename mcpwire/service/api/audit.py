"""``/api/v1/audit``: the audit log, newest first, paged by cursor."""

from __future__ import annotations

from ..store import AuditRow
from .core import API, PREFIX, service_of
from .routing import Ctx, ResponseSpec
from .types import AuditList, AuditOut, AuditQuery

__all__ = ["audit_out"]


def audit_out(row: AuditRow) -> AuditOut:
    return AuditOut(
        id=row.id,
        time=row.time,
        kind=row.kind,
        server=row.server,
        tool=row.tool,
        name=row.name,
        outcome=row.outcome,
        trace_id=row.trace_id,
        run_id=row.run_id,
        caller=row.caller,
        record=row.record,
    )


@API.operation(
    "GET",
    f"{PREFIX}/audit",
    summary="Read the audit log",
    tags=("audit",),
    query=AuditQuery,
    responses={200: ResponseSpec("A page of records, newest first; pass nextCursor for older ones.", AuditList)},
)
async def list_audit(ctx: Ctx) -> AuditList:
    """Filters: ``server``, ``tool`` (its own or namespaced name), ``outcome`` (ok, tool_error,
    error, denied, cache_hit, cancelled...), ``trace_id``, ``run_id`` (a call's or an agent run's),
    ``kind`` (tool, prompt, resource, pin, approval...), and the time: ``since`` (included) and
    ``until`` (not), as Unix seconds. An unknown parameter is refused, not ignored. Arguments are
    redacted per the host's audit policy before they are stored."""
    query = ctx.query_as(AuditQuery)
    service = service_of(ctx)
    await service.audit.flush()  # (what this process journaled, in the store before it is read)
    page = await service.store.audit(
        server=query.server,
        tool=query.tool,
        outcome=query.outcome,
        trace_id=query.trace_id,
        run_id=query.run_id,
        kind=query.kind,
        since=query.since,
        until=query.until,
        cursor=query.cursor,
        limit=query.limit,
    )
    return AuditList(items=[audit_out(r) for r in page.items], next_cursor=page.next_cursor)
