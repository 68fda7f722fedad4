"""Running the service: one trio run with the host's actors and the HTTP server.

Theory of operation: the store is opened (and migrated) first; the config file's servers, with
the store's changes laid over them (:mod:`mcpwire.service.servers`), make the host. The host is
entered without waiting for its servers, the HTTP server (the built-in one of
:mod:`mcpwire.server.http1server`, or hypercorn's trio worker when chosen) starts serving the app at once (``/healthz``
answers while servers connect; ``/readyz`` waits for every enabled server to be tried), and one
line per server is printed as soon as each has been tried (bounded), then the URLs. SIGINT or
SIGTERM ends the event streams, stops accepting connections and gives requests in flight
``drain_timeout`` seconds; then the host closes every server in order and the store closes; the
exit status is 0. A second signal cuts the drain short.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final, TextIO

import trio

from .._version import __version__
from ..errors import ConfigError
from ..host import Host, HostConfig, ServerInfo, ServerStatus, load_config, parse_server
from ..host.config import find_config
from ..redaction import clean_terminal, shorten
from ..server.http import HttpServerName, serve_http
from ..testing import demo_server_argv
from .agent_runs import agent_routes
from .app import build_app
from .localfiles import TOKEN_FILE, announce, data_folder
from .servers import Source, effective_config
from .settings import Settings
from .store import ServerRow, Store, describe_url, open_store
from .store_bridge import service_host

__all__ = ["FIRST_ATTEMPT_TIMEOUT", "ServeOptions", "serve"]

log = logging.getLogger("mcpwire.service")

#: seconds start-up waits for each server's first attempt before printing it as still connecting
FIRST_ATTEMPT_TIMEOUT: Final = 30.0
#: the youngest generation's collection threshold once serving (CPython's default: 700)
GC_YOUNG_THRESHOLD: Final = 20_000
#: seconds between two full collections of everything, frozen objects too (see settle_memory)
GC_RESETTLE_S: Final = 600.0
DEMO_NAME: Final = "demo"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    settings: Settings
    config: str | None = None
    db: str | None = None
    stdio: bool = False
    first_attempt_timeout: float = FIRST_ATTEMPT_TIMEOUT
    #: ``builtin`` (HTTP/1.1, mcpwire's own server) or ``hypercorn`` (HTTP/2 as well)
    http_server: HttpServerName = "builtin"
    #: the admin token is the one kept in the data folder (loopback without a token given)
    local_token: bool = False


def _demo_config() -> HostConfig:
    argv = demo_server_argv()
    entry: dict[str, object] = {
        "command": argv[0],
        "args": list(argv[1:]),
        "description": "the bundled demo server (no mcp.json was found)",
    }
    return HostConfig(servers=(parse_server(DEMO_NAME, entry),), entries={DEMO_NAME: entry})


@dataclass(frozen=True, slots=True)
class LoadedServers:
    config: HostConfig
    sources: dict[str, Source]
    problems: list[str]
    base_path: Path | None
    #: the config file's own servers (the demo server's config when there is none)
    file: HostConfig | None = None


def load_servers(config: str | None, rows: list[ServerRow]) -> LoadedServers:
    """The servers to run and where each came from; the bundled demo server when there is no
    config file anywhere and the store holds no server either.

    Raises:
        ConfigError: the named config file is missing or unreadable.
    """
    found = find_config(config)
    if found is None and not rows:
        demo = _demo_config()
        return LoadedServers(demo, {DEMO_NAME: "config"}, [], None, demo)
    file = load_config(found) if found is not None else HostConfig()
    merged, sources, problems = effective_config(file, rows)
    base = found.resolve().parent if found is not None else None
    return LoadedServers(merged, sources, [*file.problems, *problems], base, file)


def server_line(info: ServerInfo) -> str:
    """``name  transport  era revision  N tools`` or the error, terminal-safe."""
    name = clean_terminal(info.name, newlines=False)
    head = f"  {name:<16} {info.transport:<6}"
    if not info.config.enabled:
        return f"{head} disabled"
    if info.status is ServerStatus.CONNECTED:
        era = info.era or "?"
        revision = info.protocol_version or "?"
        return f"{head} {era} {revision}  {info.tool_count} tool{'s' if info.tool_count != 1 else ''}"
    if info.status is ServerStatus.ERROR:
        error = clean_terminal(shorten(info.error or "failed", 160), newlines=False)
        return f"{head} error: {error} (retrying)"
    return f"{head} still connecting"


def settle_memory() -> None:
    """Collects everything (frozen objects too), then freezes what is left out of later
    collections, and has the youngest generation collected every :data:`GC_YOUNG_THRESHOLD`
    allocations instead of 700.

    A call leaves few objects behind, so the collector's time went to walking objects that live
    as long as the process: a full collection every thousand calls or so, over every object
    start-up made (30-40 ms each), and a young one every few calls. That was about a fifth of
    the service's time per call at 64 calls in flight. Cyclic garbage a call makes is still
    collected, in fewer and larger batches (a few ms each, every thousand calls or so).
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, oldest)


async def keep_memory_settled(stop: trio.Event, interval: float = GC_RESETTLE_S) -> None:
    """:func:`settle_memory` now and every ``interval`` seconds until ``stop`` is set: a frozen
    object that becomes cyclic garbage later (a server removed or restarted) is freed by the
    next round."""
    while not stop.is_set():
        settle_memory()
        with trio.move_on_after(interval):
            await stop.wait()


