"""The pages of the paginated lists, and which capability each list needs."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ..protocol.types import Prompt, Resource, ResourceTemplate

__all__ = ["LISTS", "PromptsPage", "ResourcesPage", "TemplatesPage", "ToolsPage"]


class ToolsPage(msgspec.Struct, rename="camel"):
    tools: list[Any] = msgspec.field(default_factory=list)  # checked one by one: a bad tool is skipped
    next_cursor: str | None = None


class ResourcesPage(msgspec.Struct, rename="camel"):
    resources: list[Resource] = msgspec.field(default_factory=list)
    next_cursor: str | None = None


class TemplatesPage(msgspec.Struct, rename="camel"):
    resource_templates: list[ResourceTemplate] = msgspec.field(default_factory=list)
    next_cursor: str | None = None


class PromptsPage(msgspec.Struct, rename="camel"):
    prompts: list[Prompt] = msgspec.field(default_factory=list)
    next_cursor: str | None = None


#: The lists whose emptiness era parity compares: method -> (capability, page type, items field).
LISTS: Final[dict[str, tuple[str, type[Any], str]]] = {
    "tools/list": ("tools", ToolsPage, "tools"),
    "prompts/list": ("prompts", PromptsPage, "prompts"),
    "resources/list": ("resources", ResourcesPage, "resources"),
}
