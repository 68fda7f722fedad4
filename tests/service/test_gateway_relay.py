"""A 2026-07-28 client's input rounds with a 2026-07-28 backend, relayed through the gateway: the
backend's own questions (its keys, all in one round) under the client's own capabilities, the
backend's requestState wrapped so that it goes back to that backend only; and the client feature
under it (mcpwire.client.relay: a relayed round, a task for the asker, questions put to the asker),
against the reference server directly."""

from __future__ import annotations

import sys
from typing import Any

import httpx
import pytest
import trio
from _gateway import MODERN, gateway, reference

import mcpwire
from mcpwire.client.relay import InputRequested, Relay, RelayedRound, TaskCreated
from mcpwire.transports import StdioServer

pytestmark = pytest.mark.slow
CAPS = "io.modelcontextprotocol/clientCapabilities"
ALL_CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}
MULTIPLE = "test_input_required_result_multiple_inputs"
ANSWERS: dict[str, Any] = {
    "user_name": {"action": "accept", "content": {"name": "Alice"}},
    "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"},
    "client_roots": {"roots": [{"uri": "file:///a"}]},
}


async def _call(
    http: httpx.AsyncClient, url: str, tool: str, caps: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """One 2026-07-28 tools/call through the gateway; the JSON-RPC response."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, CAPS: ALL_CAPS if caps is None else caps}
    params = {"name": tool, "arguments": {}, "_meta": meta, **extra}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}
    reply = await http.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers
    )
    answer: dict[str, Any] = reply.json()
    return answer


async def test_the_backends_input_rounds_reach_the_client_as_the_backend_sent_them() -> None:
    backends = {"ref": {**reference(), "era": "modern"}, "other": {**reference(), "era": "modern"}}
    async with gateway(backends) as running, httpx.AsyncClient(timeout=30) as http:
        with trio.fail_after(60):
            first = (await _call(http, running.url, f"ref__{MULTIPLE}"))["result"]
            assert first["resultType"] == "input_required"
            assert sorted(first["inputRequests"]) == ["client_roots", "greeting", "user_name"]  # one round
            state = first["requestState"]
            assert state.startswith("relayed.")
            done = await _call(http, running.url, f"ref__{MULTIPLE}", inputResponses=ANSWERS, requestState=state)
            assert done["result"]["content"] == [{"type": "text", "text": "LLM response: Hi Alice; roots: file:///a"}]
            # the wrapped state is the gateway's to check: tampered, or sent to another backend
            tampered = state[:-1] + ("0" if state[-1] != "0" else "1")
            refused = await _call(http, running.url, f"ref__{MULTIPLE}", inputResponses=ANSWERS, requestState=tampered)
            assert refused["error"]["code"] == -32602
            assert refused["error"]["message"] == "Invalid params: 'requestState' failed verification"
            elsewhere = await _call(http, running.url, f"other__{MULTIPLE}", inputResponses=ANSWERS, requestState=state)
            assert elsewhere["error"]["code"] == -32602
            assert elsewhere["error"]["message"] == (
                "Invalid params: 'requestState' was issued for a call to another server"
            )


async def test_the_backend_sees_the_clients_capabilities_and_first_call_answers() -> None:
    async with gateway({"ref": {**reference(), "era": "modern"}}) as running, httpx.AsyncClient(timeout=30) as http:
        with trio.fail_after(60):
            sampling_only = await _call(
                http, running.url, "ref__test_input_required_result_capabilities", caps={"sampling": {}}
            )
            assert list(sampling_only["result"]["inputRequests"]) == ["capital_question"]
            # answers sent with a first call (no requestState) reach the backend too
            answered = await _call(
                http,
                running.url,
                "ref__test_input_required_result_elicitation",
                inputResponses={"user_name": ANSWERS["user_name"], "extra": {"action": "cancel"}},
            )
            assert answered["result"]["content"] == [{"type": "text", "text": "Hello, Alice!"}]


async def test_a_relayed_call_raises_the_servers_input_required_result_instead_of_answering_it() -> None:
    asked: list[Any] = []

    async def elicit(params: Any) -> Any:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Bob"}}

    server = StdioServer(command=sys.executable, args=("-m", "mcpwire.testing.everything"))
    with trio.fail_after(60):
        async with mcpwire.open_client(server, era="modern", era_cache=False, elicitation=elicit) as client:
            tool = "test_input_required_result_elicitation"
            theirs = Relay(round=RelayedRound({}, {CAPS: {"elicitation": {}}}))
            with pytest.raises(InputRequested) as raised:
                await client.call_tool(tool, {}, relay=theirs)
            assert raised.value.result["resultType"] == "input_required"
            assert list(raised.value.result["inputRequests"]) == ["user_name"]
            assert asked == []  # this client's handler was not asked
            answered = Relay(round=RelayedRound({"inputResponses": {"user_name": ANSWERS["user_name"]}}))
            assert (await client.call_tool(tool, {}, relay=answered)).text() == "Hello, Alice!"
            # without a relay, the client answers with its own handler
            assert (await client.call_tool(tool, {})).text() == "Hello, Bob!"
            assert len(asked) == 1
            # the relayed round's capabilities replace the client's: none declared, none asked
            bare = Relay(round=RelayedRound({}, {CAPS: {}}))
            with pytest.raises(mcpwire.RPCError) as refused:
                await client.call_tool(tool, {}, relay=bare)
            assert refused.value.code == -32021


async def test_a_result_reached_through_input_rounds_is_never_cached() -> None:
    """A cacheable tool whose answer depends on the asking client's input responses: each client's
    rounds reach the backend, and no one is answered from another's answers (a cache keyed on the
    arguments alone would replay Alice's result to Bob, and skip the backend's question)."""
    policy = {"cacheable_tools": ["test_input_required_*"], "cache_ttl_seconds": 300}
    backend = {**reference(), "era": "modern", "policy": policy}
    tool = "ref__test_input_required_result_elicitation"
    bob = {"user_name": {"action": "accept", "content": {"name": "Bob"}}}
    async with gateway({"ref": backend}) as running, httpx.AsyncClient(timeout=30) as http:
        with trio.fail_after(60):
            for answers, greeting in ((ANSWERS, "Hello, Alice!"), (bob, "Hello, Bob!")):
                first = (await _call(http, running.url, tool))["result"]
                assert first["resultType"] == "input_required", first
                state = {"requestState": first["requestState"]} if "requestState" in first else {}
                done = await _call(http, running.url, tool, inputResponses=answers, **state)
                assert done["result"]["content"] == [{"type": "text", "text": greeting}]
            # answers sent with a first call are the asker's own too
            direct = await _call(http, running.url, tool, inputResponses=bob)
            assert direct["result"]["content"] == [{"type": "text", "text": "Hello, Bob!"}]
            again = await _call(http, running.url, tool, inputResponses={"user_name": ANSWERS["user_name"]})
            assert again["result"]["content"] == [{"type": "text", "text": "Hello, Alice!"}]


TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


async def test_a_relayed_call_that_becomes_a_task_raises_the_task_for_the_asker_to_poll() -> None:
    server = StdioServer(command=sys.executable, args=("-m", "mcpwire.testing.everything"))
    with trio.fail_after(60):
        async with mcpwire.open_client(server, era="modern", era_cache=False) as client:
            theirs = Relay(round=RelayedRound(meta={CAPS: TASKS}))
            with pytest.raises(TaskCreated) as raised:
                await client.call_tool("slow_compute", {"seconds": 0.2}, relay=theirs)
            created = raised.value.result
            assert (created["resultType"], created["status"]) == ("task", "working")
            # the task's own requests carry the asker's capabilities too (the server checks them)
            polled: Any = {}
            while polled.get("status") != "completed":
                polled = await client.request("tasks/get", {"taskId": created["taskId"]}, relay=theirs)
                await trio.sleep(0.05)
            assert polled["result"]["content"] == [{"type": "text", "text": "slow_compute: done after 0.2 s"}]
            with pytest.raises(mcpwire.RPCError) as refused:
                await client.request("tasks/get", {"taskId": created["taskId"]})  # this client declared none
            assert refused.value.code == -32021
            # without the asker's declaration, the same call is no task: it is this client's answer
            assert (await client.call_tool("slow_compute", {"seconds": 0})).text() == "slow_compute: done after 0 s"


async def test_a_relay_without_a_round_answers_the_servers_input_requests_itself() -> None:
    """A legacy proxy client's call to a 2026-07-28 server: the questions of that call go to the
    relay's asker, not to this client's handlers, and the input rounds are completed here."""
    mine: list[Any] = []
    theirs: list[tuple[str, Any]] = []

    async def handler(params: Any) -> Any:
        mine.append(params)
        return {"action": "accept", "content": {"name": "Mine"}}

    async def ask(method: str, params: Any) -> Any:
        theirs.append((method, params))
        return {"action": "accept", "content": {"name": "Theirs"}}

    server = StdioServer(command=sys.executable, args=("-m", "mcpwire.testing.everything"))
    with trio.fail_after(60):
        async with mcpwire.open_client(server, era="modern", era_cache=False, elicitation=handler) as client:
            tool = "test_input_required_result_elicitation"
            assert (await client.call_tool(tool, {}, relay=Relay(ask=ask))).text() == "Hello, Theirs!"
            assert [method for method, _ in theirs] == ["elicitation/create"] and mine == []
            assert (await client.call_tool(tool, {})).text() == "Hello, Mine!"
            assert len(mine) == 1 and len(theirs) == 1
