"""Streamable HTTP (both eras) and HTTP+SSE (2024-11-05) for the bundled servers, on the stdlib.

    python -m mcpwire.testing.everything --http 127.0.0.1:0

Theory of operation: :class:`McpHttpServer` is a ``ThreadingHTTPServer`` on loopback that turns
HTTP into lines for a :class:`~mcpwire.testing.demo_server.DemoServer` and routes what the
engine writes back to the right response. One POST carries one message (or, in 2025-03-26, one
batch). Every request gets a :class:`_Stream`: the events that belong to it, in order, kept
until the final response is written. The handler thread of the POST waits on its stream; the
first message decides the shape of the answer (``_answer``): the final response alone becomes a
``application/json`` body (so a 2026-07-28 error can carry its HTTP status), anything before it
(progress, logs, a legacy server request) opens ``text/event-stream``.

Eras. A POST is modern (2026-07-28) when its ``MCP-Protocol-Version`` header or its body
``_meta`` names a modern revision, or its method exists only there; modern requests share one
engine (they are stateless) and get internal ids, so that equal JSON-RPC ids from different
clients never meet; the header rules of ``basic/transports/streamable-http`` (Mcp-Method,
Mcp-Name, Mcp-Param-*, -32020 with 400) are checked before the engine sees the request, and a
closed response stream cancels the request. Legacy POSTs live in sessions: ``initialize``
creates one (``Mcp-Session-Id``, one engine per session), DELETE ends it (later requests get
404), GET opens the session's standalone stream or, with ``Last-Event-ID``, resumes a request's
stream (event ids are ``<stream>.<n>``; 2025-11-25 streams start with a priming event and a
``retry`` field). ``/sse`` + ``/messages`` serve the 2024-11-05 HTTP+SSE transport.

The header rules' tables and value decoding are the server side's own
(:mod:`mcpwire.protocol.serving`); everything else here is the standard library.

Which request a notification or server request belongs to comes from
:data:`~mcpwire.testing.demo_server.CURRENT_REQUEST`, set by the engine while a handler runs.
Every request must come with a loopback ``Host`` and, if present, a loopback ``Origin`` (403
otherwise: DNS-rebinding protection, 2025-11-25 basic/transports §Security Warning).
"""

from __future__ import annotations

import http.server
import json
import logging
import re
import secrets
import select
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, TypeGuard

from mcpwire.protocol.serving import MODERN_STATUS, NAME_FIELDS, decode_header_value
from mcpwire.testing.demo_server import (
    CURRENT_REQUEST,
    LEGACY_REVISIONS,
    MODERN_REVISION,
    V2025_03_26,
    V2025_11_25,
    DemoServer,
    Message,
    RequestId,
    decode_json,
    encode_message,
)

__all__ = ["EngineFactory", "McpHttpHandler", "McpHttpServer", "serve_forever"]

_log = logging.getLogger(__name__)
_Obj = dict[str, Any]

#: Builds an engine: (writer, stream_control) -> DemoServer.
EngineFactory = Callable[[Callable[[Message], None], Callable[[RequestId], None]], DemoServer]

MCP_PATH: Final = "/mcp"
SSE_PATH: Final = "/sse"
MESSAGES_PATH: Final = "/messages"
MAX_BODY_BYTES: Final = 4 * 1024 * 1024
#: How often a waiting handler looks at its socket for a client that went away.
POLL_S: Final = 0.1
KEEPALIVE_S: Final = 10.0
RETRY_MS: Final = 500
#: Events kept per stream for resumption.
MAX_EVENTS: Final = 1000
#: Legacy sessions and finished streams kept at once; the oldest go first (clients that never
#: send DELETE must not grow the server without bound).
MAX_SESSIONS: Final = 2000
MAX_FINISHED_STREAMS: Final = 2000
LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPS: Final = "io.modelcontextprotocol/clientCapabilities"
META_SUBSCRIPTION: Final = "io.modelcontextprotocol/subscriptionId"
MODERN_ONLY: Final = frozenset({"server/discover", "subscriptions/listen"})
_TCHAR = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


