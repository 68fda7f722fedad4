"""ClientSession: intentions to bytes, bytes to events, per era (LC-14..LC-22, ST-05..ST-11, UT-G01/G02)."""

from __future__ import annotations

import json

import msgspec
import pytest
from protocol_support import (
    ALL,
    CLIENT_INFO_JSON,
    EVERYTHING,
    LEGACY,
    MODERN,
    TOOLS,
    FakeServer,
    connect,
    make_session,
    roundtrip,
    wire,
)

from mcpwire.errors import ClientClosed, LocalProtocolError
from mcpwire.protocol import ClientSession, SessionState, classify
from mcpwire.protocol.jsonrpc import ErrorResponse, NotProtocol, Response, encode_error, encode_result
from mcpwire.protocol.lifecycle import Decided, Failed, Restart, SendDiscover, SendInitialize
from mcpwire.protocol.session import (
    AnswerReceived,
    NotificationReceived,
    ProgressReceived,
    ServerRequestReceived,
    Violation,
)
from mcpwire.protocol.types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    Implementation,
    ServerCapabilities,
)
from mcpwire.protocol.versions import LATEST_LEGACY, Era

CAPS = {"roots": {}, "elicitation": {"form": {}}}


def params_of(payload: bytes) -> dict[str, object]:
    message = wire(payload)
    params = message.get("params", {})
    assert isinstance(params, dict)
    return params


# -- sending: modern _meta ---------------------------------------------------------------------


def test_modern_request_carries_per_request_meta() -> None:
    """LC-20/LC-21/LC-22: version, capabilities and clientInfo on every request."""
    session = make_session(MODERN, client_capabilities=CAPS)
    for method in ("tools/list", "tools/call", "prompts/list"):
        _, payload = session.prepare_request(method, {"name": "x"} if method == "tools/call" else None, "w")
        assert params_of(payload)["_meta"] == {
            META_PROTOCOL_VERSION: MODERN,
            META_CLIENT_CAPABILITIES: CAPS,
            META_CLIENT_INFO: CLIENT_INFO_JSON,
        }


def test_modern_request_without_params_still_has_params() -> None:
    """2026-07-28 schema: ``params`` and ``_meta`` are required on requests."""
    session = make_session(MODERN)
    _, payload = session.prepare_request("tools/list", None, "w")
    message = wire(payload)
    assert message == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {
            "_meta": {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}, META_CLIENT_INFO: CLIENT_INFO_JSON}
        },
    }


def test_modern_meta_merges_with_the_callers_meta() -> None:
    """The caller's own ``_meta`` keys (trace context, a log level) survive; nothing is mutated."""
    session = make_session(MODERN)
    callers_meta = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x.example/k": 1}
    params = {"name": "echo", "arguments": {"m": "hi"}, "_meta": callers_meta}
    _, payload = session.prepare_request("tools/call", params, "w", progress=True)
    sent = params_of(payload)
    assert sent["name"] == "echo" and sent["arguments"] == {"m": "hi"}
    assert sent["_meta"] == {
        **callers_meta,
        "progressToken": 1,
        META_PROTOCOL_VERSION: MODERN,
        META_CLIENT_CAPABILITIES: {},
        META_CLIENT_INFO: CLIENT_INFO_JSON,
    }
    assert params == {"name": "echo", "arguments": {"m": "hi"}, "_meta": callers_meta}
    assert set(callers_meta) == {"traceparent", "x.example/k"}


def test_modern_meta_wins_over_a_callers_reserved_keys() -> None:
    """JR-40: the reserved keys are the session's to set; the negotiated version is what is sent."""
    session = make_session(MODERN)
    _, payload = session.prepare_request("tools/list", {"_meta": {META_PROTOCOL_VERSION: "1999-01-01"}}, "w")
    meta = params_of(payload)["_meta"]
    assert isinstance(meta, dict) and meta[META_PROTOCOL_VERSION] == MODERN


