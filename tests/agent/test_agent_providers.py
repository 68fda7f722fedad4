"""The providers against a scripted fake on loopback: both wire formats, streamed and whole,
parallel tool calls, malformed arguments, refusals that pass (429, 5xx with Retry-After) and
those that do not, streams that break, end early or carry garbage. Every request is checked with
the vendor's own request type."""

from __future__ import annotations

import json
import logging

import pytest
import trio
from _agent_fake_llm import FakeLLM, Recorded, Reply
from _agent_wire import (
    anthropic_request,
    anthropic_stream,
    anthropic_whole,
    openai_request,
    openai_stream,
    openai_whole,
)

from mcpwire.agent import (
    AnthropicProvider,
    ImagePart,
    Message,
    ModelRequest,
    OpenAIProvider,
    PresetError,
    ProviderError,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolSpec,
    make_provider,
)
from mcpwire.agent.providers import TextChunk, ToolCallChunk, retry_after

KEY = "sk-test-0123456789abcdef0123456789"
TOOLS = (
    ToolSpec(
        name="time__get_current_time",
        description="Get the time",
        input_schema={"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
    ),
    ToolSpec(name="demo__ping", description="", input_schema={"type": "object"}),
)
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.fixture
async def llm(nursery: trio.Nursery) -> FakeLLM:
    fake = FakeLLM()
    await nursery.start(fake.serve)
    return fake


def _openai(llm: FakeLLM, **options: object) -> OpenAIProvider:
    return OpenAIProvider("fake-model", base_url=llm.base_url + "/v1", api_key=KEY, **options)  # type: ignore[arg-type]


def _anthropic(llm: FakeLLM, **options: object) -> AnthropicProvider:
    return AnthropicProvider("fake-claude", base_url=llm.base_url, api_key=KEY, **options)  # type: ignore[arg-type]


def _conversation() -> tuple[Message, ...]:
    """Every kind of part: a user's text and image, the model's text and two calls (one with
    arguments that are not JSON), their results (an image in one), and a follow-up question."""
    return (
        Message.user("What time is it, and what is in this picture?", ImagePart(media_type="image/png", data=PNG)),
        Message(
            role="assistant",
            parts=(
                TextPart(text="Let me check."),
                ToolCall.parse("call_a", "time__get_current_time", '{"timezone": "UTC"}'),
                ToolCall.parse("call_b", "demo__ping", "{not json"),
            ),
        ),
        Message(
            role="tool",
            parts=(
                ToolResultPart(
                    call_id="call_a",
                    name="time__get_current_time",
                    content=(TextPart(text="12:00"), ImagePart(media_type="image/png", data=PNG)),
                ),
                ToolResultPart(
                    call_id="call_b", name="demo__ping", content=(TextPart(text="bad arguments"),), is_error=True
                ),
            ),
        ),
        Message.user("Thanks. And in Tokyo?"),
    )


async def _collect(provider: OpenAIProvider | AnthropicProvider, request: ModelRequest) -> tuple[list[object], object]:
    chunks: list[object] = []

    async def on_chunk(chunk: object) -> None:
        chunks.append(chunk)

    completion = await provider.complete(request, on_chunk)  # type: ignore[arg-type]
    return chunks, completion


# -- OpenAI ---------------------------------------------------------------------------------------


async def test_openai_streams_text_and_counts_usage(llm: FakeLLM) -> None:
    llm.add(openai_stream("Hello there, world", pieces=3, usage=(12, 7)))
    async with _openai(llm) as provider:
        chunks, completion = await _collect(provider, ModelRequest(messages=(Message.user("hi"),), system="Be brief."))
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == ["Hello ", "there,", " world"]
    assert completion.message.text == "Hello there, world"  # type: ignore[attr-defined]
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (12, 7)  # type: ignore[attr-defined]
    assert completion.stop_reason == "end_turn"  # type: ignore[attr-defined]
    (request,) = llm.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = openai_request(request.json)
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert body["stream_options"] == {"include_usage": True}
    assert "tools" not in body


async def test_openai_assembles_parallel_tool_calls_from_fragments(llm: FakeLLM) -> None:
    calls = [("call_1", "time__get_current_time", '{"timezone": "Asia/Tokyo"}'), ("call_2", "demo__ping", "{}")]
    llm.add(openai_stream("", calls))
    async with _openai(llm) as provider:
        chunks, completion = await _collect(provider, ModelRequest(messages=(Message.user("time?"),), tools=TOOLS))
    got = completion.message.tool_calls  # type: ignore[attr-defined]
    assert [(c.id, c.name, c.arguments) for c in got] == [
        ("call_1", "time__get_current_time", {"timezone": "Asia/Tokyo"}),
        ("call_2", "demo__ping", {}),
    ]
    assert completion.stop_reason == "tool_use"  # type: ignore[attr-defined]
    fragments = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert fragments[0] == ToolCallChunk(0, "call_1", "time__get_current_time", "")
    assert "".join(c.arguments_delta for c in fragments if c.index == 0) == '{"timezone": "Asia/Tokyo"}'
    body = openai_request(llm.requests[0].json)
    assert [t["function"]["name"] for t in body["tools"]] == ["time__get_current_time", "demo__ping"]
    assert body["tools"][1]["function"]["parameters"] == {"type": "object", "properties": {}}


async def test_openai_keeps_malformed_arguments_with_the_reason(llm: FakeLLM) -> None:
    llm.add(openai_stream("", [("call_1", "demo__ping", '{"a": 1,'), ("call_2", "demo__ping", "[1, 2]")]))
    async with _openai(llm) as provider:
        _, completion = await _collect(provider, ModelRequest(messages=(Message.user("x"),), tools=TOOLS))
    bad, listed = completion.message.tool_calls  # type: ignore[attr-defined]
    assert bad.arguments is None and bad.raw_arguments == '{"a": 1,'
    assert bad.error is not None and bad.error.startswith("the arguments are not valid JSON (")
    assert listed.error == "the arguments must be a JSON object, not an array"


async def test_openai_sends_the_whole_conversation_in_its_own_shapes(llm: FakeLLM) -> None:
    llm.add(openai_whole("It is 21:00 in Tokyo."))
    async with _openai(llm, stream=False) as provider:
        _, completion = await _collect(provider, ModelRequest(messages=_conversation(), tools=TOOLS, max_tokens=50))
    assert completion.message.text == "It is 21:00 in Tokyo."  # type: ignore[attr-defined]
    body = openai_request(llm.requests[0].json)
    assert "stream" not in body and body["max_tokens"] == 50
    user, assistant, result_a, result_b, follow_up = body["messages"]
    assert user["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert assistant["tool_calls"][1]["function"] == {"name": "demo__ping", "arguments": "{not json"}
    assert result_a == {"role": "tool", "tool_call_id": "call_a", "content": "12:00"}
    assert result_b == {"role": "tool", "tool_call_id": "call_b", "content": "bad arguments"}
    assert follow_up == {"role": "user", "content": "Thanks. And in Tokyo?"}


async def test_openai_whole_answer_with_tool_calls(llm: FakeLLM) -> None:
    llm.add(openai_whole(None, [("call_9", "demo__ping", '{"n": 1}')]))
    async with _openai(llm, stream=False) as provider:
        chunks, completion = await _collect(provider, ModelRequest(messages=(Message.user("x"),), tools=TOOLS))
    assert [(c.id, c.arguments) for c in completion.message.tool_calls] == [("call_9", {"n": 1})]  # type: ignore[attr-defined]
    assert chunks == [ToolCallChunk(0, "call_9", "demo__ping", '{"n": 1}')]


async def test_a_429_with_retry_after_is_retried_then_succeeds(llm: FakeLLM) -> None:
    llm.add(
        Reply(
            status=429,
            json={"error": {"message": "Rate limit reached", "type": "requests"}},
            headers={"retry-after-ms": "50"},
        ),
        Reply(status=503, json={"error": "loading model"}, headers={"retry-after": "0"}),
        openai_stream("ok"),
    )
    async with _openai(llm) as provider:
        started = trio.current_time()
        _, completion = await _collect(provider, ModelRequest(messages=(Message.user("x"),)))
        waited = trio.current_time() - started
    assert completion.message.text == "ok"  # type: ignore[attr-defined]
    assert len(llm.requests) == 3
    assert waited >= 0.05
    assert llm.requests[0].body == llm.requests[2].body  # the same request each time


async def test_retries_are_bounded_and_the_error_names_provider_and_status(llm: FakeLLM) -> None:
    llm.add(*[Reply(status=500, json={"error": {"message": "boom"}}, headers={"retry-after": "0"})] * 3)
    async with _openai(llm, max_retries=2) as provider:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))
    assert str(caught.value) == (
        f"provider openai model 'fake-model' at 127.0.0.1:{llm.port}: HTTP 500 Internal Server Error: boom"
    )
    assert caught.value.status == 500 and caught.value.retryable
    assert len(llm.requests) == 3


async def test_a_retry_after_longer_than_allowed_fails_at_once(llm: FakeLLM) -> None:
    llm.add(Reply(status=429, json={"error": {"message": "slow down"}}, headers={"retry-after": "3600"}))
    async with _openai(llm, max_retry_wait=30) as provider:
        with pytest.raises(
            ProviderError,
            match=r"^provider openai model 'fake-model' at 127\.0\.0\.1:\d+: HTTP 429 Too Many Requests: slow down "
            r"\(it asks to retry after 3600 s, longer than the 30 s this provider waits\)$",
        ):
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))
    assert len(llm.requests) == 1


