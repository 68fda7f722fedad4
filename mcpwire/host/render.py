"""Text renderings of results for models: every content block gets a line, nothing is lost
silently (images and audio become a placeholder naming their type and size)."""

from __future__ import annotations

import msgspec
from msgspec import UnsetType

from ..protocol.types import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)

__all__ = ["render_result"]


def _size(b64: str) -> int:
    return len(b64) * 3 // 4 - b64[-2:].count("=") if b64 else 0


def render_result(result: ToolResult) -> str:
    """The result as text for a model. ``isError`` results start with ``Error:``."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image: {block.mime_type}, {_size(block.data)} bytes]")
        elif isinstance(block, AudioContent):
            parts.append(f"[audio: {block.mime_type}, {_size(block.data)} bytes]")
        elif isinstance(block, ResourceLink):
            label = block.title or block.name or block.uri
            parts.append(f"[resource link: {label} <{block.uri}>]")
        elif isinstance(block, EmbeddedResource):
            res = block.resource
            if res.text is not None:
                parts.append(res.text)
            else:
                parts.append(f"[resource {res.uri}: {res.mime_type or 'binary'}, {_size(res.blob or '')} bytes]")
        else:
            parts.append(f"[{block.type or 'unknown'} content]")
    structured = result.structured_content
    if not parts and not isinstance(structured, UnsetType):
        parts.append(msgspec.json.encode(structured).decode())
    text = "\n".join(parts)
    if result.is_error:
        return f"Error: {text}" if text else "Error: the tool failed without a message"
    return text
