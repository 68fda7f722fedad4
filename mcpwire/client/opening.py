"""Opening a client: :func:`open_client` (a context manager owning its tasks) and
:func:`connect_client` (the caller's nursery owns them).

Both take the target, then either an ``options`` value (:class:`~mcpwire.client.ClientOptions`),
or its fields as keyword arguments (which editors complete), or both: keywords override the
value's fields. A keyword left out is :data:`~mcpwire.client.options.USE_DEFAULT`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from ..protocol.types import Implementation
from ..transports import HttpServer, StdioServer, as_server, demo_server
from .core import Client
from .groups import reraise_alone, single_exception
from .options import (
    USE_DEFAULT,
    ClientOptions,
    ElicitationHandler,
    EraMode,
    NoiseCallback,
    NotificationCallback,
    RootsHandler,
    SamplingHandler,
    UseDefault,
    merge_options,
)
from .state import ServerSpec

if TYPE_CHECKING:
    import httpx

    from .eracache import EraCache

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
    name: str | UseDefault | None = USE_DEFAULT,
    http_client: httpx.AsyncClient | UseDefault | None = USE_DEFAULT,
    client_info: Implementation | UseDefault | None = USE_DEFAULT,
    era: EraMode | UseDefault | None = USE_DEFAULT,
    protocol_version: str | UseDefault | None = USE_DEFAULT,
    timeout: float | UseDefault = USE_DEFAULT,
    max_timeout: float | UseDefault = USE_DEFAULT,
    connect_timeout: float | UseDefault = USE_DEFAULT,
    probe_timeout: float | UseDefault = USE_DEFAULT,
    max_message_bytes: int | UseDefault = USE_DEFAULT,
    max_list_items: int | UseDefault = USE_DEFAULT,
    max_list_bytes: int | UseDefault = USE_DEFAULT,
    notification_buffer: int | UseDefault = USE_DEFAULT,
    strict: bool | UseDefault = USE_DEFAULT,
    on_stdout_noise: NoiseCallback | UseDefault | None = USE_DEFAULT,
    roots: RootsHandler | UseDefault | None = USE_DEFAULT,
    sampling: SamplingHandler | UseDefault | None = USE_DEFAULT,
    elicitation: ElicitationHandler | UseDefault | None = USE_DEFAULT,
    max_input_rounds: int | UseDefault = USE_DEFAULT,
    validate_output: bool | UseDefault = USE_DEFAULT,
    era_cache: bool | EraCache | UseDefault = USE_DEFAULT,
    server_stream: bool | UseDefault = USE_DEFAULT,
    on_notification: NotificationCallback | UseDefault | None = USE_DEFAULT,
) -> AsyncIterator[Client]:
    """Connects to a server and yields a ready :class:`~mcpwire.Client`; closes it on exit.

    Args:
        target: an argv list (``["npx", "-y", "@modelcontextprotocol/server-everything"]``), a
            command string, a URL, a :class:`~mcpwire.StdioServer` or :class:`~mcpwire.HttpServer`,
            or ``None`` for the bundled demo server.
        options: a :class:`~mcpwire.client.ClientOptions`; the keyword arguments below override
            its fields (each is described there).

    Raises:
        ServerNotFound: the command does not exist.
        ConnectError: the server could not be started or did not finish the handshake in time.
        UnsupportedVersion: the server speaks no revision mcpwire does.
        ValueError: an option is out of range (a negative timeout, an unknown revision...).

    Leaving the block shuts the server down in order; no task or process outlives it. An
    exception raised in the block propagates as itself, not wrapped in an exception group.
    """
    merged = merge_options(options, _overrides(locals()))
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
    name: str | UseDefault | None = USE_DEFAULT,
    http_client: httpx.AsyncClient | UseDefault | None = USE_DEFAULT,
    client_info: Implementation | UseDefault | None = USE_DEFAULT,
    era: EraMode | UseDefault | None = USE_DEFAULT,
    protocol_version: str | UseDefault | None = USE_DEFAULT,
    timeout: float | UseDefault = USE_DEFAULT,
    max_timeout: float | UseDefault = USE_DEFAULT,
    connect_timeout: float | UseDefault = USE_DEFAULT,
    probe_timeout: float | UseDefault = USE_DEFAULT,
    max_message_bytes: int | UseDefault = USE_DEFAULT,
    max_list_items: int | UseDefault = USE_DEFAULT,
    max_list_bytes: int | UseDefault = USE_DEFAULT,
    notification_buffer: int | UseDefault = USE_DEFAULT,
    strict: bool | UseDefault = USE_DEFAULT,
    on_stdout_noise: NoiseCallback | UseDefault | None = USE_DEFAULT,
    roots: RootsHandler | UseDefault | None = USE_DEFAULT,
    sampling: SamplingHandler | UseDefault | None = USE_DEFAULT,
    elicitation: ElicitationHandler | UseDefault | None = USE_DEFAULT,
    max_input_rounds: int | UseDefault = USE_DEFAULT,
    validate_output: bool | UseDefault = USE_DEFAULT,
    era_cache: bool | EraCache | UseDefault = USE_DEFAULT,
    server_stream: bool | UseDefault = USE_DEFAULT,
    on_notification: NotificationCallback | UseDefault | None = USE_DEFAULT,
) -> Client:
    """Connects a client whose tasks run in ``nursery``; you close it with
    :meth:`~mcpwire.Client.aclose`. Takes what :func:`open_client` takes."""
    # The keywords are spelt out again, not passed as **kwargs, so that editors and type
    # checkers see each one with its type.
    merged = merge_options(options, _overrides(locals()))
    require_trio("mcpwire.connect_client", "open_client")
    client = Client(resolve_target(target), nursery, merged)
    try:
        await client.connect()
    except BaseException:
        await client.aclose()
        raise
    return client


def _overrides(arguments: dict[str, object]) -> dict[str, object]:
    """The option keywords of :func:`open_client` or :func:`connect_client`, from its
    ``locals()`` taken first thing (so exactly its parameters)."""
    return {k: v for k, v in arguments.items() if k not in ("target", "options", "nursery")}