def test_meta_version_adds_modern_meta_before_ready() -> None:
    """LC-40: the probe carries the preferred modern version in ``_meta`` while still connecting."""
    session = make_session(None, client_capabilities=CAPS)
    session.begin_connecting()
    entry, payload = session.prepare_request(
        "server/discover", {}, "w", check=False, handshake=True, meta_version=MODERN
    )
    assert wire(payload) == {
        "jsonrpc": "2.0",
        "id": entry.id,
        "method": "server/discover",
        "params": {
            "_meta": {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: CAPS, META_CLIENT_INFO: CLIENT_INFO_JSON}
        },
    }


@pytest.mark.parametrize("version", ALL)
def test_progress_token_is_the_request_id(version: str) -> None:
    """UT-G01: tokens are unique across active requests because ids are."""
    session = make_session(version)
    tokens = []
    for _ in range(3):
        entry, payload = session.prepare_request("tools/list", None, "w", progress=True)
        meta = params_of(payload)["_meta"]
        assert isinstance(meta, dict)
        assert meta["progressToken"] == entry.id
        tokens.append(meta["progressToken"])
    assert tokens == [1, 2, 3]


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_request_has_no_modern_meta(version: str) -> None:
    session = make_session(version)
    _, payload = session.prepare_request("tools/list", None, "w")
    assert wire(payload) == {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    _, payload = session.prepare_request("tools/call", {"name": "echo", "_meta": {"k": 1}}, "w")
    assert params_of(payload) == {"name": "echo", "_meta": {"k": 1}}
    _, payload = session.prepare_request("tools/call", {"name": "echo"}, "w", progress=True)
    assert params_of(payload) == {"name": "echo", "_meta": {"progressToken": 3}}


def test_legacy_initialize_params() -> None:
    """LC-02: protocolVersion, capabilities and clientInfo."""
    session = make_session(None, client_capabilities=CAPS)
    assert session.initialize_params(LATEST_LEGACY) == {
        "protocolVersion": LATEST_LEGACY,
        "capabilities": CAPS,
        "clientInfo": CLIENT_INFO_JSON,
    }


def test_encode_notification() -> None:
    session = make_session(LATEST_LEGACY)
    assert session.encode_notification("notifications/initialized") == (
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    )
    assert wire(session.encode_notification("notifications/cancelled", {"requestId": 4})) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 4},
    }


# -- sending: capability and revision gating ---------------------------------------------------


def refused(session: ClientSession[str], method: str, params: dict[str, object] | None = None) -> str:
    before = session.table.next_id
    with pytest.raises(LocalProtocolError) as info:
        session.prepare_request(method, params, "w")
    assert session.table.next_id == before, "a refused request must not use up an id"
    assert len(session.table) == 0
    return str(info.value)


def allowed(session: ClientSession[str], method: str, params: dict[str, object] | None = None) -> None:
    """The request is registered and encoded as one JSON-RPC request for ``method``."""
    before = len(session.table)
    pending, data = session.prepare_request(method, params, "w")
    message = json.loads(data)
    assert (message["jsonrpc"], message["id"], message["method"]) == ("2.0", pending.id, method)
    assert (pending.method, pending.waiter) == (method, "w")
    assert len(session.table) == before + 1
    for key, value in (params or {}).items():
        assert message["params"][key] == value


@pytest.mark.parametrize("version", ALL)
def test_prompts_list_without_prompts_capability(version: str) -> None:
    """LC-14/LC-16 (and LC-26 in the modern era): only negotiated capabilities are used."""
    session = make_session(version, ServerCapabilities(tools={}))
    assert refused(session, "prompts/list") == (
        "cannot call 'prompts/list' on server 'srv': the server did not advertise the 'prompts' capability"
    )


