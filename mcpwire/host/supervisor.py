"""Supervision: each enabled server's connection, from its start to its stop.

Theory of operation: each enabled server gets a supervisor task in the host's nursery. The
supervisor connects (bounded by the server's connect timeout), reads the lists the server
advertises — tools, prompts, resources and resource templates; a server without the ``tools``
capability is connected with no tools, not refused — into the registry and the catalog (a list is
idempotent, so it runs under the server's retry policy), checks each tool against its pin when the
host pins definitions, then watches the connection (notifications, resource subscriptions,
periodic health checks) until it ends; it then marks the server ``error``, waits a jittered
exponential backoff and connects again (a stdio server is restarted, an HTTP one reconnected). A
failing server is data (its status and error text), never an exception in the host nursery; so is
an unexpected error raised while serving one server (logged with its traceback), since it must not
take the other servers down; cancellation and ``KeyboardInterrupt`` still propagate.

The :class:`Supervisor` is one part of :class:`~mcpwire.host.Host`: it is given the host's shared
state (:mod:`mcpwire.host.state`) and its oversight (to check pins), and runs its tasks in the
nursery the host opens when it is entered.
"""

from __future__ import annotations

import builtins
import logging
import math
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, Final

import trio

from ..client import Client, ClientOptions, open_client
from ..errors import MCPWireError, RPCError
from ..protocol.types import Tool
from .config import ServerConfig
from .oversight import Oversight
from .policies import CallContext
from .servers import Backoff, ServerInfo, ServerStatus
from .state import HostState, describe

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "ClientFactory", "Supervisor"]

log = logging.getLogger("mcpwire.host")

#: most seconds one connection attempt may take, listing included (a server's
#: ``connect_timeout_seconds`` overrides it)
DEFAULT_CONNECT_TIMEOUT: Final = 60.0
#: most seconds one health check may take
HEALTH_TIMEOUT: Final = 10.0
#: a connection that lived this long resets the reconnection backoff
STABLE_AFTER: Final = 30.0
#: seconds the shutdown of one server may take before it is abandoned
STOP_TIMEOUT: Final = 10.0

ClientFactory = Callable[[ServerConfig], AbstractAsyncContextManager[Client]]

#: how a server's connection is expected to fail; anything else is logged with its traceback
_EXPECTED: Final = (MCPWireError, OSError, ValueError, ImportError)


