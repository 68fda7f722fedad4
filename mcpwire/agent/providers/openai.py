"""OpenAI-compatible Chat Completions: OpenAI, Ollama's ``/v1``, vLLM, DeepSeek, Zhipu GLM's
compatible endpoint, and others that speak ``POST {base_url}/chat/completions``.

Theory of operation: the conversation becomes ``messages`` (a ``system`` message first; the
model's tool calls as ``tool_calls`` with their arguments as the model wrote them; each result as
a ``tool`` message naming its ``tool_call_id``; user images as ``image_url`` data URLs), the tools
become ``function`` tools. Streamed answers are ``chat.completion.chunk`` events: text in
``delta.content``, tool calls in ``delta.tool_calls`` keyed by ``index`` (the id and name in the
first fragment, the arguments spread over the rest), ``finish_reason`` once, the usage in a last
chunk (asked for with ``stream_options.include_usage``), then ``[DONE]``. A stream that stops
before a ``finish_reason`` is incomplete; one that carries ``{"error": ...}`` failed. Tool results
take no images in this format; their text says an image was there.

The key is read from ``OPENAI_API_KEY`` (or the variable ``api_key_env`` names) and sent as
``Authorization: Bearer``; a local server (Ollama, vLLM) needs none, so a missing key is an error
only for ``api.openai.com``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any, Final

from ...protocol.sse import SSEEvent
from ..messages import (
    Completion,
    ImagePart,
    Message,
    ModelRequest,
    StopReason,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
)
from .base import (
    ChunkCallback,
    HttpProvider,
    TextChunk,
    ToolCallChunk,
    _error_message,
    answer,
    api_key_for,
    decode_event,
    replay,
)

__all__ = ["DEFAULT_BASE_URL", "OpenAIProvider", "openai_messages", "openai_tools"]

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
DEFAULT_KEY_ENV: Final = "OPENAI_API_KEY"
_STOP: Final[dict[str, StopReason]] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}


class OpenAIProvider(HttpProvider):
    """A model behind an OpenAI-compatible Chat Completions endpoint.

    Args:
        model: e.g. ``gpt-4o-mini``, or ``llama3.2`` on Ollama.
        base_url: ``https://api.openai.com/v1`` by default; Ollama's is
            ``http://127.0.0.1:11434/v1``.
        api_key: the key; by default read from the variable ``api_key_env`` names.
        api_key_env: where the key is read from (``OPENAI_API_KEY``).
        max_tokens_field: the request field that bounds the answer, for servers that want
            ``max_completion_tokens``.

    The other options are :class:`~mcpwire.agent.providers.base.HttpProvider`'s.

    Raises:
        PresetError: no key for ``api.openai.com``.
    """

    name = "openai"
    default_base_url = DEFAULT_BASE_URL
    path = "/chat/completions"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        max_tokens_field: str = "max_tokens",
        **options: Any,
    ) -> None:
        base = (base_url or DEFAULT_BASE_URL).rstrip("/")
        api_key = api_key_for(
            api_key, api_key_env, base_url=base, required_by="api.openai.com", default_env=DEFAULT_KEY_ENV
        )
        super().__init__(model, base_url=base, api_key=api_key, **options)
        self.max_tokens_field = max_tokens_field

    def _request_headers(self) -> dict[str, str]:
        headers = super()._request_headers()
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The JSON body for ``request`` (without ``extra_body``)."""
        body: dict[str, object] = {"model": self.model, "messages": openai_messages(request)}
        if request.tools:
            body["tools"] = openai_tools(request.tools)
        if request.max_tokens is not None:
            body[self.max_tokens_field] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.stop:
            body["stop"] = list(request.stop[:4])  # the format takes at most four
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _stream_state(self, on_chunk: ChunkCallback | None) -> _Stream:
        return _Stream(self, on_chunk)

    async def _complete_whole(self, body: Mapping[str, object], on_chunk: ChunkCallback | None) -> Completion:
        data = await self._post_json(self.path, body)
        if not isinstance(data, dict):
            raise self._error("the answer is not a JSON object")
        if "error" in data:
            raise self._error(f"the answer is an error: {_error_message(_json_bytes(data))}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._error("the answer has no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise self._error("the answer's first choice has no message")
        text = message.get("content") if isinstance(message.get("content"), str) else ""
        calls: list[ToolCall] = []
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise self._error("the answer's tool_calls is not a list")
        for index, raw in enumerate(raw_calls):
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise self._error(f"the answer's tool call {index} has no function name")
            arguments = function.get("arguments")
            call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else _call_id(index)
            calls.append(ToolCall.parse(call_id, function["name"], arguments if isinstance(arguments, str) else ""))
        await replay(on_chunk, text or "", calls)
        finish = choice.get("finish_reason")
        return _completion(text or "", calls, _usage(data.get("usage")), finish, data.get("model"))


class _Stream:
    """Assembles one streamed answer."""

    def __init__(self, provider: OpenAIProvider, on_chunk: ChunkCallback | None) -> None:
        self.provider = provider
        self.on_chunk = on_chunk
        self.text: list[str] = []
        self.calls: dict[int, list[str]] = {}  # index -> [id, name, arguments...]
        self.finish_reason: str | None = None
        self.done = False
        self.usage = Usage()
        self.model: str | None = None
        self.events = 0

    async def feed(self, event: SSEEvent) -> None:
        self.events += 1
        if event.data.strip() == "[DONE]":
            self.done = True
            return
        if self.done:
            return  # nothing counts after [DONE]
        data = decode_event(self.provider, event)
        if "error" in data:
            raise self.provider._error(f"the stream reported an error: {_error_message(_json_bytes(data))}")
        model = data.get("model")
        if isinstance(model, str):
            self.model = model
        if data.get("usage"):
            self.usage = _usage(data["usage"])
        choices = data.get("choices") or []
        if not isinstance(choices, list):
            raise self.provider._error("sent a chunk whose choices is not a list")
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                await self._choice(choice)

    async def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise self.provider._error("sent a chunk whose delta is not an object")
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            if self.on_chunk is not None:
                await self.on_chunk(TextChunk(content))
        fragments = delta.get("tool_calls") or []
        if not isinstance(fragments, list):
            raise self.provider._error("sent a chunk whose tool_calls is not a list")
        for position, fragment in enumerate(fragments):
            if isinstance(fragment, dict):
                await self._fragment(position, fragment)
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])

    async def _fragment(self, position: int, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if not isinstance(index, int):
            index = position
        function = fragment.get("function") or {}
        call_id = fragment.get("id") if isinstance(fragment.get("id"), str) else None
        name = function.get("name") if isinstance(function, dict) and isinstance(function.get("name"), str) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        delta = arguments if isinstance(arguments, str) else ""
        entry = self.calls.setdefault(index, ["", ""])
        if call_id:
            entry[0] = call_id
        if name:
            entry[1] += name if entry[1] != name else ""
        entry.append(delta)
        if self.on_chunk is not None:
            await self.on_chunk(ToolCallChunk(index, call_id, name, delta))

    def finish(self) -> Completion:
        if self.finish_reason is None and not self.done:
            raise self.provider._error(
                f"the stream ended before the answer was complete (no finish_reason after {self.events} events)"
            )
        calls = []
        for index in sorted(self.calls):
            call_id, name, *parts = self.calls[index]
            if not name:
                raise self.provider._error(f"the streamed tool call {index} has no function name")
            calls.append(ToolCall.parse(call_id or _call_id(index), name, "".join(parts)))
        return _completion("".join(self.text), calls, self.usage, self.finish_reason, self.model)


def openai_messages(request: ModelRequest) -> list[dict[str, object]]:
    """The conversation as Chat Completions ``messages``."""
    out: list[dict[str, object]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "user":
            out.append({"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            entry: dict[str, object] = {"role": "assistant", "content": message.text or None}
            calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
                for c in message.tool_calls
            ]
            if calls:
                entry["tool_calls"] = calls
            elif entry["content"] is None:
                entry["content"] = ""
            out.append(entry)
        else:
            for result in message.tool_results:
                out.append({"role": "tool", "tool_call_id": result.call_id, "content": result.text or "(no output)"})
    return out


def _user_content(message: Message) -> str | list[dict[str, object]]:
    if not any(isinstance(p, ImagePart) for p in message.parts):
        return message.text
    parts: list[dict[str, object]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            parts.append({"type": "image_url", "image_url": {"url": f"data:{part.media_type};base64,{part.data}"}})
    return parts


def openai_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, object]]:
    """Tools as Chat Completions ``function`` tools (``parameters`` always has ``properties``,
    as :meth:`~mcpwire.host.registry.ToolRegistry.to_openai` makes them)."""
    out: list[dict[str, object]] = []
    for tool in tools:
        parameters = dict(tool.input_schema)
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        function: dict[str, object] = {"name": tool.name, "parameters": parameters}
        if tool.description:
            function["description"] = tool.description
        out.append({"type": "function", "function": function})
    return out


def _usage(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    return Usage(
        input_tokens=prompt if isinstance(prompt, int) else 0,
        output_tokens=completion if isinstance(completion, int) else 0,
    )


def _completion(text: str, calls: list[ToolCall], usage: Usage, finish: object, model: object) -> Completion:
    reason: StopReason = _STOP.get(str(finish), "other") if finish else ("tool_use" if calls else "end_turn")
    if calls and reason == "end_turn":
        reason = "tool_use"  # some compatible servers say "stop" after tool calls
    return answer(text, calls, usage, reason, finish, model)


def _call_id(index: int) -> str:
    return f"call_{index}_{secrets.token_hex(6)}"


def _json_bytes(value: object) -> bytes:
    return json.dumps(value).encode()