@pytest.mark.parametrize(
    ("method", "capability"),
    [
        ("tools/list", "tools"),
        ("tools/call", "tools"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resources"),
        ("resources/read", "resources"),
        ("prompts/get", "prompts"),
        ("completion/complete", "completions"),
    ],
)
@pytest.mark.parametrize("version", [MODERN, "2025-03-26"])
def test_every_feature_needs_its_capability(method: str, capability: str, version: str) -> None:
    session = make_session(version, ServerCapabilities())
    assert refused(session, method) == (
        f"cannot call '{method}' on server 'srv': the server did not advertise the '{capability}' capability"
    )


@pytest.mark.parametrize("version", LEGACY)
@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
@pytest.mark.parametrize("resources", [{}, {"subscribe": False}, {"subscribe": "yes"}, {"listChanged": True}])
def test_subscribe_needs_resources_subscribe(version: str, method: str, resources: dict[str, object]) -> None:
    """LC-16: ``resources/subscribe`` needs ``resources.subscribe`` (true, not just truthy)."""
    session = make_session(version, ServerCapabilities(resources=resources))
    assert refused(session, method, {"uri": "file:///a"}) == (
        f"cannot call '{method}' on server 'srv': the server did not advertise 'resources.subscribe'"
    )


@pytest.mark.parametrize("version", LEGACY)
def test_subscribe_allowed_with_resources_subscribe(version: str) -> None:
    session = make_session(version, ServerCapabilities(resources={"subscribe": True}))
    allowed(session, "resources/subscribe", {"uri": "file:///a"})


def test_logging_set_level_does_not_exist_in_2026() -> None:
    """LC-30: no ``logging/setLevel`` for a modern server (a per-request ``_meta`` level instead)."""
    session = make_session(MODERN)
    assert refused(session, "logging/setLevel", {"level": "info"}) == (
        "cannot call 'logging/setLevel' on server 'srv': 'logging/setLevel' does not exist in revision "
        "2026-07-28 (it exists from 2024-11-05 to 2025-11-25)"
    )


@pytest.mark.parametrize("method", ["ping", "initialize", "resources/subscribe", "resources/unsubscribe"])
def test_removed_methods_do_not_exist_in_2026(method: str) -> None:
    """LC-30/UT-P03: never sent to a modern server."""
    session = make_session(MODERN)
    message = refused(session, method)
    assert message.endswith(
        f"'{method}' does not exist in revision 2026-07-28 (it exists from 2024-11-05 to 2025-11-25)"
    )


@pytest.mark.parametrize("version", LEGACY)
@pytest.mark.parametrize("method", ["server/discover", "subscriptions/listen"])
def test_modern_methods_do_not_exist_in_legacy(version: str, method: str) -> None:
    session = make_session(version)
    assert refused(session, method) == (
        f"cannot call '{method}' on server 'srv': '{method}' does not exist in revision {version} "
        "(it exists from 2026-07-28 on)"
    )


@pytest.mark.parametrize("version", LEGACY)
def test_logging_set_level_needs_logging(version: str) -> None:
    session = make_session(version, ServerCapabilities(tools={}))
    assert refused(session, "logging/setLevel", {"level": "info"}).endswith(
        "the server did not advertise the 'logging' capability"
    )
    make_session(version, ServerCapabilities(logging={})).prepare_request("logging/setLevel", {"level": "info"}, "w")


def test_completion_needs_no_capability_in_2024() -> None:
    """UT-K01: 2024-11-05 had no ``completions`` capability; completion is just attempted."""
    session = make_session("2024-11-05", ServerCapabilities())
    allowed(session, "completion/complete", {"ref": {}, "argument": {}})


@pytest.mark.parametrize("version", ALL)
def test_methods_allowed_with_every_capability(version: str) -> None:
    session = make_session(version, EVERYTHING)
    for method in (
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "prompts/list",
        "completion/complete",
    ):
        allowed(session, method)
    if version == MODERN:
        allowed(session, "server/discover")
        allowed(session, "subscriptions/listen", {"notifications": {}})
    else:
        allowed(session, "ping")
        allowed(session, "logging/setLevel", {"level": "info"})


@pytest.mark.parametrize("version", ALL)
def test_unknown_methods_pass_unchecked(version: str) -> None:
    """Extensions and experiments are not in the method table."""
    session = make_session(version, ServerCapabilities())
    allowed(session, "x.example/do", {"a": 1})
    allowed(session, "tasks/get", {"taskId": "t"})


def test_check_false_bypasses_gating() -> None:
    session = make_session(MODERN, ServerCapabilities())
    _, payload = session.prepare_request("prompts/list", None, "w", check=False)
    assert wire(payload)["method"] == "prompts/list"


def test_label_names_the_server_in_messages() -> None:
    session: ClientSession[str] = ClientSession(Implementation(name="c", version="1"), {}, label="github")
    session.begin_connecting()
    session.established(MODERN, ServerCapabilities(), None, None)
    with pytest.raises(LocalProtocolError, match=r"^cannot call 'tools/list' on server 'github': "):
        session.prepare_request("tools/list", None, "w")


# -- sending: session state --------------------------------------------------------------------


def test_idle_session_refuses_requests() -> None:
    session = make_session(None)
    assert session.state is SessionState.IDLE
    with pytest.raises(
        LocalProtocolError, match=r"^cannot send 'tools/list' to server 'srv': session is IDLE, not READY$"
    ):
        session.prepare_request("tools/list", None, "w")


def test_connecting_session_refuses_all_but_handshake_requests() -> None:
    """LC-04: nothing but the handshake before the session is ready."""
    session = make_session(None)
    session.begin_connecting()
    with pytest.raises(
        LocalProtocolError, match=r"^cannot send 'tools/list' to server 'srv': session is CONNECTING, not READY$"
    ):
        session.prepare_request("tools/list", None, "w")
    entry, payload = session.prepare_request(
        "initialize", session.initialize_params(LATEST_LEGACY), "w", check=False, handshake=True
    )
    assert wire(payload)["method"] == "initialize" and entry.id == 1


@pytest.mark.parametrize("version", [MODERN, LATEST_LEGACY])
def test_closing_session_raises_client_closed(version: str) -> None:
    session = make_session(version)
    session.closing()
    assert session.state is SessionState.CLOSING
    with pytest.raises(ClientClosed, match=r"^cannot send 'tools/list' to server 'srv': the client is CLOSING$"):
        session.prepare_request("tools/list", None, "w")
    assert len(session.table) == 0


def test_closed_session_raises_client_closed() -> None:
    session = make_session(MODERN)
    session.state = SessionState.CLOSED
    session.closing()
    assert session.state is SessionState.CLOSED  # closing() never reopens
    with pytest.raises(ClientClosed, match=r"^cannot send 'tools/list' to server 'srv': the client is CLOSED$"):
        session.prepare_request("tools/list", None, "w")


@pytest.mark.parametrize("state", [SessionState.CLOSING, SessionState.CLOSED])
def test_handshake_requests_are_refused_when_closing(state: SessionState) -> None:
    session = make_session(LATEST_LEGACY)
    session.state = state
    with pytest.raises(ClientClosed):
        session.prepare_request(
            "initialize", session.initialize_params(LATEST_LEGACY), "w", check=False, handshake=True
        )


def test_established_records_the_server() -> None:
    session = make_session(None)
    session.begin_connecting()
    assert session.era is None and session.revision is None
    info = Implementation(name="s", version="2")
    session.established("2025-06-18", ServerCapabilities(tools={}), info, "Use the tools.")
    assert session.state is SessionState.READY
    assert session.era is Era.LEGACY and session.revision is not None and session.revision.version == "2025-06-18"
    assert session.server_info == info and session.instructions == "Use the tools."
    assert session.server_capabilities == ServerCapabilities(tools={})


def test_established_with_an_unknown_version_raises() -> None:
    session = make_session(None)
    with pytest.raises(ValueError, match=r"^unknown protocol revision '1999-01-01'"):
        session.established("1999-01-01", ServerCapabilities(), None, None)


# -- receiving: answers ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [MODERN, LATEST_LEGACY])
def test_result_resolves_its_request(version: str) -> None:
    session = make_session(version)
    entry, _ = session.prepare_request("tools/list", None, "waiter")
    events = session.receive(classify(encode_result(entry.id, {"tools": []})))
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, AnswerReceived) and event.entry is entry and event.entry.waiter == "waiter"
    assert isinstance(event.message, Response)
    assert len(session.table) == 0