def _sole(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (a nursery wraps what it raises)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class Supervisor:
    """Connection lifecycle, lists and watching of every server (part of the host).

    Attributes:
        nursery: where the supervisors run; the host sets it while it runs.
        client_options: every server's client options before its own (see :mod:`mcpwire.host.host`).
        client_options_for: more client options per server, asked for at each connection.
        on_notification: called with (server, method, params) for every notification.
    """

    def __init__(
        self,
        state: HostState,
        oversight: Oversight,
        *,
        backoff: Backoff,
        health_interval: float,
        connect_timeout: float,
        client_factory: ClientFactory | None,
        client_options: ClientOptions,
    ) -> None:
        self._state = state
        self._oversight = oversight
        self._backoff = backoff
        self._health_interval = health_interval
        self._connect_timeout = connect_timeout
        self._client_factory = client_factory
        self.client_options = client_options
        self.client_options_for: Callable[[ServerConfig], Mapping[str, object]] | None = None
        self.on_notification: Callable[[str, str, Mapping[str, object]], None] | None = None
        self.nursery: trio.Nursery | None = None

    # -- starting and stopping --------------------------------------------------------------------

    def start(self, info: ServerInfo) -> None:
        """Hands an enabled server to a supervisor task (a disabled one is marked done)."""
        if not info.config.enabled:
            info._started.set()
            info._finished.set()
            return
        assert self.nursery is not None
        info._scope = trio.CancelScope()
        info._stopping = False
        info._started = trio.Event()
        info._finished = trio.Event()
        self.nursery.start_soon(self._supervise, info)

    async def stop(self, info: ServerInfo) -> None:
        """Ends a server's supervision: its connection in order, else by cancellation (bounded by
        ``STOP_TIMEOUT`` each); then it is ``disconnected``."""
        if info._scope is not None and not info._finished.is_set():
            info._stopping = True
            if info._lost is not None:
                # connected: end the connection in order (the client closes its streams itself)
                info._lost.set()
                with trio.move_on_after(STOP_TIMEOUT):
                    await info._finished.wait()
            # connecting, backing off, or not done in time: cancel
            info._scope.cancel()
            with trio.move_on_after(STOP_TIMEOUT):
                await info._finished.wait()
        self._forget_connection(info)
        if info.name in self._state.servers:
            self._state.update_status(info.name, ServerStatus.DISCONNECTED, None)

    def _forget_connection(self, info: ServerInfo) -> None:
        info.client = None
        info.capabilities = None
        self._state.registry.remove_server(info.name)
        self._state.catalog.remove_server(info.name)
        runtime = self._state.runtime.get(info.name)
        if runtime is not None:
            runtime.cache.clear()
        info._uris.clear()
        if info.tool_count:
            info.tool_count = 0
            self._state.emit(info, "tools")
        if info.prompt_count:
            info.prompt_count = 0
            self._state.emit(info, "prompts")
        if info.resource_count or info.template_count:
            info.resource_count = info.template_count = 0
            self._state.emit(info, "resources")

    # -- supervision ------------------------------------------------------------------------------

    async def _supervise(self, info: ServerInfo) -> None:
        assert info._scope is not None
        attempt = 0
        connected = False
        verb = "restarting" if info.config.type == "stdio" else "reconnecting"
        try:
            with info._scope:
                while True:
                    if attempt == 0 or connected:
                        self._state.update_status(info.name, ServerStatus.CONNECTING, None)
                    # else: a server that never got connected stays "error" (with its last error)
                    # while it retries, rather than flapping through "connecting"
                    info._end_reason = None
                    began = trio.current_time()
                    connected = False
                    try:
                        connected = await self._run_once(info)
                        error = info._end_reason or "the server closed the connection"
                    except Exception as exc:
                        # anything else is a bug, but one that ends this server's connection
                        # only: the host and its other servers keep running. BaseExceptions
                        # (cancellation, KeyboardInterrupt) are not caught.
                        cause = _sole(exc)
                        if not isinstance(cause, _EXPECTED):
                            log.error("%s: unexpected error; %s", info.name, verb, exc_info=exc)
                        error = info._end_reason or describe(cause)
                    finally:
                        info._lost = None
                        self._forget_connection(info)
                    if info._stopping:
                        return
                    stable = connected and trio.current_time() - began >= STABLE_AFTER
                    attempt = 0 if stable else attempt + 1
                    self._state.update_status(info.name, ServerStatus.ERROR, error)
                    info._started.set()
                    delay = self._backoff.delay(attempt - 1 if attempt else 0)
                    log.info("%s: %s in %.2fs", info.name, verb, delay)
                    await trio.sleep(delay)
                    info.restart_count += 1
        finally:
            info._started.set()
            info._finished.set()

    def _open(self, config: ServerConfig) -> AbstractAsyncContextManager[Client]:
        if self._client_factory is not None:
            return self._client_factory(config)
        return open_client(config.to_spec(), options=self._options_for(config))

    def _options_for(self, config: ServerConfig) -> ClientOptions:
        """The host's client options with this server's own on top (see :mod:`mcpwire.host.host`)."""
        changes: dict[str, object] = {"timeout": config.policy.timeout_seconds}
        if self.client_options_for is not None:
            changes.update(self.client_options_for(config))
        if config.connect_timeout_seconds is not None:
            changes["connect_timeout"] = config.connect_timeout_seconds
        if config.era is not None:
            changes["era"] = config.era
        if config.protocol_version is not None:
            changes["protocol_version"] = config.protocol_version
        return self.client_options.replace(**changes)

    async def _run_once(self, info: ServerInfo) -> bool:
        """One connection's lifetime; returns True once it got connected."""
        limit = info.config.connect_timeout_seconds or self._connect_timeout
        # the deadline covers starting, the handshake and the first lists, and is lifted once
        # connected (a scope around the whole block, so the client's nursery nests inside it)
        with trio.CancelScope(deadline=trio.current_time() + limit) as connecting:
            async with self._open(info.config) as client:
                era = client.era
                info.era = None if era is None else str(getattr(era, "value", era))
                info.protocol_version = client.protocol_version
                info.capabilities = client.server_capabilities
                info.implementation = getattr(client, "server_info", None)
                await self._refresh_lists(info, client)
                connecting.deadline = math.inf
                info.client = client
                # a fresh connection starts with a closed circuit
                self._state.runtime[info.name].breaker.success()
                self._state.update_status(info.name, ServerStatus.CONNECTED, None)
                log.info(
                    "%s: connected over %s (%s, %s): %d tools, %d prompts, %d resources",
                    info.name,
                    info.config.type,
                    info.era,
                    info.protocol_version,
                    info.tool_count,
                    info.prompt_count,
                    info.resource_count,
                )
                info._started.set()
                lost = info._lost = trio.Event()
                if info._stopping:
                    return True

                async def closed() -> None:
                    await client.wait_closed()
                    lost.set()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(closed)
                    nursery.start_soon(self._watch_notifications, info, client)
                    nursery.start_soon(self._watch_resources, info, client)
                    nursery.start_soon(self._health, info, client, lost)
                    await lost.wait()
                    nursery.cancel_scope.cancel()
            return True
        info._end_reason = f"did not connect within {limit:g}s (connect_timeout_seconds)"
        return False

    # -- lists ------------------------------------------------------------------------------------

    async def _refresh_lists(self, info: ServerInfo, client: Client) -> None:
        """Reads every list the server advertises. Tools must list; prompts and resources may fail
        (logged; the server stays usable for its tools)."""
        await self._refresh_tools(info, client)
        await self._refresh_prompts(info, client)
        await self._refresh_resources(info, client)

    async def _listed(self, info: ServerInfo, method: str, fetch: Callable[[], Any]) -> Any:
        # listing is idempotent: a transient failure is retried under the server's policy
        ctx = CallContext(server=info.name, tool=method, arguments={}, kind="list")
        return await self._state.runtime[info.name].stack.retry.run(ctx, fetch)

    async def _refresh_tools(self, info: ServerInfo, client: Client) -> None:
        async with info._refresh_lock:
            if client.server_capabilities.tools is None:
                tools: builtins.list[Tool] = []  # LC: list only what the server advertises
            else:
                tools = await self._listed(info, "tools/list", client.list_tools)
            quarantined = await self._oversight.check_pins(info, tools)
            cfg = info.config
            self._state.registry.set_tools(
                info.name,
                tools,
                prefix=cfg.prefix,
                allowed=cfg.allowed_tools,
                disabled=cfg.disabled_tools,
                quarantined=quarantined,
            )
            info.tool_count = self._state.registry.count(info.name)
        self._state.emit(info, "tools")

    async def _refresh_prompts(self, info: ServerInfo, client: Client) -> None:
        if client.server_capabilities.prompts is None:
            self._state.catalog.set_prompts(info.name, [])
        else:
            try:
                prompts = await self._listed(info, "prompts/list", client.list_prompts)
            except MCPWireError as exc:
                log.warning("%s: cannot list prompts: %s", info.name, describe(exc))
                return
            self._state.catalog.set_prompts(info.name, prompts, prefix=info.config.prefix)
        info.prompt_count = self._state.catalog.counts(info.name)[0]
        self._state.emit(info, "prompts")

    async def _refresh_resources(self, info: ServerInfo, client: Client) -> None:
        if client.server_capabilities.resources is None:
            self._state.catalog.set_resources(info.name, [])
            self._state.catalog.set_templates(info.name, [])
        else:
            prefix = info.config.prefix
            try:
                resources = await self._listed(info, "resources/list", client.list_resources)
            except MCPWireError as exc:
                log.warning("%s: cannot list resources: %s", info.name, describe(exc))
            else:
                self._state.catalog.set_resources(info.name, resources, prefix=prefix)
            try:
                templates = await self._listed(info, "resources/templates/list", client.list_resource_templates)
            except RPCError as exc:
                if not exc.is_method_not_found:
                    log.warning("%s: cannot list resource templates: %s", info.name, describe(exc))
                templates = []
            except MCPWireError as exc:
                log.warning("%s: cannot list resource templates: %s", info.name, describe(exc))
                templates = []
            self._state.catalog.set_templates(info.name, templates, prefix=prefix)
        _, info.resource_count, info.template_count = self._state.catalog.counts(info.name)
        self._state.emit(info, "resources")

    # -- watching ---------------------------------------------------------------------------------

    async def _watch_notifications(self, info: ServerInfo, client: Client) -> None:
        async with AsyncExitStack() as stack:
            if info.era == "modern":
                # 2026-07-28: list changes arrive only on a subscriptions/listen stream; they are
                # also delivered to the client's notification stream read below
                caps = client.server_capabilities
                try:
                    await stack.enter_async_context(
                        client.subscribe(
                            tools_list_changed=caps.tools is not None,
                            prompts_list_changed=caps.prompts is not None,
                            resources_list_changed=caps.resources is not None,
                            timeout=HEALTH_TIMEOUT,
                        )
                    )
                except MCPWireError as exc:
                    log.info("%s: no list-change subscription: %s", info.name, describe(exc))
            try:
                await self._read_notifications(info, client)
            except MCPWireError as exc:
                log.info("%s: notification stream ended: %s", info.name, describe(exc))

    async def _read_notifications(self, info: ServerInfo, client: Client) -> None:
        async for note in client.notifications():
            await self._handle(info, client, note.method, note.params)

    async def _handle(self, info: ServerInfo, client: Client, method: str, params: Mapping[str, object]) -> None:
        if self.on_notification is not None:
            self.on_notification(info.name, method, params)
        cache = self._state.runtime[info.name].cache
        try:
            if method == "notifications/tools/list_changed":
                dropped = cache.invalidate(info.name, kind="tool")
                log.info("%s: tool list changed; %d cached results dropped", info.name, dropped)
                await self._refresh_tools(info, client)
            elif method == "notifications/prompts/list_changed":
                await self._refresh_prompts(info, client)
            elif method == "notifications/resources/updated":
                uri = params.get("uri")
                if isinstance(uri, str):
                    cache.invalidate(info.name, kind="resource", name=uri)
            elif method == "notifications/resources/list_changed":
                cache.invalidate(info.name, kind="resource")
                await self._refresh_resources(info, client)
        except MCPWireError as exc:
            log.warning("%s: cannot refresh after %s: %s", info.name, method, describe(exc))

    async def _watch_resources(self, info: ServerInfo, client: Client) -> None:
        """Subscribes to the URIs of cached reads, so ``resources/updated`` can invalidate them."""
        if not client.server_capabilities.flag("resources", "subscribe"):
            return
        subscribed: set[str] = set()
        async with AsyncExitStack() as current:
            while True:
                await info._uris_changed.wait()
                info._uris_changed = trio.Event()
                wanted = set(info._uris)
                if wanted <= subscribed:
                    continue
                try:
                    if info.era == "modern":
                        # LC-30: no resources/subscribe on 2026-07-28; one listen stream carries
                        # every URI: open the new one, then end the old
                        fresh = AsyncExitStack()
                        await fresh.enter_async_context(client.subscribe(sorted(wanted), timeout=HEALTH_TIMEOUT))
                        await current.aclose()
                        current.push_async_exit(fresh)
                        subscribed = wanted
                    else:
                        for uri in sorted(wanted - subscribed):
                            await client.request("resources/subscribe", {"uri": uri}, timeout=HEALTH_TIMEOUT)
                            subscribed.add(uri)
                except MCPWireError as exc:
                    log.info("%s: cannot subscribe to resources: %s", info.name, describe(exc))
                    subscribed |= wanted  # do not ask again; entries expire by their TTL

    async def _health(self, info: ServerInfo, client: Client, lost: trio.Event) -> None:
        # UT-P02: "Implementations SHOULD periodically issue pings to detect connection health";
        # UT-P03: 2026-07-28 has no ping, so modern servers get server/discover instead
        interval = info.config.health_interval_seconds
        if interval is None:
            interval = self._health_interval
        if not math.isfinite(interval) or interval <= 0:
            return
        method = "server/discover" if info.era == "modern" else "ping"
        while True:
            await trio.sleep(interval)
            try:
                if info.era == "modern":
                    await client.discover(timeout=min(HEALTH_TIMEOUT, interval))
                else:
                    await client.ping(timeout=min(HEALTH_TIMEOUT, interval))
            except MCPWireError as exc:
                info.health_failures += 1
                info._end_reason = f"health check ({method}) failed: {describe(exc)}"
                log.warning("%s: %s; reconnecting", info.name, info._end_reason)
                lost.set()
                return
            info.last_health_check = time.time()
