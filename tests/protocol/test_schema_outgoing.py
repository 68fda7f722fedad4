"""Every message the client side writes validates against the official schema of its revision.

The schemas are the JSON files generated from each revision's ``schema.ts`` ("the source of truth
for all protocol messages"), shipped in :mod:`mcpwire.schemas` (or found through
``$MCPWIRE_SCHEMA_DIR``). Each message is checked against the generic envelope (``JSONRPCRequest`` /
``JSONRPCNotification`` / the response type) and against its specific definition, resolved with a
``$ref`` into a registry holding the whole document. Without the schemas these tests skip (and
fail under CI=true). Rules: LC-02, LC-03, LC-20..LC-22, JR-01, JR-12, UT-C02, UT-G01.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from protocol_support import ALL, LEGACY, MODERN, assert_valid, make_session, require_schemas, wire

from mcpwire.protocol import ClientSession
from mcpwire.protocol.jsonrpc import encode_error, encode_result
from mcpwire.protocol.types import META_LOG_LEVEL, Implementation

pytestmark = pytest.mark.usefixtures("schemas")


@pytest.fixture
def schemas() -> None:
    require_schemas()


def result_envelope(revision: str) -> str:
    return "JSONRPCResultResponse" if revision >= "2025-11-25" else "JSONRPCResponse"


def error_envelope(revision: str) -> str:
    return "JSONRPCErrorResponse" if revision >= "2025-11-25" else "JSONRPCError"


def client_capabilities(version: str | None) -> dict[str, object]:
    """What ``mcpwire.Client`` declares with every handler configured (roots, sampling, elicitation)."""
    from mcpwire.client import ClientOptions
    from mcpwire.client.options import declared_capabilities

    async def handler(params: Any) -> Any:  # never called
        return {}

    options = ClientOptions(roots=["file:///work"], sampling=handler, elicitation=handler)
    return declared_capabilities(options, version)


def ready(version: str, *, with_handlers: bool = True) -> ClientSession[str]:
    return make_session(version, client_capabilities=client_capabilities(version) if with_handlers else {})


def check_request(revision: str, definition: str, payload: bytes) -> None:
    message = wire(payload)
    assert_valid(revision, "JSONRPCRequest", message)
    assert_valid(revision, definition, message)


def check_notification(revision: str, definition: str, payload: bytes) -> None:
    message = wire(payload)
    assert_valid(revision, "JSONRPCNotification", message)
    assert_valid(revision, definition, message)


# -- legacy handshake --------------------------------------------------------------------------


@pytest.mark.parametrize("revision", LEGACY)
@pytest.mark.parametrize("with_handlers", [True, False], ids=["handlers", "bare"])
@pytest.mark.parametrize("offered", [None, "2025-11-25"], ids=["own", "latest-offered"])
def test_initialize_request(revision: str, with_handlers: bool, offered: str | None) -> None:
    """LC-02: initialize with protocolVersion, capabilities and clientInfo.

    ``latest-offered``: the capabilities declared when offering 2025-11-25 to a server that then
    counter-offers ``revision`` must be valid for that revision too.
    """
    version = offered or revision
    caps = client_capabilities(version) if with_handlers else {}
    session = make_session(None, client_capabilities=caps)
    session.begin_connecting()
    _, payload = session.prepare_request(
        "initialize", session.initialize_params(revision), "w", check=False, handshake=True
    )
    check_request(revision, "InitializeRequest", payload)


@pytest.mark.parametrize("revision", LEGACY)
def test_initialize_with_a_full_client_info(revision: str) -> None:
    info = Implementation(name="host", version="2.0", title="Host", description="d", website_url="https://x.example")
    session: ClientSession[str] = ClientSession(info, {}, label="s")
    session.begin_connecting()
    _, payload = session.prepare_request("initialize", session.initialize_params(revision), "w", handshake=True)
    check_request(revision, "InitializeRequest", payload)


@pytest.mark.parametrize("revision", ALL)
def test_client_info_without_an_explicit_version_is_still_valid(revision: str) -> None:
    session: ClientSession[str] = ClientSession(Implementation(name="host"), {}, label="s")
    assert_valid(revision, "Implementation", session.initialize_params(revision)["clientInfo"])


@pytest.mark.parametrize("revision", LEGACY)
def test_initialized_notification(revision: str) -> None:
    """LC-03."""
    session = ready(revision)
    check_notification(revision, "InitializedNotification", session.encode_notification("notifications/initialized"))


# -- requests, both eras -----------------------------------------------------------------------

REQUESTS: list[tuple[str, dict[str, object] | None, str]] = [
    ("tools/list", None, "ListToolsRequest"),
    ("tools/list", {"cursor": "c2"}, "ListToolsRequest"),
    ("tools/call", {"name": "echo", "arguments": {"message": "hi", "n": [1, 2]}}, "CallToolRequest"),
    ("tools/call", {"name": "noargs"}, "CallToolRequest"),
    ("resources/list", None, "ListResourcesRequest"),
    ("resources/templates/list", None, "ListResourceTemplatesRequest"),
    ("resources/read", {"uri": "file:///srv/project/a.txt"}, "ReadResourceRequest"),
    ("prompts/list", None, "ListPromptsRequest"),
    ("prompts/get", {"name": "greet", "arguments": {"who": "you"}}, "GetPromptRequest"),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "y"}},
        "CompleteRequest",
    ),
    (
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "file:///{path}"}, "argument": {"name": "path", "value": "a"}},
        "CompleteRequest",
    ),
]
LEGACY_ONLY: list[tuple[str, dict[str, object] | None, str]] = [
    ("ping", None, "PingRequest"),
    ("resources/subscribe", {"uri": "file:///srv/project/a.txt"}, "SubscribeRequest"),
    ("resources/unsubscribe", {"uri": "file:///srv/project/a.txt"}, "UnsubscribeRequest"),
    ("logging/setLevel", {"level": "warning"}, "SetLevelRequest"),
]


def _id(case: tuple[str, dict[str, object] | None, str]) -> str:
    return f"{case[0]}{'+params' if case[1] else ''}"


@pytest.mark.parametrize("revision", ALL)
@pytest.mark.parametrize("case", REQUESTS, ids=[_id(c) for c in REQUESTS])
@pytest.mark.parametrize("progress", [False, True], ids=["", "progress"])
def test_request(revision: str, case: tuple[str, dict[str, object] | None, str], progress: bool) -> None:
    """LC-20..LC-22 in 2026-07-28 (per-request ``_meta``); UT-G01 progress tokens."""
    method, params, definition = case
    session = ready(revision)
    _, payload = session.prepare_request(method, params, "w", progress=progress)
    check_request(revision, definition, payload)


@pytest.mark.parametrize("revision", LEGACY)
@pytest.mark.parametrize("case", LEGACY_ONLY, ids=[_id(c) for c in LEGACY_ONLY])
def test_legacy_only_request(revision: str, case: tuple[str, dict[str, object] | None, str]) -> None:
    method, params, definition = case
    session = ready(revision)
    _, payload = session.prepare_request(method, params, "w")
    check_request(revision, definition, payload)


@pytest.mark.parametrize("revision", ALL)
@pytest.mark.parametrize("request_id", [1, "abc"])
def test_cancelled_notification(revision: str, request_id: int | str) -> None:
    """UT-C02/ST-12: ``notifications/cancelled`` as ``Engine.cancel_on_wire`` builds it."""
    session = ready(revision)
    payload = session.encode_notification("notifications/cancelled", {"requestId": request_id, "reason": "timeout"})
    check_notification(revision, "CancelledNotification", payload)


# -- 2026-07-28 only ---------------------------------------------------------------------------


@pytest.mark.parametrize("with_handlers", [True, False], ids=["handlers", "bare"])
def test_discover_probe(with_handlers: bool) -> None:
    """LC-40: the probe, sent while connecting with the preferred version in ``_meta``."""
    session = make_session(None, client_capabilities=client_capabilities(MODERN) if with_handlers else {})
    session.begin_connecting()
    _, payload = session.prepare_request("server/discover", {}, "w", check=False, handshake=True, meta_version=MODERN)
    check_request(MODERN, "DiscoverRequest", payload)


def test_discover_when_ready() -> None:
    """``Client.ping`` in the modern era is ``server/discover``."""
    _, payload = ready(MODERN).prepare_request("server/discover", None, "w")
    check_request(MODERN, "DiscoverRequest", payload)


def test_tools_call_with_a_log_level() -> None:
    """UT-L03: the client adds ``io.modelcontextprotocol/logLevel`` to the caller's ``_meta``."""
    session = ready(MODERN)
    params = {
        "name": "echo",
        "arguments": {},
        "_meta": {META_LOG_LEVEL: "debug", "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"},
    }
    _, payload = session.prepare_request("tools/call", params, "w", progress=True)
    check_request(MODERN, "CallToolRequest", payload)


