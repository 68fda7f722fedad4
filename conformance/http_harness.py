"""The raw HTTP wire under the checks: Streamable HTTP (both eras) and the 2024-11-05 HTTP+SSE.

Theory of operation: :func:`open_http_wire` gives a check an :class:`HttpWire` with the same
surface as the stdio :class:`~conformance.harness.Wire` (``send``, ``request``, ``recv``,
``frames``) plus raw verbs (:meth:`HttpWire.post`, :meth:`HttpWire.get`,
:meth:`HttpWire.delete`) that return the whole :class:`HttpReply`: status, headers, body bytes
and SSE events, exactly as they came. ``send`` POSTs one message in a task of the wire's nursery
and returns once the response headers are in (so the server has the message before the next
one is sent); the JSON body or each SSE ``message`` event becomes a frame. The wire adds the
headers of the revision under test by itself, unless a check overrides them: the session id and
``MCP-Protocol-Version`` learnt from ``initialize`` (legacy), and ``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` (2026-07-28; the ``x-mcp-header`` annotations are
learnt from ``tools/list`` answers). With ``transport="sse"`` it opens the GET stream, waits for the
``endpoint`` event, POSTs every message there and reads every answer from the stream.

A legacy Streamable HTTP POST whose SSE stream the server closes before the response (2025-11-25
basic/transports: "the server MAY close the connection ... at any time"; the client "SHOULD then
'poll' the SSE stream by attempting to reconnect") is resumed the way a client must: after the
stream's ``retry`` delay ("The client MUST respect the retry field"), GET with ``Last-Event-ID`` set
to the last event id seen; the resumed stream's messages become frames, so a check waiting for the
response gets it. The POST's :class:`HttpReply` keeps what came on it, so the checks can still see
that the stream was closed early.

A 429 Too Many Requests is the server's rate limit, not its answer: every request (the raw verbs,
the background POSTs of ``send``, resumption GETs, the HTTP+SSE stream) waits it out and is sent
again through :func:`.ratelimit.send_patiently`, bounded in attempts, per wait, in all and by the
deadline of the caller; a raw verb's read window moves on by the waits. Each 429 is kept with the
exchange (``rate_limited`` in :meth:`HttpReply.to_dict`) and noted in the exchanges, so a report shows
that the request was rate-limited and resent; a 429 the checker stopped waiting out is the answer.

Leaving the block cancels open streams and closes the client; with ``delete_session`` it first
DELETEs a legacy session (2025-11-25 transports: "Clients that no longer need a particular session
... SHOULD send an HTTP DELETE"; the checks leave that to SV-24c: a DELETE per check doubles the
traffic of short checks).
Over HTTP+SSE the ``endpoint`` event is resolved against the stream's URL and refused unless it is
on the same origin (scheme, host and port) with no userinfo and no fragment, as the client does
(:mod:`mcpwire.actors.legacy_sse`) and every official SDK does: otherwise a server could have the
checker POST every message, with the user's ``--header`` credentials, to a host of its choosing.
:func:`open_http_wire` then raises :class:`EndpointRefused` and nothing is sent there (the runner
reports it as the failed check HS-02).

Every HTTP exchange is kept for the report as it happened (the evidence collector redacts it); what
a wire keeps is bounded (:class:`~.bounded.BoundedLog`) whatever the server sends, and frames wait
for the check in a bounded queue: a background POST whose stream outruns the check pauses reading
(TCP pushes back on the server), a foreground one keeps reading and counts what it could not queue.
``httpx`` is imported lazily: stdio checks never need it.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import trio

from .bounded import BoundedLog
from .harness import (
    MAX_QUEUED_FRAMES,
    Exchange,
    Frame,
    WireBase,
    lone_errors,
    new_exchanges,
    new_frames,
    new_sent,
    recorded,
)
from .ratelimit import RateLimited, send_patiently
from .sse import SseEvent, SseParser

if TYPE_CHECKING:
    import httpx

__all__ = [
    "EndpointRefused",
    "HttpReply",
    "HttpWire",
    "SseEvent",
    "TargetUnreachable",
    "encode_header_value",
    "endpoint_problem",
    "id_key",
    "open_http_wire",
]

_log = logging.getLogger("mcpwire.check.http")

MODERN: Final = "2026-07-28"
META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
MAX_BODY_SHOWN: Final = 2000
MAX_READ_BYTES: Final = 16 * 1024 * 1024
#: GETs with Last-Event-ID tried for one request whose stream closed before its response
MAX_RESUMES: Final = 3
#: the longest ``retry`` delay honoured before resuming (seconds); a longer one is cut to this
MAX_RETRY_WAIT_S: Final = 5.0
#: what one wire keeps: replies (first and last, and their bodies' bytes), and per reply its SSE
#: events and JSON-RPC messages (first and last)
KEEP_REPLIES: Final = 500
MAX_REPLY_BYTES_KEPT: Final = 64 * 1024 * 1024
KEEP_EVENTS: Final = 1000
_SAFE_VALUE = re.compile(r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$")
_SENTINEL = re.compile(r"^=\?base64\?.*\?=$", re.S)


class TargetUnreachable(OSError):
    """The HTTP target cannot be reached at all (connection refused, DNS, TLS)."""


class EndpointRefused(Exception):
    """The HTTP+SSE ``endpoint`` event named a URI the checker will not POST to (HS-02).

    ``endpoint`` is the URI as resolved (it may carry credentials: show it redacted), ``reason``
    says what is wrong with it.
    """

    def __init__(self, url: str, endpoint: str, reason: str) -> None:
        super().__init__(f"the SSE stream at {url} named a POST endpoint {reason}; nothing was sent there")
        self.url = url
        self.endpoint = endpoint
        self.reason = reason
        #: what the wire recorded until it refused (the evidence)
        self.exchanges: list[Exchange] = []
        self.replies: list[dict[str, Any]] = []


def endpoint_problem(stream_url: str, endpoint: str) -> str | None:
    """Why the resolved ``endpoint`` may not receive our POSTs, or None when it may.

    2024-11-05 basic/transports §HTTP with SSE: "All subsequent client messages MUST be sent as HTTP
    POST requests to this endpoint"; the origin rule is the clients' own (HS-02), grounded in the
    same page's warning: "attackers could use DNS rebinding to interact with local MCP servers".
    """
    try:
        base = urllib.parse.urlsplit(stream_url)
        target = urllib.parse.urlsplit(endpoint)
        base_port, target_port = base.port, target.port
    except ValueError:
        return "that is not a valid URL"

    def origin(parts: urllib.parse.SplitResult, port: int | None) -> tuple[str, str, int | None]:
        default = {"http": 80, "https": 443}.get(parts.scheme.lower())
        return (parts.scheme.lower(), (parts.hostname or "").lower(), port if port is not None else default)

    if origin(target, target_port) != origin(base, base_port):
        scheme, host, port = origin(target, target_port)
        return f"on another origin ({scheme}://{host}:{port})"
    if target.username is not None or target.password is not None or "@" in target.netloc:
        return "with userinfo (user:password@)"
    if target.fragment or endpoint.endswith("#"):
        return "with a fragment"
    return None


@dataclass(slots=True)
class HttpReply:
    """One HTTP exchange: what was sent and, as it came, what came back (SSE events and messages:
    the first and the last :data:`KEEP_EVENTS` of each)."""

    number: int
    method: str
    url: str
    request_headers: dict[str, str]
    request_body: bytes = b""
    status: int | None = None
    #: lower-cased names; repeated headers joined with ", "
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    events: BoundedLog[SseEvent] = field(default_factory=lambda: BoundedLog(head=KEEP_EVENTS, tail=KEEP_EVENTS))
    #: JSON-RPC messages in the body or in the SSE ``message`` events, in order
    messages: BoundedLog[Any] = field(default_factory=lambda: BoundedLog(head=KEEP_EVENTS, tail=KEEP_EVENTS))
    #: ids of the responses seen (as :func:`id_key`), kept whole: a response is never forgotten
    answered: set[tuple[str, str]] = field(default_factory=set)
    #: SSE comment lines seen (keep-alives)
    comments: int = 0
    #: the body ended (False when the wire stopped reading first)
    complete: bool = False
    error: str | None = None
    #: every 429 Too Many Requests answer to this request, in order (see :mod:`.ratelimit`)
    rate_limited: list[RateLimited] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.method}#{self.number}"

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def is_sse(self) -> bool:
        return self.content_type == "text/event-stream"

    def json(self) -> Any:
        """The body decoded as JSON, or None."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None

    def add_message(self, message: Any) -> None:
        """Record a JSON value that came on this exchange (a batch: each of its items)."""
        for item in message if isinstance(message, list) else [message]:
            self.messages.append(item)
            if isinstance(item, dict) and "method" not in item and ("result" in item or "error" in item):
                key = id_key(item.get("id"))
                if key is not None:
                    self.answered.add(key)

    def answers(self, rid: Any) -> bool:
        """Whether the response to ``rid`` came on this exchange."""
        key = id_key(rid)
        return key is not None and key in self.answered

    def to_dict(self) -> dict[str, Any]:
        """The exchange for reports, as it happened (not redacted: see :mod:`.evidence`), long
        bodies cut."""
        return {
            "method": self.method,
            "url": self.url,
            "request_headers": dict(self.request_headers),
            "request_body": _shown(self.request_body),
            "status": self.status,
            "response_headers": dict(self.headers),
            "content_type": self.content_type,
            "body": "" if self.is_sse else _shown(self.body),
            "events": [
                {"event": e.event, "id": e.id, "retry": e.retry, "data": e.data[:MAX_BODY_SHOWN]} for e in self.events
            ],
            "complete": self.complete,
            "error": self.error,
            **({"rate_limited": [r.to_dict() for r in self.rate_limited]} if self.rate_limited else {}),
        }


