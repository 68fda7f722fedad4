"""Public test helpers: the bundled demo server, for your tests and the CLI's default target.

``python -m mcpwire.testing.demo_server`` is a small MCP server speaking both eras over stdio,
with tools, resources, prompts, completion, logging, progress, subscriptions and input requests.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..transports import StdioServer

__all__ = ["demo_server_argv", "demo_server_spec"]


def demo_server_argv(*flags: str) -> list[str]:
    """The argv that starts the demo server with this interpreter, e.g. ``demo_server_argv("--era", "legacy")``."""
    return [sys.executable, "-m", "mcpwire.testing.demo_server", *flags]


def demo_server_spec(flags: Sequence[str] = (), *, name: str = "demo") -> StdioServer:
    """A :class:`~mcpwire.transports.StdioServer` for the demo server."""
    argv = demo_server_argv(*flags)
    return StdioServer(command=argv[0], args=tuple(argv[1:]), name=name)