def test_subscriptions_listen() -> None:
    """UT-S01: the filter ``Client.subscribe`` builds."""
    from mcpwire.client import Client, Subscription
    from mcpwire.transports import StdioServer

    client = Client(StdioServer(command="true"), None)  # type: ignore[arg-type]
    sub = Subscription(client, resources=("file:///a",), tools=True, prompts=True, resources_list=True, buffer=4)
    _, payload = ready(MODERN).prepare_request("subscriptions/listen", {"notifications": sub.requested}, "w")
    check_request(MODERN, "SubscriptionsListenRequest", payload)


# -- answers to the server ---------------------------------------------------------------------


def roots_result(roots: list[Any]) -> dict[str, object]:
    from mcpwire.client.dispatch import root

    return {"roots": [root(r) for r in roots]}


def elicit_result(params: dict[str, Any], answer: dict[str, Any]) -> dict[str, object]:
    from mcpwire.client.dispatch import fill_elicitation_defaults

    return fill_elicitation_defaults(params, answer)


ELICIT_PARAMS = {
    "message": "Who?",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "anon"},
            "age": {"type": "integer", "default": 30},
            "ok": {"type": "boolean", "default": True},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "note": {"type": "string"},
        },
        "required": ["name"],
    },
}
ROOTS = ["file:///work", {"uri": "file:///data", "name": "Data"}]
ELICIT_ANSWERS = [
    {"action": "accept", "content": {"name": "Ada"}},
    {"action": "accept"},
    {"action": "decline"},
    {"action": "cancel"},
]
RESULTS: list[tuple[str, Callable[[], dict[str, object]], str]] = [
    ("ping", dict, "EmptyResult"),
    ("roots", lambda: roots_result(ROOTS), "ListRootsResult"),
    *[
        (f"elicit-{i}", (lambda a=a: elicit_result(ELICIT_PARAMS, a)), "ElicitResult")
        for i, a in enumerate(ELICIT_ANSWERS)
    ],
]


