"""Everything a real session writes validates against the official schema of the negotiated revision.

``tests/protocol/test_schema_outgoing.py`` checks messages built by the sans-I/O core one at a
time; here a whole session runs against a real server process (``fixtures/demo_recorded.py``, which
records every line it receives) using every client call the server supports in that revision:
lists, calls with progress, a timed-out call (``notifications/cancelled``), resources,
subscriptions, prompts, completion, logging, ping, and input requests answered through the
handlers (legacy: responses to server requests; 2026-07-28: retries with ``inputResponses``). Then
each recorded message is checked against the JSON-RPC envelope and its own definition, with a
``$ref`` into the whole schema document (shipped in :mod:`mcpwire.schemas`, or
``$MCPWIRE_SCHEMA_DIR``). The ``server/discover`` probe belongs to 2026-07-28 and ``initialize`` to
the revision it offers, whatever was negotiated. Rules: LC-02, LC-03, LC-20..LC-22, JR-01, JR-12,
UT-C02, UT-G01, UT-L01, UT-L03, UT-R04, UT-S01, UT-S09.
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

import pytest
import trio
from _demo import open_demo, sent
from _faulty import Record

from mcpwire import RequestTimeout
from mcpwire.client import Client
from mcpwire.schemas import schema_dir

MODERN = "2026-07-28"
LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

REQUESTS = {
    "initialize": "InitializeRequest",
    "server/discover": "DiscoverRequest",
    "ping": "PingRequest",
    "tools/list": "ListToolsRequest",
    "tools/call": "CallToolRequest",
    "resources/list": "ListResourcesRequest",
    "resources/templates/list": "ListResourceTemplatesRequest",
    "resources/read": "ReadResourceRequest",
    "resources/subscribe": "SubscribeRequest",
    "resources/unsubscribe": "UnsubscribeRequest",
    "prompts/list": "ListPromptsRequest",
    "prompts/get": "GetPromptRequest",
    "completion/complete": "CompleteRequest",
    "logging/setLevel": "SetLevelRequest",
    "subscriptions/listen": "SubscriptionsListenRequest",
}
NOTIFICATIONS = {
    "notifications/initialized": "InitializedNotification",
    "notifications/cancelled": "CancelledNotification",
}
#: what the client's answer to each server request is
RESULTS = {
    "roots/list": "ListRootsResult",
    "sampling/createMessage": "CreateMessageResult",
    "elicitation/create": "ElicitResult",
}


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(autouse=True)
def schemas() -> None:
    missing = [rev for rev in (*LEGACY, MODERN) if not (schema_dir() / rev / "schema.json").is_file()]
    if missing:
        message = f"MCP schemas missing under {schema_dir()} for {', '.join(missing)} (set MCPWIRE_SCHEMA_DIR)"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)


@cache
def validator(revision: str, definition: str) -> Any:
    import jsonschema
    from referencing import Registry
    from referencing.jsonschema import DRAFT7, DRAFT202012

    document = json.loads((schema_dir() / revision / "schema.json").read_text(encoding="utf-8"))
    modern_layout = "$defs" in document  # 2025-11-25 and 2026-07-28: 2020-12; older: draft-07
    section = "$defs" if modern_layout else "definitions"
    assert definition in document[section], f"{definition} is not defined by the {revision} schema"
    uri = f"urn:mcp-schema:{revision}"
    resource = (DRAFT202012 if modern_layout else DRAFT7).create_resource(document)
    cls = jsonschema.Draft202012Validator if modern_layout else jsonschema.Draft7Validator
    return cls({"$ref": f"{uri}#/{section}/{definition}"}, registry=Registry().with_resource(uri, resource))


def problems(revision: str, definition: str, instance: object) -> list[str]:
    import jsonschema

    error = jsonschema.exceptions.best_match(validator(revision, definition).iter_errors(instance))
    if error is None:
        return []
    return [f"not a valid {revision} {definition}: {error.message} at {list(error.absolute_path)}"]


def check_session(record: Record, negotiated: str) -> tuple[list[str], list[str]]:
    """Validates every recorded message; returns (what was checked as what, problems found)."""
    asked = {m["id"]: m["method"] for m in sent(record) if "method" in m and "id" in m}
    checked: list[str] = []
    found: list[str] = []
    for message in record.messages():
        method = message.get("method")
        if method is not None and "id" in message:
            revision = MODERN if method == "server/discover" else negotiated
            if method == "initialize":
                revision = message["params"]["protocolVersion"]
            checks = [("JSONRPCRequest", message), (REQUESTS[method], message)]
        elif method is not None:
            revision = negotiated
            checks = [("JSONRPCNotification", message), (NOTIFICATIONS[method], message)]
        else:
            revision = negotiated
            envelope = "JSONRPCResultResponse" if revision >= "2025-11-25" else "JSONRPCResponse"
            method = f"answer to {asked[message['id']]}"
            checks = [(envelope, message), (RESULTS[asked[message["id"]]], message["result"])]
        for definition, instance in checks:
            found += problems(revision, definition, instance)
        checked.append(f"{method} as {revision}")
    return checked, found


async def elicit(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"answer": "yes"}}


async def sample(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "test-model"}


HANDLERS = {
    "elicitation": elicit,
    "sampling": sample,
    "roots": ["file:///srv/a", {"uri": "file:///srv/b", "name": "b"}],
}


async def run_session(client: Client) -> None:
    """Every call the demo server supports in the negotiated revision."""
    caps = client.server_capabilities
    await client.list_tools()
    await client.call_tool("echo", {"text": "hi \u2028 there"})
    await client.call_tool("add", {"a": 1, "b": 2.5})
    await client.call_tool("slow", {"seconds": 0.1, "steps": 2}, on_progress=lambda p: None)
    with pytest.raises(RequestTimeout):
        await client.call_tool("slow", {"seconds": 30, "steps": 1}, timeout=0.2)
    can_elicit = (client.protocol_version or "") >= "2025-06-18"  # elicitation came with 2025-06-18
    assert (await client.call_tool("ask", {"question": "ok?"})).is_error is not can_elicit
    assert not (await client.call_tool("sample", {"prompt": "hi"})).is_error
    assert not (await client.call_tool("roots", {})).is_error
    await client.request("tools/call", {"name": "echo", "arguments": {}})
    await client.list_resources()
    await client.list_resource_templates()
    await client.read_resource("demo://static/hello")
    async with client.subscribe(["demo://static/hello"]):
        await client.call_tool("touch", {"uri": "demo://static/hello"})
    await client.list_prompts()
    await client.get_prompt("greet", {"name": "Ada"})
    if caps.completions is not None:
        await client.complete({"type": "ref/prompt", "name": "greet"}, "name", "a", context={"x": "y"})
    await client.set_logging_level("debug")
    await client.call_tool("notify", {})
    await client.ping()


@pytest.mark.parametrize("revision", LEGACY)
async def test_a_legacy_session_writes_only_valid_messages(revision: str, record: Record) -> None:
    """For 2025-11-25 the era is detected (so the probe is on the wire too); older revisions are
    forced with ``protocol_version``."""
    options: dict[str, Any] = {"protocol_version": revision} if revision != "2025-11-25" else {}
    with trio.fail_after(20):
        async with open_demo(record, "--era", "legacy", **HANDLERS, **options) as client:
            assert client.protocol_version == revision
            await run_session(client)
    checked, found = check_session(record, revision)
    assert found == []
    expected = {
        f"{m} as {revision}"
        for m in (
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "notifications/cancelled",
            "resources/subscribe",
            "resources/unsubscribe",
            "logging/setLevel",
            "ping",
            "answer to sampling/createMessage",
            "answer to roots/list",
        )
    }
    if revision >= "2025-06-18":
        expected.add(f"answer to elicitation/create as {revision}")
    if revision >= "2025-03-26":
        expected.add(f"completion/complete as {revision}")
    if revision == "2025-11-25":
        expected.add(f"server/discover as {MODERN}")
    assert expected <= set(checked), expected - set(checked)


async def test_a_modern_session_writes_only_valid_messages(record: Record) -> None:
    with trio.fail_after(20):
        async with open_demo(record, **HANDLERS) as client:
            assert client.protocol_version == MODERN
            await run_session(client)
    checked, found = check_session(record, MODERN)
    assert found == []
    expected = {
        f"{m} as {MODERN}"
        for m in (
            "server/discover",
            "tools/list",
            "tools/call",
            "notifications/cancelled",
            "subscriptions/listen",
            "completion/complete",
        )
    }
    assert expected <= set(checked), expected - set(checked)
    retries = [m for m in record.messages() if "inputResponses" in (m.get("params") or {})]
    assert len(retries) == 3  # ask, sample and roots each answered in one retry


async def test_the_check_finds_an_invalid_message(record: Record) -> None:
    """The validation is not vacuous: a legacy ``tools/call`` (no ``_meta``) is a valid 2025-11-25
    CallToolRequest and an invalid 2026-07-28 one."""
    with trio.fail_after(10):
        async with open_demo(record, era="legacy") as client:
            await client.call_tool("echo", {"text": "hi"})
    (call,) = [m for m in record.messages() if m.get("method") == "tools/call"]
    assert problems("2025-11-25", "CallToolRequest", call) == []
    (problem,) = problems(MODERN, "CallToolRequest", call)
    assert problem.startswith(f"not a valid {MODERN} CallToolRequest: "), problem
