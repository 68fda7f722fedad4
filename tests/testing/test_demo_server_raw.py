"""The bundled demo server on the raw wire: JSON lines in, exact JSON lines out.

Each test starts ``python -m mcpwire.testing.demo_server`` as a subprocess, writes JSON-RPC lines
to its stdin and asserts the exact messages it writes back. Every message the server writes is
checked to be one compact JSON text per line and validated against the official JSON schema of
the revision in use (the copy shipped in :mod:`mcpwire.schemas`, or ``$MCPWIRE_SCHEMA_DIR``).
Every read is bounded: a reader thread feeds a queue, so a silent server fails the test instead
of hanging it.
"""

from __future__ import annotations

import ast
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry
from referencing.jsonschema import DRAFT7, DRAFT202012

from mcpwire import schemas

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "mcpwire" / "testing" / "demo_server.py"
SCHEMA_DIR = schemas.schema_dir()  # the official schemas shipped with mcpwire, or $MCPWIRE_SCHEMA_DIR

MODERN = "2026-07-28"
LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
READ_TIMEOUT_S = 5.0

SERVER_INFO = {"name": "mcpwire-demo", "version": "1.0.0"}
MODERN_META = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
SUB_ID = "io.modelcontextprotocol/subscriptionId"
TOOL_NAMES = ["echo", "add", "fail", "slow", "big", "ask", "sample", "roots", "notify", "touch", "crash"]
CAPABILITIES = {
    "tools": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
    "logging": {},
    "completions": {},
}
CAPABILITIES_2024 = {k: v for k, v in CAPABILITIES.items() if k != "completions"}
ADD_OUTPUT_SCHEMA = {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
ANSWER_SCHEMA_WITH_DEFAULT = {
    "type": "object",
    "properties": {"answer": {"type": "string", "default": "yes"}},
    "required": ["answer"],
}
BLOB = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w=="  # noqa: E501

# ---------------------------------------------------------------------------------------------
# Schema validation

#: The result definition of each method's answer.
RESULT_DEFS = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "server/discover": "DiscoverResult",
    "subscriptions/listen": "SubscriptionsListenResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
    "logging/setLevel": "EmptyResult",
}
#: The definition of each message the server sends on its own (notifications and requests).
SERVER_MESSAGE_DEFS = {
    "notifications/progress": "ProgressNotification",
    "notifications/message": "LoggingMessageNotification",
    "notifications/tools/list_changed": "ToolListChangedNotification",
    "notifications/resources/updated": "ResourceUpdatedNotification",
    "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
    "notifications/cancelled": "CancelledNotification",
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "roots/list": "ListRootsRequest",
}
#: 2026-07-28 errors that have a definition of their own.
MODERN_ERROR_DEFS = {-32021: "MissingRequiredClientCapabilityError", -32022: "UnsupportedProtocolVersionError"}


@cache
def _schema_document(revision: str) -> dict[str, Any] | None:
    path = SCHEMA_DIR / revision / "schema.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


@cache
def _validator(revision: str, definition: str) -> Any:
    document = _schema_document(revision)
    if document is None:
        return None
    # 2025-11-25 and 2026-07-28 are JSON Schema 2020-12 with $defs; older ones draft-07 with definitions.
    modern_layout = "$defs" in document
    section = "$defs" if modern_layout else "definitions"
    assert definition in document[section], f"{definition} is not defined by the {revision} schema"
    uri = f"urn:mcp-schema:{revision}"
    resource = (DRAFT202012 if modern_layout else DRAFT7).create_resource(document)
    registry: Registry[Any] = Registry().with_resource(uri, resource)
    cls = jsonschema.Draft202012Validator if modern_layout else jsonschema.Draft7Validator
    return cls({"$ref": f"{uri}#/{section}/{definition}"}, registry=registry)


def check_schema(revision: str, definition: str, instance: object) -> None:
    """Assert that ``instance`` is a valid ``definition`` of ``revision`` (no-op without schemas)."""
    validator = _validator(revision, definition)
    if validator is None:
        return
    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    assert error is None, (
        f"not a valid {revision} {definition}: {error.message} at {list(error.absolute_path)}: {instance}"
    )


def _envelope(revision: str, kind: str) -> str:
    if kind == "notification":
        return "JSONRPCNotification"
    if kind == "request":
        return "JSONRPCRequest"
    newer = revision >= "2025-11-25"
    if kind == "result":
        return "JSONRPCResultResponse" if newer else "JSONRPCResponse"
    return "JSONRPCErrorResponse" if newer else "JSONRPCError"


def validate_server_message(revision: str, message: dict[str, Any], request_method: str | None) -> None:
    """Validate one message the server wrote, given the method of the request it answers."""
    if "method" in message:
        kind = "request" if "id" in message else "notification"
        if SUB_ID in message.get("params", {}).get("_meta", {}):
            revision = MODERN  # subscription notifications exist only in 2026-07-28
        check_schema(revision, _envelope(revision, kind), message)
        check_schema(revision, SERVER_MESSAGE_DEFS[message["method"]], message)
    elif "error" in message:
        if message["id"] is None:
            # JSON-RPC 2.0 answers an unreadable request with "id": null; the MCP schemas type ids
            # as string|integer and make the id optional (2025-11-25 on), so check the rest.
            check_schema(MODERN, "JSONRPCErrorResponse", {k: v for k, v in message.items() if k != "id"})
            return
        check_schema(revision, _envelope(revision, "error"), message)
        if revision == MODERN and message["error"]["code"] in MODERN_ERROR_DEFS:
            check_schema(revision, MODERN_ERROR_DEFS[message["error"]["code"]], message)
    else:
        assert request_method is not None, f"a response to no request of ours: {message}"
        check_schema(revision, _envelope(revision, "result"), message)
        definition = RESULT_DEFS[request_method]
        if revision == MODERN and message["result"].get("resultType") == "input_required":
            definition = "InputRequiredResult"
        check_schema(revision, definition, message["result"])


