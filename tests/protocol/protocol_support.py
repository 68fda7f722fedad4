"""Shared helpers of the sans-I/O core tests: sessions, schemas and a fake server side.

Nothing here performs I/O. :class:`FakeServer` is a few plain functions that read the bytes a
:class:`~mcpwire.protocol.ClientSession` writes (through the same ``classify`` the client uses)
and answer with bytes; :func:`connect` drives an :class:`~mcpwire.protocol.EraDetector` and the
session against it exactly as the I/O layer would, so a whole handshake runs synchronously.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import msgspec
import pytest

from mcpwire import schemas
from mcpwire.protocol import ClientSession, EraDetector, LineBuffer, classify
from mcpwire.protocol.framing import encode_line
from mcpwire.protocol.jsonrpc import (
    ErrorResponse,
    Notification,
    Request,
    Response,
    encode_error,
    encode_result,
)
from mcpwire.protocol.lifecycle import Decided, Failed, Restart, SendDiscover, SendInitialize
from mcpwire.protocol.session import AnswerReceived
from mcpwire.protocol.types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    DiscoverResult,
    Implementation,
    InitializeResult,
    ServerCapabilities,
)
from mcpwire.protocol.versions import LEGACY_REVISIONS, MODERN_REVISIONS, Era

MODERN = "2026-07-28"
LEGACY = LEGACY_REVISIONS
ALL = MODERN_REVISIONS + LEGACY_REVISIONS

CLIENT_INFO = Implementation(name="mcpwire-tests", version="0.0.1")
CLIENT_INFO_JSON = {"name": "mcpwire-tests", "version": "0.0.1"}
LABEL = "srv"

#: Every server capability, as a server advertising everything would send it.
EVERYTHING = ServerCapabilities(
    tools={"listChanged": True},
    resources={"subscribe": True, "listChanged": True},
    prompts={"listChanged": True},
    logging={},
    completions={},
)


def make_session(
    version: str | None = MODERN,
    capabilities: ServerCapabilities = EVERYTHING,
    *,
    client_capabilities: dict[str, object] | None = None,
) -> ClientSession[str]:
    """A session in READY at ``version`` (or left IDLE when ``version`` is None)."""
    session: ClientSession[str] = ClientSession(CLIENT_INFO, client_capabilities or {}, label=LABEL)
    if version is not None:
        session.begin_connecting()
        session.established(version, capabilities, Implementation(name="fake", version="1"), None)
    return session


def wire(payload: bytes) -> dict[str, Any]:
    """Decodes one outgoing message, checking it is a single compact line (ST-03)."""
    assert b"\n" not in payload and b"\r" not in payload, payload
    value = json.loads(payload)
    assert payload == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(), payload
    assert isinstance(value, dict)
    return value


# -- schemas ----------------------------------------------------------------------------------

SCHEMA_DIR = schemas.schema_dir()  # the official schemas shipped with mcpwire, or $MCPWIRE_SCHEMA_DIR


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_schemas() -> None:
    """Skips the calling test when the official schemas are absent; fails it in CI."""
    missing = [rev for rev in ALL if not (SCHEMA_DIR / rev / "schema.json").is_file()]
    if missing:
        message = f"MCP schemas missing under {SCHEMA_DIR} for {', '.join(missing)} (set MCPWIRE_SCHEMA_DIR)"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)


@cache
def _document(revision: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / revision / "schema.json").read_text(encoding="utf-8"))


@cache
def validator(revision: str, definition: str) -> Any:
    """A validator of ``definition`` in ``revision``: a ``$ref`` into a registry of the whole document."""
    import jsonschema
    from referencing import Registry
    from referencing.jsonschema import DRAFT7, DRAFT202012

    document = _document(revision)
    modern_layout = "$defs" in document  # 2025-11-25 and 2026-07-28: 2020-12; older: draft-07
    section = "$defs" if modern_layout else "definitions"
    assert definition in document[section], f"{definition} is not defined by the {revision} schema"
    uri = f"urn:mcp-schema:{revision}"
    resource = (DRAFT202012 if modern_layout else DRAFT7).create_resource(document)
    registry = Registry().with_resource(uri, resource)
    cls = jsonschema.Draft202012Validator if modern_layout else jsonschema.Draft7Validator
    return cls({"$ref": f"{uri}#/{section}/{definition}"}, registry=registry)


def assert_valid(revision: str, definition: str, instance: object) -> None:
    import jsonschema

    error = jsonschema.exceptions.best_match(validator(revision, definition).iter_errors(instance))
    assert error is None, f"not a valid {revision} {definition}: {error.message} at {list(error.absolute_path)}"


# -- a fake server side (SessionPair) -----------------------------------------------------------

TOOLS = [{"name": "echo", "inputSchema": {"type": "object"}}]


@dataclass
class FakeServer:
    """A minimal MCP server as plain functions: :meth:`receive` takes what the client wrote.

    Args:
        versions: revisions the server speaks, preferred first. A server with 2026-07-28 is
            modern (it answers ``server/discover`` and every request statelessly); otherwise it
            is legacy and needs ``initialize`` first.
        before_initialize: what a legacy server does with any other request before
            ``initialize`` (LC-41): ``"error:<code>"``, ``"silent"`` (never answers) or ``"exit"``
            (the process dies, LC-45).
        late_discover: a modern server that answers the probe only after the next message (a
            slow start: the probe times out, then its answer arrives late).
    """

    versions: tuple[str, ...]
    before_initialize: str = "error:-32601"
    late_discover: bool = False
    capabilities: dict[str, object] = field(default_factory=lambda: {"tools": {}})
    alive: bool = True
    starts: int = 1
    negotiated: str | None = None
    initialized: bool = False
    received: list[Request | Notification] = field(default_factory=list)
    _held: list[bytes] = field(default_factory=list)

    @property
    def modern(self) -> bool:
        return MODERN in self.versions

    def restart(self) -> None:
        self.alive = True
        self.starts += 1
        self.negotiated = None
        self.initialized = False
        self._held.clear()

    def receive(self, data: bytes) -> bytes:
        """Everything the server writes back to stdout in answer to ``data`` (whole lines)."""
        assert self.alive, "the client wrote to a server that had exited"
        out: list[bytes] = []
        for line in LineBuffer().feed(data):
            message = classify(line)
            # ST-04: the client writes nothing but requests and notifications.
            assert isinstance(message, Request | Notification), f"the client wrote {message!r}"
            self.received.append(message)
            params = msgspec.json.decode(message.params) if message.params else {}
            assert isinstance(params, dict)
            if isinstance(message, Notification):
                self._notification(message.method, params)
                continue
            answer = self._request(message.id, message.method, params)
            if answer is None:
                continue
            out.extend(self._held)
            self._held.clear()
            out.append(encode_line(answer))
        return b"".join(out)

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/initialized":
            assert not self.modern, "LC-30: notifications/initialized sent to a 2026-07-28 server"
            assert self.negotiated is not None, "LC-03: initialized before the initialize result"
            self.initialized = True

    def _request(self, rid: int | str, method: str, params: dict[str, Any]) -> bytes | None:
        if self.modern:
            return self._modern(rid, method, params)
        return self._legacy(rid, method, params)

    def _modern(self, rid: int | str, method: str, params: dict[str, Any]) -> bytes | None:
        meta = params.get("_meta")
        if method == "initialize":
            return encode_error(rid, -32601, "Method not found: initialize")
        # LC-20: every request carries the protocol version and the client capabilities.
        assert isinstance(meta, dict), f"{method} without _meta"
        assert isinstance(meta.get(META_CLIENT_CAPABILITIES), dict), f"{method} without clientCapabilities"
        assert meta.get(META_CLIENT_INFO) == CLIENT_INFO_JSON  # LC-21
        version = meta.get(META_PROTOCOL_VERSION)
        if version not in self.versions:
            data = {"supported": [v for v in self.versions if v in MODERN_REVISIONS], "requested": version}
            return encode_error(rid, -32022, "Unsupported protocol version", data)
        if method == "server/discover":
            result = {
                "resultType": "complete",
                "supportedVersions": list(self.versions),
                "capabilities": self.capabilities,
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake", "version": "1"}},
                "ttlMs": 0,
                "cacheScope": "public",
            }
            answer = encode_result(rid, result)
            if self.late_discover:
                self._held.append(encode_line(answer))
                return None
            return answer
        if method == "tools/list":
            return encode_result(rid, {"resultType": "complete", "tools": TOOLS, "ttlMs": 0, "cacheScope": "public"})
        return encode_error(rid, -32601, f"Method not found: {method}")

    def _legacy(self, rid: int | str, method: str, params: dict[str, Any]) -> bytes | None:
        if method == "initialize":
            offered = params["protocolVersion"]
            assert isinstance(params.get("capabilities"), dict) and params.get("clientInfo") == CLIENT_INFO_JSON
            # LC-11: echo a version it speaks, else counter-offer its preferred one.
            self.negotiated = offered if offered in self.versions else self.versions[0]
            result = {
                "protocolVersion": self.negotiated,
                "capabilities": self.capabilities,
                "serverInfo": {"name": "fake", "version": "1"},
            }
            return encode_result(rid, result)
        if self.negotiated is None and method != "ping":
            if self.before_initialize == "silent":
                return None
            if self.before_initialize == "exit":
                self.alive = False
                return None
            code = int(self.before_initialize.removeprefix("error:"))
            return encode_error(rid, code, "Server not initialized")
        # LC-04: the client sends nothing but ping before the initialized notification.
        assert self.initialized or method == "ping", f"{method} before notifications/initialized"
        if method == "tools/list":
            return encode_result(rid, {"tools": TOOLS})
        if method == "ping":
            return encode_result(rid, {})
        return encode_error(rid, -32601, f"Method not found: {method}")


@dataclass
class Outcome:
    """What :func:`connect` ended with, and what happened on the way."""

    verdict: Decided | Failed
    detector: EraDetector
    actions: list[object]


def connect(session: ClientSession[str], server: FakeServer, *, mode: str = "auto") -> Outcome:
    """Runs era detection and the handshake of ``session`` against ``server``, synchronously.

    Mirrors the I/O layer (``Connector.detect`` and ``establish`` in ``mcpwire.client.connection``):
    perform the detector's actions, deliver the server's lines one at a time through ``classify``
    and ``session.receive``, report silence as a probe timeout and death as an exit. A detector
    that stops answering while nothing is in flight fails the test instead of hanging.
    """
    detector = EraDetector(mode)
    session.begin_connecting()
    inbox: list[bytes] = []
    reader = LineBuffer()  # the client's stdout reader
    sent: list[int] = []
    log: list[object] = []

    def perform(actions: list[object]) -> Decided | Failed | None:
        nonlocal reader
        log.extend(actions)
        for action in actions:
            if isinstance(action, Decided | Failed):
                return action
            if isinstance(action, Restart):
                server.restart()
                inbox.clear()
                reader = LineBuffer()
                for entry in session.table.fail_all():  # the old process's waiters are gone
                    assert entry.waiter in ("discover", "initialize")
            elif isinstance(action, SendDiscover):
                entry, payload = session.prepare_request(
                    "server/discover", {}, "discover", check=False, handshake=True, meta_version=action.version
                )
                sent.append(entry.id)
                inbox.extend(reader.feed(server.receive(encode_line(payload))))
            elif isinstance(action, SendInitialize):
                params = session.initialize_params(action.version)
                entry, payload = session.prepare_request(
                    "initialize", params, "initialize", check=False, handshake=True
                )
                sent.append(entry.id)
                inbox.extend(reader.feed(server.receive(encode_line(payload))))
        return None

    verdict = perform(detector.start())
    timed_out = False
    while verdict is None:
        if not inbox:
            if not server.alive:
                verdict = perform(detector.on_exit())
                continue
            assert not timed_out, f"the detector stalls: nothing in flight answers ({detector})"
            timed_out = True
            verdict = perform(detector.on_probe_timeout())
            continue
        for event in session.receive(classify(inbox.pop(0))):
            assert isinstance(event, AnswerReceived), event
            role, message = event.entry.waiter, event.message
            if isinstance(message, Response):
                if role == "discover":
                    actions = detector.on_discover_result(msgspec.json.decode(message.result, type=DiscoverResult))
                else:
                    actions = detector.on_initialize_result(msgspec.json.decode(message.result, type=InitializeResult))
            else:
                assert isinstance(message, ErrorResponse)
                on_error = detector.on_discover_error if role == "discover" else detector.on_initialize_error
                actions = on_error(message.code, message.message, message.data_value())
            verdict = perform(actions)
    if isinstance(verdict, Decided):
        for request_id in sent:  # the other era's request, if still open: abandoned, as the client does
            session.table.abandon(request_id)
        if verdict.era is Era.MODERN:
            assert verdict.discover is not None
            session.established(verdict.version, verdict.discover.capabilities, None, verdict.discover.instructions)
        else:
            init = verdict.initialize
            assert init is not None
            session.established(verdict.version, init.capabilities, init.server_info, init.instructions)
            assert server.receive(encode_line(session.encode_notification("notifications/initialized"))) == b""
        # Anything the server still had to say about the handshake is late, never an event (JR-06).
        for line in inbox:
            assert session.receive(classify(line)) == []
    return Outcome(verdict, detector, log)


def roundtrip(
    session: ClientSession[str], server: FakeServer, method: str, params: dict[str, Any] | None = None
) -> Any:
    """One request through the session and the server; returns the decoded result."""
    entry, payload = session.prepare_request(method, params, "call")
    lines = LineBuffer().feed(server.receive(encode_line(payload)))
    assert len(lines) == 1, lines
    events = session.receive(classify(lines[0]))
    assert len(events) == 1 and isinstance(events[0], AnswerReceived) and events[0].entry is entry, events
    message = events[0].message
    assert isinstance(message, Response), message
    return msgspec.json.decode(message.result)