def test_error_resolves_its_request() -> None:
    session = make_session(MODERN)
    entry, _ = session.prepare_request("tools/call", {"name": "x"}, "w")
    (event,) = session.receive(classify(encode_error(entry.id, -32602, "Unknown tool: x")))
    assert isinstance(event, AnswerReceived) and isinstance(event.message, ErrorResponse)
    assert event.message.code == -32602


def test_duplicate_and_unknown_answers_are_dropped_and_counted() -> None:
    """JR-06: responses for unknown or finished ids are ignored, never raised."""
    session = make_session(MODERN)
    entry, _ = session.prepare_request("tools/list", None, "w")
    assert len(session.receive(classify(encode_result(entry.id, {})))) == 1
    assert session.receive(classify(encode_result(entry.id, {}))) == []
    assert session.receive(classify(encode_result(999, {}))) == []
    assert session.receive(classify(encode_result(str(entry.id), {}))) == []
    assert (session.table.late, session.table.unknown) == (0, 3)


def test_answer_after_abandon_is_late() -> None:
    """UT-C03: the answer to a cancelled request may still arrive; it is dropped."""
    session = make_session(MODERN)
    entry, _ = session.prepare_request("tools/call", {"name": "slow"}, "w")
    session.table.abandon(entry.id)
    assert session.receive(classify(encode_result(entry.id, {"content": []}))) == []
    assert session.table.late == 1


