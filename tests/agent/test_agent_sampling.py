"""Sampling: server-everything's ``trigger-sampling-request`` makes the server ask the client's
model for a message in the middle of a tool call; the run shows it as an approval of kind
``sampling``, and once approved the same provider writes the message (or, denied, the server
gets the refusal and the model is told)."""

from __future__ import annotations

import pytest
from _agent_fake_llm import FakeLLM
from _agent_servers import config, everything_server
from _agent_wire import anthropic_request, anthropic_stream

from mcpwire.agent import AnthropicProvider, ApprovalRequired, Final, SamplingResponder, ToolResult
from mcpwire.agent.agent import Agent
from mcpwire.agent.events import RunEvent
from mcpwire.client import ClientOptions
from mcpwire.host import Host

pytestmark = pytest.mark.real

PROMPT = "Resource trigger-sampling-request context: Write a haiku about wires"
CALL = ("toolu_1", "everything__trigger-sampling-request", '{"prompt": "Write a haiku about wires", "maxTokens": 60}')


async def _run(llm: FakeLLM, approve: bool) -> tuple[list[RunEvent], SamplingResponder]:
    provider = AnthropicProvider("fake-claude", base_url=llm.base_url, api_key="k")
    sampling = SamplingResponder(provider)
    events: list[RunEvent] = []
    host = Host(config(everything=everything_server()), client_options=ClientOptions(sampling=sampling))
    async with provider, host, Agent(host, provider, sampling=sampling).run("Ask the server for a haiku") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ApprovalRequired) and event.kind == "tool":
                event.approve()  # the server's tool itself (its name says it triggers something)
            elif isinstance(event, ApprovalRequired):
                assert event.risk == "medium"
                assert event.arguments == {  # what the server asks, shown to the person deciding
                    "messages": [{"role": "user", "text": PROMPT}],
                    "maxTokens": 60,
                    "systemPrompt": "You are a helpful test server.",
                }
                if approve:
                    event.approve()
                else:
                    event.deny("no haiku today")
    assert [e.kind for e in events if isinstance(e, ApprovalRequired)][-1] == "sampling"
    return events, sampling


async def test_an_approved_sampling_request_is_answered_by_the_same_provider(llm: FakeLLM) -> None:
    llm.add(
        anthropic_stream("", [CALL]),
        anthropic_stream("Copper threads hum low"),  # the sampling request's answer
        anthropic_stream("The server got its haiku."),
    )
    events, sampling = await _run(llm, approve=True)
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.outcome == "ok" and "Copper threads hum low" in result.text
    assert isinstance(events[-1], Final) and events[-1].text == "The server got its haiku."
    asked = anthropic_request(llm.requests[1].json)
    assert asked["messages"] == [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]
    assert asked["system"] == "You are a helpful test server."
    assert asked["max_tokens"] == 60 and "tools" not in asked
    assert (sampling.answered, sampling.refused) == (1, 0)


async def test_a_denied_sampling_request_is_refused_to_the_server(llm: FakeLLM) -> None:
    llm.add(anthropic_stream("", [CALL]), anthropic_stream("The server was refused."))
    events, sampling = await _run(llm, approve=False)
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    assert "User rejected sampling request: no haiku today" in result.text
    assert len(llm.requests) == 2  # the model was not asked to write the message
    assert (sampling.answered, sampling.refused) == (0, 1)
