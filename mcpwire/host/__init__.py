"""The multi-server host: configuration, supervised servers, a namespaced tool registry and
call policies. ``async with Host.from_config(path) as host: await host.call_tool(...)``."""

from __future__ import annotations

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
from .host import (
    Host,
    HostEvent,
    HostEvents,
    HostStatistics,
    HostToolResult,
    ServerInfo,
    ServerStatistics,
    ServerStatus,
)
from .policies import ApprovalRequest, AuditLog, Risk
from .registry import RegisteredTool, ToolRegistry
from .render import render_result

__all__ = [
    "ApprovalRequest",
    "AuditLog",
    "Host",
    "HostConfig",
    "HostEvent",
    "HostEvents",
    "HostStatistics",
    "HostToolResult",
    "PolicyConfig",
    "RegisteredTool",
    "Risk",
    "ServerConfig",
    "ServerInfo",
    "ServerStatistics",
    "ServerStatus",
    "ToolPolicy",
    "ToolRegistry",
    "ToolSettings",
    "find_config",
    "load_config",
    "parse_config",
    "parse_server",
    "render_result",
]
