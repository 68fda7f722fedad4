"""Anthropic Messages: ``POST {base_url}/v1/messages``.

Theory of operation: the system prompt is the top-level ``system``; the conversation alternates
``user`` and ``assistant`` turns of content blocks: the model's calls are ``tool_use`` blocks
(``input`` an object), their results ``tool_result`` blocks in the next ``user`` turn (first in
it, text and images, ``is_error`` for failures); consecutive turns of one role are merged, since
the format wants them alternating. Streamed answers are named events: ``message_start`` (the
input tokens), ``content_block_start`` (a text block, or a ``tool_use`` with its id and name),
``content_block_delta`` (``text_delta``, or ``input_json_delta`` with a piece of the arguments),
``content_block_stop``, ``message_delta`` (the stop reason and output tokens), ``message_stop``;
``ping`` keeps the line open and ``error`` ends it (an overloaded model, say). A stream that ends
before its ``message_delta`` stop reason is incomplete. Blocks of other kinds (thinking) are left
out of the conversation.

The key is read from ``ANTHROPIC_API_KEY`` (or the variable ``api_key_env`` names) and sent as
``x-api-key`` with ``anthropic-version: 2023-06-01``; only ``api.anthropic.com`` requires one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ...protocol.sse import SSEEvent
from ..messages import (
    Completion,
    ImagePart,
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

__all__ = ["API_VERSION", "DEFAULT_BASE_URL", "AnthropicProvider", "anthropic_messages", "anthropic_tools"]

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
DEFAULT_KEY_ENV: Final = "ANTHROPIC_API_KEY"
API_VERSION: Final = "2023-06-01"
#: the format requires a bound on the answer; this one unless the request names its own
DEFAULT_MAX_TOKENS: Final = 4096
_STOP: Final[dict[str, StopReason]] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
}


class AnthropicProvider(HttpProvider):
    """A model behind the Anthropic Messages API.

    Args:
        model: e.g. ``claude-sonnet-4-5``.
        base_url: ``https://api.anthropic.com`` by default.
        api_key: the key; by default read from the variable ``api_key_env`` names.
        api_key_env: where the key is read from (``ANTHROPIC_API_KEY``).
        max_tokens: the answer's bound when a request names none.

    The other options are :class:`~mcpwire.agent.providers.base.HttpProvider`'s.

    Raises:
        PresetError: no key for ``api.anthropic.com``.
    """

    name = "anthropic"
    default_base_url = DEFAULT_BASE_URL
    path = "/v1/messages"
    supports_tool_images = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        **options: Any,
    ) -> None:
        base = (base_url or DEFAULT_BASE_URL).rstrip("/")
        api_key = api_key_for(
            api_key, api_key_env, base_url=base, required_by="api.anthropic.com", default_env=DEFAULT_KEY_ENV
        )
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, not {max_tokens!r}")
        super().__init__(model, base_url=base, api_key=api_key, **options)
        self.max_tokens = max_tokens

    def _request_headers(self) -> dict[str, str]:
        headers = super()._request_headers()
        headers["anthropic-version"] = API_VERSION
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def body(self, request: ModelRequest) -> dict[str, object]:
        """The JSON body for ``request`` (without ``extra_body``)."""
        body: dict[str, object] = {
            "model": self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": anthropic_messages(request),
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = anthropic_tools(request.tools)
        # the Messages API takes no temperature any more (the official package's request type has
        # none); a request's temperature is not sent (extra_body can still send one)
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if self.stream:
            body["stream"] = True
        return body

    def _stream_state(self, on_chunk: ChunkCallback | None) -> _Stream:
        return _Stream(self, on_chunk)

    async def _complete_whole(self, body: Mapping[str, object], on_chunk: ChunkCallback | None) -> Completion:
        data = await self._post_json(self.path, body)
        if not isinstance(data, dict):
            raise self._error("the answer is not a JSON object")
        if data.get("type") == "error":
            raise self._error(f"the answer is an error: {_error_message(json.dumps(data).encode())}")
        content = data.get("content")
        if not isinstance(content, list):
            raise self._error("the answer has no content list")
        text: list[str] = []
        calls: list[ToolCall] = []
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                text.append(block["text"])
            elif block.get("type") == "tool_use":
                if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                    raise self._error(f"the answer's tool_use block {index} has no id or name")
                calls.append(ToolCall.parse(block["id"], block["name"], json.dumps(block.get("input", {}))))
        await replay(on_chunk, "".join(text), calls)
        usage = _usage(data.get("usage"), Usage())
        return _completion("".join(text), calls, usage, data.get("stop_reason"), data.get("model"))


class _Block:
    __slots__ = ("arguments", "id", "kind", "name", "text")

    def __init__(self, kind: str, *, id: str = "", name: str = "", text: str = "") -> None:
        self.kind = kind
        self.id = id
        self.name = name
        self.text = [text] if text else []
        self.arguments: list[str] = []


class _Stream:
    """Assembles one streamed answer."""

    def __init__(self, provider: AnthropicProvider, on_chunk: ChunkCallback | None) -> None:
        self.provider = provider
        self.on_chunk = on_chunk
        self.blocks: dict[int, _Block] = {}
        self.stop_reason: str | None = None
        self.usage = Usage()
        self.model: str | None = None
        self.events = 0
        self.calls = 0

    async def feed(self, event: SSEEvent) -> None:
        self.events += 1
        data = decode_event(self.provider, event)
        kind = data.get("type", event.event)
        if kind == "error":
            raise self.provider._error(f"the stream reported an error: {_error_message(json.dumps(data).encode())}")
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, dict):
                self.usage = _usage(message.get("usage"), self.usage)
                self.model = message.get("model") if isinstance(message.get("model"), str) else None
        elif kind == "content_block_start":
            await self._start(data)
        elif kind == "content_block_delta":
            await self._delta(data)
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
            self.usage = _usage(data.get("usage"), self.usage)

    def _index(self, data: dict[str, Any]) -> int:
        index = data.get("index")
        if not isinstance(index, int):
            raise self.provider._error(f"sent a {data.get('type')} event without an index")
        return index

    async def _start(self, data: dict[str, Any]) -> None:
        index = self._index(data)
        block = data.get("content_block")
        if not isinstance(block, dict):
            raise self.provider._error("sent a content_block_start without a content_block")
        kind = block.get("type")
        if kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise self.provider._error(f"sent a tool_use block {index} without an id or a name")
            entry = self.blocks[index] = _Block("tool_use", id=block["id"], name=block["name"])
            given = block.get("input")
            if isinstance(given, dict) and given:  # some servers send the whole input here
                entry.arguments.append(json.dumps(given))
            if self.on_chunk is not None:
                await self.on_chunk(ToolCallChunk(self.calls, entry.id, entry.name, "".join(entry.arguments)))
            self.calls += 1
        elif kind == "text":
            given = block.get("text")
            text = given if isinstance(given, str) else ""
            self.blocks[index] = _Block("text", text=text)
            if text and self.on_chunk is not None:
                await self.on_chunk(TextChunk(text))
        else:
            self.blocks[index] = _Block(str(kind))

    async def _delta(self, data: dict[str, Any]) -> None:
        index = self._index(data)
        block = self.blocks.get(index)
        delta = data.get("delta")
        if block is None or not isinstance(delta, dict):
            raise self.provider._error(f"sent a content_block_delta for block {index}, which was not started")
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            block.text.append(delta["text"])
            if self.on_chunk is not None and delta["text"]:
                await self.on_chunk(TextChunk(delta["text"]))
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            block.arguments.append(delta["partial_json"])
            if self.on_chunk is not None:
                position = sum(b.kind == "tool_use" for i, b in self.blocks.items() if i < index)
                await self.on_chunk(ToolCallChunk(position, None, None, delta["partial_json"]))

    def finish(self) -> Completion:
        if self.stop_reason is None:
            raise self.provider._error(
                f"the stream ended before the answer was complete (no stop_reason after {self.events} events)"
            )
        text: list[str] = []
        calls: list[ToolCall] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.kind == "text":
                text += block.text
            elif block.kind == "tool_use":
                calls.append(ToolCall.parse(block.id, block.name, "".join(block.arguments)))
        return _completion("".join(text), calls, self.usage, self.stop_reason, self.model)


def anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The conversation as Messages ``messages``: alternating turns of content blocks."""
    out: list[dict[str, Any]] = []
    for message in request.messages:
        blocks: list[dict[str, object]] = []
        if message.role == "tool":
            for result in message.tool_results:
                content: list[dict[str, object]] = [_block(p) for p in result.content if _keep(p)]
                entry: dict[str, object] = {"type": "tool_result", "tool_use_id": result.call_id}
                entry["content"] = content or [{"type": "text", "text": "(no output)"}]
                if result.is_error:
                    entry["is_error"] = True
                blocks.append(entry)
        else:
            for part in message.parts:
                if isinstance(part, TextPart | ImagePart) and _keep(part):
                    blocks.append(_block(part))
                elif isinstance(part, ToolCall) and message.role == "assistant":
                    given = part.arguments if part.arguments is not None else {}
                    blocks.append({"type": "tool_use", "id": part.id, "name": part.name, "input": given})
        if not blocks:
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _keep(part: TextPart | ImagePart) -> bool:
    return not isinstance(part, TextPart) or bool(part.text)  # the format refuses empty text blocks