# ---------------------------------------------------------------------------------------------
# Driving the server


def meta(
    caps: dict[str, Any] | None = None,
    *,
    version: str = MODERN,
    log_level: str | None = None,
    progress_token: str | int | None = None,
) -> dict[str, Any]:
    """The per-request ``_meta`` of 2026-07-28."""
    result: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {} if caps is None else caps,
    }
    if log_level is not None:
        result["io.modelcontextprotocol/logLevel"] = log_level
    if progress_token is not None:
        result["progressToken"] = progress_token
    return result


def complete(result: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 ``complete`` result as the demo server sends it."""
    return {"resultType": "complete", **result, "_meta": MODERN_META}


def text(value: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": value}]}
    if is_error:
        result["isError"] = True
    return result


def answer(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": err}


_EOF = object()


class RawServer:
    """One demo server subprocess, spoken to in raw JSON lines."""

    def __init__(self, *flags: str, revision: str = MODERN) -> None:
        #: The revision the server's unsolicited messages are validated against.
        self.revision = revision
        #: A --era legacy server serves requests with a modern _meta by legacy rules.
        self.legacy_only = "--era" in flags and flags[flags.index("--era") + 1] == "legacy"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpwire.testing.demo_server", *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        self._lines: queue.Queue[object] = queue.Queue()
        self._requests: dict[tuple[type, Any], tuple[str, str]] = {}  # id -> (method, revision)
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(_EOF)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        self._stderr_thread.join(timeout=READ_TIMEOUT_S)
        return b"".join(self._stderr).decode(errors="replace")

    # -- sending ----------------------------------------------------------------------------

    def send_raw(self, data: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((data.encode() if isinstance(data, str) else data) + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any] | list[dict[str, Any]]) -> None:
        for item in message if isinstance(message, list) else [message]:
            if "method" in item and "id" in item:
                params = item.get("params") or {}
                modern = not self.legacy_only and (
                    "io.modelcontextprotocol/protocolVersion" in params.get("_meta", {})
                    or item["method"] in ("server/discover", "subscriptions/listen")
                )
                self._requests[type(item["id"]), item["id"]] = (item["method"], MODERN if modern else self.revision)
        self.send_raw(json.dumps(message))

    def send_request(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def request(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return the next message, which must be its answer."""
        self.send_request(request_id, method, params)
        message = self.recv()
        assert isinstance(message, dict) and "method" not in message and message.get("id") == request_id, message
        return message

    def call(self, request_id: Any, tool: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
        return self.request(request_id, "tools/call", {"name": tool, "arguments": arguments, **params})

    def cancel(self, request_id: Any) -> None:
        self.notify("notifications/cancelled", {"requestId": request_id, "reason": "test"})

    # -- receiving --------------------------------------------------------------------------

    def recv(self, timeout: float = READ_TIMEOUT_S) -> Any:
        """The next message the server writes, checked for framing and schema."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no message from the server within {timeout} s")
        if line is _EOF:
            self._lines.put(_EOF)
            pytest.fail(f"the server closed stdout (exit status {self.proc.poll()}); stderr: {self.stderr}")
        assert isinstance(line, bytes) and line.endswith(b"\n"), line
        body = line[:-1].decode("utf-8")
        message = json.loads(body)
        assert body == json.dumps(message, separators=(",", ":"), ensure_ascii=False), "not one compact JSON text"
        for item in message if isinstance(message, list) else [message]:
            key = (type(item.get("id")), item.get("id"))
            method, revision = (
                self._requests.get(key, (None, self.revision)) if "method" not in item else (None, self.revision)
            )
            validate_server_message(revision, item, method)
        if isinstance(message, list):
            check_schema("2025-03-26", "JSONRPCBatchResponse", message)
        return message

    def recv_until(self, request_id: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Messages up to the answer to ``request_id``: (the ones before it, the answer)."""
        before: list[dict[str, Any]] = []
        while True:
            message = self.recv()
            if "method" not in message and message.get("id") == request_id:
                return before, message
            before.append(message)

    def assert_silent(self, duration: float = 0.3) -> None:
        try:
            line = self._lines.get(timeout=duration)
        except queue.Empty:
            return
        if line is _EOF:
            self._lines.put(_EOF)
            pytest.fail(f"the server closed stdout (exit status {self.proc.poll()})")
        pytest.fail(f"unexpected message from the server: {line!r}")

    def assert_eof(self, timeout: float = READ_TIMEOUT_S) -> None:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the server did not close stdout within {timeout} s")
        assert line is _EOF, f"unexpected message from the server: {line!r}"

    # -- lifecycle --------------------------------------------------------------------------

    def initialize(self, version: str, caps: dict[str, Any] | None = None) -> dict[str, Any]:
        """The legacy handshake; returns the initialize answer."""
        negotiated = version if version in LEGACY else "2025-11-25"
        self.revision = negotiated
        params = {
            "protocolVersion": version,
            "capabilities": caps or {},
            "clientInfo": {"name": "raw-test", "version": "0"},
        }
        response = self.request(0, "initialize", params)
        self.notify("notifications/initialized")
        return response

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server did not exit within {timeout} s")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=READ_TIMEOUT_S)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(*flags: str, revision: str = MODERN) -> RawServer:
        server = RawServer(*flags, revision=revision)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.kill()


def _legacy(spawn: Callable[..., RawServer], version: str = "2025-11-25", *flags: str, **caps: Any) -> RawServer:
    server = spawn(*flags)
    server.initialize(version, caps)
    return server


# ---------------------------------------------------------------------------------------------
# The module itself


def test_schema_harness_rejects_invalid_messages() -> None:
    if _schema_document(MODERN) is None:
        pytest.skip(f"no MCP schemas in {SCHEMA_DIR}")
    for revision in (*LEGACY, MODERN):
        assert _schema_document(revision) is not None, f"{SCHEMA_DIR / revision} is missing"
    with pytest.raises(AssertionError, match=r"^not a valid 2026-07-28 JSONRPCResultResponse: 'resultType' is"):
        validate_server_message(MODERN, answer(1, text("no resultType")), "tools/call")
    with pytest.raises(AssertionError, match=r"^not a valid 2026-07-28 CallToolResult: 'content' is a required"):
        validate_server_message(MODERN, answer(1, {"resultType": "complete"}), "tools/call")
    with pytest.raises(AssertionError, match=r"^not a valid 2024-11-05 InitializeResult: 'serverInfo' is a required"):
        validate_server_message(
            "2024-11-05", answer(1, {"protocolVersion": "2024-11-05", "capabilities": {}}), "initialize"
        )
    bad_ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {"_meta": {SUB_ID: 1}}}
    with pytest.raises(AssertionError, match=r"'notifications' is a required property"):
        validate_server_message(MODERN, bad_ack, None)


def test_module_is_standalone_and_imports_no_third_party_package() -> None:
    imported: set[str] = set()
    for node in ast.walk(ast.parse(MODULE.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import"
            imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)
    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('demo_server', {str(MODULE)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(sorted(m for m in ('trio', 'httpx', 'msgspec', 'mcpwire') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# Legacy era


@pytest.mark.parametrize(
    ("requested", "negotiated"),
    [(v, v) for v in LEGACY] + [("1999-01-01", "2025-11-25"), (MODERN, "2025-11-25")],
)
def test_legacy_handshake(spawn: Callable[..., RawServer], requested: str, negotiated: str) -> None:
    from mcpwire.testing.demo_server import INSTRUCTIONS

    server = spawn()
    response = server.initialize(requested)
    assert response == answer(
        0,
        {
            "protocolVersion": negotiated,
            "capabilities": CAPABILITIES_2024 if negotiated == "2024-11-05" else CAPABILITIES,
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        },
    )
    assert server.request(1, "ping") == answer(1, {})
    tools = server.request(2, "tools/list")["result"]
    assert list(tools) == ["tools"]
    assert [t["name"] for t in tools["tools"]] == TOOL_NAMES
    add = tools["tools"][1]
    structured = negotiated >= "2025-06-18"
    assert add == {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        **({"outputSchema": ADD_OUTPUT_SCHEMA} if structured else {}),
    }
    expected = text("5")
    if structured:
        expected["structuredContent"] = {"sum": 5}
    assert server.call(3, "add", {"a": 2, "b": 3}) == answer(3, expected)
    assert server.call(4, "echo", {"text": "héllo ☃"}) == answer(4, text("héllo ☃"))
    server.close_stdin()
    server.assert_eof()
    assert server.wait(2.0) == 0


@pytest.mark.parametrize("era", ["both", "legacy"])
def test_legacy_requests_need_initialize(spawn: Callable[..., RawServer], era: str) -> None:
    server = spawn("--era", era, revision="2025-11-25")
    assert server.request(1, "tools/list") == error(1, -32600, "not initialized: send 'initialize' first")
    assert server.request("p", "ping") == answer("p", {})
    server.initialize("2025-11-25")
    assert server.request(
        2,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}},
    ) == error(2, -32600, "Invalid Request: already initialized")
    assert server.request(3, "tools/list")["result"]["tools"][0]["name"] == "echo"
    assert server.request(4, "no/such/method") == error(4, -32601, "Method not found: no/such/method")


def test_legacy_elicitation_round_trip(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2025-11-25", elicitation={})
    server.send_request(1, "tools/call", {"name": "ask", "arguments": {"question": "Favourite colour?"}})
    assert server.recv() == {
        "jsonrpc": "2.0",
        "id": "srv-1",
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Favourite colour?", "requestedSchema": ANSWER_SCHEMA_WITH_DEFAULT},
    }
    server.send({"jsonrpc": "2.0", "id": "srv-1", "result": {"action": "accept", "content": {"answer": "blue"}}})
    assert server.recv() == answer(1, text("answer: blue"))

    server.send_request(2, "tools/call", {"name": "ask", "arguments": {"question": "Sure?"}})
    assert server.recv()["id"] == "srv-2"
    server.send({"jsonrpc": "2.0", "id": "srv-2", "result": {"action": "decline"}})
    assert server.recv() == answer(2, text("declined"))

    server.send_request(3, "tools/call", {"name": "ask", "arguments": {"question": "Really?"}})
    assert server.recv()["id"] == "srv-3"
    server.send({"jsonrpc": "2.0", "id": "srv-3", "error": {"code": -1, "message": "user went away"}})
    assert server.recv() == answer(3, text("elicitation/create failed: user went away", is_error=True))


def test_legacy_elicitation_2025_06_18_has_no_mode_or_default(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2025-06-18", elicitation={})
    server.send_request(1, "tools/call", {"name": "ask", "arguments": {"question": "Q?"}})
    assert server.recv() == {
        "jsonrpc": "2.0",
        "id": "srv-1",
        "method": "elicitation/create",
        "params": {"message": "Q?", "requestedSchema": ANSWER_SCHEMA},
    }
    server.send({"jsonrpc": "2.0", "id": "srv-1", "result": {"action": "cancel"}})
    assert server.recv() == answer(1, text("cancelled"))


@pytest.mark.parametrize(
    ("version", "caps"),
    [("2025-11-25", {}), ("2025-03-26", {"elicitation": {}}), ("2025-11-25", {"elicitation": {"url": {}}})],
)
def test_legacy_ask_without_elicitation(spawn: Callable[..., RawServer], version: str, caps: dict[str, Any]) -> None:
    server = _legacy(spawn, version, **caps)
    assert server.call(1, "ask", {"question": "Q?"}) == answer(1, text("client cannot elicit", is_error=True))
    assert server.call(2, "sample", {"prompt": "p"}) == answer(2, text("client cannot sample", is_error=True))
    assert server.call(3, "roots", {}) == answer(3, text("client cannot list roots", is_error=True))


def test_legacy_sampling_and_roots_round_trip(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2024-11-05", sampling={}, roots={"listChanged": True})
    server.send_request(1, "tools/call", {"name": "sample", "arguments": {"prompt": "Say hi"}})
    assert server.recv() == {
        "jsonrpc": "2.0",
        "id": "srv-1",
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 100},
    }
    reply = {"role": "assistant", "content": {"type": "text", "text": "hi!"}, "model": "m", "stopReason": "endTurn"}
    server.send({"jsonrpc": "2.0", "id": "srv-1", "result": reply})
    assert server.recv() == answer(1, text("sampled: hi!"))

    server.send_request(2, "tools/call", {"name": "roots", "arguments": {}})
    assert server.recv() == {"jsonrpc": "2.0", "id": "srv-2", "method": "roots/list"}
    roots = {"roots": [{"uri": "file:///a", "name": "a"}, {"uri": "file:///b"}]}
    server.send({"jsonrpc": "2.0", "id": "srv-2", "result": roots})
    assert server.recv() == answer(2, text("file:///a\nfile:///b"))


def test_legacy_cancel_while_waiting_for_the_client(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2025-11-25", elicitation={})
    server.send_request(1, "tools/call", {"name": "ask", "arguments": {"question": "Q?"}})
    assert server.recv()["id"] == "srv-1"
    server.cancel(1)
    assert server.recv() == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": "srv-1", "reason": "the tool call was cancelled"},
    }
    assert server.request(2, "ping") == answer(2, {})
    server.send({"jsonrpc": "2.0", "id": "srv-1", "result": {"action": "decline"}})  # too late: dropped
    server.assert_silent()


def test_legacy_logging_and_list_changed(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2025-06-18")
    server.send_request(1, "tools/call", {"name": "notify", "arguments": {}})
    before, result = server.recv_until(1)
    assert before == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "logger": "demo", "data": "the notify tool was called"},
        },
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
    ]
    assert result == answer(1, text("ok"))
    assert server.request(2, "logging/setLevel", {"level": "warning"}) == answer(2, {})
    server.send_request(3, "tools/call", {"name": "notify", "arguments": {}})
    before, result = server.recv_until(3)
    assert before == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
    assert result == answer(3, text("ok"))
    assert server.request(4, "logging/setLevel", {"level": "loud"}) == error(
        4, -32602, "Invalid params: unknown log level 'loud'"
    )


def test_legacy_resource_subscription(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2025-03-26")
    assert server.request(1, "resources/subscribe", {"uri": "demo://static/hello"}) == answer(1, {})
    server.send_request(2, "tools/call", {"name": "touch", "arguments": {"uri": "demo://static/hello"}})
    before, result = server.recv_until(2)
    assert before == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "demo://static/hello"}}
    ]
    assert result == answer(2, text("ok"))
    assert server.call(3, "touch", {"uri": "demo://static/blob"}) == answer(3, text("ok"))
    assert server.request(4, "resources/unsubscribe", {"uri": "demo://static/hello"}) == answer(4, {})
    assert server.call(5, "touch", {"uri": "demo://static/hello"}) == answer(5, text("ok"))
    server.assert_silent()


def test_legacy_tool_results(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2025-11-25")
    assert server.call(1, "fail", {"message": "boom"}) == answer(1, text("boom", is_error=True))
    assert server.call(2, "fail", {}) == answer(2, text("the tool failed", is_error=True))
    big = server.call(3, "big", {"size": 100_000})
    assert big == answer(3, text("x" * 100_000))
    assert server.call(4, "add", {"a": 1.5, "b": "2"}) == answer(
        4, text("invalid arguments for tool 'add': 'b' must be a finite number", is_error=True)
    )
    assert server.call(5, "nope", {}) == error(5, -32602, "Invalid params: unknown tool 'nope'")
    assert server.call(6, "add", {"a": 0.5, "b": 0.25}) == answer(
        6, {**text("0.75"), "structuredContent": {"sum": 0.75}}
    )


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_resources_prompts_completion(spawn: Callable[..., RawServer], version: str) -> None:
    server = _legacy(spawn, version)
    assert server.request(1, "resources/list") == answer(
        1,
        {
            "resources": [
                {"uri": "demo://static/hello", "name": "hello", "description": "A greeting.", "mimeType": "text/plain"},
                {
                    "uri": "demo://static/blob",
                    "name": "blob",
                    "description": "The bytes 0..255.",
                    "mimeType": "application/octet-stream",
                },
            ]
        },
    )
    assert server.request(2, "resources/templates/list") == answer(
        2,
        {
            "resourceTemplates": [
                {
                    "uriTemplate": "demo://items/{id}",
                    "name": "item",
                    "description": "Item <id>.",
                    "mimeType": "text/plain",
                }
            ]
        },
    )
    assert server.request(3, "resources/read", {"uri": "demo://static/hello"}) == answer(
        3, {"contents": [{"uri": "demo://static/hello", "mimeType": "text/plain", "text": "Hello, world!"}]}
    )
    assert server.request(4, "resources/read", {"uri": "demo://static/blob"}) == answer(
        4, {"contents": [{"uri": "demo://static/blob", "mimeType": "application/octet-stream", "blob": BLOB}]}
    )
    assert server.request(5, "resources/read", {"uri": "demo://items/42"}) == answer(
        5, {"contents": [{"uri": "demo://items/42", "mimeType": "text/plain", "text": "item 42"}]}
    )
    assert server.request(6, "resources/read", {"uri": "demo://nope"}) == error(
        6, -32002, "Resource not found: demo://nope", {"uri": "demo://nope"}
    )
    assert server.request(7, "prompts/list") == answer(
        7,
        {
            "prompts": [
                {
                    "name": "greet",
                    "description": "Greet someone by name.",
                    "arguments": [{"name": "name", "description": "Who to greet.", "required": True}],
                },
                {"name": "plain", "description": "A prompt without arguments."},
            ]
        },
    )
    assert server.request(8, "prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}) == answer(
        8,
        {
            "description": "Greet someone by name.",
            "messages": [{"role": "user", "content": {"type": "text", "text": "Hello, Ada!"}}],
        },
    )
    assert server.request(9, "prompts/get", {"name": "greet"}) == error(
        9, -32602, "Invalid params: prompt 'greet' needs the argument 'name'"
    )
    assert server.request(10, "prompts/get", {"name": "nope"}) == error(
        10, -32602, "Invalid params: unknown prompt 'nope'"
    )
    ref = {"type": "ref/prompt", "name": "greet"}
    assert server.request(
        11, "completion/complete", {"ref": ref, "argument": {"name": "name", "value": "b"}}
    ) == answer(11, {"completion": {"values": ["bob"], "total": 1, "hasMore": False}})
    ref = {"type": "ref/resource", "uri": "demo://items/{id}"}
    assert server.request(12, "completion/complete", {"ref": ref, "argument": {"name": "id", "value": ""}}) == answer(
        12, {"completion": {"values": ["1", "2", "3"], "total": 3, "hasMore": False}}
    )


def test_batch_in_2025_03_26(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2025-03-26")
    server.send(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/whatever"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "b"}}},
            {"jsonrpc": "2.0", "id": 3, "method": "nope"},
        ]
    )
    batch = server.recv()
    assert sorted(batch, key=lambda m: m["id"]) == [
        answer(1, {}),
        answer(2, text("b")),
        error(3, -32601, "Method not found: nope"),
    ]
    server.send_raw("[]")
    assert server.recv() == error(None, -32600, "Invalid Request: empty batch")
    server.send([{"jsonrpc": "2.0", "method": "notifications/whatever"}])
    server.assert_silent()


@pytest.mark.parametrize("version", [None, "2024-11-05", "2025-06-18", "2025-11-25"])
def test_batch_rejected_outside_2025_03_26(spawn: Callable[..., RawServer], version: str | None) -> None:
    server = spawn() if version is None else _legacy(spawn, version)
    server.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert server.recv() == error(
        None, -32600, "Invalid Request: JSON-RPC batches are only supported in protocol revision 2025-03-26"
    )


# ---------------------------------------------------------------------------------------------
# Era detection: server/discover


def _discover_result() -> dict[str, Any]:
    from mcpwire.testing.demo_server import INSTRUCTIONS

    return complete(
        {
            "supportedVersions": [MODERN],
            "capabilities": CAPABILITIES,
            "instructions": INSTRUCTIONS,
            "ttlMs": 60000,
            "cacheScope": "public",
        }
    )


def test_discover_in_both_mode(spawn: Callable[..., RawServer]) -> None:
    server = spawn()
    assert server.request("d", "server/discover", {"_meta": meta()}) == answer("d", _discover_result())
    assert server.request("x", "server/discover") == error(
        "x", -32602, "Invalid params: _meta must carry 'io.modelcontextprotocol/protocolVersion'"
    )
    server.initialize("2025-06-18")  # a dual-era server still offers the handshake
    assert server.request(1, "tools/list")["result"]["tools"][1]["outputSchema"] == ADD_OUTPUT_SCHEMA
    assert server.request("d2", "server/discover", {"_meta": meta()}) == answer("d2", _discover_result())


def test_discover_in_modern_mode(spawn: Callable[..., RawServer]) -> None:
    server = spawn("--era", "modern", "--name", "modern-demo")
    result = _discover_result()
    result["_meta"] = {"io.modelcontextprotocol/serverInfo": {"name": "modern-demo", "version": "1.0.0"}}
    assert server.request(1, "server/discover", {"_meta": meta()}) == answer(1, result)
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}
    assert server.request(2, "initialize", params) == error(
        2,
        -32601,
        "Method not found: initialize (this server speaks only 2026-07-28, "
        "with the protocol version in every request's _meta)",
        {"supported": [MODERN]},
    )
    assert server.request(3, "tools/list") == error(
        3, -32602, "Invalid params: _meta must carry 'io.modelcontextprotocol/protocolVersion'"
    )
    assert server.request(4, "ping") == error(4, -32601, "Method not found: ping")


def test_discover_in_legacy_mode_is_method_not_found(spawn: Callable[..., RawServer]) -> None:
    server = spawn("--era", "legacy", revision="2025-11-25")
    assert server.request(1, "server/discover", {"_meta": meta()}) == error(
        1, -32601, "Method not found: server/discover"
    )
    # Modern _meta means nothing to a legacy server: the request still needs initialize.
    assert server.request(2, "tools/list", {"_meta": meta()}) == error(
        2, -32600, "not initialized: send 'initialize' first"
    )
    server.initialize("2025-11-25")
    assert server.request(3, "subscriptions/listen", {"_meta": meta(), "notifications": {}}) == error(
        3, -32601, "Method not found: subscriptions/listen"
    )
    tools = server.request(4, "tools/list", {"_meta": meta()})["result"]
    assert "resultType" not in tools and [t["name"] for t in tools["tools"]] == TOOL_NAMES


# ---------------------------------------------------------------------------------------------
# Modern era


@pytest.mark.parametrize("era", ["both", "modern"])
def test_modern_tools(spawn: Callable[..., RawServer], era: str) -> None:
    server = spawn("--era", era)
    listing = server.request(1, "tools/list", {"_meta": meta()})
    assert listing["result"]["resultType"] == "complete"
    assert listing["result"]["_meta"] == MODERN_META
    assert (listing["result"]["ttlMs"], listing["result"]["cacheScope"]) == (60000, "public")
    assert "nextCursor" not in listing["result"]
    assert [t["name"] for t in listing["result"]["tools"]] == TOOL_NAMES
    assert listing["result"]["tools"][1]["outputSchema"] == ADD_OUTPUT_SCHEMA
    assert server.call(2, "echo", {"text": "hi"}, _meta=meta()) == answer(2, complete(text("hi")))
    assert server.call(3, "add", {"a": 2, "b": 0.5}, _meta=meta()) == answer(
        3, complete({**text("2.5"), "structuredContent": {"sum": 2.5}})
    )
    assert server.call(4, "fail", {"message": "no"}, _meta=meta()) == answer(4, complete(text("no", is_error=True)))
    assert server.call(5, "big", {"size": 3}, _meta=meta()) == answer(5, complete(text("xxx")))
    assert server.call(6, "nope", {}, _meta=meta()) == error(6, -32602, "Invalid params: unknown tool 'nope'")


def test_modern_version_and_meta_errors(spawn: Callable[..., RawServer]) -> None:
    server = spawn()
    assert server.request(1, "tools/list", {"_meta": meta(version="2025-11-25")}) == error(
        1, -32022, "Unsupported protocol version", {"supported": [MODERN], "requested": "2025-11-25"}
    )
    assert server.request(2, "server/discover", {"_meta": meta(version="2099-01-01")}) == error(
        2, -32022, "Unsupported protocol version", {"supported": [MODERN], "requested": "2099-01-01"}
    )
    no_caps = meta()
    del no_caps["io.modelcontextprotocol/clientCapabilities"]
    assert server.request(3, "tools/list", {"_meta": no_caps}) == error(
        3, -32602, "Invalid params: _meta must carry 'io.modelcontextprotocol/clientCapabilities', an object"
    )
    assert server.request(4, "ping", {"_meta": meta()}) == error(4, -32601, "Method not found: ping")
    assert server.request(5, "logging/setLevel", {"_meta": meta(), "level": "info"}) == error(
        5, -32601, "Method not found: logging/setLevel"
    )
    assert server.request(6, "tools/list", {"_meta": meta(log_level="loud")}) == error(
        6, -32602, "Invalid params: unknown log level 'loud'"
    )
    assert server.request(7, "resources/read", {"_meta": meta(), "uri": "demo://nope"}) == error(
        7, -32602, "Invalid params: resource not found: demo://nope", {"uri": "demo://nope"}
    )


def test_modern_resources_prompts_completion(spawn: Callable[..., RawServer]) -> None:
    server = spawn("--era", "modern")
    listing = server.request(1, "resources/list", {"_meta": meta()})["result"]
    assert [r["uri"] for r in listing["resources"]] == ["demo://static/hello", "demo://static/blob"]
    assert (listing["ttlMs"], listing["cacheScope"], listing["resultType"]) == (60000, "public", "complete")
    templates = server.request(2, "resources/templates/list", {"_meta": meta()})["result"]
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == ["demo://items/{id}"]
    assert server.request(3, "resources/read", {"_meta": meta(), "uri": "demo://items/7"}) == answer(
        3,
        complete(
            {
                "contents": [{"uri": "demo://items/7", "mimeType": "text/plain", "text": "item 7"}],
                "ttlMs": 0,
                "cacheScope": "public",
            }
        ),
    )
    prompts = server.request(4, "prompts/list", {"_meta": meta()})["result"]
    assert [p["name"] for p in prompts["prompts"]] == ["greet", "plain"]
    assert server.request(5, "prompts/get", {"_meta": meta(), "name": "plain"}) == answer(
        5,
        complete(
            {
                "description": "A prompt without arguments.",
                "messages": [{"role": "user", "content": {"type": "text", "text": "Say something nice."}}],
            }
        ),
    )
    ref = {"type": "ref/prompt", "name": "greet"}
    assert server.request(
        6, "completion/complete", {"_meta": meta(), "ref": ref, "argument": {"name": "name", "value": "c"}}
    ) == answer(6, complete({"completion": {"values": ["carol"], "total": 1, "hasMore": False}}))


def test_modern_ask_input_required_round_trip(spawn: Callable[..., RawServer]) -> None:
    server = spawn("--era", "modern")
    caps: dict[str, Any] = {"elicitation": {}}
    first = server.call("c1", "ask", {"question": "Favourite colour?"}, _meta=meta(caps))
    result = first["result"]
    state = result["requestState"]
    assert isinstance(state, str) and state
    assert first == answer(
        "c1",
        {
            "resultType": "input_required",
            "inputRequests": {
                "answer": {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": "Favourite colour?",
                        "requestedSchema": ANSWER_SCHEMA_WITH_DEFAULT,
                    },
                }
            },
            "requestState": state,
            "_meta": MODERN_META,
        },
    )
    responses = {"answer": {"action": "accept", "content": {"answer": "blue"}}}
    retry = server.call(
        "c2", "ask", {"question": "Favourite colour?"}, _meta=meta(caps), inputResponses=responses, requestState=state
    )
    assert retry == answer("c2", complete(text("answer: blue")))
    declined = server.call(
        "c3",
        "ask",
        {"question": "Favourite colour?"},
        _meta=meta(caps),
        inputResponses={"answer": {"action": "decline"}},
        requestState=state,
    )
    assert declined == answer("c3", complete(text("declined")))
    # A retry without the answer is asked again; a state from another call is refused.
    again = server.call("c4", "ask", {"question": "Favourite colour?"}, _meta=meta(caps), requestState=state)
    assert again == answer("c4", first["result"])
    other = server.call(
        "c5", "ask", {"question": "Other?"}, _meta=meta(caps), inputResponses=responses, requestState=state
    )
    assert other == error("c5", -32602, "Invalid params: 'requestState' does not belong to this tool call")
    bad = server.call(
        "c6",
        "ask",
        {"question": "Favourite colour?"},
        _meta=meta(caps),
        inputResponses={"answer": {"action": "maybe"}},
        requestState=state,
    )
    assert bad == error(
        "c6",
        -32602,
        "Invalid params: inputResponses['answer']: ElicitResult action must be accept, decline or cancel, not 'maybe'",
    )
    assert server.call("c7", "ask", {"question": "Q?"}, _meta=meta()) == error(
        "c7",
        -32021,
        "Missing required client capability: elicitation",
        {"requiredCapabilities": {"elicitation": {"form": {}}}},
    )


def test_modern_sample_and_roots_input_required(spawn: Callable[..., RawServer]) -> None:
    server = spawn()
    caps: dict[str, Any] = {"sampling": {}, "roots": {}}
    first = server.call(1, "sample", {"prompt": "Say hi"}, _meta=meta(caps))["result"]
    assert first["inputRequests"] == {
        "reply": {
            "method": "sampling/createMessage",
            "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 100},
        }
    }
    reply = {"role": "assistant", "content": {"type": "text", "text": "hi!"}, "model": "m"}
    retry = server.call(
        2,
        "sample",
        {"prompt": "Say hi"},
        _meta=meta(caps),
        inputResponses={"reply": reply},
        requestState=first["requestState"],
    )
    assert retry == answer(2, complete(text("sampled: hi!")))
    first = server.call(3, "roots", {}, _meta=meta(caps))["result"]
    assert first["inputRequests"] == {"roots": {"method": "roots/list"}}
    roots = {"roots": [{"uri": "file:///x"}, {"uri": "file:///y"}]}
    retry = server.call(
        4, "roots", {}, _meta=meta(caps), inputResponses={"roots": roots}, requestState=first["requestState"]
    )
    assert retry == answer(4, complete(text("file:///x\nfile:///y")))
    assert server.call(5, "sample", {"prompt": "p"}, _meta=meta()) == error(
        5, -32021, "Missing required client capability: sampling", {"requiredCapabilities": {"sampling": {}}}
    )


def test_modern_log_level(spawn: Callable[..., RawServer]) -> None:
    server = spawn()
    message = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "logger": "demo", "data": "the notify tool was called"},
    }
    server.send_request(
        1,
        "tools/call",
        {"name": "notify", "arguments": {}, "_meta": meta(log_level="debug")},
    )
    assert server.recv_until(1) == ([message], answer(1, complete(text("ok"))))
    server.send_request(
        2,
        "tools/call",
        {"name": "notify", "arguments": {}, "_meta": meta(log_level="warning")},
    )
    assert server.recv_until(2) == ([], answer(2, complete(text("ok"))))
    server.send_request(3, "tools/call", {"name": "notify", "arguments": {}, "_meta": meta()})
    assert server.recv_until(3) == ([], answer(3, complete(text("ok"))))


