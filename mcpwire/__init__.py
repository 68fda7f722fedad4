"""mcpwire: a fast, structured Model Context Protocol client on trio.

    async with mcpwire.open_client(["npx", "-y", "@modelcontextprotocol/server-everything"]) as client:
        tools = await client.list_tools()
        result = await client.call_tool("echo", {"message": "hi"})

Names are imported lazily, so ``import mcpwire`` stays cheap; the sans-I/O core lives in
:mod:`mcpwire.protocol`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import errors
from ._version import __version__
from .errors import *  # noqa: F403 - every error class, re-exported below through errors.__all__

if TYPE_CHECKING:
    from .client import (
        Client,
        ClientOptions,
        ClientStatistics,
        Progress,
        ServerNotification,
        Subscription,
        connect_client,
        open_client,
    )
    from .host import ApprovalRequest, Host, HostConfig, HostToolResult, ServerStatus, load_config
    from .protocol.types import (
        ContentBlock,
        DiscoverResult,
        GetPromptResult,
        Implementation,
        Prompt,
        ReadResourceResult,
        Resource,
        ResourceContents,
        ResourceTemplate,
        ServerCapabilities,
        TextContent,
        Tool,
        ToolResult,
    )
    from .protocol.versions import Era
    from .transports import HttpServer, StdioServer

_LAZY: dict[str, str] = {
    "Client": "client",
    "ClientOptions": "client",
    "ClientStatistics": "client",
    "Progress": "client",
    "ServerNotification": "client",
    "Subscription": "client",
    "connect_client": "client",
    "open_client": "client",
    "ContentBlock": "protocol.types",
    "DiscoverResult": "protocol.types",
    "GetPromptResult": "protocol.types",
    "Implementation": "protocol.types",
    "Prompt": "protocol.types",
    "ReadResourceResult": "protocol.types",
    "Resource": "protocol.types",
    "ResourceContents": "protocol.types",
    "ResourceTemplate": "protocol.types",
    "ServerCapabilities": "protocol.types",
    "TextContent": "protocol.types",
    "Tool": "protocol.types",
    "ToolResult": "protocol.types",
    "Era": "protocol.versions",
    "StdioServer": "transports",
    "HttpServer": "transports",
    "Host": "host",
    "HostConfig": "host",
    "HostToolResult": "host",
    "ServerStatus": "host",
    "ApprovalRequest": "host",
    "load_config": "host",
}

# Type checkers read both forms: a literal list, and ``+=`` of a module's ``__all__``.
__all__ = [
    "__version__",
    # the lazily imported names (spelled out so that type checkers see them as exported)
    "Client",
    "ClientOptions",
    "ClientStatistics",
    "Progress",
    "ServerNotification",
    "Subscription",
    "connect_client",
    "open_client",
    "ContentBlock",
    "DiscoverResult",
    "GetPromptResult",
    "Implementation",
    "Prompt",
    "ReadResourceResult",
    "Resource",
    "ResourceContents",
    "ResourceTemplate",
    "ServerCapabilities",
    "TextContent",
    "Tool",
    "ToolResult",
    "Era",
    "StdioServer",
    "HttpServer",
    "Host",
    "HostConfig",
    "HostToolResult",
    "ServerStatus",
    "ApprovalRequest",
    "load_config",
]
__all__ += errors.__all__


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpwire' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
