"""``/api/v1/approvals`` and ``/api/v1/pins``: the decisions people take for the host."""

from __future__ import annotations

import time

import trio

from ...host import Approval, ApprovalQueue, ApprovalState, Pin
from ...host.pins import definition_diff, word_diff
from ..identity import Identity, Role
from ..problems import ProblemError
from .core import API, PREFIX, service_of
from .routing import Ctx, ResponseSpec
from .types import (
    ApprovalDecision,
    ApprovalList,
    ApprovalOut,
    ApprovalQuery,
    ApprovalWaitQuery,
    PinList,
    PinOut,
    PinQuery,
    WordChangeOut,
    WordPiece,
)

__all__ = ["approval_out", "pin_out"]


def approval_out(ctx: Ctx, approval: Approval) -> ApprovalOut:
    outcome = service_of(ctx).outcomes.get(approval.id)
    done = outcome is not None and outcome.done.is_set()
    return ApprovalOut(
        id=approval.id,
        state=approval.state.value,
        risk=approval.risk.name.lower(),
        server=approval.server,
        tool=approval.tool,
        name=approval.name,
        arguments=dict(approval.arguments),
        final_arguments=None if approval.final_arguments is None else dict(approval.final_arguments),
        reason=approval.reason,
        why=approval.why,
        created_at=approval.created_at,
        expires_at=approval.expires_at,
        decided_at=approval.decided_at,
        decided_by=approval.decided_by,
        decided_via=approval.decided_via,
        confirmations=approval.confirmations,
        confirmations_needed=approval.confirmations_needed,
        context=dict(approval.context),
        caller_present=approval.caller_present,
        caller_away_since=approval.caller_away_since,
        result=outcome.result if done and outcome is not None else None,
        error=outcome.error if done and outcome is not None else None,
    )


def _queue(ctx: Ctx) -> ApprovalQueue:
    queue = service_of(ctx).host.approvals
    if queue is None:
        raise ProblemError(409, "this host keeps no approvals: calls that need a decision are denied at once")
    return queue


@API.operation(
    "GET",
    f"{PREFIX}/approvals",
    summary="List approvals",
    tags=("approvals",),
    query=ApprovalQuery,
    responses={200: ResponseSpec("Approvals, newest first (pending: oldest first).", ApprovalList)},
)
async def list_approvals(ctx: Ctx) -> ApprovalList:
    """``state=pending`` lists what waits for a decision (overdue ones are marked expired)."""
    query = ctx.query_as(ApprovalQuery)
    queue = _queue(ctx)
    if query.state == "pending":
        approvals = (await queue.pending())[: query.limit]
    else:
        from ..store_bridge import approval_of

        rows = await service_of(ctx).store.approvals(state=query.state, limit=query.limit)
        approvals = [approval_of(r) for r in rows]
    return ApprovalList(items=[approval_out(ctx, a) for a in approvals])


@API.operation(
    "GET",
    f"{PREFIX}/approvals/{{id}}",
    summary="One approval, and the outcome of its call",
    tags=("approvals",),
    query=ApprovalWaitQuery,
    responses={200: ResponseSpec("The approval (with the call's result once it ran here).", ApprovalOut)},
)
async def get_approval(ctx: Ctx) -> ApprovalOut:
    """With ``wait=S`` (at most 60), answers when the approval is decided and its call has
    finished, or after S seconds, whichever comes first."""
    query = ctx.query_as(ApprovalWaitQuery)
    queue = _queue(ctx)
    approval_id = ctx.path["id"]
    approval = await queue.get(approval_id)
    if query.wait > 0:
        deadline = time.monotonic() + query.wait
        if approval.pending:
            approval = await queue.wait(approval_id, timeout=query.wait)
        outcome = service_of(ctx).outcomes.get(approval_id)
        if outcome is not None and approval.state is ApprovalState.APPROVED:
            with trio.move_on_at(trio.current_time() + max(0.0, deadline - time.monotonic())):
                await outcome.done.wait()
        elif outcome is not None and not approval.pending:
            with trio.move_on_after(min(1.0, max(0.0, deadline - time.monotonic()))):
                await outcome.done.wait()  # a denied call ends at once
    return approval_out(ctx, approval)


