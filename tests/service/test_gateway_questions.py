"""A backend's questions through the gateway: sampling, elicitation and roots reach the gateway's
client (a server request in a legacy session, an input_required round in 2026-07-28) or fail
cleanly when it cannot answer; the approval policy's "ask" becomes an elicitation, or a pending
approval in the host's queue for a client that cannot answer one; a 2026-07-28 requestState the
gateway did not issue is refused."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
from _gateway import MODERN, gateway, reference

import mcpwire
from mcpwire.host.approvals import ApprovalQueue
from mcpwire.protocol.versions import Era

pytestmark = pytest.mark.slow
ERAS = [Era.LEGACY, Era.MODERN]
# the backend is pinned to 2026-07-28 in half the cases: its questions then come as input rounds
BACKENDS = {"legacy backend": "legacy", "modern backend": "modern"}


def _asked(log: list[Any]) -> Any:
    async def handler(params: Any) -> Any:
        log.append(params)
        if "requestedSchema" in params and "approve" in params["requestedSchema"].get("properties", {}):
            return {"action": "accept", "content": {"approve": True}}
        if "requestedSchema" in params:
            return {"action": "accept", "content": {"answer": "forty-two"}}
        return {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}

    return handler


@pytest.mark.parametrize("backend", BACKENDS.values(), ids=list(BACKENDS))
@pytest.mark.parametrize("era", ERAS, ids=lambda e: e.value)
async def test_sampling_elicitation_and_roots_reach_the_gateways_client(era: Era, backend: str) -> None:
    asked: list[Any] = []
    handler = _asked(asked)
    async with gateway({"ref": {**reference(), "era": backend}}) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(
                running.url,
                era=era.value,
                era_cache=False,
                elicitation=handler,
                sampling=handler,
                roots=["file:///work"],
            ) as client:
                assert (await client.call_tool("ref__ask", {"question": "the answer?"})).text() == "answer: forty-two"
                assert (await client.call_tool("ref__sample", {"prompt": "hi"})).text() == "sampled: sampled"
                assert (await client.call_tool("ref__roots", {})).text() == "file:///work"
    assert asked[0]["message"] == "the answer?"


@pytest.mark.parametrize("era", ERAS, ids=lambda e: e.value)
async def test_a_client_that_cannot_answer_makes_the_question_fail_cleanly(era: Era) -> None:
    async with gateway({"ref": {**reference(), "era": "modern"}}) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(running.url, era=era.value, era_cache=False) as client:
                if era is Era.LEGACY:
                    answer = await client.call_tool("ref__sample", {"prompt": "hi"})
                    assert answer.is_error
                    assert "cannot answer 'sampling/createMessage'" in answer.text()
                else:
                    with pytest.raises(mcpwire.RPCError) as refused:
                        await client.call_tool("ref__sample", {"prompt": "hi"})
                    assert refused.value.code == -32021
                    assert refused.value.data == {"requiredCapabilities": {"sampling": {}}}


async def test_a_legacy_backends_question_the_client_cannot_answer_does_not_fail_its_call_for_it() -> None:
    """A legacy backend's question is taken to belong to its one call in flight, a guess: it may be
    the backend's own (server-everything asks for roots when it starts, in the middle of whatever
    call is running). A 2026-07-28 client that cannot answer it has the question refused; its call
    is not failed with -32021 for it, and ends as the backend ends it."""
    async with gateway({"ref": {**reference(), "era": "legacy"}}) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(running.url, era="modern", era_cache=False) as client:
                answer = await client.call_tool("ref__roots", {})
                assert answer.is_error
                assert "cannot answer 'roots/list'" in answer.text()
                assert (await client.call_tool("ref__echo", {"text": "still here"})).text() == "still here"


@pytest.mark.parametrize("era", ERAS, ids=lambda e: e.value)
async def test_ask_caller_opts_in_to_an_elicitation_to_the_calling_client(era: Era) -> None:
    asked: list[Any] = []

    async def decide(params: Any) -> Any:
        asked.append(params)
        return {"action": "accept", "content": {"approve": "no" not in str(asked[-1])}}

    queue = ApprovalQueue()
    rules = [("ref", "echo", "ask-caller")]
    async with gateway({"ref": reference()}, approval_rules=rules, approvals=queue) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(running.url, era=era.value, era_cache=False, elicitation=decide) as client:
                done = await client.call_tool("ref__echo", {"text": "approved"})
                assert done.text() == "approved"
                refused = await client.call_tool("ref__echo", {"text": "no thanks"})
                assert refused.is_error
                assert "denied" in refused.text()
    assert "Allow the tool 'echo' on server 'ref'" in asked[0]["message"]
    assert asked[0]["requestedSchema"]["required"] == ["approve"]
    approved, denied = sorted([a for a in queue.backend._items.values()], key=lambda a: a.created_at)  # type: ignore[attr-defined]
    # the caller decided, and the record says so
    assert (approved.state.value, approved.decided_via, approved.decided_by) == ("approved", "caller", "mcp (mcpwire)")
    assert (denied.state.value, denied.decided_via) == ("denied", "caller")


@pytest.mark.parametrize(
    ("entry", "rule", "elicits"),
    [
        ({}, "ask", False),  # a client that cannot answer: the call waits in the host's queue
        ({}, "ask", True),  # by default someone other than the caller decides, even if it could answer
        ({"policy": {"tools": {"echo": {"risk": "critical"}}}}, "ask-caller", True),  # never the caller if CRITICAL
    ],
    ids=["ask, no elicitation", "ask", "critical ask-caller"],
)
@pytest.mark.parametrize("era", ERAS, ids=lambda e: e.value)
async def test_a_client_does_not_approve_its_own_call(era: Era, entry: Any, rule: str, elicits: bool) -> None:
    asked: list[Any] = []

    async def accept_everything(params: Any) -> Any:
        asked.append(params)
        return {"action": "accept", "content": {"approve": True}}

    queue = ApprovalQueue()
    servers = {"ref": {**reference(), **entry}}
    async with gateway(servers, approval_rules=[("ref", "echo", rule)], approvals=queue) as running:
        with trio.fail_after(60):
            handler = accept_everything if elicits else None
            async with mcpwire.open_client(running.url, era=era.value, era_cache=False, elicitation=handler) as client:
                result: list[Any] = []

                async def call() -> None:
                    result.append(await client.call_tool("ref__echo", {"text": "mine"}))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(call)
                    while not await queue.pending():  # noqa: ASYNC110 - the queue's state, polled as the service does
                        await trio.sleep(0.02)
                    await trio.sleep(1.0)  # time enough for a question to the client, were one sent
                    [approval] = await queue.pending()
                    assert (asked, approval.confirmations, approval.caller_present) == ([], 0, True)
                    assert approval.context.get("caller") == "mcp (mcpwire)"
                    for _ in range(approval.confirmations_needed):
                        await queue.decide(approval.id, approve=True, by="ops", via="console")
                assert result[0].text() == "mine"
    final = await queue.get(approval.id)
    assert (final.state.value, final.decided_by, final.decided_via) == ("approved", "ops", "console")
    assert asked == []


async def test_a_request_state_the_gateway_did_not_issue_is_refused() -> None:
    async with gateway({"ref": reference()}) as running, httpx.AsyncClient(timeout=30) as http:
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "ref__echo"}
        for state, text in (("x.1.forged", "failed verification"), ("nonsense", "is not one this gateway issued")):
            params = {"name": "ref__echo", "arguments": {"text": "x"}, "requestState": state, "_meta": meta}
            reply = await http.post(
                running.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers
            )
            error = reply.json()["error"]
            assert error["code"] == -32602
            assert text in error["message"]


async def test_a_call_waiting_for_a_retry_does_not_take_another_calls_question() -> None:
    """A 2026-07-28 client that never retries leaves its call parked; a legacy backend's question
    for the one other call in flight still reaches that call's client."""
    async with gateway({"ref": {**reference(), "era": "legacy"}}) as running, httpx.AsyncClient(timeout=30) as http:
        caps = {"elicitation": {}}
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": caps}
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "ref__ask"}
        params = {"name": "ref__ask", "arguments": {"question": "never answered?"}, "_meta": meta}
        parked = await http.post(
            running.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers
        )
        assert parked.json()["result"]["resultType"] == "input_required"  # and no retry comes
        asked: list[Any] = []
        with trio.fail_after(60):
            async with mcpwire.open_client(
                running.url, era="legacy", era_cache=False, elicitation=_asked(asked)
            ) as client:
                answered = await client.call_tool("ref__ask", {"question": "the answer?"})
        assert (answered.text(), [a["message"] for a in asked]) == ("answer: forty-two", ["the answer?"])