async def _first_attempts(host: Host, timeout: float) -> None:
    """Waits until every enabled server has connected or failed once (at most ``timeout``)."""

    def settled() -> bool:
        return all(
            i.status in (ServerStatus.CONNECTED, ServerStatus.ERROR) or i.restart_count > 0
            for i in host.list()
            if i.config.enabled
        )

    with trio.move_on_after(timeout):
        async with host.events(buffer=1000) as events:
            if settled():
                return
            async for _ in events:
                if settled():
                    return


async def serve(
    options: ServeOptions, *, out: TextIO | None = None, ready: Callable[[list[str]], None] | None = None
) -> int:
    """Runs the service until SIGINT or SIGTERM; returns the exit status.

    Args:
        out: where start-up lines go (stdout; stderr with ``--stdio``, whose stdout is the wire).
        ready: called with the bound URLs once serving (tests).
    """
    out = out or (sys.stderr if options.stdio else sys.stdout)
    settings = options.settings
    store = await open_store(options.db)
    try:
        rows = await store.servers()
        loaded = load_servers(options.config, rows)
        for problem in loaded.problems:
            print(f"  config: {clean_terminal(problem, newlines=False)}", file=out)
        host = service_host(loaded.config, store, settings)
        app = build_app(
            host,
            store,
            settings,
            sources=loaded.sources,
            rows=rows,
            base_path=loaded.base_path,
            file=loaded.file,
            extra_routes=agent_routes(host, find_config(options.config), store),
        )
        service = app.state.service
        if options.stdio and service.gateway is None:
            print("mcpwire serve: --stdio needs the MCP gateway, which this build lacks", file=sys.stderr)
            return 2
        async with host, trio.open_nursery() as nursery:
            shutdown = trio.Event()
            nursery.start_soon(_signals, shutdown, service.begin_shutdown, nursery.cancel_scope)
            if options.stdio:
                await _serve_stdio(app, service, host, options, out, shutdown)
            else:
                await _serve_http(app, service, host, options, out, shutdown, ready, store)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await store.aclose()
    print("mcpwire serve: stopped", file=out, flush=True)
    return 0


async def _serve_http(
    app: Any,
    service: Any,
    host: Host,
    options: ServeOptions,
    out: TextIO,
    shutdown: trio.Event,
    ready: Callable[[list[str]], None] | None,
    store: Store,
) -> None:
    settings = options.settings
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(
            partial(
                serve_http,
                app,
                host=settings.host,
                port=settings.port,
                options=settings.server_options(),
                server=options.http_server,
                shutdown_trigger=shutdown.wait,
            )
        )
        print(f"mcpwire serve {__version__}", file=out, flush=True)
        await _first_attempts(host, options.first_attempt_timeout)
        for info in host.list():
            print(server_line(info), file=out)
        for url in binds:
            print(f"API       {url}/api/v1   (OpenAPI: {url}/api/v1/openapi.json)", file=out)
            print(f"MCP       {url}/mcp", file=out)
            print(f"events    {url}/events   metrics {url}/metrics   health {url}/healthz {url}/readyz", file=out)
            print(f"console   {url}/", file=out)
        print(f"database  {describe_url(options.db)}", file=out)
        with contextlib.ExitStack() as announced:
            token = settings.token
            if token is not None and options.local_token:
                # as Jupyter does: a link that signs the console in, for the person who started it
                for url in binds:
                    print(f"sign in   {url}/login?token={token.reveal()}", file=out)
                print(f"token     {data_folder() / TOKEN_FILE} (the mcpwire command line finds it)", file=out)
                announced.enter_context(announce(int(binds[0].rsplit(":", 1)[1])))
            elif token is not None:
                print("token     required (Authorization: Bearer ...)", file=out)
            else:
                print("token     none: authentication is off (--no-auth)", file=out)
            print("Ctrl+C stops.", file=out, flush=True)
            nursery.start_soon(keep_memory_settled, shutdown)
            if ready is not None:
                ready(binds)
            await shutdown.wait()


async def _serve_stdio(
    app: Any, service: Any, host: Host, options: ServeOptions, out: TextIO, shutdown: trio.Event
) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)

        async def gateway() -> None:
            await service.gateway.serve_stdio()
            shutdown.set()

        # a desktop client may give up on its initialize within seconds: the gateway answers at
        # once with what is connected, and says tools/list_changed as the others arrive
        nursery.start_soon(gateway)
        print("mcpwire serve: the MCP gateway is on stdin/stdout", file=out, flush=True)

        async def report() -> None:
            await _first_attempts(host, options.first_attempt_timeout)
            for info in host.list():
                print(server_line(info), file=out, flush=True)
            await keep_memory_settled(shutdown)

        nursery.start_soon(report)
        await shutdown.wait()
        nursery.cancel_scope.cancel()


async def _signals(shutdown: trio.Event, begin: Callable[[], None], scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            if not shutdown.is_set():
                log.info("%s: draining requests, then closing every server", signal.Signals(signum).name)
                begin()
                shutdown.set()
            else:
                log.warning("second %s: stopping now", signal.Signals(signum).name)
                scope.cancel()
                return


def config_error_message(exc: ConfigError) -> str:
    return clean_terminal(str(exc).splitlines()[0], newlines=False)