def test_listen_ack_and_tagged_notifications(spawn: Callable[..., RawServer]) -> None:
    server = spawn("--era", "modern")
    wanted = {
        "toolsListChanged": True,
        "promptsListChanged": False,
        "resourceSubscriptions": ["demo://static/hello"],
        "taskIds": ["t1"],
    }
    server.send_request("sub-1", "subscriptions/listen", {"_meta": meta(), "notifications": wanted})
    assert server.recv() == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["demo://static/hello"]},
            "_meta": {SUB_ID: "sub-1"},
        },
    }
    server.send_request(
        9, "subscriptions/listen", {"_meta": meta(), "notifications": {"resourceSubscriptions": ["demo://items/1"]}}
    )
    assert server.recv() == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"resourceSubscriptions": ["demo://items/1"]}, "_meta": {SUB_ID: 9}},
    }

    server.send_request(1, "tools/call", {"name": "notify", "arguments": {}, "_meta": meta()})
    assert server.recv_until(1) == (
        [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB_ID: "sub-1"}}}],
        answer(1, complete(text("ok"))),
    )
    server.send_request(2, "tools/call", {"name": "touch", "arguments": {"uri": "demo://items/1"}, "_meta": meta()})
    assert server.recv_until(2) == (
        [
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "demo://items/1", "_meta": {SUB_ID: 9}},
            }
        ],
        answer(2, complete(text("ok"))),
    )
    server.send_request(
        3, "tools/call", {"name": "touch", "arguments": {"uri": "demo://static/hello"}, "_meta": meta()}
    )
    assert server.recv_until(3) == (
        [
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "demo://static/hello", "_meta": {SUB_ID: "sub-1"}},
            }
        ],
        answer(3, complete(text("ok"))),
    )

    server.cancel("sub-1")  # the stream just stops: no answer, no more notifications
    server.send_request(4, "tools/call", {"name": "notify", "arguments": {}, "_meta": meta()})
    assert server.recv_until(4) == ([], answer(4, complete(text("ok"))))
    server.assert_silent()

    # At end of input the server ends the remaining stream with its graceful-closure result.
    server.close_stdin()
    assert server.recv() == answer(9, {"resultType": "complete", "_meta": {SUB_ID: 9, **MODERN_META}})
    server.assert_eof()
    assert server.wait(2.0) == 0