def test_error_without_id_is_a_violation() -> None:
    """JR-09: routed to the connection, not to a pending request."""
    session = make_session(MODERN)
    session.prepare_request("tools/list", None, "w")
    assert session.receive(classify(encode_error(None, -32700, "Parse error"))) == [
        Violation("error without an id: -32700 Parse error")
    ]
    assert len(session.table) == 1


# -- receiving: progress -----------------------------------------------------------------------


def progress(token: object, value: float = 1) -> bytes:
    return msgspec.json.encode(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": value}}
    )


@pytest.mark.parametrize("version", [MODERN, LATEST_LEGACY])
def test_progress_is_routed_to_the_request_in_flight(version: str) -> None:
    """ST-10/UT-G02: route by token."""
    session = make_session(version)
    first, _ = session.prepare_request("tools/call", {"name": "a"}, "first", progress=True)
    second, _ = session.prepare_request("tools/call", {"name": "b"}, "second", progress=True)
    (event,) = session.receive(classify(progress(second.id, 0.5)))
    assert isinstance(event, ProgressReceived) and event.entry is second
    assert event.params == {"progressToken": second.id, "progress": 0.5}
    (event,) = session.receive(classify(progress(first.id)))
    assert isinstance(event, ProgressReceived) and event.entry is first


def test_progress_for_finished_or_unknown_requests_is_dropped() -> None:
    """UT-G02: "Progress notifications MUST stop after completion": late ones are dropped."""
    session = make_session(MODERN)
    entry, _ = session.prepare_request("tools/call", {"name": "a"}, "w", progress=True)
    session.receive(classify(encode_result(entry.id, {})))
    assert session.receive(classify(progress(entry.id))) == []
    assert session.receive(classify(progress(12345))) == []
    other, _ = session.prepare_request("tools/call", {"name": "b"}, "w", progress=True)
    session.table.abandon(other.id)
    assert session.receive(classify(progress(other.id))) == []


@pytest.mark.parametrize("token", ["1", 1.0, None, [1], {"id": 1}])
def test_progress_token_must_match_type_and_value(token: object) -> None:
    """JR-05: token ``"1"`` is not request ``1``; non-id tokens match nothing."""
    session = make_session(MODERN)
    entry, _ = session.prepare_request("tools/call", {"name": "a"}, "w", progress=True)
    assert entry.id == 1
    assert session.receive(classify(progress(token))) == []


