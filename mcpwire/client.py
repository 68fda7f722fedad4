"""The MCP client: one typed surface over both eras and every transport.

Theory of operation: a :class:`Client` owns a nursery, a transport actor (the stdio subprocess
here) and a sans-I/O :class:`~mcpwire.protocol.session.ClientSession`. The transport calls the
client's dispatcher synchronously for every message it reads; the dispatcher resolves waiters,
routes progress to the caller waiting for it, pushes notifications into a bounded channel
(dropping and counting when full) and starts a task per server request, so the reader never
waits on user code.

A call allocates an id, sends, and waits on its waiter under a deadline that progress extends,
up to a hard cap (LC-60..LC-62). On timeout or cancellation the id is abandoned (a late answer is
counted and dropped, JR-06) and ``notifications/cancelled`` is sent shielded and bounded (UT-C02),
except for ``initialize`` (LC-06).

Connecting detects the era with the sans-I/O :class:`~mcpwire.protocol.lifecycle.EraDetector`:
this module only performs its actions (send the probe, send ``initialize``, restart the server)
and feeds it the answers, timeouts and exits. In the modern era every request carries ``_meta``
and results of ``tools/call``, ``resources/read`` and ``prompts/get`` may ask for input
(``input_required``); the client answers with its handlers and retries with a new id, echoing
``requestState`` byte for byte (UT-R02..UT-R07).
"""

from __future__ import annotations

import heapq
import inspect
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn, TypeVar

import msgspec
import trio
from msgspec import UNSET, UnsetType

from ._version import __version__
from .actors.base import Transport
from .actors.stdio import StdioTransport
from .errors import (
    AuthError,
    ClientClosed,
    ConnectError,
    EraDetectionError,
    FrameTooLarge,
    HTTPStatusError,
    InvalidResponse,
    MCPWireError,
    MissingClientCapability,
    OutputSchemaError,
    RemoteProtocolError,
    RequestTimeout,
    ResponseStreamLost,
    RPCError,
    ServerGone,
    SessionExpired,
    TransportError,
    UnsupportedVersion,
)
from .protocol import jsonrpc
from .protocol.framing import DEFAULT_MAX_MESSAGE_BYTES
from .protocol.http import HeaderSpec, mirrored_headers, tool_header_spec
from .protocol.jsonrpc import ErrorResponse, Message, Request, RequestId, Response
from .protocol.lifecycle import (
    Decided,
    EraDetector,
    Failed,
    Restart,
    SendDiscover,
    SendInitialize,
    SessionState,
    UseSSE,
)
from .protocol.methods import METHODS
from .protocol.pending import PendingRequest
from .protocol.session import (
    AnswerReceived,
    AnswerUnreadable,
    ClientSession,
    NotificationReceived,
    ProgressReceived,
    ServerRequestReceived,
    ToolCallResponse,
    Violation,
    decode_tool_answer,
)
from .protocol.types import (
    META_LOG_LEVEL,
    META_SERVER_INFO,
    CallToolWire,
    CallToolWireLenient,
    CompleteResult,
    Completion,
    ContentBlock,
    DiscoverResult,
    GetPromptResult,
    Implementation,
    InitializeResult,
    JSONObject,
    JSONValue,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ServerCapabilities,
    Tool,
    ToolResult,
    decode_content,
    decode_tools,
)
from .protocol.versions import LEGACY_REVISIONS, MODERN_REVISIONS, V2025_06_18, V2025_11_25, Era, era_of, is_known
from .redaction import redact_url
from .transports import HttpServer, StdioServer, as_server

if TYPE_CHECKING:
    import httpx
    from jsonschema.protocols import Validator