# ---------------------------------------------------------------------------------------------
# Progress, cancellation, pagination


def test_progress_then_result(spawn: Callable[..., RawServer]) -> None:
    server = spawn()
    server.send_request(
        1, "tools/call", {"name": "slow", "arguments": {"seconds": 0.2, "steps": 4}, "_meta": meta(progress_token=7)}
    )
    before, result = server.recv_until(1)
    assert before == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 7, "progress": i, "total": 4, "message": f"step {i} of 4"},
        }
        for i in range(1, 5)
    ]
    assert result == answer(1, complete(text("done after 4 steps")))


def test_progress_2024_11_05_has_no_message(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2024-11-05")
    server.send_request(
        1, "tools/call", {"name": "slow", "arguments": {"seconds": 0, "steps": 2}, "_meta": {"progressToken": "p"}}
    )
    before, result = server.recv_until(1)
    assert before == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "p", "progress": i, "total": 2},
        }
        for i in (1, 2)
    ]
    assert result == answer(1, text("done after 2 steps"))


def test_slow_does_not_block_and_cancel_stops_it(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2025-11-25")
    server.send_request(
        1, "tools/call", {"name": "slow", "arguments": {"seconds": 10, "steps": 100}, "_meta": {"progressToken": "tok"}}
    )
    for step in (1, 2):
        assert server.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": step, "total": 100, "message": f"step {step} of 100"},
        }
    # Another request is answered while slow runs; progress may interleave.
    server.send_request(2, "tools/call", {"name": "echo", "arguments": {"text": "meanwhile"}})
    before, result = server.recv_until(2)
    assert result == answer(2, text("meanwhile"))
    assert all(m["method"] == "notifications/progress" for m in before)
    server.cancel(1)
    server.send_request(3, "ping")
    before, result = server.recv_until(3)
    assert result == answer(3, {})
    assert len(before) <= 1 and all(m["method"] == "notifications/progress" for m in before)  # one may race the cancel
    server.assert_silent(0.5)  # no answer to 1, no more progress


