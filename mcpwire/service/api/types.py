"""The management API's request and response bodies and query parameters.

These Structs are what the handlers decode and encode, and what the OpenAPI document describes
(:mod:`mcpwire.service.api.routing` derives the JSON Schema from them). Response fields are
camelCase, as in MCP; a server entry keeps mcp.json's own spelling (``allowed_tools``...).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "ApprovalDecision",
    "CheckOut",
    "CheckQuery",
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
    "ServerEntryPatch",
    "ToolCallIn",
    "ToolCallOut",
    "ToolList",
    "ToolOut",
    "ToolQuery",
]

ServerName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="letters, digits, _ . -")]
Limit = Annotated[int, msgspec.Meta(ge=1, le=500)]


class Out(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A response body."""


class In(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A request body: unknown fields are refused, so a misspelt one is named, not ignored."""


# -- servers -------------------------------------------------------------------------------------


class Auth(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    type: Literal["bearer", "api_key"]
    token: str
    header_name: Annotated[str, msgspec.Meta(min_length=1)] | UnsetType = UNSET


# The entry is checked by the config loader (mcpwire.host.entries), not by these types: they
# describe it for the OpenAPI document, no stricter than the loader (whatever the loader takes
# fits them), so that a body refused here is refused by the loader too.
#: environment and header values: numbers and booleans become their JSON text (``8080``, ``true``)
Scalar = str | int | float | bool
PositiveSeconds = Annotated[float, msgspec.Meta(gt=0, description="seconds, more than 0")]
TransportType = Literal[
    "stdio", "local", "http", "streamable-http", "streamableHttp", "streamable_http", "remote", "sse"
]
Namespace = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]+$")]
_HTTP_TYPES = ["http", "streamable-http", "streamableHttp", "streamable_http", "remote", "sse"]


class ServerEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """One mcp.json server entry plus its name, in any shape the config file takes (Claude
    Desktop and Cursor, VS Code, SPEC-07's ``local``/``remote`` with ``environment``), checked
    by the config loader: every problem is named at its JSON path, and unknown keys are refused.
    ``${env:NAME}`` placeholders are expanded from the service's environment when the server
    starts, and stored unexpanded.

    A stdio server has a ``command`` (and no ``type``, or ``stdio``/``local``); an HTTP server a
    ``url`` (and no ``command``, or an HTTP ``type``). docs/config.md describes each key."""

    name: ServerName
    type: TransportType | UnsetType = UNSET
    #: another name for ``type``
    transport: TransportType | UnsetType = UNSET
    #: a program, a command line (split into words when no ``args`` are given), or a list of words
    command: str | Annotated[list[str], msgspec.Meta(min_length=1)] | UnsetType = UNSET
    args: list[str] | UnsetType = UNSET
    env: dict[str, Scalar] | UnsetType = UNSET
    #: SPEC-07's name for ``env`` (both may be given: ``environment`` wins)
    environment: dict[str, Scalar] | UnsetType = UNSET
    cwd: str | UnsetType = UNSET
    url: Annotated[str, msgspec.Meta(pattern="^https?://")] | UnsetType = UNSET
    headers: dict[str, Scalar] | UnsetType = UNSET
    auth: Auth | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET
    #: the opposite of ``enabled`` (which wins when both are given)
    disabled: bool | UnsetType = UNSET
    description: str | UnsetType = UNSET
    allowed_tools: list[str] | UnsetType = UNSET
    disabled_tools: list[str] | UnsetType = UNSET
    namespace: Namespace | UnsetType = UNSET
    #: each call's timeout (the same as ``policy.timeout_seconds``)
    timeout_seconds: PositiveSeconds | UnsetType = UNSET
    #: each call's timeout in milliseconds (Cline's and Roo's key), when ``timeout_seconds`` is not given
    timeout: Annotated[float, msgspec.Meta(gt=0)] | UnsetType = UNSET
    connect_timeout_seconds: PositiveSeconds | UnsetType = UNSET
    #: another name for ``connect_timeout_seconds``
    startup_timeout_seconds: PositiveSeconds | UnsetType = UNSET
    health_interval_seconds: Annotated[float, msgspec.Meta(ge=0)] | UnsetType = UNSET
    #: timeouts, retries, cache, breaker, approval rules and per-tool settings (docs/config.md)
    policy: dict[str, Any] | UnsetType = UNSET
    era: Literal["auto", "legacy", "modern"] | UnsetType = UNSET
    protocol_version: Annotated[str, msgspec.Meta(pattern=r"^\d{4}-\d{2}-\d{2}$")] | UnsetType = UNSET
    #: accepted and ignored (VS Code's file of variables; mcpwire loads no file into a server's environment)
    envFile: Any = UNSET  # (mcp.json's spelling)
    #: accepted and ignored (Cline's approval list; use ``policy.approval``)
    alwaysAllow: Any = UNSET
    #: accepted and ignored (Roo's approval list; use ``policy.approval``)
    autoApprove: Any = UNSET


#: the body of POST /servers: an entry that names a command (stdio) or a URL (HTTP)
NewServer = Annotated[
    ServerEntry,
    msgspec.Meta(
        extra_json_schema={
            "anyOf": [
                {"required": ["command"]},
                {"required": ["url"]},
            ]
        }
    ),
]

#: in a merge patch, an object merges into the one there (so a part of it is enough) and
#: ``null`` removes what it names
_LOOSE_IN_PATCH: Final[dict[str, Any]] = {
    "auth": dict[str, Any] | None,
    "env": dict[str, Scalar | None] | None,
    "environment": dict[str, Scalar | None] | None,
    "headers": dict[str, Scalar | None] | None,
}

#: the body of PATCH /servers/{name}: a JSON merge patch (RFC 7396) of the server's entry
ServerEntryPatch = msgspec.defstruct(
    "ServerEntryPatch",
    [
        (f.name, _LOOSE_IN_PATCH.get(f.name, f.type | None), UNSET)
        for f in msgspec.structs.fields(ServerEntry)
        if f.name != "name"
    ],
    kw_only=True,
    frozen=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
)
ServerEntryPatch.__doc__ = (
    "A JSON merge patch (RFC 7396) of a server's entry: each key given replaces the entry's (an "
    "object merges into the one there), and null removes a key. Any key of an entry may change, "
    "except the name. The result is checked as a new entry is."
)


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


class CheckQuery(msgspec.Struct, frozen=True, kw_only=True):
    #: how long the server may take to answer
    timeout_seconds: Annotated[float, msgspec.Meta(ge=0.05, le=60)] = 10.0


class CheckOut(Out, frozen=True, kw_only=True):
    """An on-demand health check of one server."""

    name: str
    #: the server answered in time
    ok: bool
    status: str
    #: what was asked (``ping``, or ``server/discover`` in 2026-07-28); None when not connected
    method: str | None
    latency_ms: float | None
    #: why the check failed
    error: str | None
    checked_at: float


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
    #: seconds for each attempt (0.05 to 3600), instead of the server's configured timeout
    timeout_seconds: Annotated[float, msgspec.Meta(ge=0.05, le=3600)] | None = None
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


#: a moment, as Unix seconds
Time = Annotated[float, msgspec.Meta(ge=0, le=1e11)]


class AuditQuery(msgspec.Struct, frozen=True, kw_only=True):
    server: str | None = None
    tool: str | None = None
    outcome: str | None = None
    trace_id: str | None = None
    run_id: str | None = None
    kind: str | None = None
    since: Time | None = None
    until: Time | None = None
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
