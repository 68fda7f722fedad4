"""The management API's request and response bodies and query parameters.

These Structs are what the handlers decode and encode, and what the OpenAPI document describes
(:mod:`mcpwire.service.api.routing` derives the JSON Schema from them). Response fields are
camelCase, as in MCP; a server entry keeps mcp.json's own spelling (``allowed_tools``...).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "ApprovalDecision",
    "ApprovalList",
    "ApprovalOut",
    "ApprovalQuery",
    "ApprovalWaitQuery",
    "AuditList",
    "AuditOut",
    "AuditQuery",
    "CallAccepted",
    "Health",
    "PromptGetIn",
    "PromptList",
    "PromptOut",
    "Readiness",
    "ResourceList",
    "ResourceOut",
    "ResourceReadQuery",
    "ResourceTemplateOut",
    "ServerEntry",
    "ServerList",
    "ServerOut",
    "ServerPatch",
    "ToolCallIn",
    "ToolCallOut",
    "ToolList",
    "ToolOut",
    "ToolQuery",
]

ServerName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="letters, digits, _ . -")]
Seconds = Annotated[float, msgspec.Meta(ge=1, le=86_400)]
Limit = Annotated[int, msgspec.Meta(ge=1, le=500)]
ToolNames = list[Annotated[str, msgspec.Meta(min_length=1, max_length=256)]]


class Out(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A response body."""