def test_boolean_progress_token_matches_nothing() -> None:
    session = make_session(MODERN)
    entry, _ = session.prepare_request("tools/call", {"name": "a"}, "w", progress=True)
    assert entry.id == 1
    assert session.receive(classify(progress(True))) == []


def test_progress_without_a_token_is_dropped() -> None:
    session = make_session(MODERN)
    session.prepare_request("tools/call", {"name": "a"}, "w", progress=True)
    assert (
        session.receive(classify(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}')) == []
    )


# -- receiving: notifications ------------------------------------------------------------------


def test_notification_is_reported_with_its_params() -> None:
    session = make_session(LATEST_LEGACY)
    line = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}'
    assert session.receive(classify(line)) == [
        NotificationReceived("notifications/message", {"level": "info", "data": "hi"})
    ]


def test_notification_without_params() -> None:
    session = make_session(LATEST_LEGACY)
    assert session.receive(classify(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')) == [
        NotificationReceived("notifications/tools/list_changed", {})
    ]


@pytest.mark.parametrize("sub_id", [7, "7", "sub-ид"])
def test_notification_with_subscription_id(sub_id: int | str) -> None:
    """ST-10: subscription traffic is correlated by ``_meta`` subscriptionId, type preserved."""
    session = make_session(MODERN)
    params = {"uri": "file:///a", "_meta": {META_SUBSCRIPTION_ID: sub_id}}
    line = msgspec.json.encode({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params})
    (event,) = session.receive(classify(line))
    assert isinstance(event, NotificationReceived)
    assert event.subscription_id == sub_id and type(event.subscription_id) is type(sub_id)
    assert event.params == params


@pytest.mark.parametrize("meta", [{}, {META_SUBSCRIPTION_ID: None}, {META_SUBSCRIPTION_ID: 1.5}, "not-an-object"])
def test_notification_without_a_usable_subscription_id(meta: object) -> None:
    session = make_session(MODERN)
    line = msgspec.json.encode(
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": meta}}
    )
    (event,) = session.receive(classify(line))
    assert isinstance(event, NotificationReceived) and event.subscription_id is None


@pytest.mark.parametrize("params", [b"[1,2]", b'"text"', b"3", b"null"])
def test_notification_with_non_object_params_is_a_violation(params: bytes) -> None:
    session = make_session(MODERN)
    line = b'{"jsonrpc":"2.0","method":"notifications/message","params":' + params + b"}"
    assert session.receive(classify(line)) == [
        Violation("'notifications/message' notification with params that are not an object")
    ]


def test_notification_with_invalid_utf8_params_is_a_violation() -> None:
    session = make_session(MODERN)
    line = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"\xff"}}'
    (event,) = session.receive(classify(line))
    assert isinstance(event, Violation)


# -- receiving: server requests ----------------------------------------------------------------


@pytest.mark.parametrize("version", LEGACY)
def test_server_request_in_the_legacy_era(version: str) -> None:
    """JR-12: a legacy server may ask (roots/list, sampling, elicitation, ping): answer it once."""
    session = make_session(version)
    (event,) = session.receive(classify(b'{"jsonrpc":"2.0","id":"s1","method":"roots/list","params":{"x":1}}'))
    assert isinstance(event, ServerRequestReceived)
    assert event.request.id == "s1" and event.request.method == "roots/list"
    assert event.params == {"x": 1}


def test_server_ping_during_the_handshake_is_a_request() -> None:
    """LC-05: a ping may arrive before the era is known."""
    session = make_session(None)
    session.begin_connecting()
    (event,) = session.receive(classify(b'{"jsonrpc":"2.0","id":0,"method":"ping"}'))
    assert isinstance(event, ServerRequestReceived) and event.params == {}


