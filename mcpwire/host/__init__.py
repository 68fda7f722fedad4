"""The multi-server host: configuration, supervised servers, a namespaced tool registry and
call policies. ``async with Host.from_config(path) as host: await host.call_tool(...)``."""

from __future__ import annotations

from .config import HostConfig, PolicyConfig, ServerConfig, find_config, load_config, parse_config
from .host import Host, HostEvent, ServerInfo, ServerStatus
from .registry import RegisteredTool, ToolRegistry

__all__ = [
    "Host",
    "HostConfig",
    "HostEvent",
    "PolicyConfig",
    "RegisteredTool",
    "ServerConfig",
    "ServerInfo",
    "ServerStatus",
    "ToolRegistry",
    "find_config",
    "load_config",
    "parse_config",
]
