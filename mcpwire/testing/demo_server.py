"""The bundled demo MCP server: stdio, both protocol eras, standard library only.

    python -m mcpwire.testing.demo_server [--era {both,legacy,modern}] [--page-size N] [--name NAME] [-v]

It gives mcpwire's users and tests a server that speaks every released revision with nothing else
installed: the legacy era (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25: an ``initialize``
handshake, then a session in which the server may send requests) and the modern era (2026-07-28:
no handshake, every request carries ``params._meta``, server->client requests become
``input_required`` results, change notifications flow on ``subscriptions/listen`` streams).

Theory of operation: :class:`DemoServer` is the whole protocol, without I/O. Feed it one line (or
one decoded message) at a time with :meth:`DemoServer.handle_line`; it hands every outgoing
message, as a JSON-ready object, to the *writer* callback, never two at once. ``tools/call`` runs
in a thread of its own (``slow`` sleeps, ``ask`` may wait for the client), so it never blocks
other requests; everything else is answered at once, in order, on the caller's thread, so a
request sent after ``initialize`` sees the session it opened. ``notifications/cancelled`` sets
the call's flag: a cancelled call stops and is never answered. :meth:`DemoServer.close` cancels
what is in flight and ends open subscriptions with their graceful-closure result. :func:`main` is
the thin stdio shell around it: lines from stdin, one compact JSON text per line to stdout, logs
to stderr, exit at end of input.

Era per request: with ``--era both`` (the default) a request whose ``params._meta`` carries
``io.modelcontextprotocol/protocolVersion`` is served statelessly as 2026-07-28, as are
``server/discover`` and ``subscriptions/listen``; anything else needs a prior ``initialize`` and
follows the negotiated legacy revision. ``--era legacy`` answers ``server/discover`` with -32601
like a real legacy server; ``--era modern`` answers ``initialize`` with -32601.

This module must stay importable on its own, fast, with no third-party package and nothing from
mcpwire: it is the reference peer the client is tested against.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextvars
import json
import logging
import math
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias, TypeGuard

__all__ = [
    "CURRENT_REQUEST",
    "DEFAULT_NAME",
    "LATEST_LEGACY",
    "LEGACY_REVISIONS",
    "MODERN_REVISION",
    "SERVER_VERSION",
    "DemoServer",
    "EraMode",
    "JSONObject",
    "JSONValue",
    "Message",
    "Writer",
    "encode_message",
    "main",
]

if TYPE_CHECKING:
    JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
else:
    JSONValue = Any
JSONObject: TypeAlias = dict[str, JSONValue]
#: What the writer receives: one message, or the array answering a 2025-03-26 batch.
Message: TypeAlias = JSONObject | list[JSONObject]
#: Called with every outgoing message; :class:`DemoServer` never calls it concurrently.
Writer: TypeAlias = Callable[[Message], None]
RequestId: TypeAlias = int | str
#: ``--era``: which lifecycles the server offers.
EraMode: TypeAlias = Literal["both", "legacy", "modern"]

# Internally messages are plain dicts; the public surface says JSONValue.
_Obj: TypeAlias = dict[str, Any]
_Respond: TypeAlias = Callable[[_Obj | None], None]

_log = logging.getLogger(__name__)

#: The id of the request whose handler is running (None outside one). A transport that must put
#: each outgoing notification or server request on the stream of the request it belongs to
#: (Streamable HTTP) reads it in its writer.
CURRENT_REQUEST: Final[contextvars.ContextVar[RequestId | None]] = contextvars.ContextVar(
    "mcpwire_demo_current_request", default=None
)

# ---------------------------------------------------------------------------------------------
# Protocol constants

V2024_11_05: Final = "2024-11-05"
V2025_03_26: Final = "2025-03-26"
V2025_06_18: Final = "2025-06-18"
V2025_11_25: Final = "2025-11-25"
MODERN_REVISION: Final = "2026-07-28"
#: The legacy revisions, oldest first; ``initialize`` with any other version gets LATEST_LEGACY.
LEGACY_REVISIONS: Final[tuple[str, ...]] = (V2024_11_05, V2025_03_26, V2025_06_18, V2025_11_25)
LATEST_LEGACY: Final = V2025_11_25

DEFAULT_NAME: Final = "mcpwire-demo"
SERVER_VERSION: Final = "1.0.0"
INSTRUCTIONS: Final = (
    "Demo server bundled with mcpwire. Tools: echo, add, fail, slow, big, ask, sample, roots, "
    "notify, touch, crash. Resources: demo://static/hello, demo://static/blob, demo://items/{id}. "
    "Prompts: greet, plain."
)

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# 2025-11-25 server/resources: "Resource not found: -32002" (legacy only; 2026-07-28 uses -32602).
RESOURCE_NOT_FOUND: Final = -32002
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

#: RFC 5424 severities, least severe first.
LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LOG_LEVEL: Final = "info"

#: How long a legacy tool call waits for the client to answer the server's request.
INPUT_TIMEOUT_S: Final = 30.0
#: Caching hints on 2026-07-28 results (server/utilities/caching).
LIST_TTL_MS: Final = 60_000
DISCOVER_TTL_MS: Final = 60_000
READ_TTL_MS: Final = 0
CACHE_SCOPE: Final = "public"
MAX_BIG_CHARS: Final = 256 * 1024 * 1024
MAX_SLOW_S: Final = 3600.0
MAX_SLOW_STEPS: Final = 10_000
CRASH_EXIT_STATUS: Final = 3

_LEGACY_METHODS: Final = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
    }
)
_MODERN_METHODS: Final = frozenset(
    {
        "server/discover",
        "subscriptions/listen",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    }
)
_MODERN_ONLY_METHODS: Final = _MODERN_METHODS - _LEGACY_METHODS
_LIST_FLAGS: Final = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")

# ---------------------------------------------------------------------------------------------
# The catalogue: tools, resources, prompts


def _object_schema(properties: _Obj, required: Sequence[str] = ()) -> _Obj:
    schema: _Obj = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


_STRING: Final = {"type": "string"}
_NUMBER: Final = {"type": "number"}

#: (name, description, inputSchema), in listing order.
_TOOLS: Final[tuple[tuple[str, str, _Obj], ...]] = (
    ("echo", "Return the text unchanged.", _object_schema({"text": _STRING}, ["text"])),
    ("add", "Add two numbers.", _object_schema({"a": _NUMBER, "b": _NUMBER}, ["a", "b"])),
    ("fail", "Return a tool error (isError) with the message.", _object_schema({"message": _STRING})),
    (
        "slow",
        "Sleep for the given seconds in steps, reporting progress after each; cancellable.",
        _object_schema({"seconds": _NUMBER, "steps": {"type": "integer", "minimum": 1, "default": 5}}, ["seconds"]),
    ),
    (
        "big",
        "Return one text block of exactly `size` 'x' characters.",
        _object_schema({"size": {"type": "integer", "minimum": 0}}, ["size"]),
    ),
    (
        "ask",
        "Ask the user a question (elicitation) and return the answer.",
        _object_schema({"question": _STRING}, ["question"]),
    ),
    (
        "sample",
        "Ask the client's model (sampling) and return its reply.",
        _object_schema({"prompt": _STRING}, ["prompt"]),
    ),
    ("roots", "List the client's roots, one URI per line.", _object_schema({})),
    ("notify", "Emit a log message and a tools list_changed notification.", _object_schema({})),
    (
        "touch",
        "Emit notifications/resources/updated for the URI to its subscribers.",
        _object_schema({"uri": _STRING}, ["uri"]),
    ),
    ("crash", "Exit the server process at once with status 3, without answering.", _object_schema({})),
)
_ADD_OUTPUT_SCHEMA: Final = _object_schema({"sum": _NUMBER}, ["sum"])

HELLO_URI: Final = "demo://static/hello"
BLOB_URI: Final = "demo://static/blob"
ITEMS_PREFIX: Final = "demo://items/"
ITEMS_TEMPLATE: Final = "demo://items/{id}"
RESOURCES: Final[tuple[_Obj, ...]] = (
    {"uri": HELLO_URI, "name": "hello", "description": "A greeting.", "mimeType": "text/plain"},
    {"uri": BLOB_URI, "name": "blob", "description": "The bytes 0..255.", "mimeType": "application/octet-stream"},
)
TEMPLATES: Final[tuple[_Obj, ...]] = (
    {"uriTemplate": ITEMS_TEMPLATE, "name": "item", "description": "Item <id>.", "mimeType": "text/plain"},
)
PROMPTS: Final[tuple[_Obj, ...]] = (
    {
        "name": "greet",
        "description": "Greet someone by name.",
        "arguments": [{"name": "name", "description": "Who to greet.", "required": True}],
    },
    {"name": "plain", "description": "A prompt without arguments."},
)
GREET_NAMES: Final = ("alice", "bob", "carol")
ITEM_IDS: Final = ("1", "2", "3")


def since(revision: str, first: str) -> bool:
    """True when ``revision`` has what ``first`` introduced (revisions are ISO dates)."""
    return revision >= first


def tool_list(revision: str) -> list[_Obj]:
    tools: list[_Obj] = []
    for name, description, input_schema in _TOOLS:
        tool: _Obj = {"name": name, "description": description, "inputSchema": input_schema}
        # 2025-06-18 server/tools: outputSchema and structuredContent appear.
        if name == "add" and since(revision, V2025_06_18):
            tool["outputSchema"] = _ADD_OUTPUT_SCHEMA
        tools.append(tool)
    return tools


def _capabilities(revision: str) -> _Obj:
    capabilities: _Obj = {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "logging": {},
    }
    if since(revision, V2025_03_26):  # the completions capability did not exist in 2024-11-05
        capabilities["completions"] = {}
    return capabilities


def read_resource(uri: str) -> _Obj | None:
    if uri == HELLO_URI:
        return {"uri": uri, "mimeType": "text/plain", "text": "Hello, world!"}
    if uri == BLOB_URI:
        return {
            "uri": uri,
            "mimeType": "application/octet-stream",
            "blob": base64.b64encode(bytes(range(256))).decode(),
        }
    item = uri[len(ITEMS_PREFIX) :] if uri.startswith(ITEMS_PREFIX) else ""
    if item and "/" not in item:
        return {"uri": uri, "mimeType": "text/plain", "text": f"item {item}"}
    return None


# ---------------------------------------------------------------------------------------------
# Errors and small helpers


class ErrorAnswer(Exception):
    """A JSON-RPC error answer, raised by a handler and sent by the dispatcher."""

    def __init__(self, code: int, message: str, data: JSONValue = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class InputRequired(Exception):
    """2026-07-28 MRTR: the call ends with this ``input_required`` result instead."""

    def __init__(self, result: _Obj) -> None:
        super().__init__("input required")
        self.result = result


class Abandoned(Exception):
    """The call was cancelled (or the server is closing): it must not be answered."""


class BadArguments(Exception):
    """Tool arguments that do not fit the inputSchema (reported as an isError result)."""


def _error(request_id: RequestId | None, code: int, message: str, data: JSONValue = None) -> _Obj:
    error: _Obj = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def text_result(text: str, *, is_error: bool = False) -> _Obj:
    result: _Obj = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


def _is_request_id(value: object) -> TypeGuard[RequestId]:
    # 2025-11-25 basic: "Requests MUST include a string or integer ID" ... "MUST NOT be null".
    return isinstance(value, str | int) and not isinstance(value, bool)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def decode_json(text: str) -> Any:
    """Decode one JSON text; nesting past the interpreter's recursion limit is a ValueError too.

    Raises:
        ValueError: not JSON, or nested too deeply to decode (``json`` raises RecursionError
            there; a client must not be able to end the process with one line).
    """
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("the JSON text is nested too deeply") from None


def encode_message(message: Message) -> bytes:
    """One compact JSON text in UTF-8, without the newline (lone surrogates fall back to escapes)."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()


