"""The client side of an MCP session, without I/O.

Theory of operation: :class:`ClientSession` turns intentions into bytes and bytes into events.
``prepare_request`` checks the session state and the negotiated capabilities, allocates an id in
the :class:`~mcpwire.protocol.pending.RequestTable`, adds the 2026-07-28 per-request ``_meta``
when the era is modern (LC-20..LC-22) and returns the encoded message. ``receive`` takes a
classified message and returns what happened as events: an answer for a waiter, progress for a
request in flight, a notification, a request from the server, or a protocol violation. The I/O
layer performs the events; this module never awaits, logs or touches a socket.

Progress tokens are the request's own id, so they are unique across active requests (UT-G01) and
route without a second table; progress for a request that is no longer in flight is dropped
(UT-G02).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

import msgspec

from ..errors import ClientClosed, LocalProtocolError
from . import jsonrpc
from .jsonrpc import Batch, ErrorResponse, Message, Notification, NotProtocol, Request, RequestId, Response
from .lifecycle import SessionState
from .methods import check_method
from .pending import PendingRequest, RequestTable
from .types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    CallToolWire,
    Implementation,
    ServerCapabilities,
)
from .versions import Era, Revision

__all__ = [
    "ToolCallResponse",
    "decode_tool_answer",
    "AnswerReceived",
    "AnswerUnreadable",
    "ClientSession",
    "Event",
    "NotificationReceived",
    "ProgressReceived",
    "ServerRequestReceived",
    "Violation",
]

W = TypeVar("W")

_params_decoder = msgspec.json.Decoder(dict[str, object])


class ToolCallResponse(Response, frozen=True):
    """A ``tools/call`` answer decoded in one pass (large results), ``result`` left empty.

    Classifying a message first (to learn its id) and then decoding its result reads a large
    answer twice; for a big message while calls are pending, :func:`decode_tool_answer` reads it
    once, straight into the typed result, and the generic path is the fallback.
    """

    tool: CallToolWire | None = None


class _ToolAnswer(msgspec.Struct, forbid_unknown_fields=True):
    # forbid_unknown_fields: a notification or a request fails at its "method" key, at once,
    # instead of after skipping its params
    jsonrpc: str
    id: RequestId
    result: CallToolWire


_tool_answer: msgspec.json.Decoder[_ToolAnswer] | None = None  # built on first use (about 1 ms)
_EMPTY_RESULT = msgspec.Raw(b"")


def decode_tool_answer(data: bytes) -> ToolCallResponse | None:
    """``data`` as a complete ``tools/call`` answer in one pass, or ``None`` when it is
    anything else (another message, an error, input rounds, unusual content blocks, bad JSON)."""
    global _tool_answer
    if _tool_answer is None:
        _tool_answer = msgspec.json.Decoder(_ToolAnswer)
    try:
        answer = _tool_answer.decode(data)
    except jsonrpc.DECODE_ERRORS:
        return None
    if answer.jsonrpc != "2.0" or answer.result.result_type != "complete":
        return None
    return ToolCallResponse(answer.id, _EMPTY_RESULT, answer.result)


class AnswerReceived(msgspec.Struct, Generic[W], frozen=True):
    """The answer to one of our requests."""

    entry: PendingRequest[W]
    message: Response | ErrorResponse


class AnswerUnreadable(msgspec.Struct, Generic[W], frozen=True):
    """An answer to one of our requests that cannot be decoded; ``reason`` says why."""

    entry: PendingRequest[W]
    reason: str


class ProgressReceived(msgspec.Struct, Generic[W], frozen=True):
    """``notifications/progress`` for a request still in flight."""

    entry: PendingRequest[W]
    params: dict[str, object]


class NotificationReceived(msgspec.Struct, frozen=True):
    """Any other notification. ``subscription_id`` is set on 2026-07-28 subscription traffic."""

    method: str
    params: dict[str, object]
    subscription_id: RequestId | None = None


class ServerRequestReceived(msgspec.Struct, frozen=True):
    """A request from the server (legacy era only): answer it exactly once (JR-12)."""

    request: Request
    params: dict[str, object]


class Violation(msgspec.Struct, frozen=True):
    """The server broke the protocol in a way that does not end the connection."""

    reason: str
    line: bytes = b""
    #: True for stdout lines that are not JSON-RPC at all (banners, log lines).
    not_protocol: bool = False


Event = (
    AnswerReceived[W]
    | AnswerUnreadable[W]
    | ProgressReceived[W]
    | NotificationReceived
    | ServerRequestReceived
    | Violation
)


def _decode_params(raw: msgspec.Raw) -> dict[str, object] | None:
    if not raw:
        return {}
    try:
        return _params_decoder.decode(raw)
    except jsonrpc.DECODE_ERRORS:  # not an object, invalid UTF-8 (ST-02), or nested too deeply
        return None


class ClientSession(Generic[W]):
    """State, ids and era rules of one client connection.

    Args:
        client_info: our ``Implementation``.
        capabilities: the client capabilities we declare (legacy: once; modern: every request).
        label: the server's name, used in error messages.
    """

    def __init__(
        self,
        client_info: Implementation,
        capabilities: Mapping[str, object],
        *,
        label: str = "server",
    ) -> None:
        self.client_info = client_info
        self.capabilities = dict(capabilities)
        self.label = label
        self.state = SessionState.IDLE
        self.revision: Revision | None = None
        self.server_capabilities = ServerCapabilities()
        #: check_method's answer per method, for the current revision and capabilities
        self._verdicts: dict[str, str | None] = {}
        self.server_info: Implementation | None = None
        self.instructions: str | None = None
        self.table: RequestTable[W] = RequestTable()
        info: dict[str, object] = msgspec.to_builtins(client_info)
        # every revision's schema requires Implementation.version; omit_defaults drops an empty one
        info.setdefault("version", client_info.version)
        self._client_info_value = info
        self._modern_meta: dict[str, object] = {}
        #: the same, encoded once: spliced into requests whose params carry no ``_meta`` of their own
        self._modern_meta_raw: msgspec.Raw | None = None

    # -- state --------------------------------------------------------------------------------

    @property
    def era(self) -> Era | None:
        return self.revision.era if self.revision else None

    def begin_connecting(self) -> None:
        """Connecting, or negotiating again on the same connection (nothing negotiated applies
        until :meth:`established`; requests in flight keep their ids)."""
        self.state = SessionState.CONNECTING
        self.revision = None
        self._verdicts.clear()
        self._modern_meta = {}
        self._modern_meta_raw = None

    def established(
        self,
        version: str,
        capabilities: ServerCapabilities,
        server_info: Implementation | None,
        instructions: str | None,
    ) -> None:
        """The handshake (or discovery) finished: requests may flow."""
        self.revision = Revision(version)
        self.server_capabilities = capabilities
        self._verdicts.clear()
        self.server_info = server_info
        self.instructions = instructions
        self.state = SessionState.READY
        if self.revision.modern:
            self._modern_meta = self.modern_meta(version)
            self._modern_meta_raw = msgspec.Raw(jsonrpc.encode_json(self._modern_meta))
        else:
            self._modern_meta = {}
            self._modern_meta_raw = None

    def closing(self) -> None:
        if self.state is not SessionState.CLOSED:
            self.state = SessionState.CLOSING

    def modern_meta(self, version: str) -> dict[str, object]:
        """The per-request ``_meta`` fields of 2026-07-28 (LC-20, LC-21, LC-22)."""
        return {
            META_PROTOCOL_VERSION: version,
            META_CLIENT_CAPABILITIES: self.capabilities,
            META_CLIENT_INFO: self._client_info_value,
        }

    def initialize_params(self, version: str) -> dict[str, object]:
        """``initialize`` params (LC-02): version, capabilities, clientInfo."""
        return {
            "protocolVersion": version,
            "capabilities": self.capabilities,
            "clientInfo": self._client_info_value,
        }

    # -- sending ------------------------------------------------------------------------------

    def prepare_request(
        self,
        method: str,
        params: Mapping[str, object] | None,
        waiter: W,
        *,
        check: bool = True,
        handshake: bool = False,
        progress: bool = False,
        meta_version: str | None = None,
        meta: Mapping[str, object] | None = None,
    ) -> tuple[PendingRequest[W], bytes]:
        """Registers a request and encodes it.

        Args:
            check: verify state, revision and capability (LC-14, LC-16).
            handshake: the request is part of connecting (``initialize``, the probe).
            progress: ask for progress notifications (token = the request id).
            meta_version: add modern ``_meta`` for this version even before READY (the probe).
            meta: ``_meta`` fields set over the per-request ones (a proxy relaying its own
                client's capabilities).

        Raises:
            ClientClosed: the session is closing or closed.
            LocalProtocolError: the method is not allowed now.
        """
        state = self.state
        if state in (SessionState.CLOSING, SessionState.CLOSED):  # handshakes included (re-init racing close)
            raise ClientClosed(f"cannot send '{method}' to server '{self.label}': the client is {state.name}")
        if state is not SessionState.READY and not handshake:
            raise LocalProtocolError(
                f"cannot send '{method}' to server '{self.label}': session is {state.name}, not READY"
            )
        if check and self.revision is not None:
            verdicts = self._verdicts
            if method in verdicts:
                why = verdicts[method]
            else:
                why = verdicts[method] = check_method(method, self.revision, self.server_capabilities)
            if why is not None:
                raise LocalProtocolError(f"cannot call '{method}' on server '{self.label}': {why}")
        entry = self.table.add(method, waiter)
        if meta_version is None and not progress and not meta:
            # The common case, kept cheap: legacy params go out as they are; 2026-07-28 ones get
            # the per-request _meta encoded once at READY (LC-20..LC-22).
            raw_meta = self._modern_meta_raw
            if raw_meta is None:
                plain = params if params is None or type(params) is dict else dict(params)
                return entry, jsonrpc.encode_request(entry.id, method, plain or None)
            if not params or "_meta" not in params:
                with_meta: dict[str, object] = {**params, "_meta": raw_meta} if params else {"_meta": raw_meta}
                return entry, jsonrpc.encode_request(entry.id, method, with_meta)
        out: dict[str, object] = dict(params) if params else {}
        modern_meta = self._modern_meta if meta_version is None else self.modern_meta(meta_version)
        if modern_meta or progress or meta:
            given = out.get("_meta")
            merged: dict[str, object] = dict(given) if isinstance(given, Mapping) else {}
            if progress:
                merged["progressToken"] = entry.id
            if modern_meta:
                merged.update(modern_meta)
            if meta:
                merged.update(meta)
            out["_meta"] = merged
        payload = jsonrpc.encode_request(entry.id, method, out if (out or modern_meta) else None)
        return entry, payload

    def encode_notification(self, method: str, params: Mapping[str, object] | None = None) -> bytes:
        return jsonrpc.encode_notification(method, dict(params) if params else None)

    # -- receiving ------------------------------------------------------------------------------

    def receive(self, message: Message) -> list[Event[W]]:
        """Turns one classified message into events."""
        if isinstance(message, Response | ErrorResponse):
            entry = self.table.resolve(message.id)
            if entry is None:
                if isinstance(message, ErrorResponse) and message.id is None:
                    return [Violation(f"error without an id: {message.code} {message.message}")]
                return []  # late or unknown: counted by the table (JR-06)
            return [AnswerReceived(entry, message)]
        if isinstance(message, Notification):
            params = _decode_params(message.params)
            if params is None:
                return [Violation(f"'{message.method}' notification with params that are not an object")]
            if message.method == "notifications/progress":
                token = params.get("progressToken")
                # bool is an int subclass (True == 1): a JSON true is no token (UT-G01: string or integer)
                valid = isinstance(token, int | str) and not isinstance(token, bool)
                entry = self.table.get(token) if valid else None  # type: ignore[arg-type]
                if entry is None:
                    return []  # for a finished or unknown request (UT-G02)
                return [ProgressReceived(entry, params)]
            sub_id: RequestId | None = None
            meta = params.get("_meta")
            if isinstance(meta, dict):
                value = meta.get(META_SUBSCRIPTION_ID)
                if isinstance(value, int | str) and not isinstance(value, bool):
                    sub_id = value
            return [NotificationReceived(message.method, params, sub_id)]
        if isinstance(message, Request):
            if self.revision is not None and self.revision.modern:
                # 2026-07-28 stdio: "The server MUST NOT write JSON-RPC requests" (ST-11); and
                # the client "MUST NOT write JSON-RPC responses" (ST-05): drop it.
                return [Violation(f"a 2026-07-28 server sent a request ('{message.method}')")]
            params = _decode_params(message.params)
            return [ServerRequestReceived(message, params if params is not None else {})]
        if isinstance(message, Batch):
            events: list[Event[W]] = []
            if self.revision is not None and not self.revision.receives_batches:
                events.append(Violation(f"a JSON-RPC batch in revision {self.revision.version} (JR-22)"))
            for item in message.messages:
                events.extend(self.receive(item))
            return events
        assert isinstance(message, NotProtocol)
        if message.answer_id is not None and message.answer_id in self.table:
            # An answer to a request in flight that cannot be read (nested too deeply, a
            # malformed error object): the request fails now rather than at its timeout.
            entry = self.table.resolve(message.answer_id)
            assert entry is not None
            return [AnswerUnreadable(entry, message.reason.removeprefix("not a JSON-RPC message: "))]
        return [Violation(message.reason, message.line, not_protocol=True)]