@pytest.mark.parametrize("modern", [False, True])
def test_pagination(spawn: Callable[..., RawServer], modern: bool) -> None:
    server = spawn("--page-size", "2")
    if not modern:
        server.initialize("2025-11-25")
    extra = {"_meta": meta()} if modern else {}
    names: list[str] = []
    cursors: list[str] = []
    params: dict[str, Any] = dict(extra)
    for request_id in range(1, 20):
        result = server.request(request_id, "tools/list", params)["result"]
        assert 1 <= len(result["tools"]) <= 2
        names.extend(t["name"] for t in result["tools"])
        if "nextCursor" not in result:
            break
        cursors.append(result["nextCursor"])
        params = {**extra, "cursor": result["nextCursor"]}
    assert names == TOOL_NAMES  # every tool exactly once, in order
    assert len(cursors) == 5 and len(set(cursors)) == 5
    prompts = server.request(30, "prompts/list", dict(extra))["result"]
    assert [p["name"] for p in prompts["prompts"]] == ["greet", "plain"] and "nextCursor" not in prompts
    for request_id, cursor in ((31, "garbage"), (32, cursors[0][::-1])):
        assert server.request(request_id, "tools/list", {**extra, "cursor": cursor}) == error(
            request_id, -32602, "Invalid params: invalid cursor for tools/list"
        )
    # A cursor belongs to its list.
    assert server.request(33, "prompts/list", {**extra, "cursor": cursors[0]}) == error(
        33, -32602, "Invalid params: invalid cursor for prompts/list"
    )