def b64_json(value: _Obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).decode()


def unb64_json(text: str) -> Any:
    try:
        return decode_json(base64.urlsafe_b64decode(text.encode("ascii")).decode())
    except (ValueError, binascii.Error):  # UnicodeError is a ValueError
        return None


def page_of(items: Sequence[_Obj], cursor: object, key: str, marker: _Obj, size: int) -> _Obj | None:
    """One page of ``items`` under ``key`` (``size`` 0: all of them), with a ``nextCursor`` that
    carries ``marker``; None when ``cursor`` is not one this list issued (-32602 for the caller)."""
    start = 0
    if cursor is not None:
        decoded = unb64_json(cursor) if isinstance(cursor, str) else None
        ours = isinstance(decoded, dict) and all(decoded.get(k) == v for k, v in marker.items())
        offset = decoded.get("offset") if ours and isinstance(decoded, dict) else None
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 < offset < len(items) or size == 0:
            return None
        start = offset
    end = len(items) if size == 0 else min(len(items), start + size)
    result: _Obj = {key: list(items[start:end])}
    if end < len(items):
        result["nextCursor"] = b64_json({**marker, "offset": end})
    return result


def arg_str(args: _Obj, key: str, *, required: bool = True) -> str | None:
    value = args.get(key)
    if value is None and not required and key not in args:
        return None
    if not isinstance(value, str):
        raise BadArguments(f"'{key}' must be a string")
    return value


