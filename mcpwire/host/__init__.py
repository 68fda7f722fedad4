"""The multi-server host: configuration, supervised servers, namespaced tools, prompts and
resources, call policies, approvals as objects and tool-definition pins.
``async with Host.from_config(path) as host: await host.call_tool(...)``."""

from __future__ import annotations

from .approvals import (
    Approval,
    ApprovalBackend,
    ApprovalConflict,
    ApprovalNotPending,
    ApprovalQueue,
    ApprovalState,
    MemoryApprovals,
    UnknownApproval,
)
from .catalog import RegisteredPrompt, RegisteredResource, RegisteredTemplate, UnknownPrompt
from .config import (
    HostConfig,
    PolicyConfig,
    ServerConfig,
    ToolPolicy,
    ToolSettings,
    find_config,
    load_config,
    parse_config,
    parse_server,
)
from .events import HostEvent, HostEvents
from .host import Host, HostToolResult, ToolQuarantined, ToolResultError
from .pins import MemoryPins, Pin, PinState, PinStore
from .policies import (
    ApprovalRequest,
    Approver,
    AuditLog,
    AuditRecord,
    AuditSink,
    Caller,
    Risk,
    Verdict,
    classify_risk,
)
from .registry import RegisteredTool, ToolRegistry
from .render import render_result
from .servers import HostStatistics, ServerInfo, ServerStatistics, ServerStatus

__all__ = [
    "Approval",
    "ApprovalBackend",
    "ApprovalConflict",
    "ApprovalNotPending",
    "ApprovalQueue",
    "ApprovalRequest",
    "ApprovalState",
    "Approver",
    "AuditLog",
    "AuditRecord",
    "AuditSink",
    "Caller",
    "Host",
    "HostConfig",
    "HostEvent",
    "HostEvents",
    "HostStatistics",
    "HostToolResult",
    "MemoryApprovals",
    "MemoryPins",
    "Pin",
    "PinState",
    "PinStore",
    "PolicyConfig",
    "RegisteredPrompt",
    "RegisteredResource",
    "RegisteredTemplate",
    "RegisteredTool",
    "Risk",
    "ServerConfig",
    "ServerInfo",
    "ServerStatistics",
    "ServerStatus",
    "ToolPolicy",
    "ToolQuarantined",
    "ToolRegistry",
    "ToolResultError",
    "ToolSettings",
    "UnknownApproval",
    "UnknownPrompt",
    "Verdict",
    "classify_risk",
    "find_config",
    "load_config",
    "parse_config",
    "parse_server",
    "render_result",
]