class _Stream:
    """The messages of one request (or of a standalone GET stream), in order."""

    def __init__(self, number: int, *, primed: bool = False, resumable: bool = False) -> None:
        self.number = number
        self.primed = primed
        self.resumable = resumable
        self.events: list[tuple[int, Message]] = []
        self.first_seq = 1
        self.done = False
        #: set by ``test_reconnection``: end the current connection, keep the stream
        self.kick = False
        self.attached = False
        self._next = 1
        self.cond = threading.Condition()

    def push(self, message: Message, *, final: bool = False) -> None:
        with self.cond:
            if self.done:
                return
            self.events.append((self._next, message))
            self._next += 1
            if len(self.events) > MAX_EVENTS:
                del self.events[0]
            self.done = final
            self.cond.notify_all()

    def finish(self) -> None:
        with self.cond:
            self.done = True
            self.cond.notify_all()

    def event_id(self, seq: int) -> str:
        return f"{self.number}.{seq}"


class _Engine:
    """One engine and the streams its output goes to."""

    def __init__(self, owner: McpHttpServer, *, modern: bool) -> None:
        self.owner = owner
        self.modern = modern
        self.lock = threading.Lock()
        self.by_request: dict[RequestId, _Stream] = {}
        #: internal id -> the client's id (modern engine only)
        self.original: dict[RequestId, RequestId] = {}
        self.batches: dict[frozenset[str], _Stream] = {}
        self.standalone: _Stream | None = None
        self.server = owner.factory(self.write, self.kick)

    def kick(self, request_id: RequestId) -> None:
        with self.lock:
            stream = self.by_request.get(request_id)
        # only a primed stream (2025-11-25) gave the client an event id to resume from
        if stream is not None and stream.primed:
            with stream.cond:
                stream.kick = True
                stream.cond.notify_all()

    def register(self, request_id: RequestId, stream: _Stream, original: RequestId | None = None) -> None:
        with self.lock:
            self.by_request[request_id] = stream
            if original is not None:
                self.original[request_id] = original

    def forget(self, request_id: RequestId) -> None:
        with self.lock:
            self.by_request.pop(request_id, None)
            self.original.pop(request_id, None)

    def write(self, outgoing: Message) -> None:
        message: Any = outgoing
        if isinstance(message, list):  # a 2025-03-26 batch answer
            key = frozenset(json.dumps(m.get("id")) for m in message if isinstance(m, dict))
            with self.lock:
                stream = self.batches.pop(key, None)
            if stream is not None:
                stream.push(message, final=stream is not self.standalone)
            return
        is_response = "method" not in message and ("result" in message or "error" in message)
        if is_response:
            rid = message.get("id")
            with self.lock:
                stream = self.by_request.pop(rid, None) if _hashable(rid) else None
                original = self.original.pop(rid, None) if _hashable(rid) else None
            if stream is None:
                _log.debug("no stream for the response to %r; dropped", rid)
                return
            if self.modern:
                message = self._restore(message, original)
            # HTTP+SSE: every response goes to the one GET stream, which stays open
            stream.push(message, final=stream is not self.standalone)
            return
        stream = self._target(message)
        if stream is None:
            _log.debug("no stream for %s; dropped", message.get("method"))
            return
        stream.push(self._restore_notification(message) if self.modern else message)

    def _target(self, message: _Obj) -> _Stream | None:
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        subscription = meta.get(META_SUBSCRIPTION) if isinstance(meta, dict) else None
        with self.lock:
            if subscription is not None and _hashable(subscription) and subscription in self.by_request:
                return self.by_request[subscription]
            current = CURRENT_REQUEST.get()
            stream = self.by_request.get(current) if current is not None else None
            if stream is not None and not stream.done:
                # 2025-11-25 transports: list changes are not about the request; the session's
                # GET stream carries them when one is open.
                method = str(message.get("method"))
                unrelated = method.endswith("/list_changed") or method == "notifications/resources/updated"
                if unrelated and not self.modern and self.standalone is not None and not self.standalone.done:
                    return self.standalone
                return stream
            if self.standalone is not None and not self.standalone.done:
                return self.standalone
        return None

    def _restore(self, message: _Obj, original: RequestId | None) -> _Obj:
        out = dict(message)
        if original is not None:
            out["id"] = original
        result = out.get("result")
        if isinstance(result, dict) and isinstance(result.get("_meta"), dict) and META_SUBSCRIPTION in result["_meta"]:
            out["result"] = {**result, "_meta": {**result["_meta"], META_SUBSCRIPTION: out.get("id")}}
        return out

    def _restore_notification(self, message: _Obj) -> _Obj:
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(params, dict) or not isinstance(meta, dict) or META_SUBSCRIPTION not in meta:
            return message
        with self.lock:
            original = self.original.get(meta[META_SUBSCRIPTION], meta[META_SUBSCRIPTION])
        return {**message, "params": {**params, "_meta": {**meta, META_SUBSCRIPTION: original}}}