def arg_number(args: _Obj, key: str) -> float:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadArguments(f"'{key}' must be a finite number")
    return value


def arg_int(args: _Obj, key: str, *, default: int | None = None, minimum: int = 0, maximum: int) -> int:
    value = args.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise BadArguments(f"'{key}' must be an integer from {minimum} to {maximum}")
    return value


def elicit_text(result: object) -> str:
    if not isinstance(result, dict):
        raise ValueError("an ElicitResult must be an object")
    action = result.get("action")
    if action == "accept":
        content = result.get("content")
        answer = content.get("answer") if isinstance(content, dict) else None
        if not isinstance(answer, str):
            raise ValueError("an accepted ElicitResult needs content.answer, a string")
        return f"answer: {answer}"
    if action == "decline":
        return "declined"
    if action == "cancel":
        return "cancelled"
    raise ValueError(f"ElicitResult action must be accept, decline or cancel, not {action!r}")


def sample_text(result: object) -> str:
    content = result.get("content") if isinstance(result, dict) else None
    blocks = content if isinstance(content, list) else [content]
    texts = [
        b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    if not texts:
        raise ValueError("a CreateMessageResult needs text content")
    return "sampled: " + "".join(texts)


def roots_text(result: object) -> str:
    roots = result.get("roots") if isinstance(result, dict) else None
    if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots):
        raise ValueError("a ListRootsResult needs roots, a list of objects with a string uri")
    return "\n".join(root["uri"] for root in roots)


# ---------------------------------------------------------------------------------------------
# Per-request state


class Call:
    """One request being served: its era, what the client declared, and its cancel flag."""

    __slots__ = (
        "_answered",
        "_lock",
        "_respond",
        "cancelled",
        "caps",
        "era",
        "id",
        "log_level",
        "method",
        "params",
        "progress_token",
        "revision",
    )

    def __init__(
        self,
        request_id: RequestId,
        method: str,
        params: _Obj,
        *,
        era: Literal["legacy", "modern"],
        revision: str,
        caps: _Obj,
        log_level: str | None,
        respond: _Respond,
    ) -> None:
        self.id = request_id
        self.method = method
        self.params = params
        self.era = era
        self.revision = revision
        self.caps = caps
        self.log_level = log_level
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.progress_token: RequestId | None = token if _is_request_id(token) else None
        self.cancelled = threading.Event()
        self._respond = respond
        self._answered = False
        self._lock = threading.Lock()

    def finish(self, message: _Obj | None) -> None:
        """Answer exactly once; a cancelled call is never answered (``None`` = no answer)."""
        with self._lock:
            if self._answered:
                return
            self._answered = True
        self._respond(None if self.cancelled.is_set() else message)


class _Pending:
    """A legacy server->client request awaiting the client's response."""

    __slots__ = ("call", "event", "response")

    def __init__(self, call: Call) -> None:
        self.call = call
        self.event = threading.Event()
        self.response: _Obj | None = None


class _Listen:
    """An open 2026-07-28 ``subscriptions/listen`` stream and the filter it was granted."""

    __slots__ = ("call", "granted")

    def __init__(self, call: Call, granted: _Obj) -> None:
        self.call = call
        self.granted = granted

    def wants_uri(self, uri: str) -> bool:
        return uri in self.granted.get("resourceSubscriptions", ())


class _Batch:
    """Collects the answers to a 2025-03-26 batch and writes them as one array.

    It starts with one extra expected answer (the dispatch loop itself), so the array cannot be
    written while later items are still being dispatched.
    """

    def __init__(self, emit: Callable[[Message], None]) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._outstanding = 1
        self._answers: list[_Obj] = []

    def expect(self) -> None:
        with self._lock:
            self._outstanding += 1

    def deliver(self, message: _Obj | None) -> None:
        with self._lock:
            if message is not None:
                self._answers.append(message)
            self._outstanding -= 1
            done = self._outstanding == 0 and bool(self._answers)
        if done:
            self._emit(self._answers)


# ---------------------------------------------------------------------------------------------
# The server


