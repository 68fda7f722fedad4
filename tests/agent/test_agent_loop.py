"""The loop driving real MCP servers as tools (mcp-server-time, server-everything, server-memory)
through the host, with a scripted provider on loopback in both wire formats: parallel calls
across servers, tool errors, malformed arguments, unknown names, oversized results, budgets,
the deadline, provider failures, cancellation, and the events' JSON form."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import trio
from _agent_fake_llm import FakeLLM, Reply
from _agent_servers import config, everything_server, time_server
from _agent_wire import anthropic_request, anthropic_stream, openai_request, openai_stream

from mcpwire.agent import (
    Agent,
    AgentPolicy,
    AnthropicProvider,
    Failed,
    Final,
    Message,
    OpenAIProvider,
    RunState,
    StateChanged,
    StepFinished,
    TextDelta,
    ToolCallStarted,
    ToolResult,
    decode_event,
)
from mcpwire.agent.events import RunEvent
from mcpwire.host import Host

pytestmark = pytest.mark.real


def _openai(llm: FakeLLM) -> OpenAIProvider:
    return OpenAIProvider("fake-model", base_url=llm.base_url + "/v1", api_key="sk-test")


async def _events(agent: Agent, prompt: str) -> list[RunEvent]:
    async with agent.run(prompt) as run:
        return [event async for event in run]


def _of(events: list[RunEvent], kind: type) -> list:  # type: ignore[type-arg]
    return [e for e in events if isinstance(e, kind)]


async def test_parallel_calls_across_two_real_servers_then_an_answer(llm: FakeLLM, tmp_path: Path) -> None:
    llm.add(
        openai_stream(
            "Let me look.",
            [
                ("call_t", "time__get_current_time", '{"timezone": "Asia/Tokyo"}'),
                ("call_e", "everything__echo", '{"message": "hello from the model"}'),
            ],
        ),
        openai_stream("It is night in Tokyo, and the echo said hello.", usage=(40, 12)),
    )
    audit = tmp_path / "audit.jsonl"
    async with Host(config(time=time_server(), everything=everything_server()), audit=audit) as host, _openai(llm) as p:
        events = await _events(Agent(host, p, system="Be brief.", caller="tests"), "Time in Tokyo, and echo hello")
    final = events[-1]
    assert isinstance(final, Final)
    assert final.text == "It is night in Tokyo, and the echo said hello."
    assert (final.steps, final.tool_calls, final.usage.input_tokens, final.usage.output_tokens) == (2, 2, 50, 17)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    states = [e.state for e in _of(events, StateChanged)]
    assert states == [RunState.REASONING, RunState.CALLING_TOOLS, RunState.REASONING, RunState.FINISHED]
    started = {e.call_id: e for e in _of(events, ToolCallStarted)}
    assert (started["call_t"].server, started["call_t"].tool) == ("time", "get_current_time")
    assert started["call_e"].arguments == {"message": "hello from the model"}
    results = {e.call_id: e for e in _of(events, ToolResult)}
    assert json.loads(results["call_t"].text)["timezone"] == "Asia/Tokyo"
    assert results["call_e"].text == "Echo: hello from the model"
    assert {r.outcome for r in results.values()} == {"ok"}
    assert "".join(e.text for e in _of(events, TextDelta) if e.step == 1) == "Let me look."
    # the second request carries both results, as the vendor's type has them
    body = openai_request(llm.requests[1].json)
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_t", "call_e"]
    exported = {t["function"]["name"] for t in body["tools"]}
    assert {"time__get_current_time", "time__convert_time", "everything__echo"} <= exported
    # every call is in the audit log with the run's id and the caller
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert {(r["tool"], r["run_id"], r["caller"]) for r in records} == {
        ("get_current_time", final.run_id, "tests"),
        ("echo", final.run_id, "tests"),
    }


async def test_anthropic_format_with_tool_errors_bad_arguments_and_unknown_names(llm: FakeLLM) -> None:
    llm.add(
        anthropic_stream(
            "",
            [
                ("toolu_1", "time__get_current_time", '{"timezone": "Mars/Olympus_Mons"}'),
                ("toolu_2", "time__convert_time", '{"source_timezone": "UTC",'),
                ("toolu_3", "time__get_weather", "{}"),
            ],
        ),
        anthropic_stream("I could not tell the time on Mars."),
    )
    provider = AnthropicProvider("fake-claude", base_url=llm.base_url, api_key="k")
    async with Host(config(time=time_server())) as host, provider:
        events = await _events(Agent(host, provider), "What time is it on Mars?")
    assert isinstance(events[-1], Final)
    results = {e.call_id: e for e in _of(events, ToolResult)}
    assert results["toolu_1"].outcome == "tool_error" and results["toolu_1"].is_error
    assert "Mars/Olympus_Mons" in results["toolu_1"].text
    assert results["toolu_2"].outcome == "invalid_arguments"
    assert results["toolu_2"].text.startswith("not run: the arguments are not valid JSON (")
    assert results["toolu_3"].outcome == "unknown_tool"
    assert results["toolu_3"].text == (
        "no tool named 'time__get_weather' is available; the tools are: time__convert_time, time__get_current_time"
    )
    started = {e.call_id: e for e in _of(events, ToolCallStarted)}
    assert (started["toolu_2"].arguments, started["toolu_2"].raw_arguments) == (None, '{"source_timezone": "UTC",')
    assert (started["toolu_3"].server, started["toolu_3"].tool) == (None, None)
    body = anthropic_request(llm.requests[1].json)
    results_turn = body["messages"][-1]
    assert [b["tool_use_id"] for b in results_turn["content"]] == ["toolu_1", "toolu_2", "toolu_3"]
    assert all(b.get("is_error") for b in results_turn["content"])


async def test_oversized_results_are_cut_with_a_marker(llm: FakeLLM) -> None:
    long = "x" * 5000
    llm.add(openai_stream("", [("c1", "everything__echo", json.dumps({"message": long}))]), openai_stream("done"))
    async with Host(config(everything=everything_server())) as host, _openai(llm) as p:
        events = await _events(Agent(host, p, policy=AgentPolicy(result_chars=1000)), "echo")
    (result,) = _of(events, ToolResult)
    assert result.truncated and len(result.text) <= 1000
    assert result.text.endswith("]") and "[... cut: the result has 5,006 characters; only the first" in result.text
    sent = [m for m in openai_request(llm.requests[1].json)["messages"] if m["role"] == "tool"]
    assert sent[0]["content"] == result.text


async def test_the_step_budget_ends_the_run_before_calling_unused_tools(llm: FakeLLM) -> None:
    llm.add(openai_stream("", [("c1", "time__get_current_time", '{"timezone": "UTC"}')]))
    async with Host(config(time=time_server())) as host, _openai(llm) as p:
        events = await _events(Agent(host, p, max_steps=1), "time?")
    failed = events[-1]
    assert isinstance(failed, Failed) and failed.kind == "budget"
    assert failed.reason == "the step budget of 1 requests is spent and the model still asks for tools"
    assert not _of(events, ToolCallStarted)
    assert _of(events, StateChanged)[-1].state is RunState.FAILED


async def test_the_tool_call_and_token_budgets(llm: FakeLLM) -> None:
    two = [("a", "time__get_current_time", '{"timezone": "UTC"}'), ("b", "time__get_current_time", "{}")]
    llm.add(openai_stream("", two), openai_stream("", two[:1], usage=(900, 200)))
    async with Host(config(time=time_server())) as host, _openai(llm) as p:
        events = await _events(Agent(host, p, policy=AgentPolicy(max_tool_calls=1)), "x")
        assert events[-1] == Failed(
            run_id=events[-1].run_id,
            seq=events[-1].seq,
            kind="budget",
            reason="the model asked for 2 more tool call(s) after 0; the budget is 1 per run",
            usage=events[-1].usage,
            steps=1,
        )
        events = await _events(Agent(host, p, policy=AgentPolicy(max_tokens=1000)), "x")
    failed = events[-1]
    assert isinstance(failed, Failed) and failed.reason == "the run used 1100 tokens; the budget is 1000"


async def test_a_provider_failure_ends_the_run_naming_the_provider(llm: FakeLLM) -> None:
    llm.add(Reply(status=400, json={"error": {"message": "model not found", "type": "invalid_request_error"}}))
    async with Host(config()) as host, _openai(llm) as p:
        events = await _events(Agent(host, p), "x")
    failed = events[-1]
    assert isinstance(failed, Failed) and failed.kind == "provider"
    assert failed.provider == f"openai model 'fake-model' at 127.0.0.1:{llm.port}"
    assert failed.reason == (
        f"provider openai model 'fake-model' at 127.0.0.1:{llm.port}: HTTP 400 Bad Request: model not found "
        "(invalid_request_error)"
    )


async def test_a_dropped_stream_gives_failed_after_the_text_it_streamed(llm: FakeLLM) -> None:
    llm.add(openai_stream("Once upon a time", pieces=4, drop_after=3))
    async with Host(config()) as host, _openai(llm) as p:
        events = await _events(Agent(host, p), "story")
    assert "".join(e.text for e in _of(events, TextDelta)) == "Once upo"
    failed = events[-1]
    assert isinstance(failed, Failed) and failed.kind == "provider"
    assert failed.reason.startswith(f"provider openai model 'fake-model' at 127.0.0.1:{llm.port}: the stream broke")


async def test_the_deadline_ends_a_run_whose_model_is_slow(llm: FakeLLM) -> None:
    slow = openai_stream("a b c d e f", pieces=6)
    slow.pause = 5.0
    llm.add(slow)
    async with Host(config()) as host, _openai(llm) as p:
        with trio.fail_after(20):
            events = await _events(Agent(host, p, deadline=0.5), "x")
    failed = events[-1]
    assert isinstance(failed, Failed)
    assert (failed.kind, failed.reason) == ("deadline", "the run did not finish within its deadline of 0.5 s")


@pytest.mark.slow
async def test_leaving_the_block_cancels_a_tool_call_in_flight(llm: FakeLLM) -> None:
    llm.add(openai_stream("", [("c1", "everything__trigger-long-running-operation", '{"duration": 30, "steps": 3}')]))
    async with Host(config(everything=everything_server())) as host, _openai(llm) as p:
        agent = Agent(host, p)
        started = trio.current_time()
        async with agent.run("run long") as run:
            async for event in run:
                if isinstance(event, ToolCallStarted):
                    await trio.sleep(0.5)  # the call is on the wire
                    break
        assert trio.current_time() - started < 15
        assert run.outcome is not None and run.outcome.kind == "cancelled"  # type: ignore[union-attr]
        # the server is still there, and its next call is answered
        result = await host.call_tool("everything__echo", {"message": "still here"})
        assert result.text == "Echo: still here"


async def test_every_event_is_json_and_decodes_back(llm: FakeLLM) -> None:
    llm.add(openai_stream("hmm", [("c1", "time__get_current_time", '{"timezone": "UTC"}')]), openai_stream("ok"))
    async with Host(config(time=time_server())) as host, _openai(llm) as p:
        events = await _events(Agent(host, p), "x")
    for event in events:
        line = msgspec.json.encode(event)
        assert b"\n" not in line
        assert decode_event(line) == event
    kinds = [json.loads(msgspec.json.encode(e))["type"] for e in events]
    assert kinds[0] == "state_changed" and kinds[-1] == "final"
    assert {"tool_call_delta", "tool_call_started", "tool_result", "step_finished", "text_delta"} <= set(kinds)
    assert sum(isinstance(e, StepFinished) for e in events) == 2


async def test_a_conversation_continues_from_the_last_run(llm: FakeLLM) -> None:
    llm.add(openai_stream("Hi Ada."), openai_stream("Your name is Ada."))
    async with Host(config(time=time_server())) as host, _openai(llm) as p:
        agent = Agent(host, p)
        async with agent.run("My name is Ada.") as first:
            await first.result()
        async with agent.run([*first.messages, Message.user("What is my name?")]) as second:
            outcome = await second.result()
    assert isinstance(outcome, Final) and outcome.text == "Your name is Ada."
    sent = openai_request(llm.requests[1].json)["messages"]
    assert sent == [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hi Ada."},
        {"role": "user", "content": "What is my name?"},
    ]