def _hashable(value: object) -> TypeGuard[RequestId]:
    return isinstance(value, str | int) and not isinstance(value, bool)


class _Session(_Engine):
    """A legacy Streamable HTTP session (or an HTTP+SSE connection): one engine of its own."""

    def __init__(self, owner: McpHttpServer, session_id: str) -> None:
        super().__init__(owner, modern=False)
        self.id = session_id
        self.revision: str | None = None
        self._streams = 0

    def new_stream(self, *, sse_events: bool) -> _Stream:
        with self.lock:
            self._streams += 1
            number = self._streams
        # 2025-11-25 basic/transports: "The server SHOULD immediately send an SSE event consisting
        # of an event ID and an empty data field in order to prime the client to reconnect".
        primed = sse_events and (self.revision or "") >= V2025_11_25
        # resumability (event ids, Last-Event-ID) exists from 2025-03-26 on
        return _Stream(number, primed=primed, resumable=sse_events and (self.revision or "") >= V2025_03_26)

    def stream_number(self, number: int) -> _Stream | None:
        with self.lock:
            for stream in self.by_request.values():
                if stream.number == number:
                    return stream
            return self.owner.finished_streams.get((self.id, number))


class McpHttpServer(http.server.ThreadingHTTPServer):
    """The HTTP front of one engine factory; :meth:`start` serves in a thread, :meth:`close` stops.

    Args:
        factory: builds an engine for the modern era and one per legacy session.
        host, port: where to listen (loopback; port 0 picks a free one).
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        factory: EngineFactory,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        handler_class: type[McpHttpHandler] | None = None,
    ) -> None:
        super().__init__((host, port), handler_class or McpHttpHandler)
        self.factory = factory
        self.lock = threading.Lock()
        self.sessions: dict[str, _Session] = {}
        self.terminated: set[str] = set()
        #: (session, stream number) -> stream, kept after the response for Last-Event-ID replays
        self.finished_streams: dict[tuple[str, int], _Stream] = {}
        self.modern = _Engine(self, modern=True)
        self._next_internal = 0
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}{MCP_PATH}"

    def internal_id(self) -> str:
        with self.lock:
            self._next_internal += 1
            return f"http-{self._next_internal}"

    def new_session(self) -> _Session:
        session = _Session(self, secrets.token_hex(16))
        with self.lock:
            self.sessions[session.id] = session
            oldest = next(iter(self.sessions)) if len(self.sessions) > MAX_SESSIONS else None
        if oldest is not None:
            self.end_session(oldest)
        return session

    def end_session(self, session_id: str) -> bool:
        with self.lock:
            session = self.sessions.pop(session_id, None)
            if session is None:
                return False
            self.terminated.add(session_id)
            for key in [k for k in self.finished_streams if k[0] == session_id]:
                del self.finished_streams[key]
        session.server.close()
        if session.standalone is not None:
            session.standalone.finish()
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, name="mcp-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving (from another thread than the serving one) and close every engine."""
        self.shutdown()
        self.release()

    def release(self) -> None:
        """Close the socket and every engine; idempotent."""
        self.server_close()
        for session_id in list(self.sessions):
            self.end_session(session_id)
        self.modern.server.close()


