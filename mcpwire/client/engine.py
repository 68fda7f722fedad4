"""The request engine: ids, waiters, deadlines, re-sends, cancellation on the wire.

Theory of operation: a call allocates an id in the session's table, sends, and waits on its
waiter under a deadline that progress extends, up to a hard cap (LC-60..LC-62). On timeout or
cancellation the id is abandoned (a late answer is counted and dropped, JR-06) and
``notifications/cancelled`` is sent shielded and bounded (UT-C02), except for ``initialize``
(LC-06) and where closing the response stream is the cancellation (2026-07-28 HTTP, HT-M10).

What became of an attempt decides what happens next, through the one table of
:mod:`mcpwire.protocol.resend`: a lost 2026-07-28 stream is re-issued, an expired legacy session
renewed, a header mismatch relisted, an unsupported revision switched, each within its bound;
anything else is returned or raised. A 2026-07-28 result that asks for input is completed the
same way (:meth:`Engine.complete`): the input requests are answered by the client's handlers
(or by the asker of a request made for another client, :mod:`mcpwire.client.relay`) and the
request is sent again with a new id, echoing ``requestState`` byte for byte (UT-R02..UT-R07).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

import msgspec
import trio
from msgspec import UNSET, UnsetType

from ..errors import (
    InvalidResponse,
    MCPWireError,
    MissingClientCapability,
    RemoteProtocolError,
    RequestTimeout,
    ResponseStreamLost,
    RPCError,
    SessionExpired,
    TransportError,
    UnsupportedVersion,
)
from ..protocol import jsonrpc
from ..protocol.jsonrpc import ErrorResponse, Response
from ..protocol.lifecycle import SessionState
from ..protocol.methods import METHODS
from ..protocol.pending import PendingRequest
from ..protocol.resend import Outcome, Step, next_step
from ..protocol.types import META_LOG_LEVEL, JSONObject
from ..protocol.versions import MODERN_REVISIONS
from .options import ProgressCallback, declared_capabilities
from .relay import Ask, InputRequested, Relay, TaskCreated
from .state import Link
from .values import NotDeclared, printable, progress_from
from .waiters import Deadlines, ProgressSink, Waiter, wait_for_answer
from .wire import headers_for, raise_send_failure

__all__ = ["CANCEL_NOTIFY_TIMEOUT", "MAX_PAGES", "Engine", "decode", "decoder_for"]

T = TypeVar("T")

log = logging.getLogger(__name__)

CANCEL_NOTIFY_TIMEOUT: Final = 1.0
MAX_PAGES: Final = 10_000


class _ResultHead(msgspec.Struct, rename="camel"):
    result_type: str = "complete"
    input_requests: dict[str, Any] | None = None
    request_state: str | UnsetType = UNSET


_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def decoder_for(kind: type[T]) -> msgspec.json.Decoder[T]:
    """The decoder for ``kind``, built once per process."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    return decoder


def decode(raw: msgspec.Raw, kind: type[T], method: str, server: str) -> T:
    """A result decoded into its type.

    Raises:
        InvalidResponse: the result does not have that shape (or is not JSON at all).
    """
    try:
        return decoder_for(kind).decode(raw)
    except jsonrpc.DECODE_ERRORS as exc:  # also invalid UTF-8 and hostile nesting
        raise InvalidResponse(f"server '{server}' answered '{method}' with an invalid result: {exc}") from exc