async def test_a_refused_key_is_not_retried_and_never_shown(llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    llm.add(
        Reply(
            status=401,
            json={"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}},
        )
    )
    async with _openai(llm) as provider:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))
    assert str(caught.value).endswith("HTTP 401 Unauthorized: Incorrect API key provided: *** (invalid_request_error)")
    assert KEY not in caplog.text and KEY not in repr(provider)
    assert len(llm.requests) == 1


async def test_a_stream_that_breaks_mid_answer_fails_naming_the_provider(llm: FakeLLM) -> None:
    llm.add(openai_stream("Hello there, world", pieces=3, drop_after=3))
    seen: list[str] = []

    async def on_chunk(chunk: object) -> None:
        if isinstance(chunk, TextChunk):
            seen.append(chunk.text)

    async with _openai(llm) as provider:
        with pytest.raises(
            ProviderError,
            match=r"^provider openai model 'fake-model' at 127\.0\.0\.1:\d+: the stream broke before the answer "
            r"was complete: ",
        ):
            await provider.complete(ModelRequest(messages=(Message.user("x"),)), on_chunk)
    assert seen == ["Hello ", "there,"]
    assert len(llm.requests) == 1  # part of the answer was passed on: not retried


async def test_a_stream_that_ends_without_a_finish_is_incomplete(llm: FakeLLM) -> None:
    reply = openai_stream("partial", pieces=1)
    assert reply.events is not None
    reply.events = reply.events[:2]  # the role chunk and the text; then a clean end
    llm.add(reply)
    async with _openai(llm) as provider:
        with pytest.raises(
            ProviderError,
            match=r": the stream ended before the answer was complete \(no finish_reason after 2 events\)$",
        ):
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))