# ---------------------------------------------------------------------------------------------
# Robustness and process lifecycle


def test_malformed_input(spawn: Callable[..., RawServer]) -> None:
    server = spawn(revision="2025-11-25")  # what it answers here is legacy (ping before initialize)
    server.send_raw("this is not json")
    parse_error = server.recv()
    assert parse_error["id"] is None and parse_error["error"]["code"] == -32700
    assert parse_error == error(None, -32700, "Parse error: Expecting value: line 1 column 1 (char 0)")
    server.send_raw('{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": NaN}}')
    assert server.recv() == error(None, -32700, "Parse error: NaN is not valid JSON")
    server.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}')
    assert server.recv() == error(None, -32700, "Parse error: invalid UTF-8 (invalid start byte)")
    server.send_raw("42")
    assert server.recv() == error(None, -32600, "Invalid Request: a message must be a JSON object")
    server.send_raw('{"jsonrpc": "2.0", "id": null, "method": "ping"}')
    assert server.recv() == error(None, -32600, "Invalid Request: 'id' must be a string or an integer")
    server.send_raw('{"id": 5, "method": "ping"}')
    assert server.recv() == error(5, -32600, "Invalid Request: 'jsonrpc' must be \"2.0\"")
    server.send_raw('{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": [1]}')
    assert server.recv() == error(6, -32602, "Invalid params: 'params' must be an object")
    server.send_raw("")
    server.send_raw('{"jsonrpc": "2.0", "method": "tools/list"}')  # a notification is never answered
    server.send_raw('{"jsonrpc": "2.0", "id": "srv-99", "result": {}}')  # a response to nothing
    server.assert_silent()
    assert server.request(7, "ping") == answer(7, {})


def test_crash_exits_with_status_3(spawn: Callable[..., RawServer]) -> None:
    server = _legacy(spawn, "2025-11-25")
    server.send_request(1, "tools/call", {"name": "crash", "arguments": {}})
    server.assert_eof()
    assert server.wait(5.0) == 3
    assert server.stderr.endswith("demo server: the crash tool was called, exiting with status 3\n")


@pytest.mark.parametrize("busy", [False, True])
def test_eof_on_stdin_exits_promptly(spawn: Callable[..., RawServer], busy: bool) -> None:
    server = spawn()
    if busy:  # a call in flight is dropped, not waited for
        server.send_request(1, "tools/call", {"name": "slow", "arguments": {"seconds": 30}, "_meta": meta()})
        assert server.request(2, "tools/list", {"_meta": meta()})["result"]["resultType"] == "complete"
    server.close_stdin()
    assert server.wait(2.0) == 0
    server.assert_eof()
