"""A configurable fake MCP server over HTTP, for ``httpx.MockTransport``.

Theory of operation: one :class:`FakeMCPServer` plays one kind of server, chosen by ``mode``:

- ``"legacy"``: Streamable HTTP of 2025-03-26 .. 2025-11-25. ``initialize`` opens a session
  (``Mcp-Session-Id``); every later request must carry it (400 without, 404 for an unknown or
  expired one). Requests are answered as one JSON body or as an SSE stream whose events carry
  ids (optionally a priming event with ``retry``, and optionally cut after it so the answer
  only comes back on GET + ``Last-Event-ID``). A standalone GET stream and DELETE are offered
  or refused by switches.
- ``"modern"``: 2026-07-28, stateless. No ``initialize``, no sessions, no GET, no DELETE (405).
  It validates every POST like a strict server (SV-27): ``_meta`` carries the protocol version
  and client capabilities, ``MCP-Protocol-Version`` equals the ``_meta`` version, ``Mcp-Method``
  equals the body's method, ``Mcp-Name`` and every ``Mcp-Param-*`` of a tool's ``x-mcp-header``
  annotations equal the body after base64-sentinel decoding; a mismatch is 400 + ``-32020``, an
  unsupported version 400 + ``-32022`` with ``data.supported``, an unknown method 404 + ``-32601``.
- ``"sse"``: HTTP+SSE of 2024-11-05. GET on the URL opens a stream whose first event is
  ``endpoint``; POSTs to that endpoint answer 202 and the JSON-RPC answers arrive as ``message``
  events on the GET stream. POSTs to the URL itself answer the statuses in ``ladder`` with an
  empty body, which is what the detection ladder (LC-46) meets first.

Every request is recorded (:class:`Recorded`: HTTP method, URL, headers, parsed body, arrival time,
and the status and headers the fake answered), so tests assert exactly what the client sent.
SSE bodies are :class:`SSEStream` objects fed through a trio memory channel: the fake (or a test)
can push events into a stream at any time, end it, or drop it, and can see whether the client
closed it before the server ended it (2026-07-28 cancellation, HT-M10).

Behaviour per method is built in (tools, resources, prompts) and can be replaced per test through
``handlers[method] = callable(params)``; a handler returns a result object, returns or raises
:class:`RpcFault` for a JSON-RPC error, or returns :data:`HANG` to leave the request unanswered on
an open SSE stream. :meth:`FakeMCPServer.inject` queues canned HTTP answers (a 503 once, ...),
:meth:`FakeMCPServer.inject_error` makes the next matching requests raise an ``httpx`` transport
error (recorded, with no status), and ``rewrite`` replaces any answer after the fake handled the
request (a huge body on a 202, ...).
"""

from __future__ import annotations

import base64
import itertools
import json
import math
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
import pytest
import trio

from mcpwire.client import DEFAULT_ERA_CACHE, Client, open_client
from mcpwire.transports import HttpServer

__all__ = [
    "CHALLENGE",
    "ECHO_TOOL",
    "HANG",
    "LEGACY_VERSION",
    "MODERN_VERSION",
    "SSE_VERSION",
    "FakeMCPServer",
    "Recorded",
    "RpcFault",
    "SSEStream",
    "connect",
    "fresh_era_cache",
    "sentinel",
]

LEGACY_VERSION: Final = "2025-11-25"
MODERN_VERSION: Final = "2026-07-28"
SSE_VERSION: Final = "2024-11-05"
META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
RESOURCE_METADATA: Final = "http://mcp.test/.well-known/oauth-protected-resource/mcp"
CHALLENGE: Final = f'Bearer resource_metadata="{RESOURCE_METADATA}"'
SERVER_INFO: Final = {"name": "fake-mcp", "version": "1.0.0"}
CAPABILITIES: Final = {"tools": {"listChanged": True}, "resources": {}, "prompts": {}}
#: 2026-07-28: methods that carry ``Mcp-Name``, and the params field it mirrors (HT-M04).
NAMED_METHODS: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
MODERN_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
    }
)
CACHEABLE: Final = frozenset(
    {"server/discover", "tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list"}
)