@API.operation(
    "POST",
    f"{PREFIX}/approvals/{{id}}",
    role=Role.APPROVER,
    summary="Approve or deny",
    tags=("approvals",),
    body=ApprovalDecision,
    responses={200: ResponseSpec("The approval after the decision (a CRITICAL one may need another).", ApprovalOut)},
)
async def decide_approval(ctx: Ctx) -> ApprovalOut:
    """``approve`` runs the call (with ``arguments`` instead, when given); ``deny`` refuses it
    with ``reason``. A CRITICAL call stays pending until its second confirmation. The waiting
    call is released as soon as the decision is stored (in another replica, within its poll)."""
    body = ctx.body_as(ApprovalDecision)
    queue = _queue(ctx)
    approval = await queue.decide(
        ctx.path["id"],
        approve=body.decision == "approve",
        arguments=body.arguments,
        reason=body.reason,
        by=_decider(ctx),
        via=_channel(ctx),
    )
    return approval_out(ctx, approval)


def _channel(ctx: Ctx) -> str:
    """Through what a decision came: the console (its pages call the API's operations) or the API."""
    return "console" if (ctx.caller or "").startswith("console ") else "api"


def _decider(ctx: Ctx) -> str:
    """Who decided: the identity behind the request (a token's name, a signed-in user; ``local``
    when authentication is off) and where from (the channel is ``decided_via``)."""
    identity = (ctx.request.scope.get("state") or {}).get("identity")
    address = ctx.request.client.host if ctx.request.client is not None else "unknown"
    if isinstance(identity, Identity):
        return f"{identity.describe()} ({address})"
    caller = ctx.caller or "unknown"
    return caller if _channel(ctx) == "console" else f"api {caller}"


def pin_out(pin: Pin) -> PinOut:
    diff = None
    other = pin.pending_definition if pin.quarantined else pin.reordered_definition
    words: list[WordChangeOut] = []
    if other is not None:
        if pin.quarantined:
            diff = definition_diff(pin.definition, other, label=f"{pin.server}/{pin.tool}")
        words = [
            WordChangeOut(field=c.field, pieces=[WordPiece(op=op, text=text) for op, text in c.pieces])  # type: ignore[arg-type]
            for c in word_diff(pin.definition, other)
        ]
    return PinOut(
        server=pin.server,
        tool=pin.tool,
        state=pin.state.value,
        hash=pin.hash,
        definition=dict(pin.definition),
        pending_hash=pin.pending_hash,
        pending_definition=None if pin.pending_definition is None else dict(pin.pending_definition),
        first_seen=pin.first_seen,
        changed_at=pin.changed_at,
        reordered_at=pin.reordered_at,
        reorders=pin.reorders,
        diff=diff,
        word_diff=words,
    )


@API.operation(
    "GET",
    f"{PREFIX}/pins",
    summary="List pinned tool definitions",
    tags=("pins",),
    query=PinQuery,
    responses={200: ResponseSpec("Pins by server and tool; quarantined ones carry the diff.", PinList)},
)
async def list_pins(ctx: Ctx) -> PinList:
    """A tool whose definition changed since it was first seen is ``quarantined``: hidden from
    the tool lists and the gateway, refused by calls, until its new definition is approved."""
    query = ctx.query_as(PinQuery)
    pins = await service_of(ctx).host.pinned()
    items = [
        pin_out(p)
        for p in pins
        if (query.server is None or p.server == query.server) and (query.state is None or p.state.value == query.state)
    ]
    return PinList(items=items)


@API.operation(
    "POST",
    f"{PREFIX}/pins/{{server}}/{{tool}}/approve",
    role=Role.APPROVER,
    summary="Approve a changed tool definition",
    tags=("pins",),
    responses={200: ResponseSpec("The pin, now holding the new definition.", PinOut)},
)
async def approve_pin(ctx: Ctx) -> PinOut:
    server, tool = ctx.path["server"], ctx.path["tool"]
    host = service_of(ctx).host
    if host.pins is None:
        raise ProblemError(409, "this host does not pin tool definitions")
    if await host.pins.get(server, tool) is None:
        raise ProblemError(404, f"no pinned tool {tool!r} on server {server!r}")
    return pin_out(await host.approve_pin(server, tool, by=_decider(ctx)))