def test_server_request_in_the_modern_era_is_a_violation() -> None:
    """ST-11: "The server MUST NOT write JSON-RPC requests"; the client never answers (ST-05)."""
    session = make_session(MODERN)
    assert session.receive(classify(b'{"jsonrpc":"2.0","id":1,"method":"roots/list"}')) == [
        Violation("a 2026-07-28 server sent a request ('roots/list')")
    ]


# -- receiving: batches ------------------------------------------------------------------------

BATCH = (
    b'[{"jsonrpc":"2.0","id":1,"result":{}},'
    b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}},'
    b'{"jsonrpc":"2.0","id":"r","method":"ping"}]'
)


def test_batch_accepted_in_2025_03_26() -> None:
    """JR-21/ST-09: 2025-03-26 "MUST support receiving JSON-RPC batches"."""
    session = make_session("2025-03-26")
    entry, _ = session.prepare_request("tools/list", None, "w")
    events = session.receive(classify(BATCH))
    assert [type(e) for e in events] == [AnswerReceived, NotificationReceived, ServerRequestReceived]
    assert isinstance(events[0], AnswerReceived) and events[0].entry is entry


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
def test_batch_in_other_legacy_revisions_is_a_violation_plus_its_events(version: str) -> None:
    """JR-22: batching was removed in 2025-06-18; the messages are still handled."""
    session = make_session(version)
    session.prepare_request("tools/list", None, "w")
    events = session.receive(classify(BATCH))
    assert events[0] == Violation(f"a JSON-RPC batch in revision {version} (JR-22)")
    assert [type(e) for e in events[1:]] == [AnswerReceived, NotificationReceived, ServerRequestReceived]


def test_batch_in_the_modern_era_flags_both_the_batch_and_the_request() -> None:
    session = make_session(MODERN)
    session.prepare_request("tools/list", None, "w")
    events = session.receive(classify(BATCH))
    assert events[0] == Violation("a JSON-RPC batch in revision 2026-07-28 (JR-22)")
    assert isinstance(events[1], AnswerReceived) and isinstance(events[2], NotificationReceived)
    assert events[3] == Violation("a 2026-07-28 server sent a request ('ping')")


def test_not_protocol_element_in_a_batch() -> None:
    session = make_session("2025-03-26")
    (event,) = session.receive(classify(b'[{"level":"info"}]'))
    assert isinstance(event, Violation) and event.not_protocol


# -- receiving: noise --------------------------------------------------------------------------


@pytest.mark.parametrize("line", [b"Server listening on stdio", b'{"level":"info","msg":"up"}', b"[]"])
def test_not_protocol_is_a_violation_with_its_line(line: bytes) -> None:
    """ST-08: noise is reported (and counted by the client), never raised."""
    session = make_session(LATEST_LEGACY)
    message = classify(line)
    assert isinstance(message, NotProtocol)
    assert session.receive(message) == [Violation(message.reason, line, not_protocol=True)]


# -- the whole handshake against a fake server (SessionPair) -----------------------------------


def check_ready(session: ClientSession[str], server: FakeServer, era: Era, version: str) -> None:
    assert session.state is SessionState.READY
    assert session.era is era and session.revision is not None and session.revision.version == version
    assert roundtrip(session, server, "tools/list")["tools"] == TOOLS
    assert len(session.table) == 0


def test_pair_modern_server() -> None:
    """LC-40: probe, DiscoverResult, modern; requests carry ``_meta`` (the server checks LC-20)."""
    server = FakeServer((MODERN, LATEST_LEGACY))
    session = make_session(None)
    outcome = connect(session, server)
    assert outcome.actions == [SendDiscover(MODERN), outcome.verdict]
    assert isinstance(outcome.verdict, Decided) and outcome.verdict.era is Era.MODERN
    check_ready(session, server, Era.MODERN, MODERN)
    assert [m.method for m in server.received] == ["server/discover", "tools/list"]