ECHO_TOOL: Final[dict[str, Any]] = {
    "name": "echo",
    "description": "Echoes its text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


class _Hang:
    def __repr__(self) -> str:
        return "HANG"


#: Returned by a handler: leave the request unanswered on an open SSE stream.
HANG: Final = _Hang()


class RpcFault(Exception):
    """A JSON-RPC error a handler returns or raises; ``status`` is the HTTP status to use."""

    def __init__(self, code: int, message: str, data: Any = None, *, status: int = 200) -> None:
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message
        self.data = data
        self.status = status

    def error_object(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def sentinel(value: str) -> str:
    """The base64 sentinel form of ``value`` (2026-07-28 §Value Encoding), computed here
    independently of mcpwire."""
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _decode_header(value: str) -> str:
    # A real HTTP parser strips optional white space around a field value, so a value sent
    # raw with leading or trailing spaces arrives without them.
    value = value.strip(" \t")
    if value.startswith("=?base64?") and value.endswith("?="):
        return base64.b64decode(value[len("=?base64?") : -2], validate=True).decode("utf-8")
    return value


def _header_params(schema: Mapping[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """``x-mcp-header`` annotations reachable through a pure ``properties`` chain."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return
    for prop, sub in properties.items():
        if isinstance(sub, Mapping):
            if "x-mcp-header" in sub:
                yield (*path, prop), str(sub["x-mcp-header"])
            yield from _header_params(sub, (*path, prop))


def _value_at(arguments: object, path: tuple[str, ...]) -> object:
    current = arguments
    for key in path:
        if not isinstance(current, Mapping) or key not in current:
            return None
        current = current[key]
    return current


def _as_header_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class Recorded:
    """One HTTP request the client sent, and the status the fake answered."""

    method: str
    url: httpx.URL
    headers: httpx.Headers
    raw: bytes
    body: Any = None
    #: ``trio.current_time()`` when it arrived (virtual under ``autojump_clock``).
    time: float = 0.0
    status: int | None = None
    response_headers: httpx.Headers = field(default_factory=httpx.Headers)

    @property
    def path(self) -> str:
        return self.url.path

    @property
    def rpc_method(self) -> str | None:
        return self.body.get("method") if isinstance(self.body, dict) else None

    @property
    def rpc_id(self) -> int | str | None:
        return self.body.get("id") if isinstance(self.body, dict) else None

    @property
    def params(self) -> dict[str, Any]:
        params = self.body.get("params") if isinstance(self.body, dict) else None
        return params if isinstance(params, dict) else {}

    def header(self, name: str) -> str | None:
        value: str | None = self.headers.get(name)
        return value

    def __repr__(self) -> str:
        what = f" {self.rpc_method}" if self.rpc_method else ""
        return f"<{self.method} {self.path}{what} -> {self.status}>"


class SSEStream(httpx.AsyncByteStream):
    """One SSE response body. Events are pushed through a trio memory channel, so they can be
    written before, while or after the client reads.

    Attributes:
        rpc_method: the JSON-RPC method that opened it (``None`` for GET streams).
        kind: ``"post"``, ``"get"``, ``"resume"`` or ``"sse"`` (2024-11-05).
        ended: the server ended (or dropped) it.
        closed_early: the client closed it before the server ended it.
    """

    def __init__(
        self,
        number: int,
        *,
        rpc_method: str | None,
        kind: str,
        newline: str = "\n",
        keepalive: bool = False,
        multiline: bool = False,
        chunk_size: int | None = None,
    ) -> None:
        self.number = number
        self.rpc_method = rpc_method
        self.kind = kind
        self._newline = newline
        self._keepalive = keepalive
        self._multiline = multiline
        self._chunk_size = chunk_size
        self._send, self._recv = trio.open_memory_channel[bytes | BaseException](math.inf)
        self._seq = itertools.count()
        self._closed = trio.Event()
        self.last_id: str | None = None
        self.ended = False
        self.closed_early = False

    def __repr__(self) -> str:
        return f"<SSEStream #{self.number} {self.kind} {self.rpc_method}>"

    def next_id(self) -> str:
        return f"{self.number}-{next(self._seq)}"

    def event(
        self, data: str = "", *, event: str | None = None, id: str | None = None, retry: int | None = None
    ) -> None:
        """Writes one event; with ``keepalive`` a comment precedes it and one sits inside it."""
        nl = self._newline
        lines: list[str] = []
        if self._keepalive:
            lines += [": keep-alive", ""]
        if event is not None:
            lines.append(f"event: {event}")
        if id is not None:
            lines.append(f"id: {id}")
            self.last_id = id
        if retry is not None:
            lines.append(f"retry: {retry}")
        if self._keepalive:
            lines.append(": still here")
        if data:
            lines += [f"data: {line}" for line in data.split("\n")]
        else:
            lines.append("data:")
        self.push((nl.join(lines) + nl + nl).encode("utf-8"))

    def message(self, message: Mapping[str, Any], *, event: str | None = None, with_id: bool = True) -> None:
        """Writes a JSON-RPC message as an event (multi-line ``data:`` when ``multiline``)."""
        data = json.dumps(message, ensure_ascii=False, indent=1 if self._multiline else None)
        self.event(data, event=event, id=self.next_id() if with_id else None)

    def push(self, raw: bytes) -> None:
        """Writes raw bytes, split into ``chunk_size`` pieces when set."""
        size = self._chunk_size or len(raw) or 1
        for start in range(0, len(raw), size):
            try:
                self._send.send_nowait(raw[start : start + size])
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return

    def end(self) -> None:
        """The server ends the stream (a clean end of the body)."""
        self.ended = True
        self._send.close()

    def drop(self) -> None:
        """The connection breaks mid-stream."""
        self.ended = True
        try:
            self._send.send_nowait(httpx.RemoteProtocolError("peer closed connection without sending complete body"))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        self._send.close()

    async def wait_closed(self) -> None:
        """Waits until the client has closed the body."""
        await self._closed.wait()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for item in self._recv:
            if isinstance(item, BaseException):
                raise item
            yield item

    async def aclose(self) -> None:
        # No checkpoint here: this runs in cancelled scopes too.
        if not self.ended:
            self.closed_early = True
        self._recv.close()
        self._closed.set()


@dataclass
class _Injection:
    status: int
    rpc_method: str | None
    http_method: str
    times: int
    headers: dict[str, str]
    json: Any
    content: bytes
    error: Callable[[httpx.Request], Exception] | None = None

    def matches(self, rec: Recorded) -> bool:
        return rec.method == self.http_method and (self.rpc_method is None or rec.rpc_method == self.rpc_method)


@dataclass
class FakeMCPServer:
    """A fake MCP server; pass :meth:`handle` to ``httpx.MockTransport``.

    Args:
        mode: ``"legacy"`` (Streamable HTTP with sessions), ``"modern"`` (2026-07-28) or ``"sse"``
            (HTTP+SSE 2024-11-05).
        url: the MCP endpoint (for ``"sse"``, the SSE URL).
        answer_as: ``"json"`` or ``"sse"``: how Streamable HTTP requests are answered.
        versions: legacy: revisions ``initialize`` accepts (the first is the fallback answer);
            modern: ``supportedVersions``; sse: the revision ``initialize`` answers.
        get_stream: legacy: ``"sse"`` opens the standalone GET stream, a status refuses it.
        delete_status: legacy: the answer to DELETE.
        notification_status: 202, or 200 with a JSON body (tolerated, HT-L21).
        require_version_header: legacy: 400 unless ``MCP-Protocol-Version`` equals the
            negotiated revision (HT-L08).
        require_token: 401 with :data:`CHALLENGE` unless ``Authorization: Bearer <token>``.
        endpoint: sse: the ``endpoint`` event's data (``{session}`` is replaced); ``None``: no
            ``endpoint`` event is sent (a test sends it).
        ladder: sse: statuses of POSTs to the SSE URL, by JSON-RPC method (else 405).
        priming: SSE answers open with a priming event (id, empty data, ``retry``).
        drop_after_priming: methods whose SSE answer ends right after the priming event; the
            answer is kept for a GET with ``Last-Event-ID`` (HT-L16..HT-L19).
        retry_ms: the ``retry`` field of priming events.
        keepalive: comments before and inside every event.
        multiline: JSON spread over several ``data:`` lines.
        newline: ``"\\n"``, ``"\\r\\n"`` or ``"\\r"``.
        chunk_size: split every write into pieces of this many bytes.
        session_on_errors: legacy: an error answer to a request without a session carries an
            ``Mcp-Session-Id`` the server never keeps (as servers do that mint a session per
            connection attempt and drop it when the request fails).
        sse_content_type: the ``Content-Type`` of SSE answers (HT-05: compared case-insensitively,
            parameters ignored).
        stray_session_header: modern: every answer carries an ``Mcp-Session-Id`` (a dual-era
            deployment or an intermediary); a 2026-07-28 client must not echo it (HT-M16).
        capabilities: the server capabilities ``initialize`` and ``server/discover`` announce.
        rewrite: called with each recorded request and the fake's answer; returns the answer
            to send instead (the request was handled either way).
    """

    mode: str = "legacy"
    url: str = "http://mcp.test/mcp"
    answer_as: str = "json"
    versions: Sequence[str] | None = None
    get_stream: int | str = 405
    delete_status: int = 200
    notification_status: int = 202
    require_version_header: bool = False
    require_token: str | None = None
    endpoint: str | None = "/messages?session_id={session}"
    ladder: Mapping[str, int] = field(default_factory=lambda: {"server/discover": 400, "initialize": 404})
    priming: bool = False
    drop_after_priming: Iterable[str] = ()
    retry_ms: int | None = None
    keepalive: bool = False
    multiline: bool = False
    newline: str = "\n"
    chunk_size: int | None = None
    session_on_errors: bool = False
    sse_content_type: str = "text/event-stream"
    stray_session_header: bool = False
    capabilities: Mapping[str, Any] = field(default_factory=lambda: dict(CAPABILITIES))
    rewrite: Callable[[Recorded, httpx.Response], httpx.Response] | None = None

    tools: list[dict[str, Any]] = field(default_factory=lambda: [dict(ECHO_TOOL)])
    handlers: dict[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list, init=False)
    streams: list[SSEStream] = field(default_factory=list, init=False)
    #: modern: ``(method, reason)`` of every request refused for its headers.
    rejections: list[tuple[str, str]] = field(default_factory=list, init=False)
    #: legacy: live session ids, and the revision each negotiated.
    sessions: dict[str, str] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.mode not in ("legacy", "modern", "sse"):
            raise ValueError(f"unknown mode {self.mode!r}")
        if self.versions is None:
            self.versions = {"legacy": (LEGACY_VERSION,), "modern": (MODERN_VERSION,), "sse": (SSE_VERSION,)}[self.mode]
        self.drop_after_priming = frozenset(self.drop_after_priming)
        self._path = httpx.URL(self.url).path
        self._numbers = itertools.count(1)
        self._injections: list[_Injection] = []
        self._replay: dict[str, list[dict[str, Any]]] = {}
        self._stream_added = trio.Event()
        self._request_added = trio.Event()
        self._sse_sessions: dict[str, SSEStream] = {}

    # -- test-facing helpers -------------------------------------------------------------------

    def inject(
        self,
        status: int,
        *,
        rpc_method: str | None = None,
        http_method: str = "POST",
        times: int = 1,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        content: bytes = b"",
    ) -> None:
        """The next ``times`` matching requests get this canned answer instead."""
        self._injections.append(_Injection(status, rpc_method, http_method, times, dict(headers or {}), json, content))

    def inject_error(
        self,
        error: Callable[[httpx.Request], Exception],
        *,
        rpc_method: str | None = None,
        http_method: str = "POST",
        times: int = 1,
    ) -> None:
        """The next ``times`` matching requests raise ``error(request)`` (an ``httpx`` transport
        error) instead of being answered; they are recorded with no status."""
        self._injections.append(_Injection(0, rpc_method, http_method, times, {}, None, b"", error))

    def expire_sessions(self) -> None:
        """Legacy: the server forgets every session (later requests on them get 404)."""
        self.sessions.clear()

    def sent(self, rpc_method: str | None = None, *, http_method: str | None = None) -> list[Recorded]:
        """Recorded requests, filtered by JSON-RPC method and/or HTTP method."""
        return [
            r
            for r in self.requests
            if (rpc_method is None or r.rpc_method == rpc_method) and (http_method is None or r.method == http_method)
        ]

    def trace(self) -> list[tuple[str, str, str | None, int | None]]:
        """``(HTTP method, path, JSON-RPC method, status)`` of every request, in order."""
        return [(r.method, r.path, r.rpc_method, r.status) for r in self.requests]

    async def wait_for_request(self, predicate: Callable[[Recorded], bool]) -> Recorded:
        """Waits for the first recorded request ``predicate`` accepts."""
        while True:
            for rec in self.requests:
                if predicate(rec):
                    return rec
            await self._request_added.wait()

    async def stream_for(self, rpc_method: str | None, *, kind: str | None = None, index: int = 0) -> SSEStream:
        """Waits for the ``index``-th stream opened for ``rpc_method`` (and ``kind``)."""
        while True:
            found = [s for s in self.streams if s.rpc_method == rpc_method and (kind is None or s.kind == kind)]
            if len(found) > index:
                return found[index]
            await self._stream_added.wait()

    # -- the handler ------------------------------------------------------------------------------

    async def handle(self, request: httpx.Request) -> httpx.Response:
        raw = request.content
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        rec = Recorded(request.method, request.url, httpx.Headers(request.headers), raw, body, trio.current_time())
        self.requests.append(rec)
        self._request_added.set()
        self._request_added = trio.Event()
        for injection in self._injections:
            if injection.error is not None and injection.times > 0 and injection.matches(rec):
                injection.times -= 1
                raise injection.error(request)
        response = self._respond(rec)
        if self.rewrite is not None:
            response = self.rewrite(rec, response)
        rec.status = response.status_code
        rec.response_headers = response.headers
        return response

    def _respond(self, rec: Recorded) -> httpx.Response:
        for injection in self._injections:
            if injection.error is None and injection.times > 0 and injection.matches(rec):
                injection.times -= 1
                if injection.json is not None:
                    return httpx.Response(injection.status, headers=injection.headers, json=injection.json)
                return httpx.Response(injection.status, headers=injection.headers, content=injection.content)
        if self.require_token is not None and rec.header("authorization") != f"Bearer {self.require_token}":
            return httpx.Response(401, headers={"WWW-Authenticate": CHALLENGE}, json={"error": "invalid_token"})
        if self.mode == "sse":
            return self._sse_mode(rec)
        if rec.path != self._path:
            return httpx.Response(404, text="Not Found")
        if self.mode == "modern":
            if rec.method == "POST":
                response = self._post_modern(rec)
            else:
                response = httpx.Response(405, headers={"Allow": "POST"})
            if self.stray_session_header:
                response.headers["Mcp-Session-Id"] = f"stray-{next(self._numbers)}"
            return response
        if rec.method == "POST":
            return self._post_legacy(rec)
        if rec.method == "GET":
            return self._get_legacy(rec)
        if rec.method == "DELETE":
            return self._delete_legacy(rec)
        return httpx.Response(405)

    # -- shared pieces ----------------------------------------------------------------------------

    def _open_stream(self, rpc_method: str | None, kind: str) -> SSEStream:
        stream = SSEStream(
            next(self._numbers),
            rpc_method=rpc_method,
            kind=kind,
            newline=self.newline,
            keepalive=self.keepalive,
            multiline=self.multiline,
            chunk_size=self.chunk_size,
        )
        self.streams.append(stream)
        self._stream_added.set()
        self._stream_added = trio.Event()
        return stream

    def _sse_response(self, stream: SSEStream, headers: Mapping[str, str] | None = None) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"Content-Type": self.sse_content_type, "Cache-Control": "no-cache", **(headers or {})},
            stream=stream,
        )

    @staticmethod
    def _rpc_error(status: int, rpc_id: Any, code: int, message: str, data: Any = None) -> httpx.Response:
        return httpx.Response(
            status, json={"jsonrpc": "2.0", "id": rpc_id, "error": RpcFault(code, message, data).error_object()}
        )

    @staticmethod
    def _accepts_both(rec: Recorded) -> bool:
        accept = rec.header("accept") or ""
        return "application/json" in accept and "text/event-stream" in accept

    def _outcome(self, method: str, params: dict[str, Any]) -> dict[str, Any] | RpcFault | _Hang:
        """The result of one request, a fault, or HANG."""
        handler = self.handlers.get(method)
        try:
            outcome = handler(params) if handler is not None else self.builtin(method, params)
        except RpcFault as fault:
            return fault
        if self.mode == "modern" and isinstance(outcome, dict):
            outcome = {"resultType": "complete", **outcome}
            if method in CACHEABLE:
                outcome = {"ttlMs": 0, "cacheScope": "public", **outcome}
        return outcome

    def builtin(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The built-in answer to ``method`` (for handlers that wrap it); raises
        :class:`RpcFault` for unknown methods and tools."""
        if method == "server/discover":
            return {
                "supportedVersions": list(self.versions or ()),
                "capabilities": self.capabilities,
                "_meta": {META_SERVER_INFO: SERVER_INFO},
            }
        if method == "initialize":  # sse mode; legacy mode answers it in _initialize
            return {
                "protocolVersion": (self.versions or (SSE_VERSION,))[0],
                "capabilities": self.capabilities,
                "serverInfo": SERVER_INFO,
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": self.tools}
        if method == "tools/call":
            name = params.get("name")
            if not any(tool["name"] == name for tool in self.tools):
                raise RpcFault(-32602, f"Unknown tool: {name}")
            arguments = json.dumps(params.get("arguments") or {}, sort_keys=True, ensure_ascii=False)
            return {"content": [{"type": "text", "text": f"{name} {arguments}"}]}
        if method == "resources/list":
            return {"resources": [{"uri": "file:///readme.txt", "name": "readme"}]}
        if method == "resources/templates/list":
            return {"resourceTemplates": []}
        if method == "resources/read":
            uri = params.get("uri")
            return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": f"contents of {uri}"}]}
        if method == "prompts/list":
            return {"prompts": [{"name": "greet", "arguments": [{"name": "who", "required": True}]}]}
        if method == "prompts/get":
            who = (params.get("arguments") or {}).get("who", "")
            return {"messages": [{"role": "user", "content": {"type": "text", "text": f"Hello, {who}"}}]}
        raise RpcFault(-32601, f"Method not found: {method}", status=404 if self.mode == "modern" else 200)

    def _reply(
        self,
        rpc_id: Any,
        method: str,
        params: dict[str, Any],
        outcome: dict[str, Any] | RpcFault | _Hang,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Answers a Streamable HTTP request as JSON or as an SSE stream."""
        if isinstance(outcome, RpcFault):
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "error": outcome.error_object()}
            status = outcome.status
        else:
            message = {"jsonrpc": "2.0", "id": rpc_id, "result": outcome}
            status = 200
        dropped = method in self.drop_after_priming
        if status == 200 and (self.answer_as == "sse" or outcome is HANG or dropped):
            stream = self._open_stream(method, "post")
            resumable = self.mode == "legacy"
            if resumable and (self.priming or dropped):
                stream.event("", id=stream.next_id(), retry=self.retry_ms)
            token = (params.get("_meta") or {}).get("progressToken")
            if token is not None:
                stream.message(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": 1, "total": 2, "message": "half way"},
                    },
                    with_id=resumable,
                )
            if outcome is HANG:
                pass
            elif dropped:
                assert stream.last_id is not None
                self._replay[stream.last_id] = [message]
                stream.end()
            else:
                stream.message(message, with_id=resumable)
                stream.end()
            return self._sse_response(stream, headers)
        return httpx.Response(status, headers=headers, json=message)

    # -- legacy Streamable HTTP ------------------------------------------------------------------

    def _post_legacy(self, rec: Recorded) -> httpx.Response:
        msg = rec.body
        if not isinstance(msg, dict):
            return self._rpc_error(400, None, -32700, "Parse error")
        if not self._accepts_both(rec):
            return self._rpc_error(
                406, None, -32000, "Not Acceptable: Client must accept both application/json and text/event-stream"
            )
        method = msg.get("method")
        sid = rec.header("mcp-session-id")
        if method == "initialize":
            if sid is not None and sid not in self.sessions:
                return self._rpc_error(404, None, -32001, "Not Found: Invalid or expired session ID")
            return self._initialize(msg)
        if sid is None:
            response = self._rpc_error(400, None, -32000, "Bad Request: No valid session ID provided")
            if self.session_on_errors:
                response.headers["Mcp-Session-Id"] = f"orphan-{next(self._numbers)}"
            return response
        if sid not in self.sessions:
            return self._rpc_error(404, None, -32001, "Session not found")
        problem = self._version_problem(rec, sid)
        if problem is not None:
            return self._rpc_error(400, None, -32000, problem)
        if "id" not in msg or not isinstance(method, str):
            return self._acknowledge()
        params = rec.params
        return self._reply(msg["id"], method, params, self._outcome(method, params))

    def _initialize(self, msg: dict[str, Any]) -> httpx.Response:
        params = msg.get("params") or {}
        asked = params.get("protocolVersion")
        versions = tuple(self.versions or ())
        version = asked if asked in versions else versions[0]
        sid = f"session-{next(self._numbers)}"
        self.sessions[sid] = version
        result = {"protocolVersion": version, "capabilities": self.capabilities, "serverInfo": SERVER_INFO}
        return self._reply(msg.get("id"), "initialize", params, result, headers={"Mcp-Session-Id": sid})

    def _version_problem(self, rec: Recorded, sid: str) -> str | None:
        if not self.require_version_header:
            return None
        sent = rec.header("mcp-protocol-version")
        if sent != self.sessions[sid]:
            return f"Bad Request: MCP-Protocol-Version must be {self.sessions[sid]!r}, got {sent!r}"
        return None

    def _acknowledge(self) -> httpx.Response:
        if self.notification_status == 202:
            return httpx.Response(202)
        return httpx.Response(self.notification_status, json={"ok": True})

    def _get_legacy(self, rec: Recorded) -> httpx.Response:
        if "text/event-stream" not in (rec.header("accept") or ""):
            return httpx.Response(406)
        sid = rec.header("mcp-session-id")
        if sid is None:
            return self._rpc_error(400, None, -32000, "Bad Request: No valid session ID provided")
        if sid not in self.sessions:
            return self._rpc_error(404, None, -32001, "Session not found")
        problem = self._version_problem(rec, sid)
        if problem is not None:
            return self._rpc_error(400, None, -32000, problem)
        last = rec.header("last-event-id")
        if last is not None:
            messages = self._replay.pop(last, None)
            if messages is None:
                return httpx.Response(404)
            stream = self._open_stream(None, "resume")
            for message in messages:
                stream.message(message)
            stream.end()
            return self._sse_response(stream)
        if self.get_stream != "sse":
            return httpx.Response(int(self.get_stream))
        return self._sse_response(self._open_stream(None, "get"))

    def _delete_legacy(self, rec: Recorded) -> httpx.Response:
        sid = rec.header("mcp-session-id")
        if sid is None or sid not in self.sessions:
            return httpx.Response(404)
        problem = self._version_problem(rec, sid)
        if problem is not None:
            return self._rpc_error(400, None, -32000, problem)
        if self.delete_status < 300:
            del self.sessions[sid]
        return httpx.Response(self.delete_status)

    # -- 2026-07-28 ------------------------------------------------------------------------------

    def _post_modern(self, rec: Recorded) -> httpx.Response:
        msg = rec.body
        if not isinstance(msg, dict):
            return self._rpc_error(400, None, -32700, "Parse error")
        if not self._accepts_both(rec):
            return self._rpc_error(406, None, -32600, "Not Acceptable")
        if (rec.header("content-type") or "").split(";")[0].strip().lower() != "application/json":
            return httpx.Response(415)
        method, rpc_id = msg.get("method"), msg.get("id")
        if "id" not in msg:
            return httpx.Response(202)  # HT-M02: no client notifications are defined
        if not isinstance(method, str):
            return self._rpc_error(400, rpc_id, -32600, "Invalid Request")
        params = rec.params
        meta = params.get("_meta")
        version = meta.get(META_VERSION) if isinstance(meta, dict) else None
        if not isinstance(version, str) or not isinstance(meta.get(META_CAPABILITIES), dict):  # type: ignore[union-attr]
            return self._rpc_error(
                400, rpc_id, -32602, "Invalid params: _meta needs protocolVersion and clientCapabilities"
            )
        problem = self._header_problem(rec, method, params, version)
        if problem is not None:
            self.rejections.append((method, problem))
            return self._rpc_error(400, rpc_id, -32020, f"Header mismatch: {problem}")
        versions = list(self.versions or ())
        if version not in versions:
            return self._rpc_error(
                400,
                rpc_id,
                -32022,
                "Unsupported protocol version",
                {"supported": versions, "requested": version},
            )
        if method not in MODERN_METHODS and method not in self.handlers:
            return self._rpc_error(404, rpc_id, -32601, f"Method not found: {method}")
        outcome = self._outcome(method, params)
        if isinstance(outcome, RpcFault) and outcome.status != 200:
            return self._rpc_error(outcome.status, rpc_id, outcome.code, outcome.message, outcome.data)
        return self._reply(rpc_id, method, params, outcome)

    def _header_problem(self, rec: Recorded, method: str, params: dict[str, Any], version: str) -> str | None:
        """What a strict 2026-07-28 server finds wrong with the mirrored headers (SV-27)."""
        sent_version = rec.header("mcp-protocol-version")
        if sent_version != version:
            return f"MCP-Protocol-Version is {sent_version!r} but _meta says {version!r}"
        sent_method = rec.header("mcp-method")
        if sent_method != method:
            return f"Mcp-Method is {sent_method!r} but the body's method is {method!r}"
        field_name = NAMED_METHODS.get(method)
        if field_name is not None:
            sent_name = rec.header("mcp-name")
            if sent_name is None:
                return "Mcp-Name is missing"
            if _decode_header(sent_name) != params.get(field_name):
                return f"Mcp-Name {sent_name!r} does not match params.{field_name} {params.get(field_name)!r}"
        if method == "tools/call":
            tool = next((t for t in self.tools if t["name"] == params.get("name")), None)
            schema = tool.get("inputSchema") if tool else None
            if isinstance(schema, Mapping):
                arguments = params.get("arguments") or {}
                for path, name in _header_params(schema):
                    value = _value_at(arguments, path)
                    sent = rec.header(f"mcp-param-{name}")
                    if value is None:
                        if sent is not None:
                            return f"Mcp-Param-{name} is present but the argument is absent"
                        continue
                    if sent is None:
                        return f"Mcp-Param-{name} is missing"
                    if _decode_header(sent) != _as_header_text(value):
                        return f"Mcp-Param-{name} {sent!r} does not match the argument {value!r}"
        return None

    # -- HTTP+SSE 2024-11-05 ----------------------------------------------------------------------

    def _sse_mode(self, rec: Recorded) -> httpx.Response:
        if rec.path == self._path and rec.method == "GET":
            if "text/event-stream" not in (rec.header("accept") or ""):
                return httpx.Response(406)
            session = f"sse-{next(self._numbers)}"
            stream = self._open_stream(None, "sse")
            self._sse_sessions[session] = stream
            if self.endpoint is not None:
                stream.event(self.endpoint.format(session=session), event="endpoint")
            return self._sse_response(stream)
        if rec.path == self._path and rec.method == "POST":
            return httpx.Response(self.ladder.get(rec.rpc_method or "", 405))
        session_stream = self._sse_sessions.get(rec.url.params.get("session_id") or "")
        if rec.method != "POST" or session_stream is None:
            return httpx.Response(404, text="Could not find session")
        stream = session_stream
        msg = rec.body
        if not isinstance(msg, dict):
            return httpx.Response(400, text="Invalid message")
        method = msg.get("method")
        if "id" in msg and isinstance(method, str):
            outcome = self._outcome(method, rec.params)
            if isinstance(outcome, RpcFault):
                stream.message({"jsonrpc": "2.0", "id": msg["id"], "error": outcome.error_object()}, event="message")
            elif isinstance(outcome, dict):
                stream.message({"jsonrpc": "2.0", "id": msg["id"], "result": outcome}, event="message")
        return httpx.Response(202, text="Accepted")


# -- fixtures and helpers -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def fresh_era_cache() -> Iterator[None]:
    """The client remembers eras and HTTP transports per URL for the life of the process
    (LC-44); every test starts and ends with an empty memory. Import it into a test module to
    use it there."""
    DEFAULT_ERA_CACHE.clear()
    yield
    DEFAULT_ERA_CACHE.clear()


@asynccontextmanager
async def connect(fake: FakeMCPServer, spec: HttpServer | str | None = None, **options: Any) -> AsyncIterator[Client]:
    """``open_client`` on ``fake`` through an injected ``httpx.AsyncClient(MockTransport)``."""
    transport = httpx.MockTransport(fake.handle)
    target = spec if spec is not None else fake.url
    async with (
        httpx.AsyncClient(transport=transport, trust_env=False) as http,
        open_client(target, http_client=http, **options) as client,
    ):
        yield client