async def test_a_stream_of_garbage_fails_naming_what_came(llm: FakeLLM) -> None:
    llm.add(Reply(events=[(None, "<html>\x1b[31mnot json")]))
    async with _openai(llm) as provider:
        with pytest.raises(ProviderError, match=r": sent an event that is not JSON: '<html>\\x1b\[31mnot json'$"):
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))


async def test_an_answer_that_is_not_an_event_stream_is_refused(llm: FakeLLM) -> None:
    llm.add(Reply(raw=b"<html>gateway</html>", content_type="text/html"))
    async with _openai(llm) as provider:
        with pytest.raises(
            ProviderError,
            match=r": expected an event stream \(text/event-stream\), got text/html: <html>gateway</html>$",
        ):
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))


async def test_an_error_inside_the_stream_fails(llm: FakeLLM) -> None:
    llm.add(Reply(events=[(None, json.dumps({"error": {"message": "context too long", "type": "invalid_request"}}))]))
    async with _openai(llm) as provider:
        with pytest.raises(
            ProviderError, match=r": the stream reported an error: context too long \(invalid_request\)$"
        ):
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))


async def test_a_refused_connection_is_retried_then_reported() -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAIProvider("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    async with provider:
        with pytest.raises(
            ProviderError, match=rf"^provider openai model 'm' at 127\.0\.0\.1:{port}: cannot reach it: "
        ):
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))


def test_keys_come_from_the_environment_and_are_required_by_the_vendors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(
        PresetError, match=r"^no API key for https://api\.openai\.com/v1: set OPENAI_API_KEY in the environment$"
    ):
        OpenAIProvider("gpt-4o-mini")
    with pytest.raises(
        PresetError, match=r"^no API key for https://api\.anthropic\.com: set MY_KEY in the environment$"
    ):
        make_provider("anthropic", "claude", api_key_env="MY_KEY")
    monkeypatch.setenv("MY_KEY", KEY)
    assert make_provider("anthropic", "claude", api_key_env="MY_KEY")._api_key == KEY
    local = make_provider("ollama", "llama3.2")  # Ollama needs no key
    assert (local.base_url, local._api_key, local.label) == (
        "http://127.0.0.1:11434/v1",
        None,
        "openai model 'llama3.2' at 127.0.0.1:11434",
    )