def _block(part: TextPart | ImagePart) -> dict[str, object]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {"type": "image", "source": {"type": "base64", "media_type": part.media_type, "data": part.data}}


def anthropic_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, object]]:
    """Tools as Messages ``tools`` entries (as
    :meth:`~mcpwire.host.registry.ToolRegistry.to_anthropic` makes them)."""
    out: list[dict[str, object]] = []
    for tool in tools:
        schema = dict(tool.input_schema)
        schema.setdefault("type", "object")
        entry: dict[str, object] = {"name": tool.name, "input_schema": schema}
        if tool.description:
            entry["description"] = tool.description
        out.append(entry)
    return out


def _usage(raw: object, before: Usage) -> Usage:
    """``before`` updated with what ``raw`` says (``output_tokens`` is a running total)."""
    if not isinstance(raw, dict):
        return before
    inputs = [raw.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    counted = [v for v in inputs if isinstance(v, int)]
    output = raw.get("output_tokens")
    return Usage(
        input_tokens=sum(counted) if counted else before.input_tokens,
        output_tokens=output if isinstance(output, int) else before.output_tokens,
    )


def _completion(text: str, calls: list[ToolCall], usage: Usage, stop: object, model: object) -> Completion:
    return answer(text, calls, usage, _STOP.get(str(stop), "other") if stop else "end_turn", stop, model)
