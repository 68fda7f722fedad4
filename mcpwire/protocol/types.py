"""The MCP data model, as msgspec Structs decoded straight from the wire.

Theory of operation: every Struct is frozen, camel-cased on the wire (``input_schema`` is
``inputSchema``), omits defaults when encoded, and ignores unknown fields when decoded (schemas
are open: "[key: string]: unknown", JR-11). Fields that differ between revisions are optional.
JSON Schemas and other free-form JSON stay plain ``dict`` values, preserved key for key so they
can be handed to an LLM unchanged (JR-46).

Where a single bad item must not spoil a whole answer (one malformed tool in a list, one content
block of a type newer than this library), decoding falls back item by item: see
:func:`decode_tools` and :func:`decode_content`.
"""

# No ``from __future__ import annotations`` here: msgspec reads a Struct's annotations when its
# first decoder is built, and a string annotation costs it a compile() and an eval() each (some
# 40 on a first connect, more than half of building the decoders); evaluated when the class is
# made, each costs a fraction of that.

from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType, field

from ..errors import ToolError

if TYPE_CHECKING:
    JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
    JSONObject: TypeAlias = dict[str, JSONValue]
else:  # msgspec cannot resolve a recursive alias; at run time any JSON value decodes as Any
    JSONValue = Any
    JSONObject = dict[str, Any]

__all__ = [
    "AudioContent",
    "BlobResourceContents",
    "CompleteResult",
    "Completion",
    "ContentBlock",
    "DiscoverResult",
    "EmbeddedResource",
    "GetPromptResult",
    "ImageContent",
    "Implementation",
    "InitializeResult",
    "JSONObject",
    "JSONValue",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "ReadResourceResult",
    "Resource",
    "ResourceContents",
    "ResourceLink",
    "ResourceMetadata",
    "ResourceTemplate",
    "ServerCapabilities",
    "TextContent",
    "TextResourceContents",
    "Tool",
    "ToolAnnotations",
    "ToolResult",
    "UnknownContent",
    "decode_content",
    "decode_tools",
]


class Wire(msgspec.Struct, frozen=True, omit_defaults=True, rename="camel", kw_only=True):
    """Base of wire data: frozen, camelCase, defaults omitted."""


class Implementation(Wire, frozen=True, kw_only=True):
    """``clientInfo`` / ``serverInfo``: who is on the other end (display only, LC-27)."""

    name: str
    version: str = ""
    title: str | None = None
    description: str | None = None
    website_url: str | None = None


class ServerCapabilities(Wire, frozen=True, kw_only=True):
    """What the server offers. ``None`` means "not advertised"."""

    tools: JSONObject | None = None
    resources: JSONObject | None = None
    prompts: JSONObject | None = None
    logging: JSONObject | None = None
    completions: JSONObject | None = None
    experimental: JSONObject | None = None
    extensions: JSONObject | None = None
    tasks: JSONObject | None = None

    def flag(self, feature: str, name: str) -> bool:
        """True when ``capabilities[feature][name]`` is true, e.g. ``flag("resources", "subscribe")``."""
        value = getattr(self, feature, None)
        return isinstance(value, dict) and value.get(name) is True


class InitializeResult(Wire, frozen=True, kw_only=True):
    protocol_version: str
    capabilities: ServerCapabilities = field(default_factory=ServerCapabilities)
    server_info: Implementation = field(default_factory=lambda: Implementation(name="", version=""))
    instructions: str | None = None


class DiscoverResult(Wire, frozen=True, kw_only=True):
    """2026-07-28 ``server/discover`` (LC-26, DS-01)."""

    supported_versions: list[str]
    capabilities: ServerCapabilities = field(default_factory=ServerCapabilities)
    instructions: str | None = None
    ttl_ms: int | None = None
    cache_scope: str | None = None
    meta: JSONObject | None = field(default=None, name="_meta")


# -- content ---------------------------------------------------------------------------------


class TextContent(Wire, frozen=True, kw_only=True, tag="text", tag_field="type"):
    text: str
    annotations: JSONObject | None = None
    meta: JSONObject | None = field(default=None, name="_meta")