class DemoServer:
    """The demo server's protocol engine, without I/O.

    Args:
        writer: receives every outgoing message (never concurrently; it may block).
        era: ``"both"`` (dual-era), ``"legacy"`` or ``"modern"``.
        page_size: items per page of the four list methods; 0 means everything in one page.
        name: ``serverInfo.name``.
        input_timeout: seconds a legacy ``ask``/``sample``/``roots`` call waits for the client.
        exit_process: called with 3 by the ``crash`` tool (default :func:`os._exit`).
    """

    def __init__(
        self,
        writer: Writer,
        *,
        era: EraMode = "both",
        page_size: int = 0,
        name: str = DEFAULT_NAME,
        input_timeout: float = INPUT_TIMEOUT_S,
        exit_process: Callable[[int], object] = os._exit,
    ) -> None:
        if era not in ("both", "legacy", "modern"):
            raise ValueError(f"era must be 'both', 'legacy' or 'modern', not {era!r}")
        if page_size < 0:
            raise ValueError(f"page_size must be >= 0, not {page_size}")
        self._writer = writer
        self._era: EraMode = era
        self._page_size = page_size
        self._name = name
        self._input_timeout = input_timeout
        self._exit_process = exit_process
        self._write_lock = threading.Lock()
        self._lock = threading.RLock()  # state below; taken before _write_lock, never after
        self._closed = False
        self._revision: str | None = None  # the legacy session's revision, once initialized
        self._client_caps: _Obj = {}
        self._client_info: _Obj = {}
        self._log_level = DEFAULT_LOG_LEVEL
        self._subscribed: set[str] = set()  # legacy resources/subscribe
        self._inflight: dict[RequestId, Call] = {}
        self._listens: dict[RequestId, _Listen] = {}
        self._pending: dict[str, _Pending] = {}
        self._next_server_id = 0

    # -- public surface ---------------------------------------------------------------------

    @property
    def era(self) -> EraMode:
        """The ``--era`` mode."""
        return self._era

    @property
    def legacy_revision(self) -> str | None:
        """The revision negotiated by ``initialize``, or None before it."""
        with self._lock:
            return self._revision

    @property
    def closed(self) -> bool:
        """True after :meth:`close`; input is then ignored."""
        with self._lock:
            return self._closed

    def handle_line(self, line: str | bytes) -> None:
        """Handle one line of input (one JSON-RPC message or batch); blank lines are ignored."""
        if self.closed:
            return
        if isinstance(line, bytes):
            try:
                line = line.decode()
            except UnicodeDecodeError as exc:
                self._emit(_error(None, PARSE_ERROR, f"Parse error: invalid UTF-8 ({exc.reason})"))
                return
        text = line.strip()
        if not text:
            return
        try:
            message = decode_json(text)
        except ValueError as exc:
            self._emit(_error(None, PARSE_ERROR, f"Parse error: {exc}"))
            return
        self.handle_message(message)

    def handle_message(self, message: JSONValue) -> None:
        """Handle one decoded message (an object, or an array for a batch)."""
        if self.closed:
            return
        if isinstance(message, list):
            self._handle_batch(message)
        else:
            self._dispatch(message, self._emit_optional)

    def cancel_request(self, request_id: RequestId) -> None:
        """Cancel one request as ``notifications/cancelled`` would: it is not answered.

        For transports whose own signal is the cancellation (a closed 2026-07-28 HTTP response
        stream, ``basic/transports/streamable-http`` §Cancellation).
        """
        self._cancel(request_id)

    def close(self) -> None:
        """Cancel what is in flight and end every open subscription gracefully. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            calls = list(self._inflight.values())
            pending = list(self._pending.values())
            listens = list(self._listens.values())
            self._listens.clear()
        for call in calls:
            call.cancelled.set()
        for waiter in pending:
            waiter.event.set()
        # 2026-07-28 basic/patterns/subscriptions: "When the server ends a subscription on its own
        # initiative (for example, during shutdown), it SHOULD respond to the original
        # subscriptions/listen request with a completion result before closing the stream."
        for listen in listens:
            result = self._decorate(listen.call, {"_meta": {META_SUBSCRIPTION_ID: listen.call.id}})
            listen.call.finish({"jsonrpc": "2.0", "id": listen.call.id, "result": result})

    # -- output -------------------------------------------------------------------------------

    def _emit(self, message: Message) -> None:
        with self._write_lock:
            self._writer(message)

    def _emit_optional(self, message: _Obj | None) -> None:
        if message is not None:
            self._emit(message)

    def _notify(self, method: str, params: _Obj | None = None) -> None:
        message: _Obj = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._emit(message)

    def _server_info(self) -> _Obj:
        return {"name": self._name, "version": SERVER_VERSION}

    # -- input: classification ----------------------------------------------------------------

    def _handle_batch(self, items: list[Any]) -> None:
        with self._lock:
            revision = self._revision
        # JSON-RPC batches exist in 2025-03-26 only (added by it, removed by 2025-06-18).
        if revision != V2025_03_26 or self._era == "modern":
            self._emit(
                _error(
                    None,
                    INVALID_REQUEST,
                    "Invalid Request: JSON-RPC batches are only supported in protocol revision 2025-03-26",
                )
            )
            return
        if not items:
            self._emit(_error(None, INVALID_REQUEST, "Invalid Request: empty batch"))
            return
        batch = _Batch(self._emit)
        for item in items:
            batch.expect()
            if not self._dispatch(item, batch.deliver):
                batch.deliver(None)
        batch.deliver(None)

    def _dispatch(self, message: object, respond: _Respond) -> bool:
        """Route one message; True when ``respond`` will be called exactly once for it."""
        if not isinstance(message, dict):
            respond(_error(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object"))
            return True
        raw_id = message.get("id")
        error_id = raw_id if _is_request_id(raw_id) else None
        if message.get("jsonrpc") != "2.0":
            respond(_error(error_id, INVALID_REQUEST, "Invalid Request: 'jsonrpc' must be \"2.0\""))
            return True
        if "method" in message:
            method = message["method"]
            if not isinstance(method, str):
                if "id" not in message:
                    return False
                respond(_error(error_id, INVALID_REQUEST, "Invalid Request: 'method' must be a string"))
                return True
            params = message.get("params", {})
            if "id" not in message:
                self._on_notification(method, params if isinstance(params, dict) else {})
                return False
            if not _is_request_id(raw_id):
                respond(_error(None, INVALID_REQUEST, "Invalid Request: 'id' must be a string or an integer"))
                return True
            if not isinstance(params, dict):
                respond(_error(raw_id, INVALID_PARAMS, "Invalid params: 'params' must be an object"))
                return True
            self._on_request(raw_id, method, params, respond)
            return True
        if "result" in message or "error" in message:
            self._on_response(raw_id, message)
            return False
        respond(_error(error_id, INVALID_REQUEST, "Invalid Request: expected 'method', 'result' or 'error'"))
        return True

    def _on_notification(self, method: str, params: _Obj) -> None:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            if _is_request_id(request_id):
                self._cancel(request_id)
        elif method == "notifications/initialized":
            _log.debug("client sent notifications/initialized")
        else:
            _log.debug("ignoring notification %s", method)

    def _on_response(self, request_id: object, message: _Obj) -> None:
        with self._lock:
            waiter = self._pending.get(request_id) if isinstance(request_id, str) else None
        if waiter is None:
            _log.warning("dropping a response to unknown request id %r", request_id)
            return
        waiter.response = message
        waiter.event.set()

    def _cancel(self, request_id: RequestId) -> None:
        with self._lock:
            listen = self._listens.pop(request_id, None)
            call = listen.call if listen is not None else self._inflight.get(request_id)
            waiters = [w for w in self._pending.values() if w.call is call]
        if call is None:
            _log.debug("ignoring cancellation of unknown request %r", request_id)
            return
        call.cancelled.set()
        for waiter in waiters:
            waiter.event.set()
        if listen is not None:
            call.finish(None)  # the stream just stops: no response

    # -- input: requests ----------------------------------------------------------------------

    def _on_request(self, request_id: RequestId, method: str, params: _Obj, respond: _Respond) -> None:
        meta = params.get("_meta")
        modern = self._era == "modern" or (
            self._era == "both"
            and (method in _MODERN_ONLY_METHODS or (isinstance(meta, dict) and META_PROTOCOL_VERSION in meta))
        )
        try:
            call = (
                self._modern_call(request_id, method, params, respond)
                if modern
                else self._legacy_call(request_id, method, params, respond)
            )
        except ErrorAnswer as exc:
            respond(_error(request_id, exc.code, exc.message, exc.data))
            return
        if call is not None:
            self._run(call)

    def _legacy_call(self, request_id: RequestId, method: str, params: _Obj, respond: _Respond) -> Call | None:
        if method not in _LEGACY_METHODS:
            raise ErrorAnswer(METHOD_NOT_FOUND, f"Method not found: {method}")
        if method == "initialize":
            respond(self._initialize(request_id, params))
            return None
        if method == "ping":  # allowed before initialize
            respond({"jsonrpc": "2.0", "id": request_id, "result": {}})
            return None
        with self._lock:
            revision, caps = self._revision, self._client_caps
        if revision is None:
            raise ErrorAnswer(INVALID_REQUEST, "not initialized: send 'initialize' first")
        return Call(
            request_id, method, params, era="legacy", revision=revision, caps=caps, log_level=None, respond=respond
        )

    def _modern_call(self, request_id: RequestId, method: str, params: _Obj, respond: _Respond) -> Call:
        if method not in self._modern_methods:
            if method == "initialize":
                # 2026-07-28 basic/versioning: "A server that supports only modern versions SHOULD name
                # the protocol versions it supports in any error it returns to an initialize request".
                raise ErrorAnswer(
                    METHOD_NOT_FOUND,
                    f"Method not found: initialize (this server speaks only {MODERN_REVISION}, "
                    "with the protocol version in every request's _meta)",
                    {"supported": [MODERN_REVISION]},
                )
            raise ErrorAnswer(METHOD_NOT_FOUND, f"Method not found: {method}")
        # 2026-07-28 basic: "A request missing any required field is malformed; the server MUST
        # reject it with JSON-RPC error code -32602 (Invalid params)."
        meta = params.get("_meta")
        if not isinstance(meta, dict) or META_PROTOCOL_VERSION not in meta:
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: _meta must carry {META_PROTOCOL_VERSION!r}")
        version = meta[META_PROTOCOL_VERSION]
        if not isinstance(version, str):
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: _meta {META_PROTOCOL_VERSION!r} must be a string")
        if version != MODERN_REVISION:
            raise ErrorAnswer(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": [MODERN_REVISION], "requested": version},
            )
        caps = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(caps, dict):
            raise ErrorAnswer(
                INVALID_PARAMS, f"Invalid params: _meta must carry {META_CLIENT_CAPABILITIES!r}, an object"
            )
        if META_CLIENT_INFO in meta and not isinstance(meta[META_CLIENT_INFO], dict):
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: _meta {META_CLIENT_INFO!r} must be an object")
        log_level = meta.get(META_LOG_LEVEL)
        # 2026-07-28 server/utilities/logging: an unrecognized level "SHOULD" get -32602.
        if log_level is not None and log_level not in LOG_LEVELS:
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: unknown log level {log_level!r}")
        return Call(
            request_id,
            method,
            params,
            era="modern",
            revision=MODERN_REVISION,
            caps=caps,
            log_level=log_level,
            respond=respond,
        )

    def _initialize(self, request_id: RequestId, params: _Obj) -> _Obj:
        version = params.get("protocolVersion")
        caps = params.get("capabilities", {})
        info = params.get("clientInfo", {})
        if not isinstance(version, str):
            return _error(request_id, INVALID_PARAMS, "Invalid params: 'protocolVersion' must be a string")
        if not isinstance(caps, dict) or not isinstance(info, dict):
            return _error(request_id, INVALID_PARAMS, "Invalid params: 'capabilities' and 'clientInfo' must be objects")
        # 2025-11-25 basic/lifecycle: "If the server supports the requested protocol version, it MUST
        # respond with the same version. Otherwise, the server MUST respond with another protocol
        # version it supports. This SHOULD be the latest version supported by the server."
        revision = version if version in LEGACY_REVISIONS else LATEST_LEGACY
        with self._lock:
            if self._revision is not None:
                return _error(request_id, INVALID_REQUEST, "Invalid Request: already initialized")
            self._revision, self._client_caps, self._client_info = revision, caps, info
        _log.info("initialized: revision %s, client %s", revision, info.get("name"))
        result = {
            "protocolVersion": revision,
            "capabilities": _capabilities(revision),
            "serverInfo": self._server_info(),
            "instructions": INSTRUCTIONS,
        }
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def _run(self, call: Call) -> None:
        if call.method == "subscriptions/listen":
            self._open_listen(call)
            return
        with self._lock:
            if self._closed:
                return
            self._inflight[call.id] = call
        if call.method == "tools/call":
            threading.Thread(target=self._execute, args=(call,), name=f"demo-call-{call.id}", daemon=True).start()
        else:
            self._execute(call)

    def _execute(self, call: Call) -> None:
        token = CURRENT_REQUEST.set(call.id)
        try:
            self._execute_in_context(call)
        finally:
            CURRENT_REQUEST.reset(token)

    def _execute_in_context(self, call: Call) -> None:
        message: _Obj | None
        try:
            result = getattr(self, self._handlers[call.method])(call)
            message = {"jsonrpc": "2.0", "id": call.id, "result": self._decorate(call, result)}
        except InputRequired as exc:
            message = {"jsonrpc": "2.0", "id": call.id, "result": self._decorate(call, exc.result)}
        except Abandoned:
            message = None
        except ErrorAnswer as exc:
            message = _error(call.id, exc.code, exc.message, exc.data)
        except Exception:
            _log.exception("%s (id %r) failed", call.method, call.id)
            message = _error(call.id, INTERNAL_ERROR, "Internal error")
        finally:
            with self._lock:
                if self._inflight.get(call.id) is call:
                    del self._inflight[call.id]
        call.finish(message)

    def _decorate(self, call: Call, result: _Obj) -> _Obj:
        """2026-07-28 results carry resultType and, in _meta, the serverInfo."""
        if call.era != "modern":
            return result
        decorated: _Obj = {"resultType": "complete", **result}
        decorated["_meta"] = {**result.get("_meta", {}), META_SERVER_INFO: self._server_info()}
        return decorated

    # -- method handlers ----------------------------------------------------------------------

    def _discover(self, call: Call) -> _Obj:
        return {
            "supportedVersions": [MODERN_REVISION],
            "capabilities": _capabilities(MODERN_REVISION),
            "instructions": INSTRUCTIONS,
            "ttlMs": DISCOVER_TTL_MS,
            "cacheScope": CACHE_SCOPE,
        }

    def _paginated(self, call: Call, kind: str, items: Sequence[_Obj]) -> _Obj:
        result = page_of(items, call.params.get("cursor"), kind, {"list": kind}, self._page_size)
        if result is None:
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: invalid cursor for {call.method}")
        if call.era == "modern":
            result["ttlMs"] = LIST_TTL_MS
            result["cacheScope"] = CACHE_SCOPE
        return result

    def _tools_list(self, call: Call) -> _Obj:
        return self._paginated(call, "tools", self._tool_definitions(call.revision))

    def _tool_definitions(self, revision: str) -> list[_Obj]:
        """Every tool as listed in ``revision`` (a subclass adds its own)."""
        return tool_list(revision)

    def _resources_list(self, call: Call) -> _Obj:
        return self._paginated(call, "resources", RESOURCES)

    def _templates_list(self, call: Call) -> _Obj:
        return self._paginated(call, "resourceTemplates", TEMPLATES)

    def _prompts_list(self, call: Call) -> _Obj:
        return self._paginated(call, "prompts", PROMPTS)

    def _resources_read(self, call: Call) -> _Obj:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'uri' must be a string")
        contents = read_resource(uri)
        if contents is None:
            if call.era == "legacy":
                raise ErrorAnswer(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: resource not found: {uri}", {"uri": uri})
        result: _Obj = {"contents": [contents]}
        if call.era == "modern":
            result["ttlMs"] = READ_TTL_MS
            result["cacheScope"] = CACHE_SCOPE
        return result

    def _resources_subscribe(self, call: Call) -> _Obj:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'uri' must be a string")
        with self._lock:
            if call.method == "resources/subscribe":
                self._subscribed.add(uri)
            else:
                self._subscribed.discard(uri)
        return {}

    def _prompts_get(self, call: Call) -> _Obj:
        name = call.params.get("name")
        arguments = call.params.get("arguments", {})
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'arguments' must map names to strings")
        if name == "greet":
            if "name" not in arguments:
                raise ErrorAnswer(INVALID_PARAMS, "Invalid params: prompt 'greet' needs the argument 'name'")
            text = f"Hello, {arguments['name']}!"
            description = "Greet someone by name."
        elif name == "plain":
            text, description = "Say something nice.", "A prompt without arguments."
        else:
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: unknown prompt {name!r}")
        return {"description": description, "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}

    def _complete(self, call: Call) -> _Obj:
        ref, argument = call.params.get("ref"), call.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'ref' and 'argument' must be objects")
        arg_name, value = argument.get("name"), argument.get("value")
        if not isinstance(arg_name, str) or not isinstance(value, str):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'argument' needs string 'name' and 'value'")
        candidates: tuple[str, ...] = ()
        if ref.get("type") == "ref/prompt":
            if ref.get("name") not in ("greet", "plain"):
                raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: unknown prompt {ref.get('name')!r}")
            if ref["name"] == "greet" and arg_name == "name":
                candidates = GREET_NAMES
        elif ref.get("type") == "ref/resource":
            if ref.get("uri") not in (ITEMS_TEMPLATE, HELLO_URI, BLOB_URI):
                raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: unknown resource {ref.get('uri')!r}")
            if ref["uri"] == ITEMS_TEMPLATE and arg_name == "id":
                candidates = ITEM_IDS
        else:
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'ref.type' must be 'ref/prompt' or 'ref/resource'")
        values = [c for c in candidates if c.startswith(value)]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    def _set_level(self, call: Call) -> _Obj:
        level = call.params.get("level")
        if level not in LOG_LEVELS:
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        with self._lock:
            self._log_level = level
        return {}

    def _open_listen(self, call: Call) -> None:
        token = CURRENT_REQUEST.set(call.id)
        try:
            self._open_listen_in_context(call)
        finally:
            CURRENT_REQUEST.reset(token)

    def _open_listen_in_context(self, call: Call) -> None:
        wanted = call.params.get("notifications")
        if not isinstance(wanted, dict):
            call.finish(_error(call.id, INVALID_PARAMS, "Invalid params: 'notifications' must be an object"))
            return
        # 2026-07-28 basic/patterns/subscriptions: the acknowledgment "reflects the subset the server
        # agreed to honor. Notification types the server does not support are omitted."
        granted: _Obj = {flag: True for flag in _LIST_FLAGS if wanted.get(flag) is True}
        uris = wanted.get("resourceSubscriptions")
        if uris is not None:
            if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
                call.finish(
                    _error(call.id, INVALID_PARAMS, "Invalid params: 'resourceSubscriptions' must be a list of strings")
                )
                return
            granted["resourceSubscriptions"] = list(uris)
        try:
            granted.update(self._listen_grants(call, wanted))
        except ErrorAnswer as exc:
            call.finish(_error(call.id, exc.code, exc.message, exc.data))
            return
        with self._lock:
            if self._closed:
                return
            if call.id in self._listens:
                call.finish(
                    _error(call.id, INVALID_REQUEST, f"Invalid Request: subscription {call.id!r} is already open")
                )
                return
            # "MUST send notifications/subscriptions/acknowledged as the first message carrying the
            # subscription's ID": sent under the lock, before any publisher can see the stream.
            self._notify(
                "notifications/subscriptions/acknowledged",
                {"notifications": granted, "_meta": {META_SUBSCRIPTION_ID: call.id}},
            )
            self._listens[call.id] = _Listen(call, granted)

    def _listen_grants(self, call: Call, wanted: _Obj) -> _Obj:
        """Grants for the filter fields a subclass serves (extensions); may raise ``ErrorAnswer``."""
        return {}

    # -- tools --------------------------------------------------------------------------------

    def _tools_call(self, call: Call) -> _Obj:
        name = call.params.get("name")
        args = call.params.get("arguments", {})
        handler = self._tools.get(name) if isinstance(name, str) else None
        if handler is None:
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: unknown tool {name!r}")
        if not isinstance(args, dict):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'arguments' must be an object")
        tool: Callable[[Call, _Obj], _Obj] = getattr(self, handler)
        try:
            return tool(call, args)
        except BadArguments as exc:
            # 2025-11-25 server/tools: input validation errors are tool execution errors (isError),
            # so that the model can correct itself.
            return text_result(f"invalid arguments for tool {name!r}: {exc}", is_error=True)

    def _tool_echo(self, call: Call, args: _Obj) -> _Obj:
        return text_result(arg_str(args, "text") or "")

    def _tool_add(self, call: Call, args: _Obj) -> _Obj:
        total = arg_number(args, "a") + arg_number(args, "b")
        if not math.isfinite(total):
            raise BadArguments("the sum is not a finite number")
        result = text_result(json.dumps(total))
        if since(call.revision, V2025_06_18):
            result["structuredContent"] = {"sum": total}
        return result

    def _tool_fail(self, call: Call, args: _Obj) -> _Obj:
        message = arg_str(args, "message", required=False)
        return text_result("the tool failed" if message is None else message, is_error=True)

    def _tool_slow(self, call: Call, args: _Obj) -> _Obj:
        seconds = arg_number(args, "seconds")
        if not 0 <= seconds <= MAX_SLOW_S:
            raise BadArguments(f"'seconds' must be from 0 to {MAX_SLOW_S:g}")
        steps = arg_int(args, "steps", default=5, minimum=1, maximum=MAX_SLOW_STEPS)
        for step in range(1, steps + 1):
            if call.cancelled.wait(seconds / steps):
                raise Abandoned
            self._progress(call, step, steps, f"step {step} of {steps}")
        return text_result(f"done after {steps} steps")

    def _tool_big(self, call: Call, args: _Obj) -> _Obj:
        return text_result("x" * arg_int(args, "size", maximum=MAX_BIG_CHARS))

    def _tool_ask(self, call: Call, args: _Obj) -> _Obj:
        question = arg_str(args, "question") or ""
        # 2025-06-18 introduced elicitation; 2025-11-25 added modes ("form" is the default) and
        # string defaults.
        if not since(call.revision, V2025_06_18) or not self._form_elicitation(call.caps):
            return self._missing_capability(call, "elicitation", {"elicitation": {"form": {}}}, "client cannot elicit")
        answer: _Obj = {"type": "string"}
        params: _Obj = {"message": question}
        if since(call.revision, V2025_11_25):
            answer["default"] = "yes"
            params = {"mode": "form", **params}
        params["requestedSchema"] = {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}
        return self._with_input(call, args, "answer", {"method": "elicitation/create", "params": params}, elicit_text)

    def _tool_sample(self, call: Call, args: _Obj) -> _Obj:
        prompt = arg_str(args, "prompt") or ""
        if not isinstance(call.caps.get("sampling"), dict):
            return self._missing_capability(call, "sampling", {"sampling": {}}, "client cannot sample")
        params: _Obj = {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 100}
        return self._with_input(
            call, args, "reply", {"method": "sampling/createMessage", "params": params}, sample_text
        )

    def _tool_roots(self, call: Call, args: _Obj) -> _Obj:
        if not isinstance(call.caps.get("roots"), dict):
            return self._missing_capability(call, "roots", {"roots": {}}, "client cannot list roots")
        return self._with_input(call, args, "roots", {"method": "roots/list"}, roots_text)

    def _tool_notify(self, call: Call, args: _Obj) -> _Obj:
        self._log_to_client(call, "info", "the notify tool was called")
        # 2026-07-28: list_changed only on listen streams that asked for it; legacy: to the session.
        with self._lock:
            if self._revision is not None:
                self._notify("notifications/tools/list_changed")
            for listen in self._listens.values():
                if listen.granted.get("toolsListChanged"):
                    self._notify("notifications/tools/list_changed", {"_meta": {META_SUBSCRIPTION_ID: listen.call.id}})
        return text_result("ok")

    def _tool_touch(self, call: Call, args: _Obj) -> _Obj:
        uri = arg_str(args, "uri") or ""
        with self._lock:
            if self._revision is not None and uri in self._subscribed:
                self._notify("notifications/resources/updated", {"uri": uri})
            for listen in self._listens.values():
                if listen.wants_uri(uri):
                    self._notify(
                        "notifications/resources/updated", {"uri": uri, "_meta": {META_SUBSCRIPTION_ID: listen.call.id}}
                    )
        return text_result("ok")

    def _tool_crash(self, call: Call, args: _Obj) -> _Obj:
        sys.stderr.write(f"demo server: the crash tool was called, exiting with status {CRASH_EXIT_STATUS}\n")
        sys.stderr.flush()
        self._exit_process(CRASH_EXIT_STATUS)
        raise Abandoned  # only reached when exit_process returns (an embedding that does not exit)

    # -- tool helpers -------------------------------------------------------------------------

    @staticmethod
    def _form_elicitation(caps: _Obj) -> bool:
        # 2025-11-25 client/elicitation: an empty elicitation object means form mode is supported.
        declared = caps.get("elicitation")
        return isinstance(declared, dict) and (not declared or "form" in declared)

    @staticmethod
    def _missing_capability(call: Call, capability: str, required: _Obj, legacy_text: str) -> _Obj:
        if call.era == "legacy":
            return text_result(legacy_text, is_error=True)
        # 2026-07-28 basic: "If processing a request requires a capability the client did not
        # include ..., the server MUST return a MissingRequiredClientCapabilityError (-32021)".
        raise ErrorAnswer(
            MISSING_CLIENT_CAPABILITY,
            f"Missing required client capability: {capability}",
            {"requiredCapabilities": required},
        )

    def _with_input(self, call: Call, args: _Obj, key: str, request: _Obj, interpret: Callable[[object], str]) -> _Obj:
        """Get the client's answer to ``request`` the era's way, then turn it into the tool's text."""
        method = request["method"]
        if call.era == "legacy":
            response = self._ask_client(call, request)
            if response is None:
                return text_result(f"no answer to {method} within {self._input_timeout:g} s", is_error=True)
            if "error" in response:
                error = response["error"]
                detail = error.get("message") if isinstance(error, dict) else None
                return text_result(f"{method} failed: {detail}", is_error=True)
            try:
                return text_result(interpret(response.get("result")))
            except ValueError as exc:
                return text_result(f"invalid {method} result: {exc}", is_error=True)
        # 2026-07-28 basic/patterns/mrtr: the state travels in requestState; the retry carries the
        # answers in inputResponses. The state only names the call it belongs to, so tampering
        # can cause nothing worse than a failed request.
        state = b64_json({"tool": call.params.get("name"), "arguments": args})
        if "requestState" in call.params:
            if call.params["requestState"] != state:
                raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'requestState' does not belong to this tool call")
            responses = call.params.get("inputResponses")
            if isinstance(responses, dict) and key in responses:
                try:
                    return text_result(interpret(responses[key]))
                except ValueError as exc:
                    raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: inputResponses[{key!r}]: {exc}") from None
        # First attempt, or a retry without the answer: ask (again), as the spec recommends.
        raise InputRequired({"resultType": "input_required", "inputRequests": {key: request}, "requestState": state})

    def _ask_client(self, call: Call, request: _Obj) -> _Obj | None:
        """Send a legacy server->client request and wait for the response (None on timeout)."""
        waiter = _Pending(call)
        with self._lock:
            if self._closed:
                raise Abandoned
            self._next_server_id += 1
            server_id = f"srv-{self._next_server_id}"
            self._pending[server_id] = waiter
        try:
            self._emit({"jsonrpc": "2.0", "id": server_id, **request})
            answered = waiter.event.wait(self._input_timeout)
            if waiter.response is not None:
                return waiter.response
            reason = "the tool call was cancelled" if call.cancelled.is_set() or answered else "no answer in time"
            if not self.closed:
                self._notify("notifications/cancelled", {"requestId": server_id, "reason": reason})
            if answered or call.cancelled.is_set():
                raise Abandoned
            return None
        finally:
            with self._lock:
                self._pending.pop(server_id, None)

    def _progress(self, call: Call, progress: int, total: int, message: str) -> None:
        if call.progress_token is None or call.cancelled.is_set():
            return
        params: _Obj = {"progressToken": call.progress_token, "progress": progress, "total": total}
        if since(call.revision, V2025_03_26):  # 2024-11-05 progress had no message
            params["message"] = message
        self._notify("notifications/progress", params)

    def _log_to_client(self, call: Call, level: str, data: JSONValue) -> None:
        if call.era == "legacy":
            with self._lock:
                threshold: str | None = self._log_level
        else:
            # 2026-07-28 server/utilities/logging: "The server MUST NOT emit notifications/message
            # for a request that does not include this field."
            threshold = call.log_level
        if threshold is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return
        self._notify("notifications/message", {"level": level, "logger": "demo", "data": data})

    #: the methods served in the 2026-07-28 era (a subclass adds those of its extensions)
    _modern_methods: ClassVar[frozenset[str]] = _MODERN_METHODS
    #: method -> handler attribute (``getattr`` so that a subclass may override or add one)
    _handlers: ClassVar[dict[str, str]] = {
        "server/discover": "_discover",
        "tools/list": "_tools_list",
        "tools/call": "_tools_call",
        "resources/list": "_resources_list",
        "resources/templates/list": "_templates_list",
        "resources/read": "_resources_read",
        "resources/subscribe": "_resources_subscribe",
        "resources/unsubscribe": "_resources_subscribe",
        "prompts/list": "_prompts_list",
        "prompts/get": "_prompts_get",
        "completion/complete": "_complete",
        "logging/setLevel": "_set_level",
    }
    #: tool name -> handler attribute, called with (call, arguments)
    _tools: ClassVar[dict[str, str]] = {
        "echo": "_tool_echo",
        "add": "_tool_add",
        "fail": "_tool_fail",
        "slow": "_tool_slow",
        "big": "_tool_big",
        "ask": "_tool_ask",
        "sample": "_tool_sample",
        "roots": "_tool_roots",
        "notify": "_tool_notify",
        "touch": "_tool_touch",
        "crash": "_tool_crash",
    }


