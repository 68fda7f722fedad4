"""Opening a client: :func:`open_client` (a context manager owning its tasks) and
:func:`connect_client` (the caller's nursery owns them).

Both take the target, then either an ``options`` value (:class:`~mcpwire.client.ClientOptions`),
or its fields as keyword arguments (typed once, by :class:`~mcpwire.client.options.OptionKeywords`,
so that editors and type checkers know them), or both: keywords override the value's fields.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Unpack

import trio

from ..transports import HttpServer, StdioServer, as_server, demo_server
from .core import Client
from .groups import reraise_alone, single_exception
from .options import ClientOptions, OptionKeywords, merge_options
from .state import ServerSpec

__all__ = ["Target", "connect_client", "open_client", "require_trio", "resolve_target"]

Target = StdioServer | HttpServer | Sequence[str] | str | None


def require_trio(entry: str, instead: str) -> None:
    """Fails at once, in one line, when a trio entry point is awaited outside ``trio.run``
    (typically from asyncio, where trio's first await would fail obscurely or never return).

    Raises:
        RuntimeError: naming ``entry`` and its asyncio counterpart ``mcpwire.aio.<instead>``.
    """
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        raise RuntimeError(
            f"{entry} runs under trio (trio.run), not here; from asyncio use mcpwire.aio.{instead}"
        ) from None


def resolve_target(target: Target) -> ServerSpec:
    """A spec from a target: ``None`` is the bundled demo server."""
    if target is None:
        return demo_server()
    return as_server(target)


@asynccontextmanager
async def open_client(
    target: Target = None,
    *,
    options: ClientOptions | None = None,
    **overrides: Unpack[OptionKeywords],
) -> AsyncIterator[Client]:
    """Connects to a server and yields a ready :class:`~mcpwire.Client`; closes it on exit.

    Args:
        target: an argv list (``["npx", "-y", "@modelcontextprotocol/server-everything"]``), a
            command string, a URL, a :class:`~mcpwire.StdioServer` or :class:`~mcpwire.HttpServer`,
            or ``None`` for the bundled demo server.
        options: a :class:`~mcpwire.client.ClientOptions`.
        **overrides: any field of :class:`~mcpwire.client.ClientOptions` (each is described
            there), overriding ``options``.

    Raises:
        ServerNotFound: the command does not exist.
        ConnectError: the server could not be started or did not finish the handshake in time.
        UnsupportedVersion: the server speaks no revision mcpwire does.
        ValueError: an option is out of range (a negative timeout, an unknown revision...).
        TypeError: a keyword that is no option.

    Leaving the block shuts the server down in order; no task or process outlives it. An
    exception raised in the block propagates as itself, not wrapped in an exception group.
    """
    merged = merge_options("open_client", options, overrides)
    require_trio("mcpwire.open_client", "open_client")
    spec = resolve_target(target)
    try:
        async with trio.open_nursery() as nursery:
            client = Client(spec, nursery, merged)
            try:
                await client.connect()
                yield client
            finally:
                await client.aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        single = single_exception(group)
        if single is group:
            raise
        reraise_alone(single)


async def connect_client(
    nursery: trio.Nursery,
    target: Target = None,
    *,
    options: ClientOptions | None = None,
    **overrides: Unpack[OptionKeywords],
) -> Client:
    """Connects a client whose tasks run in ``nursery``; you close it with
    :meth:`~mcpwire.Client.aclose`. Takes what :func:`open_client` takes."""
    merged = merge_options("connect_client", options, overrides)
    require_trio("mcpwire.connect_client", "open_client")
    client = Client(resolve_target(target), nursery, merged)
    try:
        await client.connect()
    except BaseException:
        await client.aclose()
        raise
    return client