class Reject(Exception):
    def __init__(self, status: int, code: int | None, message: str, request_id: RequestId | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id


def _error_body(request_id: RequestId | None, code: int, message: str, data: Any = None) -> _Obj:
    error: _Obj = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _header_text(value: object) -> str | None:
    """The header form of an argument value (string, integer, boolean), or None."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


class McpHttpHandler(http.server.BaseHTTPRequestHandler):
    """One HTTP connection; a test fixture may subclass it to break one rule."""

    protocol_version = "HTTP/1.1"
    server: McpHttpServer
    server_version = "mcpwire-reference/1.0"
    #: Content-Type of JSON answers
    json_content_type = "application/json"
    #: answer legacy requests with SSE when the client accepts it and the revision resumes streams
    legacy_sse = True
    #: 2026-07-28 error code -> the HTTP status that carries it
    modern_status: ClassVar[Mapping[int, int]] = MODERN_STATUS

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes; without this, Nagle's algorithm and the
        # peer's delayed ACK hold every answer back by tens of milliseconds
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s %s", self.address_string(), format % args)

    # -- plumbing -----------------------------------------------------------------------------

    def _allowed(self) -> bool:
        host = self.headers.get("Host", "")
        hostname = urllib.parse.urlsplit(f"//{host}").hostname or ""
        if hostname not in LOOPBACK and f"[{hostname}]" not in LOOPBACK:
            self._reject(Reject(403, -32600, f"Forbidden: Host {host!r} is not a loopback address"))
            return False
        origin = self.headers.get("Origin")
        if origin is not None:
            origin_host = urllib.parse.urlsplit(origin).hostname or ""
            if origin_host not in LOOPBACK:
                # 2025-11-25 basic/transports: "If the Origin header is present and invalid,
                # servers MUST respond with HTTP 403 Forbidden."
                self._reject(Reject(403, -32600, f"Forbidden: Origin {origin!r} is not allowed"))
                return False
        return True

    def _send_json(self, status: int, body: Message | None, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else encode_message(body)
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", self.json_content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if data:
            self.wfile.write(data)
        self.wfile.flush()

    def _reject(self, reject: Reject, headers: dict[str, str] | None = None) -> None:
        body = None if reject.code is None else _error_body(reject.request_id, reject.code, reject.message)
        self._send_json(reject.status, body, headers)

    def _plain(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
                if len(data) > MAX_BODY_BYTES:
                    raise Reject(413, None, "request body too large")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise Reject(413, None, "request body too large")
        return self.rfile.read(length)

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except (OSError, ValueError):
            return True

    def _start_sse(self, headers: dict[str, str] | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        # 2026-07-28 basic/transports/streamable-http: "servers SHOULD include the
        # X-Accel-Buffering: no header"
        self.send_header("X-Accel-Buffering", "no")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass

    def _event(self, stream: _Stream, seq: int, message: Message, *, event: str = "message") -> None:
        lines = f"event: {event}\n"
        if stream.resumable:
            lines += f"id: {stream.event_id(seq)}\n"
        self._chunk(lines + "data: " + encode_message(message).decode() + "\n\n")

    # -- streaming an answer ---------------------------------------------------------------------

    def _answer(
        self,
        stream: _Stream,
        *,
        modern: bool,
        headers: dict[str, str] | None = None,
        sse_now: bool = False,
        started: bool = False,
        cursor: int = 0,
        on_gone: Callable[[], None] | None = None,
    ) -> None:
        """Write ``stream`` as JSON (when its first message is its final one) or as SSE.

        ``cursor`` is the last sequence number the client has (resumption). When the client goes
        away, ``on_gone`` runs (2026-07-28: that is the cancellation).
        """
        sse = sse_now or started
        written = cursor
        last_keepalive = time.monotonic()
        if sse_now and not started:
            self._start_sse(headers)
            if stream.primed and cursor == 0:
                self._chunk(f"id: {stream.event_id(0)}\nretry: {RETRY_MS}\ndata: \n\n")
        try:
            while True:
                with stream.cond:
                    pending = [(seq, m) for seq, m in stream.events if seq > written]
                    done, kick = stream.done, stream.kick
                    if not pending and not done and not kick:
                        stream.cond.wait(POLL_S)
                        pending = [(seq, m) for seq, m in stream.events if seq > written]
                        done, kick = stream.done, stream.kick
                    if kick and sse:
                        stream.kick = False
                if not sse and pending:
                    seq, first = pending[0]
                    first_any: Any = first
                    if done and len(pending) == 1:
                        status = 200
                        if modern and isinstance(first_any, dict) and isinstance(first_any.get("error"), dict):
                            status = self.modern_status.get(first_any["error"].get("code"), 200)
                        self._send_json(status, first, headers)
                        return
                    sse = True
                    self._start_sse(headers)
                    if stream.primed:
                        self._chunk(f"id: {stream.event_id(0)}\nretry: {RETRY_MS}\ndata: \n\n")
                for seq, message in pending if sse else ():
                    self._event(stream, seq, message)
                    written = seq
                if sse and done and all(seq <= written for seq, _ in stream.events):
                    self._end_chunks()
                    return
                if sse and kick:
                    # 2025-11-25: close the connection, not the stream; the client resumes it.
                    _log.debug("closing stream %d early (client resumes with Last-Event-ID)", stream.number)
                    self._end_chunks()
                    self.close_connection = True
                    return
                if self._client_gone():
                    raise ConnectionResetError("the client closed the connection")
                if sse and time.monotonic() - last_keepalive > KEEPALIVE_S:
                    self._chunk(": keep-alive\n\n")
                    last_keepalive = time.monotonic()
        except OSError:
            self.close_connection = True
            if on_gone is not None:
                on_gone()

    # -- verbs ----------------------------------------------------------------------------------

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path)
        try:
            raw = self._body()  # read before any answer: the connection may carry another request
            if path.path not in (MCP_PATH, MESSAGES_PATH):
                self._plain(404, "not found")
                return
            if not self._allowed():
                return
            try:
                message = decode_json(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise Reject(400, -32700, f"Parse error: {exc}") from None
            if path.path == MESSAGES_PATH:
                self._post_sse_transport(path.query, message)
            elif self._is_modern(message):
                self._post_modern(message)
            else:
                self._post_legacy(message)
        except Reject as reject:
            self.close_connection = reject.status >= 413
            self._reject(reject)

    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path)
        if path.path == SSE_PATH:
            if self._allowed():
                self._get_sse_transport()
            return
        if path.path != MCP_PATH:
            self._plain(404, "not found")
            return
        if not self._allowed():
            return
        try:
            self._get_legacy()
        except Reject as reject:
            self._reject(reject)

    def do_DELETE(self) -> None:
        if urllib.parse.urlsplit(self.path).path != MCP_PATH:
            self._plain(404, "not found")
            return
        if not self._allowed():
            return
        session_id = self.headers.get("Mcp-Session-Id")
        if session_id is None:
            if self.headers.get("MCP-Protocol-Version") == MODERN_REVISION:
                # 2026-07-28 streamable-http §Earlier Streamable HTTP Revisions: 405 for DELETE.
                self._plain(405, "no sessions in 2026-07-28", {"Allow": "POST"})
            else:
                self._reject(Reject(400, -32600, "Bad Request: DELETE needs an Mcp-Session-Id header"))
            return
        if self.server.end_session(session_id):
            self._send_json(200, None)
        else:
            self._reject(Reject(404, -32600, "Session not found"))

    def do_PUT(self) -> None:
        self._plain(405, "method not allowed", {"Allow": "GET, POST, DELETE"})

    do_PATCH = do_PUT

    # -- 2026-07-28 -----------------------------------------------------------------------------

    def _is_modern(self, message: object) -> bool:
        if self.headers.get("MCP-Protocol-Version", "").strip() == MODERN_REVISION:
            return True
        if not isinstance(message, dict):
            return False
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and META_VERSION in meta and self.headers.get("Mcp-Session-Id") is None:
            return True
        return message.get("method") in MODERN_ONLY

    def _post_modern(self, message: object) -> None:
        if not isinstance(message, dict):
            raise Reject(400, -32600, "Invalid Request: a 2026-07-28 POST carries exactly one JSON-RPC message")
        request_id = message.get("id") if _hashable(message.get("id")) else None
        if "method" not in message:
            raise Reject(400, -32600, "Invalid Request: clients do not send JSON-RPC responses", request_id)
        if "id" not in message:
            # 2026-07-28 §Sending Messages: an accepted notification gets 202 and no body.
            self._send_json(202, None)
            return
        self._check_headers(message, request_id)
        engine = self.server.modern
        internal = self.server.internal_id()
        stream = _Stream(0)
        engine.register(internal, stream, original=message["id"])
        forwarded = {**message, "id": internal}

        def cancelled() -> None:
            # 2026-07-28 §Cancellation: "Closing the SSE response stream MUST be treated by the
            # server as cancellation of that request."
            engine.server.cancel_request(internal)
            engine.forget(internal)

        engine.server.handle_message(forwarded)
        self._answer(stream, modern=True, on_gone=cancelled)
        engine.forget(internal)

    def _check_headers(self, message: _Obj, request_id: RequestId | None) -> None:
        """2026-07-28 §Server Validation: headers missing or not matching the body: -32020 + 400."""
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        self._check_version_match(meta, request_id)
        self._check_method_header(message, request_id)
        # the _meta rules (basic/index §_meta): a request missing a required field is -32602 + 400
        if not isinstance(meta, dict) or not isinstance(meta.get(META_VERSION), str):
            raise Reject(400, -32602, f"Invalid params: _meta must carry {META_VERSION!r}", request_id)
        if not isinstance(meta.get(META_CAPS), dict):
            raise Reject(400, -32602, f"Invalid params: _meta must carry {META_CAPS!r}, an object", request_id)
        self._check_name_header(message, request_id)
        if message.get("method") == "tools/call" and isinstance(params, dict):
            self._check_param_headers(params, request_id)

    def _check_version_match(self, meta: Any, request_id: RequestId | None) -> None:
        version = self.headers.get("MCP-Protocol-Version")
        if version is None:
            raise Reject(400, -32020, "Header mismatch: the MCP-Protocol-Version header is missing", request_id)
        if isinstance(meta, dict) and META_VERSION in meta and meta[META_VERSION] != version.strip():
            raise Reject(
                400,
                -32020,
                f"Header mismatch: MCP-Protocol-Version {version!r} does not match _meta {meta[META_VERSION]!r}",
                request_id,
            )

    def _check_method_header(self, message: _Obj, request_id: RequestId | None) -> None:
        method = message.get("method")
        header_method = self.headers.get("Mcp-Method")
        if header_method is None:
            raise Reject(400, -32020, "Header mismatch: the Mcp-Method header is missing", request_id)
        if header_method.strip(" \t") != method:
            raise Reject(
                400, -32020, f"Header mismatch: Mcp-Method {header_method!r} does not match {method!r}", request_id
            )

    def _check_name_header(self, message: _Obj, request_id: RequestId | None) -> None:
        params = message.get("params")
        key = NAME_FIELDS.get(str(message.get("method")))
        if key is None or not isinstance(params, dict) or not isinstance(params.get(key), str):
            return
        name = self.headers.get("Mcp-Name")
        if name is None:
            raise Reject(400, -32020, "Header mismatch: the Mcp-Name header is missing", request_id)
        try:
            decoded = decode_header_value(name)
        except ValueError as exc:
            raise Reject(400, -32020, f"Header mismatch: Mcp-Name {exc}", request_id) from None
        if decoded != params[key]:
            raise Reject(400, -32020, f"Header mismatch: Mcp-Name {name!r} does not match {params[key]!r}", request_id)

    def _check_param_headers(self, params: _Obj, request_id: RequestId | None) -> None:
        tool = next(
            (
                t
                for t in self.server.modern.server._tool_definitions(MODERN_REVISION)
                if t["name"] == params.get("name")
            ),
            None,
        )
        schema = tool.get("inputSchema") if tool is not None else None
        properties = schema.get("properties") if isinstance(schema, dict) else None
        arguments: _Obj = params["arguments"] if isinstance(params.get("arguments"), dict) else {}
        for prop, spec in (properties or {}).items():
            header = spec.get("x-mcp-header") if isinstance(spec, dict) else None
            if not isinstance(header, str) or not _TCHAR.match(header):
                continue
            value = arguments.get(prop)
            sent = self.headers.get(f"Mcp-Param-{header}")
            if value is None:
                continue  # "Server MUST NOT expect the header"
            if sent is None:
                raise Reject(400, -32020, f"Header mismatch: Mcp-Param-{header} is missing", request_id)
            try:
                decoded = decode_header_value(sent)
            except ValueError as exc:
                raise Reject(400, -32020, f"Header mismatch: Mcp-Param-{header} {exc}", request_id) from None
            if decoded != _header_text(value):
                raise Reject(
                    400, -32020, f"Header mismatch: Mcp-Param-{header} {sent!r} does not match {value!r}", request_id
                )

    # -- legacy Streamable HTTP -----------------------------------------------------------------

    def _session(self, *, required: bool = True) -> _Session | None:
        session_id = self.headers.get("Mcp-Session-Id")
        if session_id is None:
            if required:
                # 2025-11-25 transports: "Servers that require a session ID SHOULD respond to
                # requests without an MCP-Session-Id header (other than initialization) with
                # HTTP 400 Bad Request."
                raise Reject(400, -32600, "Bad Request: no Mcp-Session-Id header; send initialize first")
            return None
        with self.server.lock:
            session = self.server.sessions.get(session_id)
        if session is None:
            # "...it MUST respond to requests containing that session ID with HTTP 404 Not Found."
            raise Reject(404, -32600, "Session not found")
        return session

    def _check_version_header(self, session: _Session) -> None:
        version = self.headers.get("MCP-Protocol-Version")
        if version is None:
            return  # "the server SHOULD assume protocol version 2025-03-26"
        version = version.strip()
        if version not in LEGACY_REVISIONS:
            # 2025-11-25 transports: "If the server receives a request with an invalid or
            # unsupported MCP-Protocol-Version, it MUST respond with 400 Bad Request."
            raise Reject(400, -32600, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")

    def _post_legacy(self, message: object) -> None:
        if isinstance(message, dict) and message.get("method") == "initialize" and "id" in message:
            self._initialize(message)
            return
        session = self._session()
        assert session is not None
        self._check_version_header(session)
        accept = self.headers.get("Accept", "")
        if isinstance(message, list):
            self._post_batch(session, message)
            return
        if not isinstance(message, dict):
            raise Reject(400, -32600, "Invalid Request: the body must be a JSON-RPC message")
        if "method" not in message or "id" not in message:
            # a notification or a response: "202 Accepted with no body"
            session.server.handle_message(message)
            self._send_json(202, None)
            return
        if not _hashable(message.get("id")):
            session.server.handle_message(message)  # the engine answers the invalid id itself
            raise Reject(400, -32600, "Invalid Request: the id must be a string or an integer")
        sse_ok = self.legacy_sse and ("text/event-stream" in accept or "*/*" in accept)
        stream = session.new_stream(sse_events=sse_ok)
        session.register(message["id"], stream)
        session.server.handle_message(message)
        # resumable streams are SSE from the start (2025-11-25: with a priming event)
        sse_now = sse_ok and stream.resumable
        self._answer(stream, modern=False, sse_now=sse_now)
        self._retire(session, stream, message["id"])

    def _retire(self, session: _Session, stream: _Stream, request_id: RequestId) -> None:
        with stream.cond:
            finished = stream.done
        if stream.resumable:
            # kept before the request is forgotten: a client resuming at once always finds it
            with self.server.lock:
                kept = self.server.finished_streams
                kept[(session.id, stream.number)] = stream
                while len(kept) > MAX_FINISHED_STREAMS:
                    del kept[next(iter(kept))]
        if finished or not stream.resumable:
            session.forget(request_id)

    def _post_batch(self, session: _Session, items: list[Any]) -> None:
        if session.revision != V2025_03_26:
            raise Reject(400, -32600, "Invalid Request: JSON-RPC batches exist only in protocol revision 2025-03-26")
        requests = [m for m in items if isinstance(m, dict) and "method" in m and "id" in m]
        if not requests:
            session.server.handle_message(items)
            self._send_json(202, None)
            return
        stream = session.new_stream(sse_events=False)
        key = frozenset(json.dumps(m.get("id")) for m in requests)
        with session.lock:
            session.batches[key] = stream
        session.server.handle_message(items)
        self._answer(stream, modern=False)

    def _initialize(self, message: _Obj) -> None:
        if self.headers.get("Mcp-Session-Id") is not None:
            raise Reject(400, -32600, "Bad Request: initialize opens a session; do not send Mcp-Session-Id")
        session = self.server.new_session()
        stream = _Stream(0)
        session.register(message["id"], stream)
        session.server.handle_message(message)
        answer: Any = None
        with stream.cond:
            if stream.events:
                answer = stream.events[0][1]
        result = answer.get("result") if isinstance(answer, dict) else None
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            session.revision = result["protocolVersion"]
            self._send_json(200, answer, {"Mcp-Session-Id": session.id})
            return
        self.server.end_session(session.id)
        self._send_json(200, answer if answer is not None else _error_body(message["id"], -32603, "no answer"))

    def _get_legacy(self) -> None:
        if self.headers.get("Mcp-Session-Id") is None and self.headers.get("MCP-Protocol-Version") == MODERN_REVISION:
            self._plain(405, "no GET stream in 2026-07-28", {"Allow": "POST"})
            return
        session = self._session()
        assert session is not None
        self._check_version_header(session)
        if "text/event-stream" not in self.headers.get("Accept", ""):
            raise Reject(406, -32600, "Not Acceptable: GET needs Accept: text/event-stream")
        last = self.headers.get("Last-Event-ID")
        if last is not None:
            number, _, seq = last.strip().partition(".")
            stream = session.stream_number(int(number)) if number.isdigit() else None
            if stream is None or not seq.isdigit():
                raise Reject(404, -32600, f"Not Found: no stream for Last-Event-ID {last!r}")
            # 2025-11-25 transports: replay only the messages of the disconnected stream
            self._answer(stream, modern=False, sse_now=True, cursor=max(int(seq), 0))
            return
        with session.lock:
            busy = session.standalone is not None and not session.standalone.done
            if not busy:
                session.standalone = _Stream(0)
                standalone = session.standalone
        if busy:
            raise Reject(409, -32600, "Conflict: the session already has a GET stream")
        try:
            self._answer(standalone, modern=False, sse_now=True)
        finally:
            with session.lock:
                if session.standalone is standalone:
                    session.standalone = None

    # -- 2024-11-05 HTTP+SSE ----------------------------------------------------------------------

    def _get_sse_transport(self) -> None:
        session = self.server.new_session()
        stream = _Stream(0)
        with session.lock:
            session.standalone = stream
        self._start_sse()
        # 2024-11-05 basic/transports: "the server MUST send an endpoint event containing a URI
        # for the client to use for sending messages."
        self._chunk(f"event: endpoint\ndata: {MESSAGES_PATH}?session_id={session.id}\n\n")
        try:
            self._answer(stream, modern=False, started=True)
        finally:
            self.server.end_session(session.id)

    def _post_sse_transport(self, query: str, message: Any) -> None:
        session_id = urllib.parse.parse_qs(query).get("session_id", [""])[0]
        with self.server.lock:
            session = self.server.sessions.get(session_id)
        if session is None:
            raise Reject(404, -32600, "Session not found")
        messages = message if isinstance(message, list) else [message]
        stream = session.standalone or _Stream(0)
        with session.lock:
            if isinstance(message, list):
                key = frozenset(json.dumps(m.get("id")) for m in messages if isinstance(m, dict) and "method" in m)
                session.batches[key] = stream
            else:
                for item in messages:
                    if isinstance(item, dict) and "id" in item and "method" in item and _hashable(item["id"]):
                        session.by_request[item["id"]] = stream
        session.server.handle_message(message)
        self._plain(202, "Accepted")


def serve_forever(
    factory: EngineFactory,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    handler_class: type[McpHttpHandler] | None = None,
) -> int:
    """Serve until interrupted; the first stdout line is ``listening on <url>``. Exit status."""
    server = McpHttpServer(factory, host=host, port=port, handler_class=handler_class)
    sys.stdout.write(f"listening on {server.url}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        return 130
    finally:
        server.release()
    return 0