class ImageContent(Wire, frozen=True, kw_only=True, tag="image", tag_field="type"):
    data: str  #: base64
    mime_type: str
    annotations: JSONObject | None = None
    meta: JSONObject | None = field(default=None, name="_meta")


class AudioContent(Wire, frozen=True, kw_only=True, tag="audio", tag_field="type"):
    data: str  #: base64
    mime_type: str
    annotations: JSONObject | None = None
    meta: JSONObject | None = field(default=None, name="_meta")


class ResourceMetadata(Wire, frozen=True, kw_only=True):
    """What a resource, a resource template and a resource link share: the schema's
    ``BaseMetadata`` and ``Icons``, with a description, a MIME type and annotations."""

    name: str = ""
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: JSONObject | None = None
    icons: list[JSONObject] | None = None
    meta: JSONObject | None = field(default=None, name="_meta")


class ResourceLink(ResourceMetadata, frozen=True, kw_only=True, tag="resource_link", tag_field="type"):
    uri: str
    size: int | None = None


class ResourceContents(Wire, frozen=True, kw_only=True):
    """One entry of ``resources/read`` ``contents``: text or base64 ``blob`` (RS-02)."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None
    meta: JSONObject | None = field(default=None, name="_meta")

    @property
    def is_text(self) -> bool:
        return self.text is not None

    def data(self) -> bytes:
        """The contents as bytes: UTF-8 of ``text``, or the decoded ``blob``."""
        if self.text is not None:
            return self.text.encode()
        if self.blob is not None:
            import base64

            return base64.b64decode(self.blob)
        return b""


# The schema's two shapes are one Struct here; the aliases keep the schema's names.
TextResourceContents = ResourceContents
BlobResourceContents = ResourceContents


class EmbeddedResource(Wire, frozen=True, kw_only=True, tag="resource", tag_field="type"):
    resource: ResourceContents
    annotations: JSONObject | None = None
    meta: JSONObject | None = field(default=None, name="_meta")


class UnknownContent(Wire, frozen=True, kw_only=True):
    """A content block of a type this library does not know; ``raw`` keeps it whole."""

    type: str
    raw: JSONObject


ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource | UnknownContent
_KnownBlock: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


def decode_content(items: list[JSONValue]) -> list[ContentBlock]:
    """Converts raw content blocks one by one, keeping unknown or malformed ones as UnknownContent."""
    out: list[ContentBlock] = []
    for item in items:
        try:
            out.append(msgspec.convert(item, _KnownBlock))
        except msgspec.ValidationError:
            kind = item.get("type") if isinstance(item, dict) else None
            raw: JSONObject = item if isinstance(item, dict) else {"value": item}
            out.append(UnknownContent(type=kind if isinstance(kind, str) else "", raw=raw))
    return out


# -- tools -----------------------------------------------------------------------------------


class ToolAnnotations(Wire, frozen=True, kw_only=True):
    """Hints about a tool. Untrusted unless the server is (TL-05)."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class Tool(Wire, frozen=True, kw_only=True):
    name: str
    input_schema: JSONObject = field(default_factory=dict)
    description: str | None = None
    title: str | None = None
    output_schema: JSONObject | None = None
    annotations: ToolAnnotations | None = None
    icons: list[JSONObject] | None = None
    execution: JSONObject | None = None
    meta: JSONObject | None = field(default=None, name="_meta")

    @property
    def display_name(self) -> str:
        """``title``, then ``annotations.title``, then ``name`` (TL-06)."""
        if self.title:
            return self.title
        if self.annotations is not None and self.annotations.title:
            return self.annotations.title
        return self.name


