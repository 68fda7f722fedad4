"""A call made for another client (a proxy's) names that client explicitly: the host hands the
relay given to ``call_tool``, ``get_prompt`` and ``read_resource`` through its policies to the
connection's request, call by call; a relayed round's result is never cached; and an answer that
is the asker's to follow is a live server's answer, recorded as one, not a failure."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from _host_fakes import Factory, FakeServer

from mcpwire.client.relay import InputRequested, Relay, RelayedRound, TaskCreated
from mcpwire.errors import ToolExecutionError
from mcpwire.host import AuditRecord, Host, Risk, parse_config
from mcpwire.protocol.types import ServerCapabilities

CAPS = "io.modelcontextprotocol/clientCapabilities"


class ListSink:
    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)


def _host(factory: Factory, **options: object) -> Host:
    config = parse_config({"mcpServers": {"a": {"command": "fake", "policy": {"retries": 0, "breaker_failures": 2}}}})
    return Host(config, client_factory=factory, health_interval=0, ask_at=Risk.CRITICAL, **options)  # type: ignore[arg-type]


def _relay(name: str) -> Relay:
    async def ask(method: str, params: dict[str, object]) -> dict[str, object]:
        return {"asked": name}

    return Relay(round=RelayedRound(meta={CAPS: {"name": name}}), ask=ask)


async def test_each_call_reaches_the_connection_with_its_own_relay(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a", hang="", capabilities=ServerCapabilities(tools={}, prompts={}, resources={}))
    async with _host(Factory(server)) as host:
        alice, bob = _relay("alice"), _relay("bob")
        async with trio.open_nursery() as nursery:  # at once: neither sees the other's
            nursery.start_soon(lambda: host.call_tool("a__set_thing", {"q": "1"}, relay=alice))
            nursery.start_soon(lambda: host.call_tool("a__set_thing", {"q": "2"}, relay=bob))
        by_argument = {args["q"]: relay for (_, _, args), relay in zip(server.calls, server.relays, strict=True)}
        assert by_argument == {"1": alice, "2": bob}
        await host.get_prompt("a__greet", {"who": "x"}, relay=alice)
        await host.read_resource("a", "file:///docs/a.txt", relay=bob)
        await host.call_tool("a__set_thing", {"q": "3"})
        assert server.relays[2:] == [alice, bob, None]


async def test_a_relayed_rounds_answers_are_never_cached(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a")
    async with _host(Factory(server)) as host:
        answered = Relay(round=RelayedRound({"inputResponses": {"name": {"action": "accept"}}}))
        for _ in range(2):  # the result followed the asker's answers: each call reaches the server
            assert (await host.call_tool("a__get_thing", {"q": "1"}, relay=answered)).cached is False
        first = Relay(round=RelayedRound(meta={CAPS: {}}))  # a first round carries no answers
        assert (await host.call_tool("a__get_thing", {"q": "2"}, relay=first)).cached is False
        assert (await host.call_tool("a__get_thing", {"q": "2"}, relay=first)).cached is True
        assert len(server.calls) == 3


@pytest.mark.parametrize("answer", [InputRequested, TaskCreated])
async def test_an_answer_for_the_asker_is_recorded_as_an_answer_and_never_opens_the_breaker(
    autojump_clock: trio.testing.MockClock, answer: type[InputRequested | TaskCreated]
) -> None:
    server = FakeServer("a")
    sink = ListSink()
    async with _host(Factory(server), audit=sink) as host:
        result = {"resultType": "task" if answer is TaskCreated else "input_required"}
        server.call_error = answer(dict(result), method="tools/call", server="a")
        for _ in range(3):  # more than the breaker's 2 failures
            with pytest.raises(ToolExecutionError) as raised:
                await host.call_tool("a__set_thing", {"q": "1"}, relay=_relay("alice"))
            assert isinstance(raised.value.__cause__, answer)
            assert raised.value.__cause__.result == result
        assert host.breaker_for("a").opened == 0
        assert [(r.outcome, r.error) for r in sink.records] == [("ok", None)] * 3
