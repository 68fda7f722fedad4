"""The conversation, independent of any provider's wire format.

Theory of operation: a conversation is a list of :class:`Message` values, each a role and a tuple
of parts: text, images, the model's tool calls, and the results of those calls. Each provider
module translates this one shape to and from its own wire format (OpenAI's ``tool`` messages,
Anthropic's ``tool_use``/``tool_result`` blocks), so a conversation can be kept, stored as JSON
(every type here is a msgspec Struct) and continued later, with the same or another provider.

A tool call keeps the arguments exactly as the model wrote them (``raw_arguments``) beside their
decoded form: a model that writes broken JSON gets its own text back with the reason, and the
call is never made with guessed arguments.
"""

from __future__ import annotations

import json
from typing import Literal

import msgspec

from ..protocol.types import JSONObject

__all__ = [
    "Completion",
    "ImagePart",
    "Message",
    "ModelRequest",
    "Part",
    "Role",
    "StopReason",
    "TextPart",
    "ToolCall",
    "ToolResultPart",
    "ToolSpec",
    "Usage",
]

Role = Literal["user", "assistant", "tool"]
#: why a model stopped, in one vocabulary for every provider (``other`` keeps the provider's word
#: in :attr:`Completion.provider_stop_reason`)
StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filter", "other"]


class TextPart(msgspec.Struct, frozen=True, kw_only=True, tag="text", tag_field="type"):
    text: str


class ImagePart(msgspec.Struct, frozen=True, kw_only=True, tag="image", tag_field="type"):
    """An image as base64 data (``media_type`` like ``image/png``)."""

    media_type: str
    data: str


class ToolCall(msgspec.Struct, frozen=True, kw_only=True, tag="tool_call", tag_field="type"):
    """A call the model asked for.

    Attributes:
        id: the provider's id for the call (results refer to it).
        name: the tool's name as the model spelt it.
        raw_arguments: the arguments as the model wrote them (JSON text).
        arguments: the decoded object, or ``None`` when ``raw_arguments`` is not a JSON object.
        error: why ``arguments`` is ``None``.
    """

    id: str
    name: str
    raw_arguments: str
    arguments: JSONObject | None = None
    error: str | None = None

    @classmethod
    def parse(cls, id: str, name: str, raw_arguments: str) -> ToolCall:
        """A call with ``raw_arguments`` decoded; empty text is ``{}``, anything but a JSON object
        leaves ``arguments`` ``None`` with the reason in ``error``."""
        if not raw_arguments.strip():
            return cls(id=id, name=name, raw_arguments=raw_arguments, arguments={})
        try:
            value = json.loads(raw_arguments)
        except ValueError as exc:
            return cls(id=id, name=name, raw_arguments=raw_arguments, error=f"the arguments are not valid JSON ({exc})")
        if not isinstance(value, dict):
            kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
                type(value), "a number"
            )
            return cls(
                id=id, name=name, raw_arguments=raw_arguments, error=f"the arguments must be a JSON object, not {kind}"
            )
        return cls(id=id, name=name, raw_arguments=raw_arguments, arguments=value)


class ToolResultPart(msgspec.Struct, frozen=True, kw_only=True, tag="tool_result", tag_field="type"):
    """What a tool call gave, for the model: text, and images where the provider takes them."""

    call_id: str
    name: str
    content: tuple[TextPart | ImagePart, ...]
    is_error: bool = False

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


Part = TextPart | ImagePart | ToolCall | ToolResultPart


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One turn: ``user`` (the person, or observations in text tool mode), ``assistant`` (the
    model: text and tool calls) or ``tool`` (results of the assistant's calls)."""

    role: Role
    parts: tuple[Part, ...]

    @classmethod
    def user(cls, text: str, *images: ImagePart) -> Message:
        return cls(role="user", parts=(TextPart(text=text), *images))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", parts=(TextPart(text=text),) if text else ())

    @property
    def text(self) -> str:
        """The text parts, joined."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool as a model sees it: a provider-legal name, a description and a JSON Schema."""

    name: str
    description: str
    input_schema: JSONObject


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens a request used (cached input tokens are counted in ``input_tokens``)."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens, output_tokens=self.output_tokens + other.output_tokens
        )


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request to a model: the conversation so far and what the model may do next."""

    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] = ()


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    """A model's whole answer to one request."""

    message: Message
    usage: Usage
    stop_reason: StopReason
    provider_stop_reason: str | None = None
    model: str | None = None