async def test_a_question_of_a_call_that_is_not_the_gateways_never_reaches_a_gateway_client() -> None:
    """A call through the host that no client of the gateway made (the service's API, an agent's
    run) has no one to ask: a 2026-07-28 backend's question for it is refused, even while one
    gateway call to that backend is in flight (whose client must not see another caller's question)."""
    asked: list[Any] = []
    release = trio.Event()

    async def answer_later(params: Any) -> Any:
        asked.append(params)
        await release.wait()
        return {"action": "accept", "content": {"answer": "mine"}}

    async with gateway({"ref": {**reference(), "era": "modern"}}) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(
                running.url, era="legacy", era_cache=False, elicitation=answer_later
            ) as client, trio.open_nursery() as nursery:
                results: list[Any] = []

                async def gateway_call() -> None:
                    results.append(await client.call_tool("ref__ask", {"question": "from the client?"}))

                nursery.start_soon(gateway_call)
                while not asked:  # noqa: ASYNC110 - the gateway call is waiting for its client's answer
                    await trio.sleep(0.02)
                with pytest.raises(mcpwire.ToolExecutionError) as refused:
                    await running.host.call_tool("ref__ask", {"question": "from the API?"})
                assert "did not come from one of the gateway's MCP clients" in str(refused.value.__cause__)
                release.set()
        assert [a["message"] for a in asked] == ["from the client?"]
        assert results[0].text() == "answer: mine"