class Engine:
    """Sends requests and waits for their answers, for one connection.

    Args:
        link: the connection's shared state.
        fulfil: answers an input request (the dispatcher's handlers, or the relay's ``ask``).
        renew_session: opens a new legacy session after the given generation was lost.
        relist_tools: lists the tools again (after a header mismatch).
    """

    def __init__(
        self,
        link: Link,
        *,
        fulfil: Callable[[str, JSONObject, Ask | None], Awaitable[JSONObject]],
        renew_session: Callable[[int], Awaitable[None]],
        relist_tools: Callable[[float | None], Awaitable[object]],
    ) -> None:
        self.link = link
        self.deadlines = Deadlines()
        self._fulfil = fulfil
        self._renew_session = renew_session
        self._relist_tools = relist_tools
        self._clock: trio.abc.Clock | None = None  # the run's clock, fixed for the run (first use)
        #: 2026-07-28: the log level every request carries in ``_meta`` (UT-L03)
        self.log_level: str | None = None

    def is_idempotent(self, request_id: jsonrpc.RequestId) -> bool:
        """Whether the pending request may run twice without harm (the HTTP transport may then
        send it again after a connection broke, RFC 9112 9.3.1)."""
        entry = self.link.session.table.get(request_id)
        info = None if entry is None else METHODS.get(entry.method)
        return info is not None and info.idempotent

    # -- one request ---------------------------------------------------------------------------

    async def answer(
        self,
        method: str,
        params: Mapping[str, object] | None,
        *,
        timeout: float | None,
        on_progress: ProgressCallback | None = None,
        check: bool = True,
        typed_tool: bool = False,
        relay: Relay | None = None,
        deadline: float | None = None,
    ) -> Response:
        """Sends one request and returns its answer, sending it again where :data:`~mcpwire.
        protocol.resend.RESEND` says so. ``typed_tool``: the caller (``call_tool``) accepts a
        :class:`~mcpwire.protocol.session.ToolCallResponse`. ``relay``: the request is another
        client's (:mod:`mcpwire.client.relay`); a 2026-07-28 server gets its round.
        ``deadline``: a hard end on trio's clock that nothing here waits past, progress or not
        (a host's timeout policy); the request is then cancelled as at its own timeout.

        Raises:
            RPCError: an error answer (:class:`MissingClientCapability` for ``-32021``).
            RequestTimeout: no answer in time; the request was cancelled on the wire.

        Cancellation: the request is abandoned and ``notifications/cancelled`` sent (shielded,
        bounded).
        """
        if timeout is not None and not timeout > 0:  # before anything is sent
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        link = self.link
        session = link.session
        limit = link.options.timeout if timeout is None else timeout
        progress = _progress_sink(on_progress)
        counts: dict[Outcome, int] = {}
        clock = self._clock
        if clock is None:
            clock = self._clock = trio.lowlevel.current_clock()
        while True:
            if deadline is not None and clock.current_time() >= deadline:
                raise self._past(method, limit)
            if not link.session_ready.is_set():
                # LC-04 on a renewed session: "the client SHOULD NOT send requests other than pings
                # before the server has responded to the initialize request".
                ready_by = trio.current_time() + link.options.connect_timeout
                with trio.move_on_at(ready_by if deadline is None else min(ready_by, deadline)):
                    await link.session_ready.wait()
            if link.lost is not None:
                raise link.gone_error()
            generation = link.legacy.generation if link.legacy is not None else 0
            sent = params
            modern = session.revision is not None and session.revision.modern
            if self.log_level is not None and modern:
                sent = _with_log_level(params, self.log_level)
            relayed = relay.round if relay is not None and modern else None
            if relayed is not None:  # another client's round, relayed (mcpwire.client.relay)
                sent = {**(sent or {}), **relayed.params}
            transport = link.transport
            headers = headers_for(link, method, sent) if transport is not None and transport.wants_headers else None
            waiter = Waiter(progress=[] if on_progress is not None else None)
            waiter.typed_tool = typed_tool
            entry, payload = session.prepare_request(
                method,
                sent,
                waiter,
                check=check,
                progress=on_progress is not None,
                meta=relayed.meta if relayed is not None else None,
            )
            try:
                # wire.send(), inlined: one coroutine less on every call
                if transport is None or link.lost is not None:
                    raise link.gone_error()
                try:
                    send_by = clock.current_time() + limit
                    await transport.send(
                        payload,
                        request_id=entry.id,
                        headers=headers,
                        deadline=send_by if deadline is None else min(send_by, deadline),
                    )
                except TransportError as exc:
                    raise_send_failure(link, exc, entry.id)
            except BaseException as exc:
                issued = not (transport is None or transport.atomic_send or isinstance(exc, MCPWireError))
                if session.table.abandon(entry.id) is not None and issued:
                    await self.cancel_on_wire(entry, exc)  # UT-C01: only what may have reached the server
                raise
            link.counters.requests_sent += 1
            outcome = await self._wait(entry, limit, progress, deadline)
            kind = _outcome(outcome, method, session.revision is not None and session.revision.modern)
            step = next_step(kind, counts)
            if step is Step.RETURN:
                assert isinstance(outcome, Response)
                return outcome
            if step is Step.RAISE:
                raise self._failure(outcome, method, entry.id)
            if step is Step.REISSUE:
                log.info("%s: the response stream of '%s' (id %s) broke; re-issuing it", link.label, method, entry.id)
            elif step is Step.RENEW_SESSION:
                with trio.move_on_at(math.inf if deadline is None else deadline):
                    await self._renew_session(generation)
            elif step is Step.RELIST_TOOLS:
                with trio.move_on_at(math.inf if deadline is None else deadline):
                    await self._relist_tools(timeout)
            elif step is Step.SWITCH_REVISION:
                assert isinstance(outcome, ErrorResponse)
                self._switch_revision(outcome, method, entry.id)

    async def _wait(
        self, entry: PendingRequest[Waiter], limit: float, progress: ProgressSink, deadline: float | None = None
    ) -> Response | ErrorResponse | BaseException:
        clock = self._clock
        if clock is None:
            clock = self._clock = trio.lowlevel.current_clock()
        try:
            return await wait_for_answer(
                entry,
                limit=limit,
                hard_limit=self.link.options.max_timeout,
                hard_deadline=deadline,
                deadlines=self.deadlines,
                nursery=self.link.nursery,
                clock=clock,
                progress=progress,
                server=self.link.label,
            )
        except BaseException as exc:
            if self.link.session.table.abandon(entry.id) is not None:
                await self.cancel_on_wire(entry, exc)
            raise

    def _past(self, method: str, limit: float) -> RequestTimeout:
        """The error of a request whose caller's deadline passed before it was sent (again)."""
        return RequestTimeout(
            f"'{method}' to server '{self.link.label}' ran out of time: its caller's deadline passed "
            "before it was sent",
            method=method,
            server=self.link.label,
            timeout=limit,
        )

    def _failure(
        self, outcome: Response | ErrorResponse | BaseException, method: str, request_id: jsonrpc.RequestId
    ) -> BaseException:
        """The error a request's last attempt ends with."""
        if isinstance(outcome, ErrorResponse):
            revision = self.link.session.revision
            if outcome.code == -32022 and revision is not None and revision.modern:
                return self._unsupported(outcome, method, request_id)
            kind = MissingClientCapability if outcome.code == -32021 else RPCError
            return kind(
                outcome.code,
                outcome.message,
                outcome.data_value(),
                method=method,
                server=self.link.label,
                request_id=request_id,
            )
        assert isinstance(outcome, BaseException)
        return outcome

    def _switch_revision(self, refusal: ErrorResponse, method: str, request_id: jsonrpc.RequestId) -> None:
        """After a ``-32022`` refusal: switches to the newest 2026-07-28-era revision both sides
        support (the same one when the server lists it: a deployment in the middle of an upgrade
        may refuse it once).

        Raises:
            UnsupportedVersion: nothing in ``data.supported`` is spoken by mcpwire in this era.
        """
        link = self.link
        session = link.session
        common = [v for v in MODERN_REVISIONS if v in _supported(refusal)]
        if not common:
            raise self._unsupported(refusal, method, request_id)
        current = session.revision.version if session.revision is not None else None
        version = common[0]
        if version != current and session.state is SessionState.READY:
            log.info("%s: the server refused revision %s; switching to %s", link.label, current, version)
            session.capabilities = declared_capabilities(link.options, version)
            session.established(version, session.server_capabilities, session.server_info, session.instructions)
            if link.transport is not None:
                link.transport.negotiated(version, True)

    def _unsupported(self, refusal: ErrorResponse, method: str, request_id: jsonrpc.RequestId) -> UnsupportedVersion:
        """The error for a ``-32022`` refusal that no switch mends: nothing in common, or a
        refusal again after one switch. It names both lists."""
        link = self.link
        current = link.session.revision.version if link.session.revision is not None else "?"
        offered = _supported(refusal)
        common = [v for v in MODERN_REVISIONS if v in offered]
        data = refusal.data_value()
        error = UnsupportedVersion(
            f"server '{link.label}' refused protocol version {current} for '{method}' (id {request_id}) "
            f"with error -32022 ({printable(refusal.message)}){' again after one retry' if common else ''}; "
            f"it supports {', '.join(printable(v, 40) for v in offered) or 'no version it named'} and mcpwire "
            f"speaks {', '.join(MODERN_REVISIONS)} on this connection"
            + ("" if common else ": no version in common (a legacy revision needs a new connection)"),
            offered=offered,
        )
        error.__cause__ = RPCError(
            refusal.code, refusal.message, data, method=method, server=link.label, request_id=request_id
        )
        return error

    async def cancel_on_wire(self, entry: PendingRequest[Waiter], exc: BaseException) -> None:
        """UT-C02: tell the server we stopped waiting. Never for initialize (LC-06)."""
        link = self.link
        transport = link.transport
        if entry.method == "initialize" or link.lost is not None or transport is None:
            return
        reason = "timeout" if isinstance(exc, RequestTimeout) else "cancelled by the client"
        payload = link.session.encode_notification("notifications/cancelled", {"requestId": entry.id, "reason": reason})
        with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_NOTIFY_TIMEOUT):
            try:
                if await transport.cancel(entry.id):
                    return  # 2026-07-28 HTTP: closing the stream is the cancellation (HT-M10)
                await transport.send(payload, headers=headers_for(link, "notifications/cancelled", None))
            except MCPWireError:
                pass

    # -- results -------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, object] | None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        check: bool = True,
        relay: Relay | None = None,
    ) -> msgspec.Raw:
        """A request, with 2026-07-28 input rounds handled (MRTR)."""
        answer = await self.answer(method, params, timeout=timeout, on_progress=on_progress, check=check, relay=relay)
        return await self.complete(
            method, params, answer.result, timeout=timeout, on_progress=on_progress, check=check, relay=relay
        )

    async def complete(
        self,
        method: str,
        params: Mapping[str, object] | None,
        raw: msgspec.Raw,
        *,
        timeout: float | None,
        on_progress: ProgressCallback | None,
        check: bool,
        relay: Relay | None = None,
    ) -> msgspec.Raw:
        """The answer ``raw`` to ``method``, followed through 2026-07-28 input rounds (MRTR) to
        a complete result; legacy answers are returned as they are.

        Raises:
            RelayedAnswer: a relayed round was answered with a result its asker follows
                (:class:`InputRequested`, :class:`TaskCreated`; see :mod:`mcpwire.client.relay`).
        """
        link = self.link
        revision = link.session.revision
        if revision is None or not revision.modern:
            return raw
        head = decode(raw, _ResultHead, method, link.label)
        counts: dict[Outcome, int] = {}
        rounds = link.options.max_input_rounds
        relayed = relay is not None and relay.round is not None
        ask = relay.ask if relay is not None else None
        if relayed and head.result_type == "task" and method == "tools/call":
            # SEP-2663: the asker declared the tasks extension (its capabilities are the round's);
            # the task is its to poll. Only tools/call may create one (CF-T21).
            raise TaskCreated(_result_object(raw), method=method, server=link.label)
        while head.result_type == "input_required":
            if relayed:  # the relaying proxy's client answers it
                raise InputRequested(_result_object(raw), method=method, server=link.label)
            info = METHODS.get(method)
            if info is not None and not info.input_required:
                raise InvalidResponse(
                    f"server '{link.label}' answered '{method}' with input_required, which only "
                    "tools/call, resources/read and prompts/get may return (UT-R01)"
                )
            if next_step(Outcome.INPUT_REQUIRED, counts, input_rounds=rounds) is not Step.FULFIL_INPUT:
                raise InvalidResponse(f"server '{link.label}' asked for input more than {rounds} times for '{method}'")
            retry: dict[str, object] = dict(params or {})
            if head.input_requests:
                retry["inputResponses"] = await self._input_responses(method, head.input_requests, ask)
            if not isinstance(head.request_state, UnsetType):
                retry["requestState"] = head.request_state  # UT-R03: echoed exactly
            if not head.input_requests and isinstance(head.request_state, UnsetType):
                raise InvalidResponse(
                    f"server '{link.label}' answered '{method}' with input_required but neither "
                    "inputRequests nor requestState"
                )
            again = await self.answer(method, retry, timeout=timeout, on_progress=on_progress, check=check, relay=relay)
            raw = again.result
            head = decode(raw, _ResultHead, method, link.label)
        if head.result_type != "complete":
            # JR-10: "A resultType of any value unrecognized by the client MUST be considered invalid."
            raise InvalidResponse(
                f"server '{link.label}' answered '{method}' with unknown resultType {head.result_type!r}"
            )
        return raw

    async def _input_responses(self, method: str, requests: dict[str, Any], ask: Ask | None) -> JSONObject:
        label = self.link.label
        responses: JSONObject = {}
        for key, item in requests.items():
            inner = item.get("method") if isinstance(item, dict) else None
            inner_params = item.get("params") if isinstance(item, dict) else None
            if not isinstance(inner, str):
                raise InvalidResponse(f"server '{label}': input request {key!r} for '{method}' has no method")
            try:
                responses[key] = await self._fulfil(inner, inner_params if isinstance(inner_params, dict) else {}, ask)
            except NotDeclared as exc:
                # UT-R09: the server asked for a capability this client did not declare.
                raise RemoteProtocolError(
                    f"server '{label}' asked for '{inner}' during '{method}', a capability "
                    "this client did not declare; configure a handler for it"
                ) from exc
        return responses

    async def pages(self, method: str, kind: type[Any], key: str, timeout: float | None) -> list[Any]:
        """Follows ``nextCursor`` to the end, refusing cycles (UT-N01..UT-N07), bounded in
        items and bytes (a server cannot make one listing hold 10,000 pages in memory)."""
        link = self.link
        options = link.options
        items: list[Any] = []
        seen: set[str] = set()
        cursor: str | None = None
        modern = link.session.revision is not None and link.session.revision.modern
        size = 0
        for _ in range(MAX_PAGES):
            params = {"cursor": cursor} if cursor is not None else None
            raw = await self.request(method, params, timeout=timeout)
            size += len(raw)
            if size > options.max_list_bytes:
                raise RemoteProtocolError(
                    f"server '{link.label}' returned more than {options.max_list_bytes} bytes while paginating "
                    f"'{method}' (page {len(seen) + 1}); raise max_list_bytes if it legitimately lists that much"
                )
            page = decode(raw, kind, method, link.label)
            items.extend(getattr(page, key))
            if len(items) > options.max_list_items:
                raise RemoteProtocolError(
                    f"server '{link.label}' returned more than {options.max_list_items} items while paginating "
                    f"'{method}' (page {len(seen) + 1}); raise max_list_items if it legitimately lists that many"
                )
            cursor = page.next_cursor
            # 2026-07-28 pagination: "an empty string is a valid cursor" (UT-N02); legacy
            # servers that send "" mean the end.
            if cursor is None or (cursor == "" and not modern):
                return items
            if cursor in seen:
                raise RemoteProtocolError(
                    f"server '{link.label}' repeated the cursor {cursor!r} while paginating '{method}' (a cycle)"
                )
            seen.add(cursor)
        raise RemoteProtocolError(f"server '{link.label}' returned more than {MAX_PAGES} pages for '{method}'")