def decode_tools(items: list[JSONValue]) -> tuple[list[Tool], list[str]]:
    """Converts raw tools, dropping invalid ones (TL-02). Returns ``(tools, problems)``."""
    tools: list[Tool] = []
    problems: list[str] = []
    for index, item in enumerate(items):
        try:
            tool = msgspec.convert(item, Tool)
        except msgspec.ValidationError as exc:
            name = item.get("name") if isinstance(item, dict) else None
            problems.append(f"tool #{index} ({name!r}): {exc}")
            continue
        schema = tool.input_schema
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            problems.append(f"tool {tool.name!r}: inputSchema is not a JSON Schema object")
            continue
        tools.append(tool)
    return tools, problems


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """The result of ``tools/call``, with the tool and server it came from.

    ``is_error`` results are values, not exceptions: the model should see them (TL-09).
    ``structured_content`` is ``UNSET`` when absent (in 2026-07-28 ``null`` is a valid value).
    """

    content: list[ContentBlock] = field(default_factory=list)
    structured_content: JSONValue | UnsetType = UNSET
    is_error: bool = False
    meta: JSONObject | None = None
    tool: str = ""
    server: str = ""

    def text(self, separator: str = "\n") -> str:
        """The text of every text block (and embedded text resource), joined."""
        parts: list[str] = []
        for block in self.content:
            if isinstance(block, TextContent):
                parts.append(block.text)
            elif isinstance(block, EmbeddedResource) and block.resource.text is not None:
                parts.append(block.resource.text)
        return separator.join(parts)

    def raise_for_error(self) -> "ToolResult":
        """Raises :class:`~mcpwire.errors.ToolError` if the tool reported failure; else self."""
        if self.is_error:
            detail = self.text() or "the tool reported an error without text"
            raise ToolError(f"tool {self.tool!r} failed: {detail}", tool=self.tool, server=self.server)
        return self


class CallToolWire(Wire, frozen=True, kw_only=True):
    """``CallToolResult`` as sent; the fast path when every block is of a known type."""

    content: list[_KnownBlock] = field(default_factory=list)
    structured_content: JSONValue | UnsetType = UNSET
    is_error: bool = False
    meta: JSONObject | None = field(default=None, name="_meta")
    #: 2026-07-28 (JR-10): ``"complete"``; anything else goes through the client's general path.
    result_type: str = "complete"


class CallToolWireLenient(Wire, frozen=True, kw_only=True):
    """``CallToolResult`` with content left raw, for :func:`decode_content`."""

    content: list[JSONValue] = field(default_factory=list)
    structured_content: JSONValue | UnsetType = UNSET
    is_error: bool = False
    meta: JSONObject | None = field(default=None, name="_meta")


# -- resources ----------------------------------------------------------------------------------


class Resource(ResourceMetadata, frozen=True, kw_only=True):
    uri: str
    size: int | None = None


class ResourceTemplate(ResourceMetadata, frozen=True, kw_only=True):
    uri_template: str


class ReadResourceResult(Wire, frozen=True, kw_only=True):
    contents: list[ResourceContents] = field(default_factory=list)
    ttl_ms: int | None = None
    cache_scope: str | None = None
    meta: JSONObject | None = field(default=None, name="_meta")

    def text(self, separator: str = "\n") -> str:
        return separator.join(c.text for c in self.contents if c.text is not None)


# -- prompts -------------------------------------------------------------------------------------


class PromptArgument(Wire, frozen=True, kw_only=True):
    name: str
    title: str | None = None
    description: str | None = None
    required: bool = False


class Prompt(Wire, frozen=True, kw_only=True):
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] = field(default_factory=list)
    icons: list[JSONObject] | None = None
    meta: JSONObject | None = field(default=None, name="_meta")


class PromptMessage(Wire, frozen=True, kw_only=True):
    role: Literal["user", "assistant"] | str
    content: JSONObject

    def block(self) -> ContentBlock:
        """The message's content as a typed block."""
        return decode_content([self.content])[0]


class GetPromptResult(Wire, frozen=True, kw_only=True):
    messages: list[PromptMessage] = field(default_factory=list)
    description: str | None = None
    meta: JSONObject | None = field(default=None, name="_meta")


# -- completion ---------------------------------------------------------------------------------


class Completion(Wire, frozen=True, kw_only=True):
    values: list[str] = field(default_factory=list)
    total: int | None = None
    has_more: bool | None = None


class CompleteResult(Wire, frozen=True, kw_only=True):
    completion: Completion = field(default_factory=Completion)


#: ``_meta`` keys of the 2026-07-28 per-request fields (LC-20, LC-21).
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