def id_key(rid: Any) -> tuple[str, str] | None:
    """A hashable key for a JSON-RPC id that keeps its JSON type (1 and "1" differ)."""
    if isinstance(rid, bool) or not (rid is None or isinstance(rid, int | str | float)):
        return None
    return (type(rid).__name__, repr(rid))


def _shown(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= MAX_BODY_SHOWN else text[:MAX_BODY_SHOWN] + f"...({len(text)} chars)"


def encode_header_value(value: str) -> str:
    """2026-07-28 streamable-http §Value Encoding: plain when safe, else the base64 sentinel."""
    if _SAFE_VALUE.match(value) and not _SENTINEL.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def _header_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


@dataclass(slots=True, eq=False)
class HttpWire(WireBase):
    """A raw connection to one MCP endpoint (a session for the legacy era)."""

    url: str
    revision: str
    client: httpx.AsyncClient
    nursery: trio.Nursery
    extra_headers: dict[str, str]
    started: float
    transport: str = "http"
    exchanges: BoundedLog[Exchange] = field(default_factory=new_exchanges)
    frames: BoundedLog[Frame] = field(default_factory=new_frames)
    sent: BoundedLog[Any] = field(default_factory=new_sent)
    replies: BoundedLog[HttpReply] = field(
        default_factory=lambda: BoundedLog(
            head=KEEP_REPLIES, tail=KEEP_REPLIES, max_bytes=MAX_REPLY_BYTES_KEPT, size=_reply_size
        )
    )
    session_id: str | None = None
    negotiated: str | None = None
    #: tool name -> {argument: header name} from x-mcp-header annotations
    param_headers: dict[str, dict[str, str]] = field(default_factory=dict)
    #: 2024-11-05 HTTP+SSE: where messages are POSTed
    endpoint: str | None = None
    #: 2024-11-05 HTTP+SSE: the endpoint event refused (see :func:`endpoint_problem`)
    refused: EndpointRefused | None = None
    stream_closed: bool = False
    #: frames a foreground exchange could not queue (the check reads its reply instead)
    unqueued: int = 0
    _send: trio.MemorySendChannel[Frame] | None = None
    _receive: trio.MemoryReceiveChannel[Frame] | None = None
    _next_id: int = 0
    _numbers: int = 0

    @property
    def era(self) -> str:
        return "modern" if self.revision >= MODERN else "legacy"

    # -- headers ---------------------------------------------------------------------------------

    def headers_for(self, message: Any) -> dict[str, str]:
        """The headers this wire sends with ``message`` by default."""
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        headers.update(self.extra_headers)
        if self.transport == "sse":
            return headers
        method = message.get("method") if isinstance(message, dict) else None
        params = message.get("params") if isinstance(message, dict) else None
        if self.era == "legacy":
            if self.session_id is not None:
                headers["Mcp-Session-Id"] = self.session_id
            version = self.negotiated
            # 2025-11-25 transports §Protocol Version Header: on all requests after initialization
            if version is not None and version >= "2025-06-18" and method != "initialize":
                headers["MCP-Protocol-Version"] = version
            return headers
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(META_VERSION) if isinstance(meta, dict) else None
        headers["MCP-Protocol-Version"] = version if isinstance(version, str) else self.revision
        if isinstance(method, str):
            headers["Mcp-Method"] = method
        key = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(str(method))
        if key is not None and isinstance(params, dict) and isinstance(params.get(key), str):
            headers["Mcp-Name"] = encode_header_value(params[key])
        if method == "tools/call" and isinstance(params, dict):
            arguments = params.get("arguments")
            for prop, name in self.param_headers.get(str(params.get("name")), {}).items():
                text = _header_text(arguments.get(prop)) if isinstance(arguments, dict) else None
                if text is not None:
                    headers[f"Mcp-Param-{name}"] = encode_header_value(text)
        return headers

    def _learn(self, message: Any) -> None:
        """Track what later headers depend on: the session and the x-mcp-header annotations."""
        result = message.get("result") if isinstance(message, dict) else None
        if not isinstance(result, dict):
            return
        if isinstance(result.get("protocolVersion"), str) and "capabilities" in result:
            self.negotiated = result["protocolVersion"]
        tools = result.get("tools")
        if isinstance(tools, list):
            for tool in tools:
                schema = tool.get("inputSchema") if isinstance(tool, dict) else None
                properties = schema.get("properties") if isinstance(schema, dict) else None
                if not isinstance(properties, dict):
                    continue
                names = {
                    prop: spec["x-mcp-header"]
                    for prop, spec in properties.items()
                    if isinstance(spec, dict) and isinstance(spec.get("x-mcp-header"), str)
                }
                if names:
                    self.param_headers[str(tool.get("name"))] = names

    # -- sending ---------------------------------------------------------------------------------

    async def send(self, message: Any) -> None:
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        await self._dispatch(body, message, None)

    async def send_bytes(self, data: bytes) -> None:
        """POST raw bytes (e.g. malformed JSON) with this wire's default headers."""
        await self._dispatch(data, None, None)

    async def send_with(self, message: Any, headers: Mapping[str, str | None]) -> None:
        """Like :meth:`send` with header overrides (a None value removes that header)."""
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        await self._dispatch(body, message, headers)

    async def _dispatch(self, body: bytes, message: Any, overrides: Mapping[str, str | None] | None) -> None:
        headers = self._merged(self.headers_for(message), overrides)
        url = self.endpoint if self.transport == "sse" and self.endpoint is not None else self.url
        rid = message.get("id") if isinstance(message, dict) and "method" in message else None
        reply = self._new_reply("POST", url, headers, body)
        if self.transport == "sse":
            await self._exchange(reply, stream_to_frames=False, rid=None, foreground=True)
            return
        # returns once the headers are in: the server has the message before the next is sent
        await self.nursery.start(self._exchange_task, reply, rid)

    def _merged(self, headers: dict[str, str], overrides: Mapping[str, str | None] | None) -> dict[str, str]:
        for name, value in (overrides or {}).items():
            for existing in [k for k in headers if k.lower() == name.lower()]:
                del headers[existing]
            if value is not None:
                headers[name] = value
        return headers

    def _new_reply(self, method: str, url: str, headers: dict[str, str], body: bytes) -> HttpReply:
        self._numbers += 1
        reply = HttpReply(self._numbers, method, url, dict(headers), body)
        self.replies.append(reply)
        if body:
            try:
                self.sent.append(json.loads(body))
            except ValueError:
                pass
        shown = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "accept")}
        path = urllib.parse.urlsplit(url).path or "/"
        text = f"{reply.label} {method} {path} {_shown(body)}".rstrip()
        self.exchanges.append(Exchange(">", recorded(text), self._now(), headers=shown))
        return reply

    async def _exchange_task(self, reply: HttpReply, rid: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await self._exchange(reply, stream_to_frames=True, rid=rid, task_status=task_status, resume=True)

    async def _exchange(
        self,
        reply: HttpReply,
        *,
        stream_to_frames: bool,
        rid: Any,
        stop: Callable[[HttpReply], bool] | None = None,
        foreground: bool = False,
        resume: bool = False,
        window: trio.CancelScope | None = None,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Perform ``reply``'s request and read its answer (until ``stop`` says enough); with
        ``resume``, a stream closed before the answer to ``rid`` is resumed (:meth:`_resume`). A 429
        is waited out and the request sent again (:func:`.ratelimit.send_patiently`, moving
        ``window`` on by each wait); the started task reports once the final answer's headers are in.

        Raises:
            TargetUnreachable: (``foreground`` only) the connection cannot be made at all.
        """
        import httpx

        started = False
        try:
            response = await self._send_patiently(reply, window)
        except httpx.TransportError as exc:
            reply.error = f"{type(exc).__name__}: {exc}"
            self.note(f"{reply.label} failed: {reply.error}")
            task_status.started()
            self._ended(rid, reply)
            if isinstance(exc, httpx.ConnectError) and foreground:
                raise TargetUnreachable(f"cannot reach {reply.url}: {exc}") from exc
            return
        try:
            reply.status = response.status_code
            for key, value in response.headers.multi_items():
                name = key.lower()
                reply.headers[name] = f"{reply.headers[name]}, {value}" if name in reply.headers else value
            session = reply.headers.get("mcp-session-id")
            if session is not None and self.transport == "http" and self.era == "legacy" and self.session_id is None:
                self.session_id = session
            shown = {k: v for k, v in reply.headers.items() if k in _SHOWN_HEADERS}
            self.exchanges.append(Exchange("<", f"{reply.label} {reply.status}", self._now(), headers=shown))
            task_status.started()
            started = True
            parser = SseParser() if reply.is_sse else None
            async for chunk in response.aiter_raw():
                if len(reply.body) < MAX_READ_BYTES:
                    reply.body += chunk
                if parser is not None:
                    for event in parser.feed(chunk):
                        await self._on_event(reply, event, stream_to_frames, block=not foreground)
                    reply.comments = parser.comments
                if stop is not None and stop(reply):
                    break
            else:
                reply.complete = True
            if parser is None and reply.body.strip():
                text = reply.body.decode("utf-8", "replace")
                value = reply.json()
                if value is not None:
                    reply.add_message(value)
                    for item in value if isinstance(value, list) else [value]:
                        self._learn(item)
                if stream_to_frames:
                    await self._push(self._record(text, via=reply.label), block=not foreground)
                else:
                    text = f"{reply.label} body {_shown(reply.body)}"
                    self.exchanges.append(Exchange("<", recorded(text), self._now()))
        except httpx.TransportError as exc:
            reply.error = f"{type(exc).__name__}: {exc}"
            self.note(f"{reply.label} read failed: {reply.error}")
        finally:
            if not started:
                task_status.started()
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await response.aclose()
        answered = rid is None or reply.answers(rid)
        if not answered and not (resume and await self._resume(reply, rid)):
            self._ended(rid, reply)

    async def _send_patiently(self, reply: HttpReply, window: trio.CancelScope | None = None) -> httpx.Response:
        """Send ``reply``'s request (streamed), waiting out 429 answers; each is kept with the reply
        and noted in the exchanges.

        Raises:
            httpx.TransportError: the request could not be sent.
        """

        async def send() -> httpx.Response:
            request = self.client.build_request(
                reply.method, reply.url, headers=reply.request_headers, content=reply.request_body
            )
            return await self.client.send(request, stream=True)

        def limited(answer: RateLimited) -> None:
            reply.rate_limited.append(answer)
            self.exchanges.append(Exchange("<", recorded(answer.line(reply.label)), self._now()))

        return await send_patiently(send, on_limited=limited, window=window)

    async def _resume(self, post: HttpReply, rid: Any) -> bool:
        """Resume the legacy SSE stream of ``post`` until the answer to ``rid`` comes; True if it did.

        2025-11-25 basic/transports §Resumability and Redelivery: "the client SHOULD issue an HTTP
        GET to the MCP endpoint, and include the Last-Event-ID header". Only a stream that gave an
        event id can be resumed; a refused GET (4xx) ends the attempt, a GET that got no HTTP answer
        at all (the server closed the kept-alive connection it came on) is tried again.
        """
        if self.transport != "http" or self.era != "legacy" or post.status != 200 or not post.is_sse:
            return False
        source, last_id, retry = post, None, None
        for _ in range(MAX_RESUMES):
            for event in source.events:
                last_id = event.id if event.id is not None else last_id
                retry = event.retry if event.retry is not None else retry
            if not last_id:
                return False
            if retry is not None:
                await trio.sleep(min(retry / 1000, MAX_RETRY_WAIT_S))
            headers = self._get_headers()
            headers["Last-Event-ID"] = last_id
            reply = self._new_reply("GET", self.url, headers, b"")
            await self._exchange(reply, stream_to_frames=True, rid=None, stop=lambda r: r.answers(rid))
            if reply.answers(rid):
                return True
            if reply.status is None:
                # the pooled connection was the one the server closed: try again on a new one
                continue
            if reply.status != 200 or not reply.is_sse:
                return False
            source = reply
        return False

    async def _on_event(self, reply: HttpReply, event: SseEvent, to_frames: bool, *, block: bool = True) -> None:
        reply.events.append(event)
        meta = f"event: {event.event}" + (f" id: {event.id}" if event.id is not None else "")
        meta += f" retry: {event.retry}" if event.retry is not None else ""
        if event.event != "message" or not event.data:
            self.exchanges.append(Exchange("<", f"{reply.label} {meta} data: {event.data[:400]!r}", self._now()))
            return
        try:
            value = json.loads(event.data)
        except (ValueError, RecursionError):
            value = None
        if value is not None:
            reply.add_message(value)
            self._learn(value)
        if to_frames:
            await self._push(self._record(event.data, via=reply.label), block=block)
        else:
            self.exchanges.append(Exchange("<", f"{reply.label} {meta} data: {event.data[:400]}", self._now()))

    async def _push(self, frame: Frame, *, block: bool) -> None:
        """Queue ``frame`` for the check: waiting while the queue is full when ``block`` (a
        background exchange), else dropping it and counting (the check reads its reply)."""
        if self._send is None:
            return
        try:
            self._send.send_nowait(frame)
        except trio.WouldBlock:
            if block:
                try:
                    await self._send.send(frame)
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    self.unqueued += 1
            else:
                self.unqueued += 1
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self.unqueued += 1

    def _ended(self, rid: Any, reply: HttpReply) -> None:
        if rid is None or self._send is None:
            return
        summary = f"HTTP {reply.status}" if reply.status is not None else f"no HTTP answer ({reply.error})"
        if reply.rate_limited:
            last = reply.rate_limited[-1]
            summary += f" (rate-limited: {len(reply.rate_limited)} times 429" + (
                f", then not resent {last.gave_up})" if last.gave_up is not None else ", then answered)"
            )
        if reply.body and not reply.is_sse:
            summary += f" with body {_shown(reply.body)[:200]!r}"
        try:
            self._send.send_nowait(Frame("", ended=(rid, summary)))
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def _closed_reason(self) -> str | None:
        return "the SSE stream closed" if self.transport == "sse" and self.stream_closed else None

    # -- raw verbs -------------------------------------------------------------------------------

    async def post(
        self,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: Mapping[str, str | None] | None = None,
        timeout: float = 5.0,
        stop: Callable[[HttpReply], bool] | None = None,
        url: str | None = None,
    ) -> HttpReply:
        """POST and read the whole answer (or until ``stop``/``timeout``); frames are recorded too."""
        data = raw if raw is not None else json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        merged = self._merged(self.headers_for(body), headers)
        reply = self._new_reply("POST", url or self.url, merged, data)
        await self._bounded(reply, timeout, stop)
        return reply

    async def get(
        self,
        *,
        headers: Mapping[str, str | None] | None = None,
        timeout: float = 1.0,
        stop: Callable[[HttpReply], bool] | None = None,
        url: str | None = None,
    ) -> HttpReply:
        """GET (the standalone or a resumed SSE stream) and read for at most ``timeout`` s."""
        reply = self._new_reply("GET", url or self.url, self._merged(self._get_headers(), headers), b"")
        await self._bounded(reply, timeout, stop, to_frames=False)
        return reply

    def _get_headers(self) -> dict[str, str]:
        """A GET's default headers: SSE, the session and the negotiated version."""
        base = {"Accept": "text/event-stream", **self.extra_headers}
        if self.session_id is not None:
            base["Mcp-Session-Id"] = self.session_id
        if self.negotiated is not None and self.negotiated >= "2025-06-18":
            base["MCP-Protocol-Version"] = self.negotiated
        return base

    async def delete(self, *, headers: Mapping[str, str | None] | None = None, timeout: float = 5.0) -> HttpReply:
        base = dict(self.extra_headers)
        if self.session_id is not None:
            base["Mcp-Session-Id"] = self.session_id
        if self.negotiated is not None and self.negotiated >= "2025-06-18":
            base["MCP-Protocol-Version"] = self.negotiated
        reply = self._new_reply("DELETE", self.url, self._merged(base, headers), b"")
        await self._bounded(reply, timeout, None, to_frames=False)
        return reply

    async def _bounded(
        self, reply: HttpReply, timeout: float, stop: Callable[[HttpReply], bool] | None, *, to_frames: bool = True
    ) -> None:
        with trio.move_on_after(timeout) as scope:
            await self._exchange(reply, stream_to_frames=to_frames, rid=None, stop=stop, foreground=True, window=scope)
        if scope.cancelled_caught:
            self.note(f"{reply.label}: stopped reading after {timeout:g} s")

    def reply_for(self, rid: Any) -> HttpReply | None:
        """The POST that carried the request ``rid`` (the last one with that id)."""
        for reply in reversed(self.replies):
            if reply.method != "POST":
                continue
            try:
                sent = json.loads(reply.request_body)
            except ValueError:
                continue
            if isinstance(sent, dict) and sent.get("id") == rid and type(sent.get("id")) is type(rid):
                return reply
        return None


_SHOWN_HEADERS: Final = frozenset(
    {"content-type", "mcp-session-id", "www-authenticate", "x-accel-buffering", "allow", "location", "cache-control"}
)


def _reply_size(reply: HttpReply) -> int:
    return len(reply.body) + len(reply.request_body) + 256


async def _read_sse_transport(
    wire: HttpWire, reply: HttpReply, ready: trio.Event, waiting: trio.CancelScope | None = None
) -> None:
    """The 2024-11-05 GET stream: the endpoint event, then every server message (``waiting``: the
    scope that waits for the endpoint, moved on while a 429 is waited out)."""
    import httpx

    try:
        response = await wire._send_patiently(reply, waiting)
    except httpx.ConnectError as exc:
        reply.error = str(exc)
        ready.set()
        return
    except httpx.TransportError as exc:
        reply.error = str(exc)
        ready.set()
        return
    try:
        reply.status = response.status_code
        reply.headers = {k.lower(): v for k, v in response.headers.items()}
        wire.exchanges.append(
            Exchange("<", f"{reply.label} {reply.status} [content-type: {reply.content_type}]", wire._now())
        )
        if response.status_code != 200 or not reply.is_sse:
            ready.set()
            return
        parser = SseParser()
        async for chunk in response.aiter_raw():
            for event in parser.feed(chunk):
                if event.event == "endpoint" and wire.endpoint is None and wire.refused is None:
                    reply.events.append(event)
                    wire.exchanges.append(
                        Exchange("<", recorded(f"{reply.label} event: endpoint data: {event.data}"), wire._now())
                    )
                    endpoint = urllib.parse.urljoin(wire.url, event.data.strip())
                    problem = endpoint_problem(wire.url, endpoint)
                    if problem is None:
                        wire.endpoint = endpoint
                    else:
                        wire.refused = EndpointRefused(wire.url, endpoint, problem)
                        wire.note(f"endpoint refused: {problem}; nothing is sent there")
                        ready.set()
                        return
                    ready.set()
                    continue
                await wire._on_event(reply, event, True)
        reply.complete = True
    except httpx.TransportError as exc:
        reply.error = str(exc)
    finally:
        wire.stream_closed = True
        wire.note("the SSE stream closed")
        ready.set()
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await response.aclose()


_SSL_CONTEXT: list[Any] = []


def _ssl_context() -> Any:
    """One TLS context for every wire: building one costs more than a whole local check."""
    import httpx

    if not _SSL_CONTEXT:
        _SSL_CONTEXT.append(httpx.create_ssl_context())
    return _SSL_CONTEXT[0]


@asynccontextmanager
async def open_http_wire(
    url: str,
    revision: str,
    *,
    transport: str = "http",
    headers: Mapping[str, str] | None = None,
    connect_timeout: float = 5.0,
    delete_session: bool = False,
) -> AsyncIterator[HttpWire]:
    """A fresh HTTP wire to ``url`` for ``revision``; everything it opened is closed on exit.

    Raises:
        TargetUnreachable: nothing answers at ``url`` (or, for HTTP+SSE, no endpoint event).

    Cancellation: closing runs shielded and bounded (a DELETE of at most 2 s).
    """
    import httpx

    timeout = httpx.Timeout(connect=connect_timeout, read=None, write=connect_timeout, pool=connect_timeout)
    client = httpx.AsyncClient(timeout=timeout, follow_redirects=False, verify=_ssl_context())
    send, receive = trio.open_memory_channel[Frame](MAX_QUEUED_FRAMES)
    try:
        with lone_errors():
            async with trio.open_nursery() as nursery:
                wire = HttpWire(
                    url=url,
                    revision=revision,
                    client=client,
                    nursery=nursery,
                    extra_headers=dict(headers or {}),
                    started=time.monotonic(),
                    transport=transport,
                )
                wire._send, wire._receive = send, receive
                try:
                    if transport == "sse":
                        ready = trio.Event()
                        stream = wire._new_reply("GET", url, {"Accept": "text/event-stream", **wire.extra_headers}, b"")
                        waiting = trio.CancelScope(deadline=trio.current_time() + connect_timeout)
                        nursery.start_soon(_read_sse_transport, wire, stream, ready, waiting)
                        with waiting:
                            await ready.wait()
                        if wire.refused is not None:
                            wire.refused.exchanges = list(wire.exchanges)
                            wire.refused.replies = [reply.to_dict() for reply in wire.replies]
                            raise wire.refused
                        if wire.endpoint is None:
                            detail = stream.error or (f"HTTP {stream.status}" if stream.status else "no answer")
                            raise TargetUnreachable(f"no 'endpoint' event from the SSE stream at {url} ({detail})")
                    yield wire
                finally:
                    with trio.CancelScope(shield=True):
                        if delete_session and wire.session_id is not None and wire.transport == "http":
                            with trio.move_on_after(2):
                                await wire.delete()
                    nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()