def _result_object(raw: msgspec.Raw) -> dict[str, object]:
    """A result already decoded as a result head, as a JSON object."""
    result = jsonrpc.decode_json(raw)
    assert isinstance(result, dict)  # decoded as a result head before
    return result


def _outcome(outcome: Response | ErrorResponse | BaseException, method: str, modern: bool) -> Outcome:
    """What an attempt's outcome is for :func:`~mcpwire.protocol.resend.next_step`."""
    if isinstance(outcome, Response):
        return Outcome.ANSWERED
    if isinstance(outcome, ErrorResponse):
        if outcome.code == -32020 and method == "tools/call":
            return Outcome.HEADER_MISMATCH
        if outcome.code == -32022 and modern:
            return Outcome.UNSUPPORTED_REVISION
        return Outcome.FAILED
    if isinstance(outcome, ResponseStreamLost):
        return Outcome.STREAM_LOST
    if isinstance(outcome, SessionExpired):
        return Outcome.SESSION_EXPIRED
    return Outcome.FAILED


def _supported(refusal: ErrorResponse) -> list[str]:
    """The revisions a ``-32022`` refusal lists in ``data.supported``."""
    data = refusal.data_value()
    listed = data.get("supported") if isinstance(data, dict) else None
    return [v for v in listed if isinstance(v, str)] if isinstance(listed, list) else []


def _with_log_level(params: Mapping[str, object] | None, level: str) -> dict[str, object]:
    out = dict(params or {})
    meta = out.get("_meta")
    merged: dict[str, object] = dict(meta) if isinstance(meta, Mapping) else {}
    merged[META_LOG_LEVEL] = level
    out["_meta"] = merged
    return out


def _progress_sink(on_progress: ProgressCallback | None) -> ProgressSink:
    if on_progress is None:
        return None

    async def deliver(items: list[JSONObject]) -> None:
        for item in items:
            result = on_progress(progress_from(item))
            if inspect.isawaitable(result):
                await result

    return deliver
