"""The first exchange with a server: its transport, the revisions it accepts, and what that
exchange already proves wrong.

Theory of operation: for a URL whose transport is not given, :func:`detect_transport` follows the
2026-07-28 backward-compatibility ladder (a POST that gets a JSON-RPC answer means Streamable
HTTP; otherwise a GET whose first event is ``endpoint`` means the 2024-11-05 HTTP+SSE transport).
:func:`probe` then asks, per revision, whether the server accepts it (legacy: ``initialize``
answered with the same version; modern: ``server/discover`` listing it) and what it advertises; a
legacy ``initialize`` answered with another version records that counter-offer.

The probe reads the answer leniently so that a broken handshake is a finding, not "nothing could
be checked": an answer wrapped in a JSON array although the request was sent alone (SV-07 from
2025-06-18, SV-03 before), an answer whose id has another JSON type than the request's (SV-02),
an ``initialize`` result without ``protocolVersion`` (SV-09), and an HTTP+SSE ``endpoint`` event
on another origin (HS-02, a check of this module) each become a :class:`~.model.Violation` of the
probe: the run reports it as that check's failure in that revision, with the probe's exchange as
evidence, and skips the revision's other checks (none of them could open a session), while the
other revisions are checked as usual.

On stdio the probes borrow their processes from the run's pool: a legacy probe that was accepted
finishes the handshake (``notifications/initialized``), so the first check of that revision can
go on with the same process.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import trio

from .context import CLIENT_INFO, META_CAPS, META_INFO, META_VERSION, Context, Target, shown
from .evidence import Redactor, WireRecord, collect, limit_depth, record_of
from .harness import Frame, NoAnswer, WireBase, lone_errors
from .http_harness import EndpointRefused, TargetUnreachable, open_http_wire
from .model import ALL_REVISIONS, Probe, Violation, era_of
from .pace import Pace
from .pool import WirePool
from .registry import check

__all__ = ["detect_transport", "endpoint_origin", "probe"]

_log = logging.getLogger("mcpwire.check.handshake")

SSE_PAGE: Final = "2024-11-05/basic/transports.mdx §HTTP with SSE"
#: a probe that got no answer is tried again, alone, with this many times the wait
RETRY_FACTOR: Final = 3.0


@check(
    id="HS-02",
    title="the HTTP+SSE endpoint event names a URI on the stream's own origin, without userinfo or fragment",
    level="MUST",
    spec=SSE_PAGE,
    quote="When a client connects, the server MUST send an endpoint event containing a URI for the client to use "
    "for sending messages. All subsequent client messages MUST be sent as HTTP POST requests to this endpoint.",
    eras=("legacy",),
    transports=("sse",),
    tags=("http", "sse", "security"),
)
async def endpoint_origin(ctx: Context) -> None:
    # Every official SDK refuses an endpoint on another origin ("Endpoint origin does not match
    # connection origin"), as the page's security warning asks of servers for DNS rebinding: a
    # client that followed it would POST its messages and credentials to a host the server picked.
    try:
        async with ctx.raw():
            return
    except EndpointRefused as exc:
        ctx.fail(str(exc))


def _array_check(revision: str) -> str:
    """The rule an array answer to a single request breaks: no batches from 2025-06-18 (SV-07),
    else the response shape (SV-03: a response is one object with result or error)."""
    return "SV-07" if revision >= "2025-06-18" else "SV-03"


def _loosely(got: Any, rid: Any) -> bool:
    return got == rid or (isinstance(got, int | str | float) and not isinstance(got, bool) and str(got) == str(rid))


async def _answer(wire: WireBase, rid: Any, timeout: float, what: str) -> tuple[dict[str, Any] | None, str]:
    """The response to ``rid``, read leniently: returns ``(answer, "")``, or ``(answer, problem)``
    when it came in an array or with another JSON type of id, or ``(None, why)``.

    The wait is the wire's window for ``timeout`` (the first answer includes the start-up, and
    both grow with what the run observed: :class:`~.pace.Pace`)."""
    first = not wire.heard
    began = trio.current_time()
    timeout = wire.answer_window(timeout)
    deadline = began + timeout
    while True:
        frame: Frame | None = await wire.recv(max(0.0, deadline - trio.current_time()))
        if frame is None:
            return None, f"no answer to {what} within {timeout:g} s"
        if frame.ended is not None:
            if frame.ended[0] == rid:
                return None, f"{frame.ended[1]}: no JSON-RPC answer to {what}"
            continue
        value = frame.value
        if frame.is_response or isinstance(value, list):
            wire.observed(began, first=first)
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict) and "method" not in item and _loosely(item.get("id"), rid):
                    return item, "array"
            continue
        if frame.is_response:
            got = value.get("id")
            if got == rid and type(got) is type(rid):
                return dict(value), ""
            if _loosely(got, rid):
                return dict(value), "id-type"
        elif frame.is_request and wire.responder is not None:
            reply = wire.responder(dict(value))
            if reply is not None:
                await wire.send(reply)


def _problem(revision: str, what: str, rid: Any, answer: dict[str, Any], problem: str) -> tuple[str, str] | None:
    if problem == "array":
        return _array_check(revision), (
            f"{what} (id {shown(rid)}) was sent alone and answered with a JSON array (a batch response)"
        )
    if problem == "id-type":
        got = answer.get("id")
        return "SV-02", (
            f"{what} was sent with id {shown(rid)} ({type(rid).__name__}) and answered with id {shown(got)} "
            f"({type(got).__name__})"
        )
    return None


async def _probe_legacy(wire: WireBase, revision: str, timeout: float) -> Probe:
    rid = wire.new_id()
    params = {"protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO}
    await wire.send({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params})
    answer, problem = await _answer(wire, rid, timeout, "initialize")
    if answer is None:
        return Probe(revision, False, detail=problem)
    result = answer.get("result")
    broken = _problem(revision, "initialize", rid, answer, problem)
    if broken is None and isinstance(result, dict) and "protocolVersion" not in result:
        broken = ("SV-09", f"the initialize result has no protocolVersion: {shown(result, 200)}")
    if broken is not None:
        return Probe(revision, False, detail=broken[1], violation=Violation(*broken), answered=True)
    info = result.get("serverInfo") if isinstance(result, dict) else None
    server_info = limit_depth(dict(info)) if isinstance(info, dict) else {}
    if isinstance(result, dict) and result.get("protocolVersion") == revision:
        capabilities = result.get("capabilities")
        caps = limit_depth(dict(capabilities)) if isinstance(capabilities, dict) else {}
        await wire.notify("notifications/initialized")
        return Probe(revision, True, caps, server_info=server_info, answered=True)
    if isinstance(result, dict):
        offer = result.get("protocolVersion")
        detail = f"initialize {revision} was answered with protocolVersion {shown(offer, 60)}"
        return Probe(revision, False, detail=detail, counter_offer=offer, answered=True)
    return Probe(revision, False, detail=f"initialize answered {shown(answer, 160)}", answered=True)


async def _probe_modern(wire: WireBase, revision: str, timeout: float) -> Probe:
    rid = wire.new_id()
    meta = {META_VERSION: revision, META_CAPS: {}, META_INFO: CLIENT_INFO}
    await wire.send({"jsonrpc": "2.0", "id": rid, "method": "server/discover", "params": {"_meta": meta}})
    answer, problem = await _answer(wire, rid, timeout, "server/discover")
    if answer is None:
        return Probe(revision, False, detail=problem)
    broken = _problem(revision, "server/discover", rid, answer, problem)
    if broken is not None:
        return Probe(revision, False, detail=broken[1], violation=Violation(*broken), answered=True)
    result = answer.get("result")
    versions = result.get("supportedVersions") if isinstance(result, dict) else None
    if isinstance(result, dict) and isinstance(versions, list) and revision in versions:
        meta_out = result.get("_meta")
        info = meta_out.get("io.modelcontextprotocol/serverInfo") if isinstance(meta_out, dict) else None
        capabilities = result.get("capabilities")
        caps = limit_depth(dict(capabilities)) if isinstance(capabilities, dict) else {}
        server_info = limit_depth(dict(info)) if isinstance(info, dict) else {}
        return Probe(revision, True, caps, server_info=server_info, answered=True)
    return Probe(revision, False, detail=f"server/discover answered {shown(answer, 160)}", answered=True)


@asynccontextmanager
async def _http_wire(target: Target, revision: str) -> AsyncIterator[WireBase]:
    assert target.url is not None
    async with open_http_wire(target.url, revision, transport=target.transport, headers=target.headers) as wire:
        yield wire


def _with_evidence(found: Probe, records: Sequence[WireRecord], redactor: Redactor) -> Probe:
    if found.violation is None:
        return found
    entries, http = collect(records, redactor)
    violation = dataclasses.replace(
        found.violation, message=redactor.text(found.violation.message), evidence=tuple(entries), http=tuple(http)
    )
    return dataclasses.replace(found, violation=violation, detail=violation.message)


async def _probe_one(
    target: Target, revision: str, timeout: float, pool: WirePool | None, redactor: Redactor, pace: Pace | None
) -> Probe:
    legacy = era_of(revision) == "legacy"
    if target.transport == "sse" and not legacy:
        # 2026-07-28 defines stdio and Streamable HTTP only
        return Probe(revision, False, detail="the 2024-11-05 HTTP+SSE transport does not carry 2026-07-28")
    if pool is not None:
        lease = await pool.session(revision)
        lease.wire.pace = pace
        found = Probe(revision, False)
        try:
            found = await (_probe_legacy if legacy else _probe_modern)(lease.wire, revision, timeout)
            if found.accepted:
                pool.handshake_done(lease)
        finally:
            record = pool.give_back(lease, clean=found.accepted)
        return _with_evidence(found, [record], redactor)
    try:
        async with _http_wire(target, revision) as wire:
            wire.pace = pace
            try:
                found = await (_probe_legacy if legacy else _probe_modern)(wire, revision, timeout)
            except NoAnswer as exc:
                found = Probe(revision, False, detail=str(exc))
            return _with_evidence(found, [record_of(wire)], redactor)
    except EndpointRefused as exc:
        violation = Violation("HS-02", str(exc))
        records = [WireRecord(exc.exchanges, http=exc.replies)]
        refused = Probe(revision, False, detail=str(exc), violation=violation, answered=True)
        return _with_evidence(refused, records, redactor)


async def probe(
    target: Target,
    revisions: Sequence[str],
    *,
    timeout: float = 5.0,
    pool: WirePool | None = None,
    redactor: Redactor | None = None,
    pace: Pace | None = None,
) -> list[Probe]:
    """Which of ``revisions`` the server accepts, and what the handshake of each already breaks.

    Stdio targets need ``pool`` (the run's processes); without one a pool is made for the probes.
    ``pace`` (the run's, see :mod:`.pace`) sizes the waits and learns the server's start-up; a
    revision that got no answer at all is probed once more, alone, once the others are done (the
    probes side by side are the busiest moment of a run, and no answer is no refusal).

    Raises:
        OSError: the command cannot be started, or the URL cannot be reached.
    """
    redactor = redactor or Redactor()
    if not target.is_http and pool is None:
        with lone_errors():
            async with trio.open_nursery() as nursery:
                own = target.pool(nursery)
                try:
                    return await probe(target, revisions, timeout=timeout, pool=own, redactor=redactor, pace=pace)
                finally:
                    own.close_all()
    probes: dict[str, Probe] = {}

    async def one(revision: str) -> None:
        probes[revision] = await _probe_one(target, revision, timeout, pool, redactor, pace)

    # the first probe alone: a command that cannot start fails once, not five times
    await one(revisions[0])
    async with trio.open_nursery() as nursery:
        for revision in revisions[1:]:
            nursery.start_soon(one, revision)
    for revision in revisions:
        found = probes[revision]
        if not found.answered and found.violation is None and found.detail.startswith("no answer to "):
            # alone now, and with a longer wait: a server that answered nothing yet taught the pace
            # nothing about its start-up
            probes[revision] = await _probe_one(target, revision, timeout * RETRY_FACTOR, pool, redactor, pace)
    return [probes[r] for r in revisions]


async def detect_transport(target: Target, *, timeout: float = 5.0) -> Target:
    """``target`` with ``transport`` resolved when it is ``"auto"`` (2026-07-28 streamable-http
    §Backward Compatibility: POST first; on 400/404/405 without a modern JSON-RPC error body, GET
    and expect an ``endpoint`` event).

    Raises:
        OSError: nothing answers at the URL.
    """
    if not target.is_http or target.transport != "auto":
        return target
    assert target.url is not None
    meta = {META_VERSION: ALL_REVISIONS[0], META_CAPS: {}, META_INFO: CLIENT_INFO}
    initialize = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}
    attempts = (
        (ALL_REVISIONS[0], {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        ("2025-11-25", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}),
    )
    for revision, message in attempts:
        async with open_http_wire(target.url, revision, headers=target.headers) as wire:
            reply = await wire.post(message, timeout=timeout, stop=lambda r: bool(r.messages))
            if any(isinstance(m, dict) and ("result" in m or "error" in m) for m in reply.messages):
                return dataclasses.replace(target, transport="http")
            if reply.status is not None and reply.status in (401, 403):
                return dataclasses.replace(target, transport="http")
    try:
        async with open_http_wire(target.url, "2024-11-05", transport="sse", headers=target.headers):
            return dataclasses.replace(target, transport="sse")
    except EndpointRefused:  # an SSE server all the same: HS-02 reports the endpoint
        return dataclasses.replace(target, transport="sse")
    except TargetUnreachable:
        return dataclasses.replace(target, transport="http")
