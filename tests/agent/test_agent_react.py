"""Text tool mode (ReAct) for models without native tool calling: the strict parser, the
streamed split of thought and answer, and a run where a malformed reply is fed back to the model
as an observation and the run goes on to call a real server and answer."""

from __future__ import annotations

import json

import pytest
from _agent_fake_llm import FakeLLM
from _agent_servers import config, time_server
from _agent_wire import openai_request, openai_stream

from mcpwire.agent import Agent, AgentPolicy, Final, OpenAIProvider, TextDelta, ToolResult
from mcpwire.agent.events import RunEvent
from mcpwire.agent.react import Action, FinalAnswer, Malformed, ThoughtSplitter, parse_reply
from mcpwire.host import Host

TOOLS = {"time__get_current_time", "time__convert_time"}


def test_an_action_with_its_input() -> None:
    reply = 'Thought: I need the time.\nAction: time__get_current_time\nAction Input: {"timezone": "UTC"}'
    assert parse_reply(reply, TOOLS) == Action("time__get_current_time", '{"timezone": "UTC"}', {"timezone": "UTC"})


def test_a_fenced_input_and_a_trailing_observation_label_are_accepted() -> None:
    reply = 'Action: `time__get_current_time`\nAction Input:\n```json\n{"timezone": "UTC"}\n```\nObservation:'
    assert parse_reply(reply, TOOLS) == Action("time__get_current_time", '{"timezone": "UTC"}', {"timezone": "UTC"})


def test_a_final_answer() -> None:
    assert parse_reply("Thought: I know.\nFinal Answer: It is noon.\n", TOOLS) == FinalAnswer("It is noon.")


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (
            "It is noon.",
            "the reply has neither 'Action:' with 'Action Input:' nor 'Final Answer:'; reply in the format given.",
        ),
        (
            "Action: time__get_current_time\nAction Input: {}\nFinal Answer: noon",
            "the reply has both an Action and a Final Answer; give one of them per reply.",
        ),
        ("Final Answer:   ", "the Final Answer is empty; write the answer after 'Final Answer:'."),
        (
            "Action: time__get_weather\nAction Input: {}",
            "there is no tool named 'time__get_weather'; the tools are: time__convert_time, time__get_current_time.",
        ),
        (
            "Action: time__get_current_time",
            "the Action has no 'Action Input:' line after it; give the arguments as a JSON object.",
        ),
        (
            "Action: time__get_current_time\nAction Input: {}\nAction: time__convert_time\nAction Input: {}",
            "the reply has more than one Action; use one tool per reply.",
        ),
        (
            "Action: time__get_current_time\nAction Input: [1]",
            "the Action Input must be a JSON object (use {} for none).",
        ),
        (
            'Action: time__get_current_time\nAction Input: {"a": 1} and more',
            "the Action Input has text after its JSON object; give the object alone, then stop.",
        ),
        (
            "Action: time__get_current_time\nAction Input:",
            "the Action Input is empty; give the arguments as a JSON object (use {} for none).",
        ),
    ],
)
def test_malformed_replies_say_what_is_wrong(reply: str, problem: str) -> None:
    assert parse_reply(reply, TOOLS) == Malformed(problem)


def test_bad_json_input_names_the_decoder_error() -> None:
    parsed = parse_reply('Action: time__get_current_time\nAction Input: {"timezone": }', TOOLS)
    assert isinstance(parsed, Malformed)
    assert parsed.problem.startswith("the Action Input is not valid JSON (Expecting value: line 1 column 14")


@pytest.mark.parametrize("size", [1, 2, 3, 5, 64])
def test_the_splitter_finds_the_answer_mark_across_chunks(size: int) -> None:
    text = "Thought: easy.\nFinal Answer: It is noon. Final Answer: is quoted."
    splitter = ThoughtSplitter()
    pieces = [p for i in range(0, len(text), size) for p in splitter.feed(text[i : i + size])] + splitter.flush()
    thought = "".join(t for t, is_thought in pieces if is_thought)
    answer = "".join(t for t, is_thought in pieces if not is_thought)
    assert (thought, answer) == ("Thought: easy.\nFinal Answer:", "It is noon. Final Answer: is quoted.")


@pytest.mark.real
async def test_a_react_run_recovers_from_a_malformed_reply_and_calls_a_real_server(llm: FakeLLM) -> None:
    llm.add(
        openai_stream("Thought: I will check.\nAction: time__get_time\nAction Input: {}"),
        openai_stream('Thought: right name.\nAction: time__get_current_time\nAction Input: {"timezone": "Asia/Tokyo"}'),
        openai_stream("Thought: I have it.\nFinal Answer: It is evening in Tokyo."),
    )
    provider = OpenAIProvider("small-model", base_url=llm.base_url + "/v1")
    events: list[RunEvent] = []
    async with Host(config(time=time_server())) as host, provider:
        agent = Agent(host, provider, system="Be brief.", policy=AgentPolicy(tool_mode="react"))
        async with agent.run("What time is it in Tokyo?") as run:
            events = [event async for event in run]
    final = events[-1]
    assert isinstance(final, Final) and final.text == "It is evening in Tokyo."
    assert (final.steps, final.tool_calls) == (3, 1)
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert (result.call_id, result.outcome) == ("react_2", "ok")
    assert json.loads(result.text)["timezone"] == "Asia/Tokyo"
    answer = "".join(e.text for e in events if isinstance(e, TextDelta) and not e.thought)
    assert answer == "It is evening in Tokyo."
    # no native tools on the wire: the tools are in the system prompt, requests stop at Observation
    first = openai_request(llm.requests[0].json)
    assert "tools" not in first and first["stop"] == ["\nObservation:"]
    system = first["messages"][0]["content"]
    assert system.startswith("Be brief.\n\nYou can use the tools listed below.")
    assert "- time__get_current_time: " in system
    second = openai_request(llm.requests[1].json)["messages"]
    assert second[-1] == {
        "role": "user",
        "content": "Observation: Your reply did not follow the format: there is no tool named 'time__get_time'; "
        "the tools are: time__convert_time, time__get_current_time.",
    }
    third = openai_request(llm.requests[2].json)["messages"]
    assert third[-1]["role"] == "user" and third[-1]["content"].startswith("Observation: {")