# ---------------------------------------------------------------------------------------------
# The stdio shell


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mcpwire.testing.demo_server",
        description="A demo MCP server on stdio speaking both eras (2024-11-05 .. 2026-07-28).",
    )
    parser.add_argument(
        "--era", choices=("both", "legacy", "modern"), default="both", help="lifecycles offered (default: both)"
    )
    parser.add_argument(
        "--page-size", type=int, default=0, metavar="N", help="items per list page; 0 = no pagination (default)"
    )
    parser.add_argument("--name", default=DEFAULT_NAME, help=f"serverInfo.name (default: {DEFAULT_NAME})")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    options = parser.parse_args(argv)
    if options.page_size < 0:
        parser.error("--page-size must be >= 0")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """Serve on stdin/stdout until end of input; returns the exit status."""
    options = _parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if options.verbose else logging.WARNING,
        format="demo server %(levelname)s: %(message)s",
    )
    stdout = sys.stdout.buffer

    def write(message: Message) -> None:
        data = encode_message(message)
        try:
            stdout.write(data)
            stdout.write(b"\n")
            stdout.flush()
        except (OSError, ValueError):  # the client closed our stdout: nobody is listening
            _log.warning("stdout is closed; exiting")
            os._exit(0)

    server = DemoServer(write, era=options.era, page_size=options.page_size, name=options.name)
    _log.info("serving (era %s, page size %d)", options.era, options.page_size)
    stdin = sys.stdin.buffer
    try:
        # 2026-07-28 basic/transports/stdio: "Servers SHOULD exit promptly when their standard input
        # is closed or reads return end-of-file."
        for line in iter(stdin.readline, b""):
            server.handle_line(line)
    except KeyboardInterrupt:
        return 130
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    # os._exit, not SystemExit: a daemon call thread may be blocked writing to stdout, and the
    # interpreter's shutdown would wait on (or abort over) that stream's lock. Output is flushed.
    os._exit(main())
