"""The vendors' own types, for the wire shapes: every request the library sends is validated
with the official ``openai`` and ``anthropic`` packages' request types (with no field left
unrecognised), and every scripted answer is built through their response types, so the fake
provider speaks exactly what the real ones do. Test-only: the library never imports them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pydantic
from _agent_fake_llm import Reply
from anthropic.types import Message as AnthropicMessage
from anthropic.types import RawMessageStreamEvent
from anthropic.types import message_create_params as anthropic_params
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat import completion_create_params as openai_params

_OPENAI_STREAM = pydantic.TypeAdapter(openai_params.CompletionCreateParamsStreaming)
_OPENAI_WHOLE = pydantic.TypeAdapter(openai_params.CompletionCreateParamsNonStreaming)
_ANTHROPIC_STREAM = pydantic.TypeAdapter(anthropic_params.MessageCreateParamsStreaming)
_ANTHROPIC_WHOLE = pydantic.TypeAdapter(anthropic_params.MessageCreateParamsNonStreaming)
_ANTHROPIC_EVENT = pydantic.TypeAdapter(RawMessageStreamEvent)


def _materialise(value: Any) -> Any:
    """Forces pydantic's lazy validation of ``Iterable`` fields, all the way down."""
    if isinstance(value, dict):
        return {k: _materialise(v) for k, v in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, Iterable):
        return [_materialise(v) for v in value]
    return value


def _validated(adapter: pydantic.TypeAdapter[Any], body: dict[str, Any]) -> dict[str, Any]:
    checked = _materialise(adapter.validate_python(body))
    # a field the vendor's type does not know is dropped by validation: the two then differ
    assert checked == body, f"fields the vendor's type does not know: {_diff(body, checked)}"
    return body


def _diff(sent: Any, kept: Any, path: str = "$") -> list[str]:
    if isinstance(sent, dict) and isinstance(kept, dict):
        out = [f"{path}.{k}" for k in sent if k not in kept]
        for k in sent:
            if k in kept:
                out += _diff(sent[k], kept[k], f"{path}.{k}")
        return out
    if isinstance(sent, list) and isinstance(kept, list):
        return [d for i, (a, b) in enumerate(zip(sent, kept, strict=False)) for d in _diff(a, b, f"{path}[{i}]")]
    return [] if sent == kept else [f"{path}: {sent!r} != {kept!r}"]


def openai_request(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a Chat Completions request the ``openai`` package accepts."""
    return _validated(_OPENAI_STREAM if body.get("stream") else _OPENAI_WHOLE, body)


def anthropic_request(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a Messages request the ``anthropic`` package accepts."""
    return _validated(_ANTHROPIC_STREAM if body.get("stream") else _ANTHROPIC_WHOLE, body)


# -- OpenAI answers ---------------------------------------------------------------------------------


def _chunk(delta: dict[str, Any], *, finish: str | None = None, usage: dict[str, int] | None = None) -> str:
    data: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else [],
    }
    if usage is not None:
        data["usage"] = {**usage, "total_tokens": sum(usage.values())}
    ChatCompletionChunk.model_validate(data)
    return json.dumps(data)


def openai_stream(
    text: str = "",
    calls: Sequence[tuple[str, str, str]] = (),
    *,
    pieces: int = 3,
    usage: tuple[int, int] = (10, 5),
    finish: str | None = None,
    done: bool = True,
    drop_after: int | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """A streamed answer: ``text`` in ``pieces``, then each ``(id, name, arguments)`` call with its
    arguments split in two fragments, the finish reason, the usage chunk and ``[DONE]``."""
    events: list[tuple[str | None, str]] = [(None, _chunk({"role": "assistant", "content": ""}))]
    for piece in _split(text, pieces):
        events.append((None, _chunk({"content": piece})))
    for index, (call_id, name, arguments) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        events.append((None, _chunk({"tool_calls": [head]})))
        for piece in _split(arguments, 2):
            events.append((None, _chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})))
    events.append((None, _chunk({}, finish=finish or ("tool_calls" if calls else "stop"))))
    events.append((None, _chunk({}, usage={"prompt_tokens": usage[0], "completion_tokens": usage[1]})))
    if done:
        events.append((None, "[DONE]"))
    return Reply(events=events, drop_after=drop_after, headers=headers or {})


def openai_whole(
    text: str | None = None, calls: Sequence[tuple[str, str, str]] = (), *, usage: tuple[int, int] = (10, 5)
) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
        ]
    data = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "fake-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }
    ChatCompletion.model_validate(data)
    return Reply(json=data)


# -- Anthropic answers ------------------------------------------------------------------------------


def _event(data: dict[str, Any]) -> tuple[str, str]:
    _ANTHROPIC_EVENT.validate_python(data)
    return data["type"], json.dumps(data)


def anthropic_stream(
    text: str = "",
    calls: Sequence[tuple[str, str, str]] = (),
    *,
    pieces: int = 3,
    usage: tuple[int, int] = (10, 5),
    stop: str | None = None,
    drop_after: int | None = None,
) -> Reply:
    """A streamed answer: a text block in ``pieces``, then a ``tool_use`` block per call with its
    JSON in two ``input_json_delta`` pieces, the stop reason and usage, ``message_stop``."""
    events: list[tuple[str | None, str]] = []
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "fake-claude",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": 1},
        },
    }
    events.append(_event(start))
    events.append(("ping", json.dumps({"type": "ping"})))
    index = 0
    if text:
        events.append(
            _event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        )
        for piece in _split(text, pieces):
            events.append(
                _event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
            )
        events.append(_event({"type": "content_block_stop", "index": 0}))
        index = 1
    for call_id, name, arguments in calls:
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        events.append(_event({"type": "content_block_start", "index": index, "content_block": block}))
        for piece in _split(arguments, 2):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(_event({"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(_event({"type": "content_block_stop", "index": index}))
        index += 1
    reason = stop or ("tool_use" if calls else "end_turn")
    delta_event = {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": usage[1]},
    }
    events.append(_event(delta_event))
    events.append(_event({"type": "message_stop"}))
    return Reply(events=events, drop_after=drop_after)


def anthropic_whole(
    text: str | None = None, calls: Sequence[tuple[str, str, str]] = (), *, usage: tuple[int, int] = (10, 5)
) -> Reply:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": json.loads(a)} for i, n, a in calls]
    data = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": content,
        "model": "fake-claude",
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }
    AnthropicMessage.model_validate(data)
    return Reply(json=data)


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]