class In(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A request body: unknown fields are refused, so a misspelt one is named, not ignored."""


# -- servers -------------------------------------------------------------------------------------


class Auth(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    type: Literal["bearer", "api_key"]
    token: str
    header_name: Annotated[str, msgspec.Meta(min_length=1)] | UnsetType = UNSET


# Patterns are read by msgspec (Python's re) and by JSON Schema tools (ECMA-262), whose ``\s``
# differ (Python's includes U+001C..U+001F and U+0085): spaces and controls are spelt out instead.
_SPACE = "\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
#: a program as one string: split into words at spaces when no ``args`` are given, so quotes and
#: backslashes are not taken here (give ``command`` as a list for those)
COMMAND_LINE_PATTERN: Final = f"^[^'\"\\\\]*[^{_SPACE}'\"\\\\][^'\"\\\\]*$"
COMMAND_LINE: Final = re.compile(COMMAND_LINE_PATTERN)
# msgspec 0.22 frees a ``pattern`` constraint twice when its str is in a union with an array type
# (the process aborts at exit), so this pattern is documented here and checked by the handler
CommandLine = Annotated[
    str,
    msgspec.Meta(
        extra_json_schema={"pattern": COMMAND_LINE_PATTERN},
        description="a program, or a command line without quotes",
    ),
]
Word = Annotated[str, msgspec.Meta(pattern=f"[^{_SPACE}]")]
#: an http(s) URL whose host is a name, an address or a bracketed IPv6 address (so that every URL
#: taken here also parses, e.g. by urllib.parse.urlsplit)
Url = Annotated[
    str,
    msgspec.Meta(pattern=f"^https?://(\\[[0-9A-Fa-f:.]+\\](:[0-9]*)?|[^/?#\\[\\]{_SPACE}]+)([/?#][^{_SPACE}]*)?$"),
]
Namespace = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]+$")]
_HTTP_TYPES = ["http", "streamable-http", "streamableHttp", "remote", "sse"]


class ServerEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One mcp.json server entry plus its name (``${env:NAME}`` placeholders are expanded from
    the service's environment when the server starts, and stored unexpanded).

    A stdio server has a ``command`` (and no ``type``, or ``stdio``); an HTTP server a ``url``
    (and no ``command``, or an HTTP ``type``)."""

    name: ServerName
    type: Literal["stdio", "local", "http", "streamable-http", "streamableHttp", "remote", "sse"] | UnsetType = UNSET
    command: CommandLine | Annotated[list[Word], msgspec.Meta(min_length=1)] | UnsetType = UNSET
    args: list[str] | UnsetType = UNSET
    env: dict[str, str] | UnsetType = UNSET
    cwd: str | UnsetType = UNSET
    url: Url | UnsetType = UNSET
    headers: dict[str, str] | UnsetType = UNSET
    auth: Auth | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET
    description: str | UnsetType = UNSET
    allowed_tools: ToolNames | UnsetType = UNSET
    disabled_tools: ToolNames | UnsetType = UNSET
    namespace: Namespace | UnsetType = UNSET
    timeout_seconds: Seconds | UnsetType = UNSET
    connect_timeout_seconds: Seconds | UnsetType = UNSET
    health_interval_seconds: Annotated[float, msgspec.Meta(ge=0)] | UnsetType = UNSET
    policy: dict[str, Any] | UnsetType = UNSET
    era: Literal["auto", "legacy", "modern"] | UnsetType = UNSET
    protocol_version: Annotated[str, msgspec.Meta(pattern=r"^\d{4}-\d{2}-\d{2}$")] | UnsetType = UNSET


#: the body of POST /servers: an entry that names a command (stdio) or a URL (HTTP)
NewServer = Annotated[
    ServerEntry,
    msgspec.Meta(
        extra_json_schema={
            "anyOf": [
                {"required": ["command"], "properties": {"type": {"enum": ["stdio", "local"]}}},
                {"required": ["url"], "properties": {"type": {"enum": _HTTP_TYPES}}, "not": {"required": ["command"]}},
                {"required": ["url", "type"], "properties": {"type": {"enum": _HTTP_TYPES}}},
            ]
        }
    ),
]


class ServerPatch(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What PATCH may change; ``null`` resets ``timeout_seconds`` and ``allowed_tools``."""

    enabled: bool | UnsetType = UNSET
    timeout_seconds: Seconds | UnsetType | None = UNSET
    allowed_tools: ToolNames | UnsetType | None = UNSET
    disabled_tools: ToolNames | UnsetType = UNSET
    era: Literal["auto", "legacy", "modern"] | UnsetType = UNSET


class Latency(Out, frozen=True, kw_only=True):
    p50_ms: float
    p95_ms: float


class ServerOut(Out, frozen=True, kw_only=True):
    name: str
    source: Literal["config", "api"]
    enabled: bool
    transport: str
    target: str  #: command line or URL, credentials redacted
    status: str
    era: str | None
    revision: str | None
    tools: int
    prompts: int
    resources: int
    resource_templates: int
    #: why it is not connected now (None while connected)
    error: str | None
    #: the most recent failure, kept after the server recovers
    last_error: str | None
    connected_since: float | None
    uptime_seconds: float | None
    restarts: int
    health_failures: int
    last_health_check: float | None
    breaker: str
    calls: int
    errors: int
    latency: Latency
    cache_hits: int
    cache_misses: int
    description: str | None


class ServerList(Out, frozen=True, kw_only=True):
    items: list[ServerOut]


# -- tools, prompts, resources ------------------------------------------------------------------


class ToolQuery(msgspec.Struct, frozen=True, kw_only=True):
    server: str | None = None
    q: Annotated[str, msgspec.Meta(max_length=200)] | None = None


class ToolOut(Out, frozen=True, kw_only=True):
    name: str  #: namespaced
    server: str
    tool: str  #: its name on its server
    title: str | None
    description: str | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None
    risk: str
    #: its definition changed since it was pinned: hidden from lists, refused by calls
    quarantined: bool


class ToolList(Out, frozen=True, kw_only=True):
    items: list[ToolOut]


class ToolCallIn(In, frozen=True, kw_only=True):
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    #: seconds for each attempt (1 to 3600), instead of the server's configured timeout
    timeout_seconds: Annotated[float, msgspec.Meta(ge=1, le=3600)] | None = None
    #: call the server even when the cache holds a fresh result (the new result replaces it)
    fresh: bool = False


class ToolCallOut(Out, frozen=True, kw_only=True):
    name: str
    server: str
    tool: str
    is_error: bool
    content: list[dict[str, Any]]
    structured_content: Any = None
    text: str
    cached: bool
    risk: str | None
    approval: str
    trace_id: str | None


class CallAccepted(Out, frozen=True, kw_only=True):
    """202: the call waits for a decision; poll or wait on ``location``."""

    approval_id: str
    state: str
    location: str
    expires_at: float


class PromptOut(Out, frozen=True, kw_only=True):
    name: str
    server: str
    prompt: str
    title: str | None
    description: str | None
    arguments: list[dict[str, Any]]


class PromptList(Out, frozen=True, kw_only=True):
    items: list[PromptOut]


class PromptGetIn(In, frozen=True, kw_only=True):
    arguments: dict[str, str] = msgspec.field(default_factory=dict)


class PromptGetOut(Out, frozen=True, kw_only=True):
    name: str
    server: str
    prompt: str
    description: str | None
    messages: list[dict[str, Any]]


class ServerQuery(msgspec.Struct, frozen=True, kw_only=True):
    server: str | None = None


class ResourceOut(Out, frozen=True, kw_only=True):
    name: str
    server: str
    uri: str
    title: str | None
    description: str | None
    mime_type: str | None


class ResourceTemplateOut(Out, frozen=True, kw_only=True):
    name: str
    server: str
    uri_template: str
    description: str | None
    mime_type: str | None


class ResourceList(Out, frozen=True, kw_only=True):
    items: list[ResourceOut]
    templates: list[ResourceTemplateOut]


class ResourceReadQuery(msgspec.Struct, frozen=True, kw_only=True):
    uri: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
    server: str | None = None


class ResourceReadOut(Out, frozen=True, kw_only=True):
    server: str
    uri: str
    contents: list[dict[str, Any]]


# -- pins ------------------------------------------------------------------------------------------


class PinQuery(msgspec.Struct, frozen=True, kw_only=True):
    server: str | None = None
    state: Literal["pinned", "quarantined"] | None = None


class WordPiece(Out, frozen=True, kw_only=True):
    op: Literal["same", "add", "del"]
    text: str


class WordChangeOut(Out, frozen=True, kw_only=True):
    field: str
    pieces: list[WordPiece]


class PinOut(Out, frozen=True, kw_only=True):
    server: str
    tool: str
    state: str
    hash: str
    definition: dict[str, Any]
    pending_hash: str | None
    pending_definition: dict[str, Any] | None
    first_seen: float
    changed_at: float | None
    #: the last time the tool listed the pinned words in another order (not quarantined), and how often
    reordered_at: float | None
    reorders: int
    #: the change a quarantined tool awaits approval for (unified diff of the definitions)
    diff: str | None
    #: the change word by word: each changed field's pieces, ``same``, ``add`` or ``del`` (of a
    #: quarantined pin: pinned to pending; of a reordered one: pinned to the order seen last)
    word_diff: list[WordChangeOut] = msgspec.field(default_factory=list)


class PinList(Out, frozen=True, kw_only=True):
    items: list[PinOut]


# -- approvals and audit -------------------------------------------------------------------------


class ApprovalQuery(msgspec.Struct, frozen=True, kw_only=True):
    state: Literal["pending", "approved", "denied", "expired", "abandoned"] | None = None
    limit: Limit = 100


class ApprovalWaitQuery(msgspec.Struct, frozen=True, kw_only=True):
    wait: Annotated[float, msgspec.Meta(ge=0, le=60)] = 0.0


class ApprovalDecision(In, frozen=True, kw_only=True):
    decision: Literal["approve", "deny"]
    arguments: dict[str, Any] | None = None
    reason: Annotated[str, msgspec.Meta(max_length=2000)] | None = None


class ApprovalOut(Out, frozen=True, kw_only=True):
    id: str
    state: str
    risk: str
    server: str
    tool: str
    name: str
    arguments: dict[str, Any]
    final_arguments: dict[str, Any] | None
    reason: str | None
    why: str
    created_at: float
    expires_at: float
    decided_at: float | None
    decided_by: str | None
    #: the channel of the decision: console, api, callback, caller or queue
    decided_via: str | None
    confirmations: int
    confirmations_needed: int
    context: dict[str, str]
    #: whether whoever waits for the call's answer could receive it now (a REST caller that got
    #: 202 waits by design, polling)
    caller_present: bool
    #: when the caller went away (it may still come back, until its approval is abandoned)
    caller_away_since: float | None
    #: the call's outcome once it ran (only on the replica that made the call)
    result: ToolCallOut | None = None
    error: str | None = None


class ApprovalList(Out, frozen=True, kw_only=True):
    items: list[ApprovalOut]


class AuditQuery(msgspec.Struct, frozen=True, kw_only=True):
    server: str | None = None
    tool: str | None = None
    outcome: str | None = None
    trace_id: str | None = None
    cursor: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] | None = None
    limit: Limit = 50


class AuditOut(Out, frozen=True, kw_only=True):
    id: int
    time: float
    kind: str
    server: str
    tool: str
    name: str | None
    outcome: str
    trace_id: str | None
    run_id: str | None
    caller: str | None
    record: dict[str, Any]


class AuditList(Out, frozen=True, kw_only=True):
    items: list[AuditOut]
    next_cursor: int | None


# -- probes ----------------------------------------------------------------------------------------


class Health(Out, frozen=True, kw_only=True):
    status: Literal["ok"]
    version: str
    uptime_seconds: float


class Readiness(Out, frozen=True, kw_only=True):
    ready: bool
    waiting_for: list[str]
    store: Literal["ok", "failing"]