#: (revision, case): elicitation exists from 2025-06-18 on.
ANSWERS = [
    pytest.param(revision, case, id=f"{revision}-{case[0]}")
    for revision in LEGACY
    for case in RESULTS
    if case[2] != "ElicitResult" or revision >= "2025-06-18"
]


@pytest.mark.parametrize(("revision", "case"), ANSWERS)
@pytest.mark.parametrize("request_id", [0, "srv-1"])
def test_result_answering_a_server_request(
    revision: str, case: tuple[str, Callable[[], dict[str, object]], str], request_id: int | str
) -> None:
    """JR-12: a legacy client answers each server request once, with the same id."""
    _, build, definition = case
    result = build()
    message = wire(encode_result(request_id, result))
    assert message["id"] == request_id
    assert_valid(revision, result_envelope(revision), message)
    assert_valid(revision, definition, result)


def test_elicitation_defaults_are_filled() -> None:
    assert elicit_result(ELICIT_PARAMS, {"action": "accept", "content": {"name": "Ada"}}) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 30, "ok": True, "color": "red"},
    }


@pytest.mark.parametrize("case", RESULTS[1:], ids=[c[0] for c in RESULTS[1:]])
def test_input_responses_in_a_modern_retry(case: tuple[str, Callable[[], dict[str, object]], str]) -> None:
    """2026-07-28 MRTR: the same results travel as ``inputResponses`` on the retried request (UT-R03)."""
    _, build, _definition = case
    session = ready(MODERN)
    params = {"name": "ask", "arguments": {}, "inputResponses": {"k1": build()}, "requestState": "opaque-state"}
    _, payload = session.prepare_request("tools/call", params, "w")
    check_request(MODERN, "CallToolRequest", payload)


@pytest.mark.parametrize("revision", LEGACY)
@pytest.mark.parametrize(
    ("code", "message"),
    [(-32601, "the client does not handle 'sampling/createMessage'"), (-32603, "client handler failed: KeyError")],
)
def test_error_answering_a_server_request(revision: str, code: int, message: str) -> None:
    """JR-11/JR-12: undeclared methods get -32601; a failing handler -32603."""
    assert_valid(revision, error_envelope(revision), wire(encode_error("s1", code, message)))


# -- the validators themselves -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("revision", "definition", "message"),
    [
        (MODERN, "CallToolRequest", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}),
        (MODERN, "DiscoverRequest", {"jsonrpc": "2.0", "id": 1, "method": "server/discover"}),
        ("2024-11-05", "InitializeRequest", {"method": "initialize", "params": {"protocolVersion": "2024-11-05"}}),
        ("2026-07-28", "CancelledNotification", {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}),
        ("2025-06-18", "ElicitResult", {"action": "maybe"}),
    ],
    ids=["modern-call-without-meta", "discover-without-params", "initialize-incomplete", "cancel-no-id", "elicit"],
)
def test_the_validators_reject_invalid_messages(revision: str, definition: str, message: dict[str, object]) -> None:
    """The ``$ref`` resolves into the real definition: these checks are not vacuous."""
    with pytest.raises(AssertionError, match=rf"^not a valid {revision} {definition}: "):
        assert_valid(revision, definition, message)