@pytest.mark.parametrize("version", LEGACY)
@pytest.mark.parametrize("before", ["error:-32601", "error:-32602", "error:0", "error:-32000", "silent", "exit"])
def test_pair_legacy_server(version: str, before: str) -> None:
    """LC-41/LC-45: however a legacy server reacts to the probe, the client ends up speaking legacy.

    The server speaks only ``version``, so newer ones are counter-offered (LC-11).
    """
    server = FakeServer((version,), before_initialize=before)
    session = make_session(None)
    outcome = connect(session, server)
    verdict = outcome.verdict
    assert isinstance(verdict, Decided) and (verdict.era, verdict.version) == (Era.LEGACY, version)
    assert outcome.actions[0] == SendDiscover(MODERN)
    assert SendInitialize(LATEST_LEGACY) in outcome.actions
    assert (Restart() in outcome.actions) == (before == "exit")
    assert server.starts == (2 if before == "exit" else 1)
    check_ready(session, server, Era.LEGACY, version)
    methods = [m.method for m in server.received]
    assert methods[-3:] == ["initialize", "notifications/initialized", "tools/list"]


def test_pair_slow_modern_server_answers_the_probe_late() -> None:
    """LC-45: the probe times out, initialize goes out too, and the late DiscoverResult decides."""
    server = FakeServer((MODERN,), late_discover=True)
    session = make_session(None)
    outcome = connect(session, server)
    assert isinstance(outcome.verdict, Decided) and outcome.verdict.era is Era.MODERN
    assert outcome.actions[:2] == [SendDiscover(MODERN), SendInitialize(LATEST_LEGACY)]
    assert session.table.late == 1  # the initialize error arrived after the verdict (JR-06)
    check_ready(session, server, Era.MODERN, MODERN)


def test_pair_modern_server_with_an_unsupported_version_retry() -> None:
    """LC-24: a -32022 naming a version the client speaks: retry the probe with it."""

    class PickyServer(FakeServer):
        def _modern(self, rid: int | str, method: str, params: dict[str, object]) -> bytes | None:
            if method == "server/discover" and not getattr(self, "refused", False):
                self.refused = True
                return encode_error(rid, -32022, "Unsupported protocol version", {"supported": [MODERN]})
            return super()._modern(rid, method, params)

    server = PickyServer((MODERN,))
    session = make_session(None)
    outcome = connect(session, server)
    assert outcome.actions[:2] == [SendDiscover(MODERN), SendDiscover(MODERN)]
    assert isinstance(outcome.verdict, Decided) and outcome.verdict.era is Era.MODERN
    check_ready(session, server, Era.MODERN, MODERN)


def test_pair_forced_legacy_never_probes() -> None:
    server = FakeServer(("2025-06-18",), before_initialize="exit")
    session = make_session(None)
    outcome = connect(session, server, mode="legacy")
    assert outcome.actions[0] == SendInitialize(LATEST_LEGACY)
    check_ready(session, server, Era.LEGACY, "2025-06-18")
    assert "server/discover" not in [m.method for m in server.received]


def test_pair_forced_modern_against_a_legacy_server_fails() -> None:
    server = FakeServer((LATEST_LEGACY,))
    session = make_session(None)
    outcome = connect(session, server, mode="modern")
    assert outcome.verdict == Failed("server/discover answered error -32601: Server not initialized")
    assert session.state is SessionState.CONNECTING


def test_pair_legacy_server_of_an_unknown_revision_fails_unsupported() -> None:
    server = FakeServer(("2099-01-01",))
    session = make_session(None)
    outcome = connect(session, server)
    assert isinstance(outcome.verdict, Failed)
    assert outcome.verdict.unsupported and outcome.verdict.offered == ("2099-01-01",)


def test_pair_ids_are_never_reused_across_a_restart() -> None:
    """JR-03/JR-05: the counter survives a restart of the server process."""
    server = FakeServer((LATEST_LEGACY,), before_initialize="exit")
    session = make_session(None)
    connect(session, server)
    ids = [m.id for m in server.received if hasattr(m, "id")]
    assert ids == sorted(set(ids))
    assert roundtrip(session, server, "tools/list")["tools"] == TOOLS