def test_retry_after_reads_seconds_milliseconds_and_dates() -> None:
    assert retry_after({"retry-after": "2.5"}) == 2.5
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


# -- Anthropic ------------------------------------------------------------------------------------


async def test_anthropic_streams_text_and_tool_use_blocks(llm: FakeLLM) -> None:
    llm.add(
        anthropic_stream(
            "Checking the time.", [("toolu_1", "time__get_current_time", '{"timezone": "UTC"}')], usage=(20, 9)
        )
    )
    async with _anthropic(llm) as provider:
        chunks, completion = await _collect(
            provider, ModelRequest(messages=(Message.user("time?"),), system="Be brief.", tools=TOOLS, stop=("END",))
        )
    assert completion.message.text == "Checking the time."  # type: ignore[attr-defined]
    (call,) = completion.message.tool_calls  # type: ignore[attr-defined]
    assert (call.id, call.name, call.arguments) == ("toolu_1", "time__get_current_time", {"timezone": "UTC"})
    assert completion.stop_reason == "tool_use"  # type: ignore[attr-defined]
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (20, 9)  # type: ignore[attr-defined]
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == "Checking the time."
    (request,) = llm.requests
    assert request.path == "/v1/messages"
    assert (request.headers["x-api-key"], request.headers["anthropic-version"]) == (KEY, "2023-06-01")
    assert "authorization" not in request.headers
    body = anthropic_request(request.json)
    assert (body["system"], body["max_tokens"], body["stop_sequences"]) == ("Be brief.", 4096, ["END"])
    assert body["tools"][0] == {
        "name": "time__get_current_time",
        "description": "Get the time",
        "input_schema": TOOLS[0].input_schema,
    }


async def test_anthropic_sends_the_whole_conversation_as_alternating_turns(llm: FakeLLM) -> None:
    llm.add(anthropic_whole("It is 21:00."))
    async with _anthropic(llm, stream=False) as provider:
        _, completion = await _collect(provider, ModelRequest(messages=_conversation(), tools=TOOLS))
    assert completion.message.text == "It is 21:00."  # type: ignore[attr-defined]
    body = anthropic_request(llm.requests[0].json)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    user, assistant, results = body["messages"]
    assert user["content"][1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert assistant["content"][2] == {"type": "tool_use", "id": "call_b", "name": "demo__ping", "input": {}}
    first, second, follow_up = results["content"]  # the results first, then the user's text
    assert first["tool_use_id"] == "call_a" and first["content"][1]["type"] == "image"
    assert second == {
        "type": "tool_result",
        "tool_use_id": "call_b",
        "content": [{"type": "text", "text": "bad arguments"}],
        "is_error": True,
    }
    assert follow_up == {"type": "text", "text": "Thanks. And in Tokyo?"}


async def test_anthropic_overload_mid_stream_fails(llm: FakeLLM) -> None:
    reply = anthropic_stream("Hello world")
    assert reply.events is not None
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    reply.events = [*reply.events[:3], ("error", json.dumps(overloaded))]
    llm.add(reply)
    async with _anthropic(llm) as provider:
        with pytest.raises(
            ProviderError,
            match=r"^provider anthropic model 'fake-claude' at 127\.0\.0\.1:\d+: the stream reported an error: "
            r"Overloaded \(overloaded_error\)$",
        ):
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))


async def test_anthropic_529_then_success(llm: FakeLLM) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    llm.add(Reply(status=529, json=overloaded, headers={"retry-after": "0"}), anthropic_stream("fine"))
    async with _anthropic(llm) as provider:
        completion = await provider.complete(ModelRequest(messages=(Message.user("x"),)))
    assert completion.message.text == "fine"
    assert len(llm.requests) == 2


async def test_anthropic_stream_cut_before_its_stop_reason(llm: FakeLLM) -> None:
    llm.add(anthropic_stream("Hello world", drop_after=4))
    async with _anthropic(llm) as provider:
        with pytest.raises(ProviderError, match=r": the stream broke before the answer was complete: "):
            await provider.complete(ModelRequest(messages=(Message.user("x"),)))


async def test_requests_are_recorded_as_sent(llm: FakeLLM) -> None:
    """The fake records what reaches it: a check on the test's own instrument."""

    def echo(request: Recorded) -> Reply:
        return openai_whole(f"{request.method} {request.path} {len(request.body)}")

    llm.add(echo)
    async with _openai(llm, stream=False) as provider:
        completion = await provider.complete(ModelRequest(messages=(Message.user("x"),)))
    assert completion.message.text == f"POST /v1/chat/completions {len(llm.requests[0].body)}"
