"""Input requests over stdio: legacy server->client requests and 2026-07-28 ``input_required``
rounds (MRTR), answered by the same client handlers, against a real server process.

Each test starts ``fixtures/demo_recorded.py`` (the bundled demo server, recording what it receives
and sends) and checks the result and what travelled on the wire: the retries, their ids, the
``inputResponses`` and the byte-exact ``requestState``.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from _demo import ERAS, open_demo, requests, sent, without_meta
from _faulty import Record

from mcpwire import InvalidResponse, RemoteProtocolError

#: The ``requestState`` of the fixture's ``gather`` tool (see fixtures/demo_recorded.py).
STATE = 'st/\u00e9\u2028\\"\u0000 +==\U0001f600'
ROOTS = ["file:///srv/a", {"uri": "file:///srv/b", "name": "b"}]
SAMPLE_ANSWER = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "test-model"}


class Handlers:
    """Client handlers that record what they were asked."""

    def __init__(self) -> None:
        self.elicited: list[dict[str, Any]] = []
        self.sampled: list[dict[str, Any]] = []

    async def elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        self.elicited.append(params)
        return {"action": "accept", "content": {"name": "ann", "answer": "Ada"}}

    async def sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        self.sampled.append(params)
        return SAMPLE_ANSWER

    def options(self) -> dict[str, Any]:
        return {"elicitation": self.elicitation, "sampling": self.sampling, "roots": ROOTS}


# -- JR-12, UT-R02..UT-R06: the demo's input tools, both eras --------------------------------------------


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("tool", "arguments", "key", "response", "text"),
    [
        pytest.param(
            "ask",
            {"question": "Name?"},
            "answer",
            {"action": "accept", "content": {"name": "ann", "answer": "Ada"}},
            "answer: Ada",
            id="elicitation",
        ),
        pytest.param("sample", {"prompt": "hi"}, "reply", SAMPLE_ANSWER, "sampled: hello", id="sampling"),
        pytest.param(
            "roots",
            {},
            "roots",
            {"roots": [{"uri": "file:///srv/a"}, {"uri": "file:///srv/b", "name": "b"}]},
            "file:///srv/a\nfile:///srv/b",
            id="roots",
        ),
    ],
)
async def test_input_requests_are_answered_by_the_handlers(
    era: str, tool: str, arguments: dict[str, Any], key: str, response: dict[str, Any], text: str, record: Record
) -> None:
    """Legacy (JR-12): the server sends a request mid-call and the client answers it with the same
    id. 2026-07-28 (UT-R02..UT-R04): the call ends ``input_required``; the client retries once with a
    new id, the same arguments, ``inputResponses`` under the server's key and the ``requestState``
    it was given, echoed exactly. Either way the handler's answer reaches the tool."""
    handlers = Handlers()
    with trio.fail_after(10):
        async with open_demo(record, era=era, **handlers.options()) as client:
            result = await client.call_tool(tool, arguments)
            stats = client.statistics()
    assert (result.is_error, result.text()) == (False, text)
    calls = requests(record, "tools/call")
    if era == "legacy":
        assert stats.server_requests == 1
        assert len(calls) == 1
        (asked,) = [m for m in sent(record) if "method" in m and "id" in m]
        (answer,) = [m for m in record.messages() if "method" not in m]
        assert answer == {"jsonrpc": "2.0", "id": asked["id"], "result": response}
        assert asked["id"] == "srv-1"
        return
    assert stats.server_requests == 0
    first, retry = calls
    (input_required,) = [m for m in sent(record) if m.get("id") == first["id"]]
    state = input_required["result"]["requestState"]
    assert input_required["result"]["resultType"] == "input_required"
    assert retry["id"] != first["id"]
    assert without_meta(first["params"]) == {"name": tool, "arguments": arguments}
    assert without_meta(retry["params"]) == {
        "name": tool,
        "arguments": arguments,
        "inputResponses": {key: response},
        "requestState": state,
    }
    assert retry["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


async def test_one_round_with_three_inputs_echoes_an_odd_request_state_exactly(record: Record) -> None:
    """UT-R02, UT-R03, UT-R06, CF-E12, CF-S09: one ``input_required`` round asks for elicitation,
    sampling and roots at once, with a ``requestState`` full of characters a re-encoding could
    change (a line separator, a NUL, an escaped quote, an emoji). The retry answers all three
    (elicitation with the schema's default filled in) and carries the state unchanged."""
    handlers = Handlers()
    with trio.fail_after(10):
        async with open_demo(record, era="modern", **handlers.options()) as client:
            result = await client.call_tool("gather", {})
    assert result.text() == "gathered"
    (asked,) = [m for m in sent(record) if m.get("result", {}).get("resultType") == "input_required"]
    assert asked["result"]["requestState"] == STATE
    requested = asked["result"]["inputRequests"]
    assert handlers.elicited == [requested["who"]["params"]]
    assert handlers.sampled == [requested["model"]["params"]]
    responses = {
        "who": {"action": "accept", "content": {"name": "ann", "answer": "Ada", "team": "blue"}},
        "model": SAMPLE_ANSWER,
        "where": {"roots": [{"uri": "file:///srv/a"}, {"uri": "file:///srv/b", "name": "b"}]},
    }
    assert result.structured_content == {"inputResponses": responses, "requestState": STATE}
    first, retry = requests(record, "tools/call")
    assert "requestState" not in first["params"] and "inputResponses" not in first["params"]
    assert retry["params"]["requestState"] == STATE
    assert retry["params"]["inputResponses"] == responses


# -- UT-R07: the round cap ----------------------------------------------------------------------------


async def test_a_server_asking_forever_hits_the_round_cap(record: Record) -> None:
    """UT-R07: every retry is answered ``input_required`` again; with ``max_input_rounds=3`` the
    call fails after the third retry with InvalidResponse saying so, and nothing more is sent. Each
    retry echoes the state of the round before; the client stays usable."""
    handlers = Handlers()
    with trio.fail_after(10):
        async with open_demo(record, era="modern", max_input_rounds=3, **handlers.options()) as client:
            with pytest.raises(InvalidResponse) as info:
                await client.call_tool("ask_forever", {})
            calls = requests(record, "tools/call")
            assert (await client.call_tool("echo", {"text": "after"})).text() == "after"
    assert str(info.value) == "server 'demo' asked for input more than 3 times for 'tools/call'"
    assert [c["params"].get("requestState") for c in calls] == [None, "round-1", "round-2", "round-3"]
    assert len({c["id"] for c in calls}) == 4
    assert len(handlers.elicited) == 3


# -- JR-10: an unknown resultType ------------------------------------------------------------------------


async def test_an_unknown_result_type_is_invalid_in_the_modern_era(record: Record) -> None:
    """JR-10 ("A resultType of any value unrecognized by the client MUST be considered invalid"):
    ``resultType: "partial"`` fails ``call_tool`` and the generic ``request`` alike."""
    with trio.fail_after(10):
        async with open_demo(record, era="modern") as client:
            with pytest.raises(InvalidResponse) as typed:
                await client.call_tool("odd_result", {})
            with pytest.raises(InvalidResponse) as generic:
                await client.request("tools/call", {"name": "odd_result", "arguments": {}})
    message = "server 'demo' answered 'tools/call' with unknown resultType 'partial'"
    assert (str(typed.value), str(generic.value)) == (message, message)
    assert len(requests(record, "tools/call")) == 2  # no retry


async def test_result_type_means_nothing_in_the_legacy_era() -> None:
    """JR-10 is a 2026-07-28 rule: a legacy answer is taken as it is, extra member and all."""
    with trio.fail_after(10):
        async with open_demo(None, era="legacy") as client:
            result = await client.call_tool("odd_result", {})
    assert (result.is_error, result.text()) == (False, "half")


# -- UT-R09: input the client never declared ----------------------------------------------------------------


async def test_an_input_request_for_an_undeclared_capability_is_refused(record: Record) -> None:
    """UT-R09 ("Servers MUST NOT send an inputRequests that the client has not declared support
    for"): the client declared elicitation and sampling but no roots; a round asking for
    ``roots/list`` fails the call with RemoteProtocolError naming it, and no retry is sent."""
    handlers = Handlers()
    with trio.fail_after(10):
        async with open_demo(
            record, era="modern", elicitation=handlers.elicitation, sampling=handlers.sampling
        ) as client:
            with pytest.raises(RemoteProtocolError) as info:
                await client.call_tool("ask_undeclared", {})
    assert str(info.value) == (
        "server 'demo' asked for 'roots/list' during 'tools/call', a capability this client did not "
        "declare; configure a handler for it"
    )
    (call,) = requests(record, "tools/call")
    assert call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {
        "sampling": {},
        "elicitation": {"form": {}},
    }
    assert (handlers.elicited, handlers.sampled) == ([], [])
