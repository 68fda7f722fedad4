"""Large ``tools/call`` answers are read in one pass; everything else still takes the generic path.

The dispatcher's ``classify`` tries a typed decode of a large message only while ``call_tool`` calls are
pending, and accepts it only as the answer of one of them. These tests check the fast path is
taken, and that the cases it must leave alone still come out right: a generic
``request("tools/call")`` running at the same time, a large answer of another method, and large
answers the typed decode cannot take (unknown content blocks, an error).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import trio
from _faulty import open_faulty

from mcpwire import RPCError
from mcpwire.client.dispatch import Dispatcher
from mcpwire.protocol.jsonrpc import Message
from mcpwire.protocol.session import ToolCallResponse

KIB = 1024


@pytest.fixture
def one_pass_answers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The sizes of the messages the client took in one pass (decoded typed and accepted as the
    answer of a ``call_tool``; a typed decode that is then refused is not counted)."""
    seen: list[int] = []
    classify = Dispatcher.classify

    def spy(self: Dispatcher, data: bytes) -> Message:
        message = classify(self, data)
        if isinstance(message, ToolCallResponse):
            seen.append(len(data))
        return message

    monkeypatch.setattr(Dispatcher, "classify", spy)
    yield seen


def answer_line(result: object) -> str:
    """A JSON-RPC answer for the fixture's ``raw`` tool (``%ID%`` becomes the request id)."""
    return json.dumps({"jsonrpc": "2.0", "id": 999999, "result": result}).replace("999999", "%ID%")


async def test_a_large_answer_is_read_once(one_pass_answers: list[int]) -> None:
    with trio.fail_after(20):
        async with open_faulty() as client:
            small = await client.call_tool("big", {"bytes": 100})
            large = await client.call_tool("big", {"bytes": 1024 * KIB})
    assert len(small.text()) == 100 and len(large.text()) == 1024 * KIB
    assert len(one_pass_answers) == 1 and one_pass_answers[0] > 1024 * KIB


async def test_a_generic_request_for_tools_call_keeps_its_raw_result(one_pass_answers: list[int]) -> None:
    """``client.request("tools/call")`` wants the raw result: its answer is never taken by the
    one-pass path, even while a ``call_tool`` is pending beside it."""
    results: dict[str, object] = {}

    async def typed() -> None:
        results["typed"] = (await client.call_tool("big", {"bytes": 200 * KIB})).text()

    async def generic() -> None:
        results["generic"] = await client.request("tools/call", {"name": "big", "arguments": {"bytes": 300 * KIB}})

    with trio.fail_after(20):
        async with open_faulty() as client, trio.open_nursery() as nursery:
            nursery.start_soon(typed)
            nursery.start_soon(generic)
    assert len(str(results["typed"])) == 200 * KIB
    generic_result = results["generic"]
    assert isinstance(generic_result, dict)
    assert len(generic_result["content"][0]["text"]) == 300 * KIB
    assert len(one_pass_answers) == 1  # the typed call's answer only


async def test_unknown_content_blocks_take_the_generic_path(one_pass_answers: list[int]) -> None:
    """A large answer whose blocks the typed decode does not know is still delivered whole."""
    block = {"type": "x-future-block", "payload": "y" * (64 * KIB)}
    line = answer_line({"content": [block, {"type": "text", "text": "after"}], "isError": False})
    with trio.fail_after(20):
        async with open_faulty() as client:
            result = await client.call_tool("raw", {"lines": [line]})
    assert result.text() == "after"
    assert one_pass_answers == []


async def test_a_large_error_answer_is_an_error(one_pass_answers: list[int]) -> None:
    line = json.dumps(
        {"jsonrpc": "2.0", "id": 999999, "error": {"code": -32602, "message": "bad", "data": "z" * (64 * KIB)}}
    ).replace("999999", "%ID%")
    with trio.fail_after(20):
        async with open_faulty() as client:
            with pytest.raises(RPCError) as failed:
                await client.call_tool("raw", {"lines": [line]})
    assert failed.value.code == -32602 and failed.value.data == "z" * (64 * KIB)
    assert one_pass_answers == []