__all__ = [
    "Client",
    "ClientStatistics",
    "ElicitationHandler",
    "Progress",
    "RootsHandler",
    "SamplingHandler",
    "ServerNotification",
    "Subscription",
    "connect_client",
    "open_client",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TIMEOUT: Final = 30.0
DEFAULT_MAX_TIMEOUT: Final = 600.0
DEFAULT_CONNECT_TIMEOUT: Final = 60.0
DEFAULT_PROBE_TIMEOUT: Final = 0.5
CANCEL_NOTIFY_TIMEOUT: Final = 1.0
#: heap entries of finished calls are dropped once the heap is this large (and 4x the live ones)
COMPACT_DEADLINES_AT: Final = 1024
#: messages at least this large may be read in one pass as a call_tool answer (below, the
#: generic path's second look at the result costs little)
ONE_PASS_MIN_BYTES: Final = 16 * 1024
MAX_PAGES: Final = 10_000
#: what one listing (every page of tools/list, resources/list, ...) may add up to, by default
DEFAULT_MAX_LIST_ITEMS: Final = 100_000
DEFAULT_MAX_LIST_BYTES: Final = 64 * 1024 * 1024
NOISE_WARNINGS_PER_MINUTE: Final = 5
#: Answers with an id no request has that are logged, per client; the rest are only counted.
STRAY_WARNINGS: Final = 5
#: methods that may run twice without harm (reads, lists, setting the same log level), so an HTTP
#: transport may send them again when a connection broke after sending; never ``initialize`` (a
#: second session) or ``tools/call``
_IDEMPOTENT_METHODS: Final = frozenset(
    {
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
    }
)

#: ``async def handler(params) -> CreateMessageResult`` for ``sampling/createMessage``.
SamplingHandler = Callable[[JSONObject], Awaitable[JSONObject]]
#: ``async def handler(params) -> ElicitResult`` for ``elicitation/create``.
ElicitationHandler = Callable[[JSONObject], Awaitable[JSONObject]]
#: roots: a list of ``file://`` URIs (or ``{"uri", "name"}`` objects), or an async callable returning one.
RootsHandler = Sequence["str | JSONObject"] | Callable[[], Awaitable[Sequence["str | JSONObject"]]]
ProgressCallback = Callable[["Progress"], "Awaitable[None] | None"]
NoiseCallback = Callable[[bytes], None]

Target = StdioServer | HttpServer | Sequence[str] | str | None
ServerSpec = StdioServer | HttpServer

_ERA_CACHE: dict[tuple[object, ...], Era] = {}
"""Era verdicts, per server command and working directory (stdio) or per URL (HTTP), for the life
of the process (LC-44); written and read only with ``era_cache=True``."""

_PARITY_CHECKED: set[tuple[object, ...]] = set()
"""Servers whose 2026-07-28 lists were cross-checked against the legacy era and found to be
what they serve (see :meth:`Client._cross_check_legacy`): not checked again in this process."""

_HTTP_KIND_CACHE: dict[str, str] = {}
"""Which HTTP transport answered a URL (``"streamable-http"`` or ``"sse"``), beside its era.

Both verdicts are kept per URL, not per origin as LC-44 words it ("the lifetime of the ... origin
(HTTP)"): two MCP endpoints on one origin can differ - ``/mcp`` (Streamable HTTP, 2026-07-28) and
``/sse`` (HTTP+SSE, 2024-11-05) of one server, or a gateway routing ``/github`` and ``/slack`` to
different servers - and an origin-wide verdict would send one endpoint's era and transport to the
other. A URL is the finest key that never mixes two servers. A verdict that later fails is
dropped and detection runs again, once (LC-44: "re-probing if the cached assumption later
fails")."""


class Progress(msgspec.Struct, frozen=True):
    """One ``notifications/progress`` update for a request."""

    progress: float
    total: float | None = None
    message: str | None = None


class ServerNotification(msgspec.Struct, frozen=True):
    """A notification from the server. ``params`` is the decoded JSON object."""

    method: str
    params: JSONObject
    subscription_id: RequestId | None = None


class ClientStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one client connection (a snapshot)."""

    requests_sent: int
    pending: int
    late_responses: int
    unknown_responses: int
    notifications_received: int
    notifications_dropped: int
    server_requests: int
    non_protocol_lines: int
    protocol_violations: int
    restarts: int
    bytes_sent: int
    bytes_received: int


class _Wake:
    """A one-waiter event: what a request's caller sleeps on until its answer (or progress, or
    its deadline) arrives.

    ``trio.Event`` serves any number of waiters through a parking lot; a call has exactly one
    waiter, its caller, so this keeps just that task and reschedules it directly: one small
    object per call and no parking-lot bookkeeping, on the path every call takes. ``clear()``
    re-arms it for the next wait (after progress).
    """

    __slots__ = ("_flag", "_task")

    def __init__(self) -> None:
        self._flag = False
        self._task: trio.lowlevel.Task | None = None

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            task = self._task
            if task is not None:
                self._task = None
                trio.lowlevel.reschedule(task)

    def clear(self) -> None:
        self._flag = False

    async def wait(self) -> None:
        """Returns once set. Cancellation: a checkpoint; raises ``Cancelled`` as trio does."""
        if self._flag:
            await trio.lowlevel.checkpoint()
            return
        if self._task is not None:  # pragma: no cover - one waiter by construction
            raise RuntimeError("a call's wake-up has a single waiter")
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


class _Waiter(_Wake):
    """What one request's caller waits on, and its wake-up (a plain slotted class: one is made
    per call)."""

    __slots__ = ("channel", "deadline", "done", "expired", "outcome", "progress", "typed_tool")

    def __init__(
        self,
        *,
        progress: list[JSONObject] | None = None,
        channel: trio.MemorySendChannel[_Waiter] | None = None,
    ) -> None:
        self._flag = False
        self._task = None
        self.outcome: Response | ErrorResponse | BaseException | None = None
        self.progress = progress  # None: progress not wanted
        self.channel = channel  # handshake waiters report here
        self.deadline = math.inf  # when the caller gives up (reset on progress)
        self.expired = False  # set by the deadline watcher
        self.done = False  # the caller stopped waiting (answered, timed out or cancelled)
        self.typed_tool = False  # call_tool's own: its answer may come as a ToolCallResponse


class _Deadlines:
    """Every request timeout of one client, watched by a single task.

    A cancel scope per call would cost each call a registration in trio's deadline table and a
    cancel-status node; here a call costs one heap push. The watcher sleeps in one cancel scope
    whose deadline is the earliest pending one; at it, it marks each due waiter ``expired`` and
    sets its event. Entries of calls that finished stay in the heap until compacted (when the
    heap holds far more entries than live waiters), so memory stays bounded by the calls in flight.
    """

    __slots__ = ("_armed", "_heap", "_next_compaction", "_scope", "_seq", "_started", "_stop")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Waiter]] = []
        self._next_compaction = COMPACT_DEADLINES_AT
        self._seq = 0
        self._scope: trio.CancelScope | None = None
        self._armed = math.inf  # the scope's deadline, kept here: reading the property costs a call
        self._started = False
        self._stop = trio.CancelScope()

    def add(self, waiter: _Waiter, deadline: float, nursery: trio.Nursery) -> None:
        waiter.deadline = deadline
        heap = self._heap
        self._seq += 1
        heapq.heappush(heap, (deadline, self._seq, waiter))
        if len(heap) > self._next_compaction:
            self._compact()  # amortised O(1): the next one waits until the heap grows 4x again
            self._next_compaction = max(COMPACT_DEADLINES_AT, 4 * len(heap))
        if not self._started:
            self._started = True
            nursery.start_soon(self._watch)
        elif self._scope is not None and deadline < self._armed:
            self._scope.deadline = self._armed = deadline

    def close(self) -> None:
        self._stop.cancel()

    def _compact(self) -> None:
        self._heap[:] = [e for e in self._heap if not e[2].done and e[2].deadline == e[0]]
        heapq.heapify(self._heap)

    async def _watch(self) -> None:
        heap = self._heap
        with self._stop:
            while True:
                self._armed = heap[0][0] if heap else math.inf
                with trio.CancelScope(deadline=self._armed) as scope:
                    self._scope = scope
                    await trio.sleep_forever()
                self._scope = None
                now = trio.current_time()
                while heap and heap[0][0] <= now:
                    deadline, _, waiter = heapq.heappop(heap)
                    if not waiter.done and waiter.outcome is None and waiter.deadline == deadline:
                        waiter.expired = True
                        waiter.set()


class _ResultHead(msgspec.Struct, rename="camel"):
    result_type: str = "complete"
    input_requests: dict[str, Any] | None = None
    request_state: str | UnsetType = UNSET


class _ToolsPage(msgspec.Struct, rename="camel"):
    tools: list[Any] = msgspec.field(default_factory=list)
    next_cursor: str | None = None


class _ResourcesPage(msgspec.Struct, rename="camel"):
    resources: list[Resource] = msgspec.field(default_factory=list)
    next_cursor: str | None = None


class _TemplatesPage(msgspec.Struct, rename="camel"):
    resource_templates: list[ResourceTemplate] = msgspec.field(default_factory=list)
    next_cursor: str | None = None


class _PromptsPage(msgspec.Struct, rename="camel"):
    prompts: list[Prompt] = msgspec.field(default_factory=list)
    next_cursor: str | None = None


_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}
_call_tool_decoder: msgspec.json.Decoder[CallToolWire] | None = None  # built on first use (about 1 ms)


def _decode(raw: msgspec.Raw, kind: type[T], method: str, server: str) -> T:
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    try:
        return decoder.decode(raw)  # type: ignore[no-any-return]
    except jsonrpc.DECODE_ERRORS as exc:  # also invalid UTF-8 and hostile nesting
        raise InvalidResponse(f"server '{server}' answered '{method}' with an invalid result: {exc}") from exc


_UNSAFE_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")


def _printable(text: str, limit: int = 200) -> str:
    """Text from a server made safe for a log line (no terminal escapes, bounded; UT-L05)."""
    cleaned = _UNSAFE_TEXT.sub("?", text)
    return cleaned if len(cleaned) <= limit else cleaned[:limit] + f"... [{len(cleaned) - limit} more]"


class Client:
    """A connection to one MCP server. Create it with :func:`open_client`.

    Attributes:
        label: the server's name in logs and errors.
    """

    def __init__(
        self,
        spec: ServerSpec,
        nursery: trio.Nursery,
        *,
        name: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        client_info: Implementation | None = None,
        era: Literal["auto", "legacy", "modern"] | None = None,
        protocol_version: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_timeout: float = DEFAULT_MAX_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        notification_buffer: int = 1000,
        strict: bool = False,
        on_stdout_noise: NoiseCallback | None = None,
        roots: RootsHandler | None = None,
        sampling: SamplingHandler | None = None,
        elicitation: ElicitationHandler | None = None,
        max_input_rounds: int = 10,
        max_list_items: int = DEFAULT_MAX_LIST_ITEMS,
        max_list_bytes: int = DEFAULT_MAX_LIST_BYTES,
        validate_output: bool = True,
        era_cache: bool = True,
        server_stream: bool = True,
    ) -> None:
        if timeout <= 0 or max_timeout <= 0 or connect_timeout <= 0 or probe_timeout <= 0:
            raise ValueError("timeouts must be positive numbers of seconds")
        if max_list_items < 1 or max_list_bytes < 1:
            raise ValueError("max_list_items and max_list_bytes must be positive")
        if protocol_version is not None and not is_known(protocol_version):
            raise ValueError(
                f"unknown protocol_version {protocol_version!r}; mcpwire speaks "
                + ", ".join((*MODERN_REVISIONS, *LEGACY_REVISIONS))
            )
        if era not in (None, "auto", "legacy", "modern"):
            raise ValueError(f"era must be 'auto', 'legacy', 'modern' or None, not {era!r}")
        self.spec = spec
        self.label = name or spec.label
        self._nursery = nursery
        self._clock: trio.abc.Clock | None = None  # the run's clock, fixed for the run (first use)
        self._timeout = timeout
        self._max_timeout = max_timeout
        self._connect_timeout = connect_timeout
        self._probe_timeout = probe_timeout
        self._max_message_bytes = max_message_bytes
        self._strict = strict
        self._on_noise = on_stdout_noise
        self._roots = roots
        self._sampling = sampling
        self._elicitation = elicitation
        self._max_input_rounds = max_input_rounds
        self._max_list_items = max_list_items
        self._max_list_bytes = max_list_bytes
        self._validate_output = validate_output
        self._use_era_cache = era_cache
        self._requested_era = era or "auto"
        self._protocol_version = protocol_version
        info = client_info or Implementation(name="mcpwire", version=__version__)
        self._session: ClientSession[_Waiter] = ClientSession(info, self._capabilities(None), label=self.label)
        self._transport: Transport | None = None
        self._http_client = http_client
        self._http_kind = "streamable-http"
        #: the HTTP transport was taken from _HTTP_KIND_CACHE (so a failure re-runs detection)
        self._kind_cached = False
        if isinstance(spec, HttpServer):
            if spec.transport != "auto":
                self._http_kind = spec.transport
            elif era_cache and spec.url in _HTTP_KIND_CACHE:
                self._http_kind = _HTTP_KIND_CACHE[spec.url]
                self._kind_cached = True
        self._tool_headers: dict[str, HeaderSpec] = {}
        self._reinit_lock = trio.Lock()
        self._deadlines = _Deadlines()
        #: set while the (legacy) session is usable; cleared while a new one is initialised
        self._session_ready = trio.Event()
        self._session_ready.set()
        self._generation = 0  # counts sessions established (a renewal is needed once per loss)
        #: an auto-detected 2026-07-28 connection whose empty lists are not yet cross-checked
        self._parity_pending = False
        self._want_server_stream = server_stream
        self._lost: BaseException | None = None
        self._closed = trio.Event()
        self._closing = False
        self._notify_send, self._notify_recv = trio.open_memory_channel[ServerNotification](notification_buffer)
        self._subscriptions: dict[RequestId, Subscription] = {}
        self._legacy_subscriptions: list[Subscription] = []
        self._server_request_scopes: dict[RequestId, trio.CancelScope] = {}
        self._tools: dict[str, Tool] = {}
        self._tool_calls_in_flight = 0  # classify() tries the one-pass decode only while > 0
        self._output_schemas: frozenset[str] = frozenset()  # names of the tools that declare one
        self._validators: dict[str, Validator | None] = {}
        self._log_level: str | None = None
        self._discover: DiscoverResult | None = None
        self._noise_times: list[float] = []
        # counters
        self._requests_sent = 0
        self._notifications = 0
        self._dropped = 0
        self._unknown_logged = 0  # the table's unknown-answer count when last logged
        self._server_requests = 0
        self._noise = 0
        self._violations = 0
        self._restarts = 0

    # -- public attributes ------------------------------------------------------------------

    @property
    def era(self) -> Era | None:
        """``Era.LEGACY`` or ``Era.MODERN`` once connected."""
        return self._session.era

    @property
    def protocol_version(self) -> str | None:
        """The negotiated revision, e.g. ``"2025-11-25"``."""
        rev = self._session.revision
        return rev.version if rev else None

    @property
    def server_info(self) -> Implementation | None:
        return self._session.server_info

    @property
    def server_capabilities(self) -> ServerCapabilities:
        return self._session.server_capabilities

    @property
    def instructions(self) -> str | None:
        """The server's instructions for the model (untrusted text, DS-03)."""
        return self._session.instructions

    @property
    def state(self) -> SessionState:
        return self._session.state

    @property
    def pid(self) -> int | None:
        return self._transport.pid if self._transport else None

    def statistics(self) -> ClientStatistics:
        table = self._session.table
        transport = self._transport
        return ClientStatistics(
            requests_sent=self._requests_sent,
            pending=len(table),
            late_responses=table.late,
            unknown_responses=table.unknown,
            notifications_received=self._notifications,
            notifications_dropped=self._dropped,
            server_requests=self._server_requests,
            non_protocol_lines=self._noise,
            protocol_violations=self._violations,
            restarts=self._restarts,
            bytes_sent=transport.bytes_sent if transport else 0,
            bytes_received=transport.bytes_received if transport else 0,
        )

    # -- capabilities -----------------------------------------------------------------------------

    def _capabilities(self, version: str | None) -> dict[str, object]:
        """What this client declares: exactly the handlers it has (LC-15)."""
        caps: dict[str, object] = {}
        if self._roots is not None:
            caps["roots"] = {} if version in MODERN_REVISIONS else {"listChanged": False}
        if self._sampling is not None:
            caps["sampling"] = {}
        if self._elicitation is not None:
            caps["elicitation"] = {"form": {}} if version is None or version >= V2025_11_25 else {}
        return caps

    # -- connecting --------------------------------------------------------------------------------

    def _cache_key(self) -> tuple[object, ...]:
        spec = self.spec
        if isinstance(spec, HttpServer):
            return ("http", spec.url)
        return (tuple(spec.argv), spec.cwd)

    def _detection_mode(self) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        version = self._protocol_version
        if version is not None:
            era = era_of(version)
            if era is Era.MODERN:
                return "modern", LEGACY_REVISIONS, (version,)
            return "legacy", (version,), MODERN_REVISIONS
        mode = self._requested_era
        if self._is_http and self._http_kind == "sse":
            return "legacy", legacy_for_sse(), MODERN_REVISIONS
        if mode == "auto" and self._use_era_cache:
            cached = _ERA_CACHE.get(self._cache_key())
            if cached is not None:
                mode = cached.value
        return mode, LEGACY_REVISIONS, MODERN_REVISIONS

    async def _start_transport(self) -> None:
        spec = self.spec
        transport: Transport
        if isinstance(spec, StdioServer):
            transport = StdioTransport(spec, self, max_message_bytes=self._max_message_bytes, label=self.label)
        elif self._http_kind == "sse":
            from .actors.legacy_sse import LegacySSETransport

            transport = LegacySSETransport(
                spec, self, http_client=self._http_client, max_message_bytes=self._max_message_bytes, label=self.label
            )
        else:
            from .actors.streamable_http import StreamableHTTPTransport

            transport = StreamableHTTPTransport(
                spec,
                self,
                http_client=self._http_client,
                max_message_bytes=self._max_message_bytes,
                label=self.label,
                idempotent=self._is_idempotent,
            )
        self._lost = None
        try:
            self._transport = await self._nursery.start(transport.run)
        except BaseExceptionGroup as group:
            # the actor failed before it was ready, inside its own nursery: its error, as itself
            single = _unwrap(group)
            if single is group:
                raise
            _reraise_alone(single)

    @property
    def _is_http(self) -> bool:
        return isinstance(self.spec, HttpServer)

    def _is_idempotent(self, request_id: RequestId) -> bool:
        """Whether the pending request may run twice without harm (the HTTP transport may then
        send it again after a connection broke, RFC 9112 9.3.1)."""
        entry = self._session.table.get(request_id)
        return entry is not None and entry.method in _IDEMPOTENT_METHODS

    async def _connect(self) -> None:
        """Starts the server and detects the era. Bounded by ``connect_timeout``."""
        self._session.begin_connecting()
        mode, legacy, modern = self._detection_mode()
        cached_era = mode != self._requested_era and self._protocol_version is None
        kind = self._http_kind if self._is_http else "stdio"
        # A cached HTTP transport that fails may fail anywhere: starting it (the 2024-11-05 GET
        # of a server that moved to Streamable HTTP answers 400) or in the handshake.
        retry_on: tuple[type[BaseException], ...] = (EraDetectionError, UnsupportedVersion)
        if self._kind_cached:
            retry_on += (HTTPStatusError, ConnectError, ServerGone)
        try:
            await self._start_transport()
            decided = await self._detect(mode, legacy, modern)
        except retry_on as exc:
            if (not cached_era and not self._kind_cached) or isinstance(exc, AuthError):
                raise  # a 401 is a challenge, not an era signal (LC-46)
            # LC-44: "re-probing if the cached assumption later fails".
            log.info("%s: the cached verdict (%s era, %s) failed: %s; detecting again", self.label, mode, kind, exc)
            _ERA_CACHE.pop(self._cache_key(), None)
            if isinstance(self.spec, HttpServer):
                _HTTP_KIND_CACHE.pop(self.spec.url, None)
                if self._kind_cached:
                    self._http_kind = "streamable-http"  # where detection starts (LC-46 step 1)
            self._kind_cached = False
            await self._restart_transport()
            decided = await self._detect(*self._detection_mode())
        await self._establish(decided)
        auto = self._protocol_version is None and self._requested_era == "auto"
        self._parity_pending = (
            auto and decided.era is Era.MODERN and not (self._use_era_cache and self._cache_key() in _PARITY_CHECKED)
        )
        if self._use_era_cache and auto:
            _ERA_CACHE[self._cache_key()] = decided.era
            if isinstance(self.spec, HttpServer) and self.spec.transport == "auto":
                _HTTP_KIND_CACHE[self.spec.url] = self._http_kind
        log.info(
            "%s: connected, era %s, revision %s, server %s",
            self.label,
            decided.era.value,
            decided.version,
            self.server_info.name if self.server_info else "?",
        )

    async def _restart_transport(self, *, count: bool = True) -> None:
        if count:
            self._restarts += 1
        if self._transport is not None:
            await self._transport.aclose()
        for entry in self._session.table.fail_all():
            entry.waiter.outcome = ClientClosed("restarting the server")
            entry.waiter.set()
        await self._start_transport()

    async def _detect(
        self, mode: str, legacy: tuple[str, ...], modern: tuple[str, ...], *, sse_fallback: bool = True
    ) -> Decided:
        """Runs an :class:`EraDetector` to a verdict: performs its actions (send the probe and
        ``initialize``, restart the server, switch to HTTP+SSE) and feeds it what comes back.
        Bounded by ``connect_timeout``."""
        spec = self.spec
        http_auto = isinstance(spec, HttpServer) and spec.transport == "auto" and self._http_kind != "sse"
        detector = EraDetector(mode, legacy, modern, http_ladder=http_auto and sse_fallback)
        send, recv = trio.open_memory_channel[_Waiter](math.inf)
        roles: dict[int, tuple[str, PendingRequest[_Waiter]]] = {}
        probe_deadline: float | None = None

        async def perform(actions: list[Any]) -> Decided | None:
            nonlocal probe_deadline
            for action in actions:
                if isinstance(action, Decided):
                    return action
                if isinstance(action, Failed):
                    msg = f"cannot connect to server '{self.label}': {action.reason}"
                    if action.unsupported:
                        raise UnsupportedVersion(msg, offered=action.offered)
                    raise EraDetectionError(msg)
                if isinstance(action, Restart):
                    log.info("%s: the server exited on the server/discover probe; restarting it", self.label)
                    await self._restart_transport()
                    roles.clear()
                    _drain(recv)
                elif isinstance(action, UseSSE):
                    log.info("%s: initialize answered HTTP %s; trying HTTP+SSE", self.label, action.status)
                    await self._use_sse(action.status)
                    roles.clear()
                    _drain(recv)
                elif isinstance(action, SendDiscover):
                    self._session.capabilities = self._capabilities(action.version)
                    entry = await self._send_handshake("server/discover", {}, send, meta_version=action.version)
                    roles[id(entry.waiter)] = ("discover", entry)
                    if mode == "auto" and probe_deadline is None and not self._is_http:
                        probe_deadline = trio.current_time() + self._probe_timeout
                elif isinstance(action, SendInitialize):
                    self._session.capabilities = self._capabilities(action.version)
                    params = self._session.initialize_params(action.version)
                    entry = await self._send_handshake("initialize", params, send)
                    roles[id(entry.waiter)] = ("initialize", entry)
            return None

        with trio.move_on_after(self._connect_timeout) as timeout_scope:
            decided = await perform(detector.start())
            while decided is None:
                waiter: _Waiter | None = None
                if probe_deadline is not None:
                    with trio.move_on_at(probe_deadline):
                        waiter = await recv.receive()
                    if waiter is None:
                        probe_deadline = None
                        decided = await perform(detector.on_probe_timeout())
                        continue
                else:
                    waiter = await recv.receive()
                role, entry = roles.pop(id(waiter))
                if role == "discover":
                    probe_deadline = None
                decided = await perform(self._handshake_outcome(detector, role, entry, waiter.outcome))
        if decided is None or timeout_scope.cancelled_caught:
            tail = self._transport.stderr_tail() if self._transport else []
            detail = "; ".join(detector.errors) or "no answer"
            raise ConnectError(
                f"server '{self.label}' did not complete the handshake within {self._connect_timeout:g}s ({detail})"
                + ("\nlast stderr lines:\n  " + "\n  ".join(tail[-10:]) if tail else "")
            )
        # Abandon whatever handshake request is still open (the other era's answer, LC-45).
        for _role, entry in roles.values():
            self._session.table.abandon(entry.id)
        return decided

    def _handshake_outcome(
        self,
        detector: EraDetector,
        role: str,
        entry: PendingRequest[_Waiter],
        outcome: Response | ErrorResponse | BaseException | None,
    ) -> list[Any]:
        """Feeds one handshake answer (or failure) to the detector; raises what is no era signal."""
        discover = role == "discover"
        if isinstance(outcome, Response):
            if not discover:
                return detector.on_initialize_result(self._decode_handshake(outcome, InitializeResult, "initialize"))
            try:
                result = self._decode_handshake(outcome, DiscoverResult, "server/discover")
            except InvalidResponse as exc:
                # Some legacy servers answer any method with an empty result: that is "any other
                # answer", not a modern server (LC-41).
                return detector.on_discover_error(0, f"not a DiscoverResult ({exc})", None)
            self._discover = result
            return detector.on_discover_result(result)
        if isinstance(outcome, ErrorResponse):
            data = outcome.data_value()
            if discover:
                return detector.on_discover_error(outcome.code, outcome.message, data)
            return detector.on_initialize_error(outcome.code, outcome.message, data)
        if isinstance(outcome, ServerGone) and isinstance(outcome.__cause__, FrameTooLarge):
            # ST-07: the connection broke on an oversized answer; the server did not exit on the
            # probe, so no LC-45 restart: name the limit.
            raise ServerGone(
                f"server '{self.label}' answered '{entry.method}' during the handshake with {outcome.__cause__}",
                server=self.label,
                returncode=outcome.returncode,
                stderr_tail=outcome.stderr_tail,
            ) from outcome.__cause__
        if isinstance(outcome, AuthError):
            raise outcome  # a challenge, not an era signal (LC-46)
        if isinstance(outcome, RemoteProtocolError):  # an answer that cannot be read
            if discover:
                return detector.on_discover_error(0, str(outcome), None)
            return detector.on_initialize_error(0, str(outcome), None)
        if isinstance(outcome, HTTPStatusError):
            if discover:
                return detector.on_discover_status(outcome.status)
            return detector.on_initialize_status(outcome.status, str(outcome))
        if isinstance(outcome, ServerGone):
            actions = detector.on_exit()
            if not actions or isinstance(actions[-1], Failed):
                raise ServerGone(
                    self._exit_during_handshake(outcome, detector),
                    server=self.label,
                    returncode=outcome.returncode,
                    stderr_tail=outcome.stderr_tail,
                ) from outcome
            return actions
        if isinstance(outcome, TransportError):
            raise outcome
        raise ClientClosed(f"the connection to '{self.label}' closed during the handshake")

    async def _use_sse(self, status: int) -> None:
        """LC-46 step 3 / HS-06: ``initialize`` said this is not Streamable HTTP; reconnect with
        the 2024-11-05 HTTP+SSE transport. Nothing answering there either is a wrong URL, and
        the error says so, naming the POST's status first (the transport that was asked for)."""
        assert isinstance(self.spec, HttpServer)
        self._http_kind = "sse"
        try:
            await self._restart_transport(count=False)
        except HTTPStatusError as exc:
            if isinstance(exc, AuthError):
                raise
            raise HTTPStatusError(
                f"server '{self.label}' answered the POST of 'initialize' to {redact_url(self.spec.url)} with "
                f"HTTP {status}, and the HTTP+SSE GET with HTTP {exc.status}: no MCP endpoint answers at that URL "
                "(is the path right? Streamable HTTP servers often serve /mcp, HTTP+SSE ones /sse)",
                status=status,
                server=self.label,
                method="initialize",
            ) from exc

    def _exit_during_handshake(self, gone: ServerGone, detector: EraDetector) -> str:
        """Why connecting failed when the server exited: a server that wrote nothing at all to
        stdout crashed on start (its stderr, attached, says why), whatever it was sent."""
        transport = self._transport
        if isinstance(self.spec, StdioServer) and transport is not None and transport.bytes_received == 0:
            status = f" with status {gone.returncode}" if gone.returncode is not None else ""
            again = (
                " (started twice: a restart, in case the server/discover probe had made it exit, ended the same way)"
                if detector.restarted
                else ""
            )
            return f"server '{self.label}' crashed on start: it exited{status} before answering anything{again}"
        return f"server '{self.label}' exited during the handshake" + (
            f" ({'; '.join(detector.errors)})" if detector.errors else ""
        )

    async def _send_handshake(
        self,
        method: str,
        params: Mapping[str, object],
        channel: trio.MemorySendChannel[_Waiter],
        *,
        meta_version: str | None = None,
    ) -> PendingRequest[_Waiter]:
        waiter = _Waiter(channel=channel)
        entry, payload = self._session.prepare_request(
            method, params, waiter, check=False, handshake=True, meta_version=meta_version
        )
        self._requests_sent += 1
        headers = self._headers_for(method, params, meta_version=meta_version, handshake=True)
        try:
            await self._send(payload, request_id=entry.id, headers=headers, opens_session=method == "initialize")
        except TransportError as exc:
            # Deliver the failure through the same channel as answers.
            if self._session.table.resolve(entry.id) is not None:
                waiter.outcome = exc
                channel.send_nowait(waiter)
        return entry

    def _decode_handshake(self, response: Response, kind: type[T], method: str) -> T:
        return _decode(response.result, kind, method, self.label)

    async def _establish(self, decided: Decided) -> None:
        session = self._session
        if decided.era is Era.MODERN:
            result = decided.discover
            assert result is not None
            info = None
            meta = result.meta or {}
            raw_info = meta.get(META_SERVER_INFO)
            if isinstance(raw_info, dict):
                try:
                    info = msgspec.convert(raw_info, Implementation)
                except msgspec.ValidationError:
                    info = None
            session.capabilities = self._capabilities(decided.version)
            session.established(decided.version, result.capabilities, info, result.instructions)
            if self._transport is not None:
                self._transport.negotiated(decided.version, True)
            return
        init = decided.initialize
        assert init is not None
        session.capabilities = self._capabilities(decided.version)
        session.established(decided.version, init.capabilities, init.server_info, init.instructions)
        if self._transport is not None:
            self._transport.negotiated(decided.version, False)
        # LC-03: "the client MUST send an initialized notification".
        await self._send(
            session.encode_notification("notifications/initialized"),
            headers=self._headers_for("notifications/initialized", None),
        )
        if self._want_server_stream:
            await self._open_server_stream()

    # -- sink (called synchronously by the transport's reader) ------------------------------------

    def classify(self, data: bytes) -> Message:
        """A large message while tool calls are pending is first read as a complete
        ``tools/call`` answer, in one pass; everything else is classified generically."""
        if self._tool_calls_in_flight and len(data) >= ONE_PASS_MIN_BYTES:
            answer = decode_tool_answer(data)
            if answer is not None:
                entry = self._session.table.get(answer.id)
                if entry is not None and entry.waiter.typed_tool:
                    return answer
        return jsonrpc.classify(data)

    def message_received(self, message: Message) -> None:
        # Fast path: an answer to one of our requests.
        if type(message) is Response or type(message) is ToolCallResponse:
            entry = self._session.table.resolve(message.id)
            if entry is not None:
                waiter = entry.waiter  # self._resolve(), inlined
                waiter.outcome = message
                waiter.set()
                if waiter.channel is not None:
                    waiter.channel.send_nowait(waiter)
            else:
                self._stray_answer(message.id)
            return
        if type(message) is ErrorResponse:
            table = self._session.table
            strays = table.late + table.unknown
            events = self._session.receive(message)
            if table.late + table.unknown != strays:
                self._stray_answer(message.id)
        else:
            events = self._session.receive(message)
        for event in events:
            if isinstance(event, AnswerReceived):
                self._resolve(event.entry.waiter, event.message)
            elif isinstance(event, AnswerUnreadable):
                self._violations += 1
                entry = event.entry
                log.warning(
                    "%s: unreadable answer to '%s' (id %s): %s", self.label, entry.method, entry.id, event.reason
                )
                self._resolve(
                    entry.waiter,
                    InvalidResponse(
                        f"server '{self.label}' answered '{entry.method}' (id {entry.id}) with a message that "
                        f"cannot be read: {event.reason}"
                    ),
                )
            elif isinstance(event, ProgressReceived):
                waiter = event.entry.waiter
                if waiter.progress is not None:
                    waiter.progress.append(event.params)  # type: ignore[arg-type]
                    waiter.set()
                self._notifications += 1
                self._enqueue(ServerNotification("notifications/progress", event.params))  # type: ignore[arg-type]
            elif isinstance(event, NotificationReceived):
                self._on_notification(event)
            elif isinstance(event, ServerRequestReceived):
                self._server_requests += 1
                self._nursery.start_soon(self._answer_server_request, event.request, event.params)  # type: ignore[arg-type]
            else:
                self._on_violation(event)

    def _stray_answer(self, request_id: RequestId | None) -> None:
        """An answer no caller waits for: dropped, counted by the table, and logged (JR-06)."""
        unknown = self._session.table.unknown
        if unknown == self._unknown_logged or self._closing:
            # an id this client gave up on (timeout, cancellation, closing): expected, not the server's fault
            self._unknown_logged = unknown
            log.debug("%s: dropped a late answer to id %r (its caller had given up)", self.label, request_id)
            return
        self._unknown_logged = unknown
        if unknown <= STRAY_WARNINGS:
            log.warning(
                "%s: dropped an answer to id %s, which no request of this client has%s",
                self.label,
                _printable(repr(request_id), 80),
                "; further ones are counted in statistics(), not logged" if unknown == STRAY_WARNINGS else "",
            )

    def request_failed(self, request_id: RequestId, exc: BaseException) -> None:
        entry = self._session.table.resolve(request_id)
        if entry is not None:
            self._resolve(entry.waiter, exc)

    def session_lost(self, exc: BaseException) -> None:
        """HTTP+SSE reconnected with a new session: what was pending is lost (HS-04)."""
        for entry in self._session.table.fail_all():
            gone = ServerGone(f"{exc} while '{entry.method}' (id {entry.id}) was pending", server=self.label)
            gone.__cause__ = exc.__cause__  # e.g. the FrameTooLarge that broke the stream
            self._resolve(entry.waiter, gone)
        if self._session.state is SessionState.READY:
            ready = trio.Event()
            self._session_ready = ready  # calls made from now on wait for the new session
            self._nursery.start_soon(self._renew_session, self._generation, ready)

    def _resolve(self, waiter: _Waiter, outcome: Response | ErrorResponse | BaseException) -> None:
        waiter.outcome = outcome
        waiter.set()
        if waiter.channel is not None:
            waiter.channel.send_nowait(waiter)

    def connection_lost(self, exc: BaseException) -> None:
        if self._lost is None:  # keep the first cause (e.g. the strict-mode protocol error)
            self._lost = exc
        closing = self._closing
        for entry in self._session.table.fail_all():
            if closing:
                err: BaseException = self._closed_while_pending(entry)
            elif isinstance(exc, ServerGone):
                err = ServerGone(
                    f"{exc.reason} while '{entry.method}' (id {entry.id}) was pending",
                    server=self.label,
                    returncode=exc.returncode,
                    stderr_tail=exc.stderr_tail,
                )
                err.__cause__ = exc.__cause__
            else:  # pragma: no cover - transports only report ServerGone
                err = exc
            self._resolve(entry.waiter, err)
        if self._session.state is SessionState.READY:
            self._session.state = SessionState.CLOSED
            if not closing:
                log.warning("%s: %s", self.label, exc.reason if isinstance(exc, ServerGone) else exc)
        if self._session.state is SessionState.CONNECTING:
            return  # the handshake decides: restart the server (LC-45) or fail
        for sub in (*self._subscriptions.values(), *self._legacy_subscriptions):
            sub._end(exc)
        self._notify_send.close()

    def _closed_while_pending(self, entry: PendingRequest[_Waiter]) -> ClientClosed:
        return ClientClosed(
            f"'{entry.method}' (id {entry.id}) to server '{self.label}' was pending when the client closed"
        )

    def _fail_pending_on_close(self) -> None:
        for entry in self._session.table.fail_all():
            self._resolve(entry.waiter, self._closed_while_pending(entry))

    def _on_notification(self, event: NotificationReceived) -> None:
        self._notifications += 1
        method = event.method
        params: JSONObject = event.params  # type: ignore[assignment]
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            if isinstance(request_id, int | str):
                scope = self._server_request_scopes.pop(request_id, None)
                if scope is not None:
                    scope.cancel()  # UT-C04: stop; send no response
                sub = self._subscriptions.get(request_id)
                if sub is not None:
                    sub._end(None)  # UT-C05: the server tore the subscription down
        elif method == "notifications/message":
            self._log_server_message(params)
        elif method == "notifications/tools/list_changed":
            self._tools.clear()
            self._output_schemas = frozenset()
            self._validators.clear()
        note = ServerNotification(method, params, event.subscription_id)
        if event.subscription_id is not None:
            sub = self._subscriptions.get(event.subscription_id)
            if sub is not None:
                sub._deliver(note)
        for sub in self._legacy_subscriptions:
            sub._deliver(note)
        self._enqueue(note)

    def _enqueue(self, note: ServerNotification) -> None:
        """Into the bounded buffer of :meth:`notifications`; counted when it is full."""
        try:
            self._notify_send.send_nowait(note)
        except trio.WouldBlock:
            self._dropped += 1
        except trio.ClosedResourceError:
            pass

    _LOG_LEVELS: Final = {
        "debug": logging.DEBUG,
        "info": logging.INFO,
        "notice": logging.INFO,
        "warning": logging.WARNING,
        "error": logging.ERROR,
        "critical": logging.CRITICAL,
        "alert": logging.CRITICAL,
        "emergency": logging.CRITICAL,
    }

    def _log_server_message(self, params: JSONObject) -> None:
        level = self._LOG_LEVELS.get(str(params.get("level")), logging.INFO)
        logger = logging.getLogger(f"mcpwire.server.{self.label}")
        if logger.isEnabledFor(level):
            data = params.get("data")
            text = data if isinstance(data, str) else jsonrpc.encode_json(data).decode()
            logger.log(level, "[%s] %s", _printable(str(params.get("logger") or "log"), 60), _printable(text, 2000))

    def _on_violation(self, event: Violation) -> None:
        if event.not_protocol:
            self._noise += 1
            if self._on_noise is not None:
                try:
                    self._on_noise(event.line)
                except Exception:
                    log.exception("%s: the on_stdout_noise callback failed", self.label)
            now = trio.current_time()
            recent = [t for t in self._noise_times if now - t < 60.0]
            if len(recent) < NOISE_WARNINGS_PER_MINUTE:
                recent.append(now)
                log.warning(
                    "%s: ignoring a stdout line that is not JSON-RPC (%s): %s%s",
                    self.label,
                    event.reason,
                    _printable(event.line.decode("utf-8", "replace"), 120),
                    " (further lines this minute are counted, not logged)"
                    if len(recent) == NOISE_WARNINGS_PER_MINUTE
                    else "",
                )
            self._noise_times = recent
            if self._strict:
                self._fail_connection(
                    RemoteProtocolError(
                        f"server '{self.label}' wrote a line that is not JSON-RPC to stdout ({event.reason}): "
                        + _printable(event.line.decode("utf-8", "replace"), 120)
                    )
                )
            return
        self._violations += 1
        log.warning("%s: protocol violation: %s", self.label, event.reason)
        if self._strict:
            self._fail_connection(RemoteProtocolError(f"server '{self.label}': {event.reason}"))

    def _fail_connection(self, exc: MCPWireError) -> None:
        """Strict mode: fail everything pending with ``exc`` and close the connection."""
        self._lost = exc
        for entry in self._session.table.fail_all():
            self._resolve(entry.waiter, exc)
        self._session.closing()
        if self._transport is not None:
            self._nursery.start_soon(self._transport.aclose)

    # -- server -> client requests (legacy era) -----------------------------------------------------

    async def _answer_server_request(self, request: Request, params: JSONObject) -> None:
        method = request.method
        with trio.CancelScope() as scope:
            self._server_request_scopes[request.id] = scope
            try:
                try:
                    if method == "ping":
                        result: JSONObject = {}  # UT-P01
                    else:
                        result = await self._fulfil(method, params)
                except _NotDeclared as exc:
                    payload = jsonrpc.encode_error(request.id, -32601, str(exc))
                except RPCError as exc:
                    payload = jsonrpc.encode_error(request.id, exc.code, exc.message, exc.data)
                except Exception as exc:  # a handler's bug must not kill the connection
                    log.warning("%s: handler for '%s' failed: %r", self.label, method, exc)
                    payload = jsonrpc.encode_error(request.id, -32603, f"client handler failed: {type(exc).__name__}")
                else:
                    payload = jsonrpc.encode_result(request.id, result)
            finally:
                self._server_request_scopes.pop(request.id, None)
            try:
                await self._send(payload, headers=self._headers_for(method, None))
            except MCPWireError:  # the connection failed, or the server's answer to it was too large
                pass

    async def _fulfil(self, method: str, params: JSONObject) -> JSONObject:
        """Runs the handler for a server request or an MRTR input request."""
        if method == "roots/list" and self._roots is not None:
            roots = self._roots
            listed = await roots() if callable(roots) else roots
            return {"roots": [_root(r) for r in listed]}
        if method == "sampling/createMessage" and self._sampling is not None:
            return await self._sampling(params)
        if method == "elicitation/create" and self._elicitation is not None:
            answer = await self._elicitation(params)
            return _fill_elicitation_defaults(params, answer)
        raise _NotDeclared(f"the client does not handle '{method}'")

    # -- sending -------------------------------------------------------------------------------

    async def _send(
        self,
        payload: bytes,
        *,
        request_id: RequestId | None = None,
        headers: Mapping[str, str] | None = None,
        opens_session: bool = False,
    ) -> None:
        transport = self._transport
        if transport is None or self._lost is not None:
            raise self._gone_error()
        try:
            await transport.send(payload, request_id=request_id, headers=headers, opens_session=opens_session)
        except TransportError as exc:
            self._raise_send_failure(exc, request_id)

    def _raise_send_failure(self, exc: TransportError, request_id: RequestId | None) -> NoReturn:
        if self._closing:  # our own aclose() broke the write: not the server's doing (LC-54)
            what = f"request id {request_id}" if request_id is not None else "a notification"
            raise ClientClosed(f"the client of server '{self.label}' closed while sending {what}") from exc
        raise exc

    def _headers_for(
        self,
        method: str,
        params: Mapping[str, object] | None,
        *,
        meta_version: str | None = None,
        handshake: bool = False,
    ) -> dict[str, str] | None:
        """Headers mirroring the body, for HTTP transports (HT-L08, HT-M03..HT-M09)."""
        transport = self._transport
        if transport is None or not transport.wants_headers:
            return None
        if meta_version is not None:
            return mirrored_headers(method, params, meta_version, modern=True)
        revision = self._session.revision
        if revision is None or handshake:
            return None  # no version header on initialize itself (AMB-07)
        if revision.modern:
            spec: HeaderSpec = ()
            if method == "tools/call" and params is not None:
                spec = self._tool_headers.get(str(params.get("name")), ())
            return mirrored_headers(method, params, revision.version, modern=True, tool_headers=spec)
        if revision.at_least(V2025_06_18):
            return {"MCP-Protocol-Version": revision.version}
        return None

    def _gone_error(self) -> MCPWireError:
        if self._closing:
            return ClientClosed(f"the client of server '{self.label}' is closed")
        lost = self._lost
        if isinstance(lost, ServerGone):
            gone = ServerGone(lost.reason, server=self.label, returncode=lost.returncode, stderr_tail=lost.stderr_tail)
            gone.__cause__ = lost.__cause__
            return gone
        if isinstance(lost, RemoteProtocolError):
            return RemoteProtocolError(f"the connection was closed after an earlier error: {lost}")
        return ServerGone(f"server '{self.label}' is not connected", server=self.label)

    async def _roundtrip(
        self,
        method: str,
        params: Mapping[str, object] | None,
        *,
        timeout: float | None,
        on_progress: ProgressCallback | None = None,
        check: bool = True,
    ) -> msgspec.Raw:
        """Sends one request and returns its raw result. Raises RPCError on an error answer."""
        answer = await self._answer(method, params, timeout=timeout, on_progress=on_progress, check=check)
        return answer.result

    async def _answer(
        self,
        method: str,
        params: Mapping[str, object] | None,
        *,
        timeout: float | None,
        on_progress: ProgressCallback | None = None,
        check: bool = True,
        typed_tool: bool = False,
        _retried: bool = False,
    ) -> Response:
        """Sends one request and returns its answer. Raises RPCError on an error answer.

        ``typed_tool``: the caller (call_tool) accepts a :class:`ToolCallResponse`.
        """
        if timeout is not None and not timeout > 0:  # before anything is sent
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if not self._session_ready.is_set():
            # LC-04 on a renewed session: "the client SHOULD NOT send requests other than pings
            # before the server has responded to the initialize request".
            with trio.move_on_after(self._connect_timeout):
                await self._session_ready.wait()
        if self._lost is not None:
            raise self._gone_error()
        generation = self._generation
        if self._log_level is not None and self._session.revision is not None and self._session.revision.modern:
            params = dict(params or {})
            meta = dict(params.get("_meta") or {})  # type: ignore[call-overload]
            meta[META_LOG_LEVEL] = self._log_level
            params["_meta"] = meta
        transport = self._transport
        headers = self._headers_for(method, params) if transport is not None and transport.wants_headers else None
        waiter = _Waiter(progress=[] if on_progress is not None else None)
        waiter.typed_tool = typed_tool
        entry, payload = self._session.prepare_request(
            method, params, waiter, check=check, progress=on_progress is not None
        )
        try:
            # self._send(), inlined: one coroutine less on every call
            if transport is None or self._lost is not None:
                raise self._gone_error()
            try:
                await transport.send(payload, request_id=entry.id, headers=headers)
            except TransportError as exc:
                self._raise_send_failure(exc, entry.id)
        except BaseException as exc:
            issued = not (transport is None or transport.atomic_send or isinstance(exc, MCPWireError))
            if self._session.table.abandon(entry.id) is not None and issued:
                await self._cancel_on_wire(entry, exc)  # UT-C01: only what may have reached the server
            raise
        self._requests_sent += 1
        try:
            outcome = await self._wait(entry, timeout, on_progress)
        except BaseException as exc:
            if self._session.table.abandon(entry.id) is not None:
                await self._cancel_on_wire(entry, exc)
            raise
        if isinstance(outcome, Response):
            return outcome
        if isinstance(outcome, ErrorResponse):
            revision = self._session.revision
            if outcome.code == -32020 and method == "tools/call" and not _retried:
                # HT-M09: "the client SHOULD call tools/list to check for changes to the tool's
                # inputSchema, then retry the original request with the appropriate headers".
                await self.list_tools(timeout=timeout)
            elif outcome.code == -32022 and revision is not None and revision.modern:
                # LC-24: "The client SHOULD select a mutually supported version from the supported
                # list and retry the request, or surface an error to the user if no compatible
                # version exists."
                self._accept_version(outcome, method, entry.id, revision.version, retried=_retried)
            else:
                kind = MissingClientCapability if outcome.code == -32021 else RPCError
                data = outcome.data_value()
                raise kind(outcome.code, outcome.message, data, method=method, server=self.label, request_id=entry.id)
        elif isinstance(outcome, ResponseStreamLost) and not _retried:
            # HT-M12: "A broken response stream loses the in-flight request; clients MUST
            # re-issue it as a new request with a new request ID". Once: a second loss is raised.
            log.info("%s: the response stream of '%s' (id %s) broke; re-issuing it", self.label, method, entry.id)
        elif isinstance(outcome, SessionExpired) and not _retried:
            # HT-L12: a 404 on a known session: start a new session and re-send once.
            await self._reinitialize(generation)
        else:
            assert isinstance(outcome, BaseException)
            raise outcome
        # sent again once, as a new request (a second refusal or loss is raised)
        return await self._answer(
            method, params, timeout=timeout, on_progress=on_progress, check=check, typed_tool=typed_tool, _retried=True
        )

    def _accept_version(
        self, refusal: ErrorResponse, method: str, request_id: RequestId, current: str, *, retried: bool
    ) -> None:
        """After a ``-32022`` refusal of ``current``: switches to the newest 2026-07-28-era
        revision both sides support (the same one when the server lists it: a deployment in the
        middle of an upgrade may refuse it once).

        Raises:
            UnsupportedVersion: nothing in ``data.supported`` is spoken by mcpwire in this era, or
                the request was already sent again; the message names both lists.
        """
        data = refusal.data_value()
        listed = data.get("supported") if isinstance(data, dict) else None
        offered = [v for v in listed if isinstance(v, str)] if isinstance(listed, list) else []
        common = [v for v in MODERN_REVISIONS if v in offered]
        if not common or retried:
            refused = RPCError(
                refusal.code, refusal.message, data, method=method, server=self.label, request_id=request_id
            )
            raise UnsupportedVersion(
                f"server '{self.label}' refused protocol version {current} for '{method}' (id {request_id}) "
                f"with error -32022 ({_printable(refusal.message)}){' again after one retry' if common else ''}; "
                f"it supports {', '.join(_printable(v, 40) for v in offered) or 'no version it named'} and mcpwire "
                f"speaks {', '.join(MODERN_REVISIONS)} on this connection"
                + ("" if common else ": no version in common (a legacy revision needs a new connection)"),
                offered=offered,
            ) from refused
        version = common[0]
        session = self._session
        if version != current and session.state is SessionState.READY:
            log.info("%s: the server refused revision %s; switching to %s", self.label, current, version)
            session.capabilities = self._capabilities(version)
            session.established(version, session.server_capabilities, session.server_info, session.instructions)
            if self._transport is not None:
                self._transport.negotiated(version, True)

    async def _renew_session(self, stale: int, ready: trio.Event) -> None:
        """Background renewal after an HS-04 reconnect. Its failure is data: the connection is
        marked lost and every later call says why, nothing escapes into the nursery."""
        try:
            await self._reinitialize(stale, ready)
        except MCPWireError as exc:
            # a later drop superseded this renewal (its own task carries on): not a verdict
            if not self._closing and self._session_ready is ready:
                gone = ServerGone(
                    f"server '{self.label}' lost its session and a new one could not be initialised: {exc}",
                    server=self.label,
                )
                gone.__cause__ = exc
                self.connection_lost(gone)
        finally:
            ready.set()

    async def _reinitialize(self, stale: int, ready: trio.Event | None = None) -> None:
        """Legacy: a new session with the same revision (after session expiry or an SSE drop).

        Args:
            stale: the session generation that was lost; if another renewal already replaced
                it, nothing is done (two calls failing with the same 404 renew once).
            ready: the event later calls wait on; set when done, whatever the outcome.
        """
        async with self._reinit_lock:
            if self._generation != stale:
                return
            if ready is None:
                ready = trio.Event()
                self._session_ready = ready
            try:
                await self._initialize_again()
            finally:
                ready.set()
            if self._generation != stale:
                self._restore_session_state()

    def _restore_session_state(self) -> None:
        """HT-L13: "after re-initialization, everything session-scoped is lost: re-issue
        logging/setLevel, resources/subscribe, re-open GET stream". The GET stream reopens with
        the new session (``_establish``); the log level and the resource subscriptions of the
        open :meth:`subscribe` blocks are sent again here, in the background (the call that
        found the session gone is re-sent meanwhile)."""
        uris = [uri for sub in self._legacy_subscriptions if sub.acknowledged is not None for uri in sub._resources]
        if self._log_level is not None or uris:
            self._nursery.start_soon(self._reissue_session_state, self._log_level, list(dict.fromkeys(uris)))

    async def _reissue_session_state(self, level: str | None, uris: list[str]) -> None:
        try:
            if level is not None:
                await self._roundtrip("logging/setLevel", {"level": level}, timeout=None)
            for uri in uris:
                await self._roundtrip("resources/subscribe", {"uri": uri}, timeout=None)
        except MCPWireError as exc:  # data, not a crash: the subscriptions simply stay quiet
            if not self._closing:
                log.warning("%s: could not restore the session's state on the new session: %s", self.label, exc)

    async def _initialize_again(self) -> None:
        revision = self._session.revision
        if revision is None or revision.modern:
            return
        log.info("%s: the session was lost; initialising a new one", self.label)
        send, recv = trio.open_memory_channel[_Waiter](1)
        params = self._session.initialize_params(revision.version)
        await self._send_handshake("initialize", params, send)
        with trio.move_on_after(self._connect_timeout):
            waiter = await recv.receive()
            outcome = waiter.outcome
            if isinstance(outcome, Response):
                init = self._decode_handshake(outcome, InitializeResult, "initialize")
                if init.protocol_version != revision.version:
                    raise UnsupportedVersion(
                        f"server '{self.label}' answered the new session with {init.protocol_version!r}, "
                        f"not {revision.version!r}"
                    )
                await self._establish(Decided(Era.LEGACY, revision.version, initialize=init))
                self._generation += 1
                return
            if isinstance(outcome, ErrorResponse):
                raise RPCError(
                    outcome.code, outcome.message, outcome.data_value(), method="initialize", server=self.label
                )
            assert isinstance(outcome, BaseException)
            raise outcome
        raise ConnectError(f"server '{self.label}' did not answer initialize for a new session")

    async def _wait(
        self, entry: PendingRequest[_Waiter], timeout: float | None, on_progress: ProgressCallback | None
    ) -> Response | ErrorResponse | BaseException:
        waiter = entry.waiter
        limit = self._timeout if timeout is None else timeout
        clock = self._clock
        if clock is None:
            clock = self._clock = trio.lowlevel.current_clock()
        now = clock.current_time()
        hard = now + max(self._max_timeout, limit)  # so the first deadline, now + limit, is within it
        deadlines, nursery = self._deadlines, self._nursery
        deadlines.add(waiter, now + limit, nursery)
        try:
            while True:
                if waiter._flag:
                    await trio.lowlevel.checkpoint()
                else:  # waiter.wait(), inlined: this is every call's one wait
                    waiter._task = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(waiter._abort)
                if waiter.outcome is not None:
                    if waiter.progress and on_progress is not None:
                        # Progress that arrived before the answer, in the same wake-up: deliver it.
                        await _deliver_progress(waiter.progress, on_progress)
                    return waiter.outcome
                if waiter.progress:
                    items, waiter.progress = waiter.progress, []
                    waiter.clear()
                    waiter.expired = False
                    # LC-62: reset, but capped
                    deadlines.add(waiter, min(clock.current_time() + limit, hard), nursery)
                    if on_progress is not None:
                        await _deliver_progress(items, on_progress)
                    continue
                if waiter.expired:
                    break
                waiter.clear()  # pragma: no cover - set with neither outcome nor progress
        finally:
            # The heap may keep this waiter until its deadline: drop what it holds (a large
            # answer must not outlive the call; the caller has it from the return value).
            waiter.done = True
            waiter.outcome = None
            waiter.progress = None
        capped = clock.current_time() >= hard
        raise RequestTimeout(
            f"'{entry.method}' (id {entry.id}) to server '{self.label}' got no answer within "
            + (f"the hard cap of {hard - now:g}s" if capped else f"{limit:g}s")
            + "; it was cancelled",
            method=entry.method,
            request_id=entry.id,
            server=self.label,
            timeout=limit,
        )

    async def _cancel_on_wire(self, entry: PendingRequest[_Waiter], exc: BaseException) -> None:
        """UT-C02: tell the server we stopped waiting. Never for initialize (LC-06)."""
        if entry.method == "initialize" or self._lost is not None or self._transport is None:
            return
        transport = self._transport
        reason = "timeout" if isinstance(exc, RequestTimeout) else "cancelled by the client"
        payload = self._session.encode_notification(
            "notifications/cancelled", {"requestId": entry.id, "reason": reason}
        )
        with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_NOTIFY_TIMEOUT):
            try:
                if await transport.cancel(entry.id):
                    return  # 2026-07-28 HTTP: closing the stream is the cancellation (HT-M10)
                await transport.send(payload, headers=self._headers_for("notifications/cancelled", None))
            except MCPWireError:
                pass

    async def _request(
        self,
        method: str,
        params: Mapping[str, object] | None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        check: bool = True,
    ) -> msgspec.Raw:
        """A request, with 2026-07-28 input rounds handled (MRTR)."""
        raw = await self._roundtrip(method, params, timeout=timeout, on_progress=on_progress, check=check)
        return await self._complete(method, params, raw, timeout=timeout, on_progress=on_progress, check=check)

    async def _complete(
        self,
        method: str,
        params: Mapping[str, object] | None,
        raw: msgspec.Raw,
        *,
        timeout: float | None,
        on_progress: ProgressCallback | None,
        check: bool,
    ) -> msgspec.Raw:
        """The answer ``raw`` to ``method``, followed through 2026-07-28 input rounds (MRTR) to
        a complete result; legacy answers are returned as they are."""
        revision = self._session.revision
        if revision is None or not revision.modern:
            return raw
        head = _decode(raw, _ResultHead, method, self.label)
        rounds = 0
        while head.result_type == "input_required":
            info = METHODS.get(method)
            if info is not None and not info.input_required:
                raise InvalidResponse(
                    f"server '{self.label}' answered '{method}' with input_required, which only "
                    "tools/call, resources/read and prompts/get may return (UT-R01)"
                )
            rounds += 1
            if rounds > self._max_input_rounds:
                raise InvalidResponse(
                    f"server '{self.label}' asked for input more than {self._max_input_rounds} times for '{method}'"
                )
            retry: dict[str, object] = dict(params or {})
            if head.input_requests:
                retry["inputResponses"] = await self._input_responses(method, head.input_requests)
            if not isinstance(head.request_state, UnsetType):
                retry["requestState"] = head.request_state  # UT-R03: echoed exactly
            if not head.input_requests and isinstance(head.request_state, UnsetType):
                raise InvalidResponse(
                    f"server '{self.label}' answered '{method}' with input_required but neither "
                    "inputRequests nor requestState"
                )
            raw = await self._roundtrip(method, retry, timeout=timeout, on_progress=on_progress, check=check)
            head = _decode(raw, _ResultHead, method, self.label)
        if head.result_type != "complete":
            # JR-10: "A resultType of any value unrecognized by the client MUST be considered invalid."
            raise InvalidResponse(
                f"server '{self.label}' answered '{method}' with unknown resultType {head.result_type!r}"
            )
        return raw

    async def _input_responses(self, method: str, requests: dict[str, Any]) -> JSONObject:
        responses: JSONObject = {}
        for key, item in requests.items():
            inner = item.get("method") if isinstance(item, dict) else None
            inner_params = item.get("params") if isinstance(item, dict) else None
            if not isinstance(inner, str):
                raise InvalidResponse(f"server '{self.label}': input request {key!r} for '{method}' has no method")
            try:
                responses[key] = await self._fulfil(inner, inner_params if isinstance(inner_params, dict) else {})
            except _NotDeclared as exc:
                # UT-R09: the server asked for a capability this client did not declare.
                raise RemoteProtocolError(
                    f"server '{self.label}' asked for '{inner}' during '{method}', a capability "
                    "this client did not declare; configure a handler for it"
                ) from exc
        return responses

    # -- public API: generic --------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        check: bool = False,
    ) -> JSONValue:
        """Sends any request and returns its decoded result.

        Capability checks are off by default (``check=False``) so extensions and experiments
        pass; input rounds of 2026-07-28 are handled as for typed calls.

        Cancellation: if cancelled, the request is abandoned and ``notifications/cancelled`` is
        sent (shielded, at most 1 s).
        """
        raw = await self._request(method, params, timeout=timeout, on_progress=on_progress, check=check)
        try:
            value: JSONValue = jsonrpc.decode_json(raw)  # type: ignore[assignment]
        except msgspec.DecodeError as exc:
            raise InvalidResponse(f"server '{self.label}' answered '{method}' with an invalid result: {exc}") from exc
        return value

    async def notify(self, method: str, params: Mapping[str, object] | None = None) -> None:
        """Sends a notification."""
        if self._session.state is not SessionState.READY:
            raise ClientClosed(f"cannot notify '{method}': the client of '{self.label}' is {self._session.state.name}")
        await self._send(self._session.encode_notification(method, params), headers=self._headers_for(method, params))

    async def ping(self, *, timeout: float | None = None) -> None:
        """Checks that the server answers: ``ping`` (legacy) or ``server/discover`` (2026-07-28 has no ping)."""
        if self.era is Era.MODERN:
            await self.discover(timeout=timeout)
        else:
            await self._roundtrip("ping", None, timeout=timeout)

    async def discover(self, *, timeout: float | None = None) -> DiscoverResult:
        """``server/discover``. For a legacy server, the same facts from its ``initialize`` answer."""
        if self.era is not Era.MODERN:
            version = self.protocol_version or ""
            return DiscoverResult(
                supported_versions=[version],
                capabilities=self.server_capabilities,
                instructions=self.instructions,
            )
        raw = await self._request("server/discover", {}, timeout=timeout)
        result = _decode(raw, DiscoverResult, "server/discover", self.label)
        self._discover = result
        return result

    # -- tools ------------------------------------------------------------------------------------

    async def _pages(self, method: str, kind: type[Any], key: str, timeout: float | None) -> list[Any]:
        """Follows ``nextCursor`` to the end, refusing cycles (UT-N01..UT-N07)."""
        items: list[Any] = []
        seen: set[str] = set()
        cursor: str | None = None
        modern = self.era is Era.MODERN
        size = 0
        for _ in range(MAX_PAGES):
            params = {"cursor": cursor} if cursor is not None else None
            raw = await self._request(method, params, timeout=timeout)
            # Each page is bounded by max_message_bytes; the whole listing by these, so a
            # server cannot make one list call hold 10,000 pages of it in memory.
            size += len(raw)
            if size > self._max_list_bytes:
                raise RemoteProtocolError(
                    f"server '{self.label}' returned more than {self._max_list_bytes} bytes while paginating "
                    f"'{method}' (page {len(seen) + 1}); raise max_list_bytes if it legitimately lists that much"
                )
            page = _decode(raw, kind, method, self.label)
            items.extend(getattr(page, key))
            if len(items) > self._max_list_items:
                raise RemoteProtocolError(
                    f"server '{self.label}' returned more than {self._max_list_items} items while paginating "
                    f"'{method}' (page {len(seen) + 1}); raise max_list_items if it legitimately lists that many"
                )
            cursor = page.next_cursor
            # 2026-07-28 pagination: "an empty string is a valid cursor" (UT-N02); legacy
            # servers that send "" mean the end.
            if cursor is None or (cursor == "" and not modern):
                return items
            if cursor in seen:
                raise RemoteProtocolError(
                    f"server '{self.label}' repeated the cursor {cursor!r} while paginating '{method}' (a cycle)"
                )
            seen.add(cursor)
        raise RemoteProtocolError(f"server '{self.label}' returned more than {MAX_PAGES} pages for '{method}'")

    async def _cross_check_legacy(self, listed: str, timeout: float | None) -> bool:
        """Era parity: True when this connection switched to the legacy era, so that the caller
        lists again.

        Some dual-era servers answer ``server/discover`` but serve nothing in 2026-07-28: a proxy
        whose backend connects only for handshake sessions (FastMCP 4.1's) lists no tools,
        prompts or resources there, and every one of them with a pinned legacy revision. Users
        expect the same tools in auto mode as with a legacy pin, so the first time an
        auto-detected 2026-07-28 connection lists nothing for a capability the server declares,
        the client looks at the other declared lists; when they are all empty too, it sends
        ``initialize``. A server that accepts it carries on in the legacy era, and that verdict
        is cached for the server like any era verdict (the next connection starts in the legacy
        era); a server that refuses it is a 2026-07-28 server with nothing to list, and stays as
        it was. Over stdio the server is restarted for the handshake. Once per connection, and
        once per server per process when the era cache is on; never with a pinned era or
        revision, and never while other requests or subscriptions are in flight (the check
        waits for a quieter moment).
        """
        if not self._parity_pending or self.era is not Era.MODERN:
            return False
        if len(self._session.table) or self._subscriptions:
            return False
        self._parity_pending = False
        caps = self.server_capabilities
        others = [
            (method, kind, key)
            for method, kind, key, declared in (
                ("tools/list", _ToolsPage, "tools", caps.tools),
                ("prompts/list", _PromptsPage, "prompts", caps.prompts),
                ("resources/list", _ResourcesPage, "resources", caps.resources),
            )
            if declared is not None and method != listed
        ]
        for method, kind, key in others:
            if await self._pages(method, kind, key, timeout):
                self._parity_checked()
                return False  # it serves this era: it simply has none of what was listed
        return await self._switch_to_legacy(listed)

    def _parity_checked(self) -> None:
        if self._use_era_cache:
            _PARITY_CHECKED.add(self._cache_key())

    async def _switch_to_legacy(self, listed: str) -> bool:
        """Sends ``initialize`` (over stdio to a restarted server, over HTTP as a new session); on
        success the connection goes on in the legacy era. Calls made meanwhile wait for the
        outcome (bounded)."""
        session = self._session
        revision = session.revision
        assert revision is not None
        saved = (revision.version, session.server_capabilities, session.server_info, session.instructions)
        ready = trio.Event()
        self._session_ready = ready
        session.begin_connecting()
        try:
            try:
                if isinstance(self.spec, StdioServer):
                    # A fresh process: a stdio server may refuse a handshake on a connection that
                    # already served 2026-07-28 requests (FastMCP's does, with -32022).
                    await self._restart_transport()
                elif self._transport is not None:
                    self._transport.negotiated(LEGACY_REVISIONS[0], False)  # its answer opens a session
                decided = await self._detect("legacy", LEGACY_REVISIONS, MODERN_REVISIONS, sse_fallback=False)
            except (RemoteProtocolError, TransportError) as exc:
                if isinstance(exc, ServerGone) or self._lost is not None:
                    session.state = SessionState.CLOSED  # the connection died meanwhile
                    self.connection_lost(exc)
                    raise
                log.debug("%s: no legacy session to compare with: %s", self.label, exc)
                session.capabilities = self._capabilities(saved[0])
                session.established(*saved)
                if self._transport is not None:
                    self._transport.negotiated(saved[0], True)
                self._parity_checked()
                return False
            await self._establish(decided)
        finally:
            ready.set()
        log.info(
            "%s: the server listed nothing for '%s' in %s but accepts %s; using the legacy era",
            self.label,
            listed,
            saved[0],
            decided.version,
        )
        if self._use_era_cache:
            _ERA_CACHE[self._cache_key()] = Era.LEGACY
        return True

    async def list_tools(self, *, timeout: float | None = None) -> list[Tool]:
        """Every tool, following pagination. Invalid tool definitions are dropped with a warning (TL-02)."""
        raw_items = await self._pages("tools/list", _ToolsPage, "tools", timeout)
        if not raw_items and await self._cross_check_legacy("tools/list", timeout):
            raw_items = await self._pages("tools/list", _ToolsPage, "tools", timeout)
        tools, problems = decode_tools(raw_items)
        if self._transport is not None and self._transport.wants_headers:
            kept: list[Tool] = []
            self._tool_headers = {}
            for tool in tools:
                try:
                    spec = tool_header_spec(tool.input_schema)
                except ValueError as exc:
                    # HT-M08: "Clients using the Streamable HTTP transport MUST reject tool definitions
                    # where any x-mcp-header value violates these constraints".
                    problems.append(f"tool {tool.name!r}: {exc}")
                    continue
                if spec:
                    self._tool_headers[tool.name] = spec
                kept.append(tool)
            tools = kept
        for problem in problems:
            log.warning("%s: skipping an invalid tool: %s", self.label, problem)
        self._tools = {t.name: t for t in tools}
        self._output_schemas = frozenset(t.name for t in tools if t.output_schema is not None)
        self._validators.clear()
        return tools

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> ToolResult:
        """Calls a tool. ``isError`` results are returned, not raised (use ``raise_for_error()``).

        ``structuredContent`` is validated against the tool's ``outputSchema`` when the tool is
        known from :meth:`list_tools` (TL-11).

        Raises:
            RPCError: the server refused the call (unknown tool, bad arguments).
            RequestTimeout: no answer in time; the call was cancelled on the wire.
            OutputSchemaError: the structured result breaks the declared schema.

        Cancellation: the call is abandoned and ``notifications/cancelled`` sent (shielded, ≤ 1 s).
        """
        params: dict[str, object] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        self._tool_calls_in_flight += 1
        try:
            answer = await self._answer("tools/call", params, timeout=timeout, on_progress=on_progress, typed_tool=True)
        finally:
            self._tool_calls_in_flight -= 1
        raw = answer.result
        content: list[ContentBlock]
        # The common answer is decoded once: a complete result whose blocks are all of known
        # types (its resultType read on the way; a large one already by classify()). Anything
        # else takes the general path: input rounds (MRTR), an unknown resultType (JR-10),
        # blocks of other types.
        wire: CallToolWire | CallToolWireLenient | None
        if type(answer) is ToolCallResponse:
            wire = answer.tool
        else:
            try:
                wire = (_call_tool_decoder or _decoder_for(CallToolWire)).decode(raw)
            except jsonrpc.DECODE_ERRORS:
                wire = None
        revision = self._session.revision
        modern = revision is not None and revision.modern
        if isinstance(wire, CallToolWire) and (not modern or wire.result_type == "complete"):
            content = list(wire.content)
        else:
            raw = await self._complete("tools/call", params, raw, timeout=timeout, on_progress=on_progress, check=True)
            try:
                wire = _decoder_for(CallToolWire).decode(raw)
                content = list(wire.content)
            except jsonrpc.DECODE_ERRORS:
                wire = _decode(raw, CallToolWireLenient, "tools/call", self.label)
                content = decode_content(wire.content)
        result = ToolResult(
            content=content,
            structured_content=wire.structured_content,
            is_error=wire.is_error,
            meta=wire.meta,
            tool=name,
            server=self.label,
        )
        if self._validate_output and not result.is_error and name in self._output_schemas:
            self._check_output(name, result)
        return result

    def _check_output(self, name: str, result: ToolResult) -> None:
        tool = self._tools.get(name)
        if tool is None or tool.output_schema is None:
            return
        structured = result.structured_content
        if isinstance(structured, UnsetType):
            raise OutputSchemaError(
                f"tool '{name}' of server '{self.label}' declares an outputSchema but returned no structuredContent"
            )
        revision = self._session.revision
        if revision is not None and revision.structured_content_is_object and not isinstance(structured, dict):
            raise OutputSchemaError(
                f"tool '{name}' of server '{self.label}' returned structuredContent that is not an object "
                f"(revision {revision.version} requires one)"
            )
        if name not in self._validators:
            self._validators[name] = _compile_schema(tool.output_schema, name, self.label)
        validator = self._validators[name]
        if validator is None:
            return
        try:
            error = next(iter(validator.iter_errors(structured)), None)
        except Exception as exc:  # e.g. a "pattern" that is no regular expression: the schema's fault
            log.warning(
                "%s: the outputSchema of tool %r cannot be applied (%s); not validated",
                self.label,
                name,
                _printable(str(exc), 200),
            )
            self._validators[name] = None
            return
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise OutputSchemaError(
                f"tool '{name}' of server '{self.label}' returned structuredContent that breaks its "
                f"outputSchema at {where}: {error.message}"
            )

    # -- resources --------------------------------------------------------------------------------

    async def list_resources(self, *, timeout: float | None = None) -> list[Resource]:
        resources: list[Resource] = await self._pages("resources/list", _ResourcesPage, "resources", timeout)
        if not resources and await self._cross_check_legacy("resources/list", timeout):
            resources = await self._pages("resources/list", _ResourcesPage, "resources", timeout)
        return resources

    async def list_resource_templates(self, *, timeout: float | None = None) -> list[ResourceTemplate]:
        return await self._pages("resources/templates/list", _TemplatesPage, "resource_templates", timeout)

    async def read_resource(self, uri: str, *, timeout: float | None = None) -> ReadResourceResult:
        """Reads a resource. A missing one raises RPCError with ``is_not_found`` true (RS-03)."""
        raw = await self._request("resources/read", {"uri": uri}, timeout=timeout)
        return _decode(raw, ReadResourceResult, "resources/read", self.label)

    @asynccontextmanager
    async def subscribe(
        self,
        resources: Sequence[str] = (),
        *,
        tools_list_changed: bool = False,
        prompts_list_changed: bool = False,
        resources_list_changed: bool = False,
        buffer: int = 256,
        timeout: float | None = None,
    ) -> AsyncIterator[Subscription]:
        """Subscribes to resource updates and list changes, in either era.

        Legacy: ``resources/subscribe`` per URI (needs ``resources.subscribe``), unsubscribed on
        exit; list-changed notifications are filtered from the session's stream. 2026-07-28:
        one ``subscriptions/listen`` stream, acknowledged before this returns (UT-S01..UT-S06);
        on exit it is cancelled with ``notifications/cancelled``.

        Cancellation: leaving the block ends the subscription (bounded, shielded).
        """
        sub = Subscription(
            self,
            resources=tuple(resources),
            tools=tools_list_changed,
            prompts=prompts_list_changed,
            resources_list=resources_list_changed,
            buffer=buffer,
        )
        if self.era is Era.MODERN:
            await self._listen(sub, timeout)
            try:
                yield sub
            finally:
                await self._end_listen(sub)
        else:
            done: list[str] = []
            await self._open_server_stream()
            self._legacy_subscriptions.append(sub)
            try:
                for uri in resources:
                    await self._roundtrip("resources/subscribe", {"uri": uri}, timeout=timeout)
                    done.append(uri)
                sub.acknowledged = sub.requested
                yield sub
            finally:
                self._legacy_subscriptions.remove(sub)
                with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_NOTIFY_TIMEOUT * 5):
                    for uri in done:
                        try:
                            await self._roundtrip("resources/unsubscribe", {"uri": uri}, timeout=CANCEL_NOTIFY_TIMEOUT)
                        except MCPWireError:
                            break

    async def _listen(self, sub: Subscription, timeout: float | None) -> None:
        waiter = _Waiter()
        entry, payload = self._session.prepare_request("subscriptions/listen", {"notifications": sub.requested}, waiter)
        sub.id = entry.id
        self._subscriptions[entry.id] = sub
        self._requests_sent += 1
        try:
            await self._send(
                payload,
                request_id=entry.id,
                headers=self._headers_for("subscriptions/listen", {"notifications": sub.requested}),
            )
            limit = self._timeout if timeout is None else timeout
            with trio.move_on_after(limit):
                while sub.acknowledged is None and not waiter.is_set() and sub._error is None:
                    await sub._changed.wait()
            if isinstance(waiter.outcome, ErrorResponse):
                out = waiter.outcome
                raise RPCError(
                    out.code,
                    out.message,
                    out.data_value(),
                    method="subscriptions/listen",
                    server=self.label,
                    request_id=entry.id,
                )
            if sub._error is not None:
                raise sub._error
            if sub.acknowledged is None:
                raise RequestTimeout(
                    f"server '{self.label}' did not acknowledge subscriptions/listen (id {entry.id}) within {limit:g}s",
                    method="subscriptions/listen",
                    request_id=entry.id,
                    server=self.label,
                    timeout=limit,
                )
        except BaseException:
            await self._end_listen(sub)
            raise

    async def _end_listen(self, sub: Subscription) -> None:
        assert sub.id is not None
        self._subscriptions.pop(sub.id, None)
        entry = self._session.table.abandon(sub.id)
        sub._end(None)
        if entry is not None:
            # UT-S06: on stdio, end a subscription with notifications/cancelled.
            await self._cancel_on_wire(entry, ClientClosed("subscription closed"))

    # -- prompts ------------------------------------------------------------------------------------

    async def list_prompts(self, *, timeout: float | None = None) -> list[Prompt]:
        prompts: list[Prompt] = await self._pages("prompts/list", _PromptsPage, "prompts", timeout)
        if not prompts and await self._cross_check_legacy("prompts/list", timeout):
            prompts = await self._pages("prompts/list", _PromptsPage, "prompts", timeout)
        return prompts

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, *, timeout: float | None = None
    ) -> GetPromptResult:
        """Renders a prompt. Argument values must be strings (PR-02)."""
        params: dict[str, object] = {"name": name}
        if arguments:
            bad = [k for k, v in arguments.items() if not isinstance(v, str)]
            if bad:
                raise TypeError(f"prompt arguments must be strings; not: {', '.join(bad)}")
            params["arguments"] = dict(arguments)
        raw = await self._request("prompts/get", params, timeout=timeout)
        return _decode(raw, GetPromptResult, "prompts/get", self.label)

    # -- completion, logging --------------------------------------------------------------------------

    async def complete(
        self,
        ref: Mapping[str, object],
        argument: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """``completion/complete`` for a prompt (``{"type": "ref/prompt", "name": ...}``) or a
        resource template (``{"type": "ref/resource", "uri": ...}``) argument."""
        params: dict[str, object] = {"ref": dict(ref), "argument": {"name": argument, "value": value}}
        if context:
            params["context"] = {"arguments": dict(context)}
        raw = await self._request("completion/complete", params, timeout=timeout)
        return _decode(raw, CompleteResult, "completion/complete", self.label).completion

    async def set_logging_level(self, level: str, *, timeout: float | None = None) -> None:
        """Legacy: ``logging/setLevel``. 2026-07-28: adds the level to every later request's
        ``_meta`` (UT-L03); ``None``-like "off" is not a level: pass a RFC 5424 name."""
        if level not in self._LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; one of {', '.join(self._LOG_LEVELS)}")
        if self.era is Era.MODERN:
            self._log_level = level
            return
        await self._roundtrip("logging/setLevel", {"level": level}, timeout=timeout)
        self._log_level = level  # sent again on a renewed session (HT-L13)

    async def notify_roots_changed(self) -> None:
        """Legacy: ``notifications/roots/list_changed`` (no such notification in 2026-07-28)."""
        if self.era is Era.LEGACY:
            await self.notify("notifications/roots/list_changed")

    # -- notifications -----------------------------------------------------------------------------------

    async def _open_server_stream(self) -> None:
        """Legacy Streamable HTTP: the optional GET stream for server-initiated messages.

        Opened right after the handshake unless ``server_stream=False`` (then on demand: when
        notifications are iterated or a subscription starts), and waited for, so no request
        races with it.
        """
        self._want_server_stream = True
        open_get = getattr(self._transport, "open_get_stream", None)
        if open_get is not None and self._session.state is SessionState.READY:
            await open_get()

    async def notifications(self) -> AsyncIterator[ServerNotification]:
        """Every notification from the server, in order, until the connection ends: progress
        (also given to the call's ``on_progress``), log messages, list changes, resource updates,
        cancellations.

        The buffer is bounded (``notification_buffer``); when nobody reads, the newest are
        dropped and counted in :meth:`statistics`. Over legacy Streamable HTTP, iterating opens
        the server's GET stream.
        """
        await self._open_server_stream()
        async for note in self._notify_recv:
            yield note

    # -- closing ----------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Closes the connection in order; idempotent.

        Pending calls fail with :class:`ClientClosed`; the server is shut down (stdin closed,
        then SIGTERM, then SIGKILL, each bounded). Cancellation: shielded.
        """
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        self._session.closing()
        with trio.CancelScope(shield=True):
            for sub in list(self._subscriptions.values()):
                await self._end_listen(sub)
            # Pending calls fail first: the transport's close lets queued writes go out, and an
            # answer that comes meanwhile is no longer anyone's (dropped quietly, see _stray_answer).
            self._fail_pending_on_close()
            if self._transport is not None:
                await self._transport.aclose()
            self._fail_pending_on_close()  # sent while the transport was closing
            self._session.state = SessionState.CLOSED
            self._notify_send.close()
            for scope in self._server_request_scopes.values():
                scope.cancel()
            self._deadlines.close()
        self._closed.set()

    async def wait_closed(self) -> None:
        """Waits until the connection is closed, by either side."""
        if self._transport is not None:
            await self._transport.wait_closed()


class _NotDeclared(Exception):
    pass


class Subscription:
    """An open subscription; iterate it for its notifications.

    Attributes:
        requested: the filter sent (2026-07-28 ``SubscriptionFilter`` shape).
        acknowledged: the filter the server agreed to honour (UT-S02, UT-S03).
        id: the ``subscriptions/listen`` request id (2026-07-28).
    """

    def __init__(
        self,
        client: Client,
        *,
        resources: tuple[str, ...],
        tools: bool,
        prompts: bool,
        resources_list: bool,
        buffer: int,
    ) -> None:
        self._client = client
        requested: JSONObject = {}
        if tools:
            requested["toolsListChanged"] = True
        if prompts:
            requested["promptsListChanged"] = True
        if resources_list:
            requested["resourcesListChanged"] = True
        if resources:
            requested["resourceSubscriptions"] = list(resources)
        self.requested = requested
        self.acknowledged: JSONObject | None = None
        self.id: RequestId | None = None
        self._resources = resources  # in the order subscribed (HT-L13 re-subscribes them)
        self._uris = set(resources)
        self._send, self._recv = trio.open_memory_channel[ServerNotification](buffer)
        self._changed = trio.Event()
        self._error: BaseException | None = None
        self.dropped = 0

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _wants(self, note: ServerNotification) -> bool:
        method = note.method
        if method == "notifications/resources/updated":
            uri = note.params.get("uri")
            return isinstance(uri, str) and any(uri == u or uri.startswith(u.rstrip("/") + "/") for u in self._uris)
        flags = {
            "notifications/tools/list_changed": "toolsListChanged",
            "notifications/prompts/list_changed": "promptsListChanged",
            "notifications/resources/list_changed": "resourcesListChanged",
        }
        flag = flags.get(method)
        return flag is not None and self.requested.get(flag) is True

    def _deliver(self, note: ServerNotification) -> None:
        if note.method == "notifications/subscriptions/acknowledged":
            honoured = note.params.get("notifications")
            self.acknowledged = honoured if isinstance(honoured, dict) else {}
            self._wake()
            return
        if note.subscription_id is None and self.id is not None:
            return
        if not self._wants(note):
            return
        try:
            self._send.send_nowait(note)
        except trio.WouldBlock:
            self.dropped += 1
        except trio.ClosedResourceError:
            pass

    def _end(self, error: BaseException | None) -> None:
        if error is not None and self._error is None:
            self._error = error
        self._send.close()
        self._wake()

    def __aiter__(self) -> AsyncIterator[ServerNotification]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ServerNotification]:
        async for note in self._recv:
            yield note


def _decoder_for(kind: type[T]) -> msgspec.json.Decoder[T]:
    global _call_tool_decoder
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
        if kind is CallToolWire:
            _call_tool_decoder = decoder
    return decoder


def _progress(params: JSONObject) -> Progress:
    value = params.get("progress")
    total = params.get("total")
    message = params.get("message")
    return Progress(
        float(value) if isinstance(value, int | float) else 0.0,
        float(total) if isinstance(total, int | float) else None,
        message if isinstance(message, str) else None,
    )


def legacy_for_sse() -> tuple[str, ...]:
    """Revisions offered over HTTP+SSE: that transport belongs to 2024-11-05, but a server may
    answer a newer one; offer the newest first, as for any legacy server."""
    return LEGACY_REVISIONS


async def _deliver_progress(items: list[JSONObject], on_progress: ProgressCallback) -> None:
    for item in items:
        result = on_progress(_progress(item))
        if inspect.isawaitable(result):
            await result


def _root(value: str | JSONObject) -> JSONObject:
    if isinstance(value, str):
        if not value.startswith("file://"):
            raise ValueError(f"roots must be file:// URIs (CF-R05), not {value!r}")
        return {"uri": value}
    return dict(value)


def _fill_elicitation_defaults(params: JSONObject, answer: JSONObject) -> JSONObject:
    """Adds schema defaults for fields an accepted elicitation left out (SEP-1034)."""
    if answer.get("action") != "accept":
        return answer
    schema = params.get("requestedSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return answer
    content = answer.get("content")
    filled: JSONObject = dict(content) if isinstance(content, dict) else {}
    for key, prop in props.items():
        if key not in filled and isinstance(prop, dict) and "default" in prop:
            filled[key] = prop["default"]
    return {**answer, "content": filled}


def _compile_schema(schema: JSONObject, tool: str, server: str) -> Validator | None:
    """A jsonschema validator for an outputSchema; never fetches a network ``$ref`` (JR-44).

    ``None`` when the schema cannot be used (logged; the structural checks of the caller still
    apply) or when jsonschema is not installed (logged once: it is the ``schema`` extra).
    """
    global _JSONSCHEMA_MISSING_LOGGED
    try:
        import jsonschema
        from jsonschema import validators
        from referencing import Registry
    except ImportError:
        if not _JSONSCHEMA_MISSING_LOGGED:
            _JSONSCHEMA_MISSING_LOGGED = True
            log.warning(
                "%s: tool %r declares an outputSchema, but jsonschema is not installed: structuredContent is "
                "checked for presence and shape only (pip install 'mcpwire[schema]' to validate it)",
                server,
                tool,
            )
        return None

    def no_retrieve(uri: str) -> Any:
        raise LookupError(f"refusing to fetch external $ref {uri!r} (JR-44)")

    declared = schema.get("$schema")
    if declared is not None and not isinstance(declared, str):
        log.warning("%s: tool %r has an outputSchema whose $schema is not a string; not validated", server, tool)
        return None
    try:
        cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema, registry=Registry(retrieve=no_retrieve))  # type: ignore[call-arg]
    except jsonschema.SchemaError as exc:
        log.warning("%s: tool %r has an outputSchema that is not a valid JSON Schema: %s", server, tool, exc.message)
    except Exception as exc:  # a schema jsonschema cannot even inspect: the server's fault, not a crash
        log.warning("%s: tool %r has an outputSchema that cannot be used: %s", server, tool, _printable(str(exc), 200))
    return None


_JSONSCHEMA_MISSING_LOGGED = False


def _drain(channel: trio.MemoryReceiveChannel[_Waiter]) -> None:
    """Drops what a channel holds (the failed waiters of a connection that was replaced)."""
    while True:
        try:
            channel.receive_nowait()
        except trio.WouldBlock:
            return


def _unwrap(exc: BaseExceptionGroup[BaseException]) -> BaseException:
    """The single meaningful exception of a group, if there is one."""
    leaves: list[BaseException] = []

    def walk(group: BaseExceptionGroup[BaseException]) -> None:
        for e in group.exceptions:
            if isinstance(e, BaseExceptionGroup):
                walk(e)
            elif not isinstance(e, trio.Cancelled):
                leaves.append(e)

    walk(exc)
    return leaves[0] if len(leaves) == 1 else exc


def _resolve_target(target: Target) -> ServerSpec:
    if target is None:
        from .testing import demo_server_spec

        return demo_server_spec()
    return as_server(target)


@asynccontextmanager
async def open_client(target: Target = None, **options: Any) -> AsyncIterator[Client]:
    """Connects to a server and yields a ready :class:`Client`; closes it on exit.

    Args:
        target: an argv list (``["npx", "-y", "@modelcontextprotocol/server-everything"]``), a
            command string, a :class:`~mcpwire.transports.StdioServer`, or ``None`` for the
            bundled demo server.
        **options: see :class:`Client` (``timeout``, ``era``, ``protocol_version``, handlers, ...).

    Raises:
        ServerNotFound: the command does not exist.
        ConnectError: the server could not be started or did not finish the handshake in time.
        UnsupportedVersion: the server speaks no revision mcpwire does.

    Leaving the block shuts the server down in order; no task or process outlives it. An
    exception raised in the block propagates as itself, not wrapped in an exception group.
    """
    spec = _resolve_target(target)
    try:
        async with trio.open_nursery() as nursery:
            client = Client(spec, nursery, **options)
            try:
                await client._connect()
                yield client
            finally:
                await client.aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        single = _unwrap(group)
        if single is group:
            raise
        _reraise_alone(single)


def _reraise_alone(exc: BaseException) -> NoReturn:
    """Raises ``exc`` out of the group that carried it with its own chain intact: its
    ``__cause__``, ``__context__`` and ``__suppress_context__`` are the ones it was raised with,
    not the group's."""
    cause, context, suppress = exc.__cause__, exc.__context__, exc.__suppress_context__
    try:
        raise exc
    finally:
        exc.__cause__, exc.__context__, exc.__suppress_context__ = cause, context, suppress


async def connect_client(nursery: trio.Nursery, target: Target = None, **options: Any) -> Client:
    """Connects a client whose tasks run in ``nursery``; you close it with :meth:`Client.aclose`."""
    client = Client(_resolve_target(target), nursery, **options)
    try:
        await client._connect()
    except BaseException:
        await client.aclose()
        raise
    return client
