"""Public test helpers: the bundled demo and reference servers, for your tests and the CLI.

``python -m mcpwire.testing.demo_server`` is a small MCP server speaking both eras over stdio,
with tools, resources, prompts, completion, logging, progress, subscriptions and input requests.
``python -m mcpwire.testing.everything`` is the reference server of ``mcpwire check``: the demo
server's catalogue plus the official conformance runner's fixture names and the 2026-07-28 Tasks
and Skills extensions, built on :mod:`mcpwire.server` (:mod:`mcpwire.testing.reference`), over
stdio or, with ``--http [HOST:]PORT``, over Streamable HTTP (both eras) and HTTP+SSE. What it
serves (the fixture tools, resources, prompts and their contents) is
:mod:`~mcpwire.testing.catalogue`, which both engines serve.

The standard-library engine (:mod:`~mcpwire.testing.demo_server`,
:class:`~mcpwire.testing.everything.EverythingServer`, :mod:`~mcpwire.testing.http_server`,
:mod:`~mcpwire.testing.tasks`) stays for the demo server, which must start fast with nothing
but the standard library, and for the checker's broken fixtures, which subclass it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported lazily: the bundled servers start without loading mcpwire's client
    from ..transports import StdioServer

__all__ = ["demo_server_argv", "demo_server_spec"]


def demo_server_argv(*flags: str) -> list[str]:
    """The argv that starts the demo server with this interpreter, e.g. ``demo_server_argv("--era", "legacy")``."""
    return [sys.executable, "-m", "mcpwire.testing.demo_server", *flags]


def demo_server_spec(flags: Sequence[str] = (), *, name: str = "demo") -> StdioServer:
    """A :class:`~mcpwire.transports.StdioServer` for the demo server."""
    from ..transports import StdioServer

    argv = demo_server_argv(*flags)
    return StdioServer(command=argv[0], args=tuple(argv[1:]), name=name)
