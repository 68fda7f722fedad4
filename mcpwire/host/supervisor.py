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

This module is one part of :class:`~mcpwire.host.Host` (a mixin); the host module holds the calls.
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
from .catalog import Catalog
from .config import ServerConfig
from .events import EventHub, EventKind, HostEvent
from .pins import Pin, PinChange, PinStore, check_pin, definition_diff
from .policies import AuditRecord, AuditSink, CallContext
from .registry import ToolRegistry
from .servers import Backoff, Runtime, ServerInfo, ServerStatus

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "ClientFactory", "Supervision"]

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


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _sole(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (a nursery wraps what it raises)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class Supervision:
    """Connection lifecycle, lists and events of every server (part of the host)."""

    # set by Host.__init__
    registry: ToolRegistry
    catalog: Catalog
    pins: PinStore | None
    audit: AuditSink | None
    _servers: dict[str, ServerInfo]
    _runtime: dict[str, Runtime]
    _hub: EventHub
    _backoff: Backoff
    _health_interval: float
    _connect_timeout: float
    _client_factory: ClientFactory | None
    _client_options: ClientOptions
    client_options_for: Callable[[ServerConfig], Mapping[str, object]] | None
    on_notification: Callable[[str, str, Mapping[str, object]], None] | None
    _changed: trio.Event
    _nursery: trio.Nursery | None

    # -- status and events ------------------------------------------------------------------------

    def update_status(self, name: str, status: ServerStatus | str, error: str | None = None) -> None:
        """Sets a server's status (and why it is not connected), logs it and tells listeners.

        ``status`` is a :class:`ServerStatus` or its value (``"connected"``), as APIs in other
        languages pass it; it is checked before anything is stored. The supervisor calls this on
        every transition; a repeated identical status is ignored.

        Raises:
            ValueError: ``status`` names no status.
        """
        if not isinstance(status, ServerStatus):
            try:
                status = ServerStatus(status)
            except ValueError:
                known = ", ".join(repr(s.value) for s in ServerStatus)
                raise ValueError(f"server {name!r}: unknown status {status!r}; expected one of {known}") from None
        info = self._servers[name]
        if info.status is status and info.error == error:
            return
        previous = info.status
        info.status = status
        info.error = error
        info.status_changed_at = time.time()
        if status is ServerStatus.CONNECTED:
            info.connected_since = info.status_changed_at
            info._same_failures = 0
        elif previous is ServerStatus.CONNECTED:
            info.connected_since = None
        if error:
            repeated = error == info.last_error
            info._same_failures = info._same_failures + 1 if repeated else 1
            info.last_error = error
            if repeated:
                log.warning("%s: %s again (%d times in a row): %s", name, status.value, info._same_failures, error)
            else:
                log.error("%s: %s: %s", name, status.value, error)
        elif status is not ServerStatus.CONNECTED:  # connected is logged with its counts
            log.info("%s: %s", name, status.value)
        self._changed.set()
        self._changed = trio.Event()
        self._emit(info, "status", previous=previous)

    def _emit(self, info: ServerInfo, kind: EventKind, *, previous: ServerStatus | None = None, **extra: Any) -> None:
        if not self._hub.wants(kind):
            return
        self._hub.emit(
            HostEvent(
                server=info.name,
                kind=kind,
                status=info.status.value,
                previous=None if previous is None else previous.value,
                error=info.error,
                restart_count=info.restart_count,
                tool_count=info.tool_count,
                prompt_count=info.prompt_count,
                resource_count=info.resource_count,
                **extra,
            )
        )

    def _record(self, record: AuditRecord) -> None:
        """Writes one audit record to the host's sink and to event listeners."""
        if self.audit is not None:
            try:
                self.audit.write(record)
            except Exception as exc:  # a failing sink must not fail what it records
                log.warning("audit sink %r cannot write: %s", self.audit, describe(exc))
        info = self._servers.get(record.server)
        if info is not None:
            self._emit(info, "audit", record=record)

    # -- starting and stopping --------------------------------------------------------------------

    def _start(self, info: ServerInfo) -> None:
        if not info.config.enabled:
            info._started.set()
            info._finished.set()
            return
        assert self._nursery is not None
        info._scope = trio.CancelScope()
        info._stopping = False
        info._started = trio.Event()
        info._finished = trio.Event()
        self._nursery.start_soon(self._supervise, info)

    async def _stop(self, info: ServerInfo) -> None:
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
        if info.name in self._servers:
            self.update_status(info.name, ServerStatus.DISCONNECTED, None)

    def _forget_connection(self, info: ServerInfo) -> None:
        info.client = None
        info.capabilities = None
        self.registry.remove_server(info.name)
        self.catalog.remove_server(info.name)
        runtime = self._runtime.get(info.name)
        if runtime is not None:
            runtime.cache.clear()
        info._uris.clear()
        if info.tool_count:
            info.tool_count = 0
            self._emit(info, "tools")
        if info.prompt_count:
            info.prompt_count = 0
            self._emit(info, "prompts")
        if info.resource_count or info.template_count:
            info.resource_count = info.template_count = 0
            self._emit(info, "resources")

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
                        self.update_status(info.name, ServerStatus.CONNECTING, None)
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
                    self.update_status(info.name, ServerStatus.ERROR, error)
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
        return self._client_options.replace(**changes)

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
                self._runtime[info.name].breaker.success()
                self.update_status(info.name, ServerStatus.CONNECTED, None)
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
        return await self._runtime[info.name].stack.retry.run(ctx, fetch)

    async def _refresh_tools(self, info: ServerInfo, client: Client) -> None:
        async with info._refresh_lock:
            if client.server_capabilities.tools is None:
                tools: builtins.list[Tool] = []  # LC: list only what the server advertises
            else:
                tools = await self._listed(info, "tools/list", client.list_tools)
            quarantined = await self._check_pins(info, tools)
            cfg = info.config
            self.registry.set_tools(
                info.name,
                tools,
                prefix=cfg.prefix,
                allowed=cfg.allowed_tools,
                disabled=cfg.disabled_tools,
                quarantined=quarantined,
            )
            info.tool_count = self.registry.count(info.name)
        self._emit(info, "tools")

    async def _refresh_prompts(self, info: ServerInfo, client: Client) -> None:
        if client.server_capabilities.prompts is None:
            self.catalog.set_prompts(info.name, [])
        else:
            try:
                prompts = await self._listed(info, "prompts/list", client.list_prompts)
            except MCPWireError as exc:
                log.warning("%s: cannot list prompts: %s", info.name, describe(exc))
                return
            self.catalog.set_prompts(info.name, prompts, prefix=info.config.prefix)
        info.prompt_count = self.catalog.counts(info.name)[0]
        self._emit(info, "prompts")

    async def _refresh_resources(self, info: ServerInfo, client: Client) -> None:
        if client.server_capabilities.resources is None:
            self.catalog.set_resources(info.name, [])
            self.catalog.set_templates(info.name, [])
        else:
            prefix = info.config.prefix
            try:
                resources = await self._listed(info, "resources/list", client.list_resources)
            except MCPWireError as exc:
                log.warning("%s: cannot list resources: %s", info.name, describe(exc))
            else:
                self.catalog.set_resources(info.name, resources, prefix=prefix)
            try:
                templates = await self._listed(info, "resources/templates/list", client.list_resource_templates)
            except RPCError as exc:
                if not exc.is_method_not_found:
                    log.warning("%s: cannot list resource templates: %s", info.name, describe(exc))
                templates = []
            except MCPWireError as exc:
                log.warning("%s: cannot list resource templates: %s", info.name, describe(exc))
                templates = []
            self.catalog.set_templates(info.name, templates, prefix=prefix)
        _, info.resource_count, info.template_count = self.catalog.counts(info.name)
        self._emit(info, "resources")

    async def _check_pins(self, info: ServerInfo, tools: builtins.list[Tool]) -> set[str]:
        """Pins first-seen tools and quarantines changed ones; returns the quarantined names.
        Without pins, a changed definition is only logged."""
        if self.pins is None:
            # SEC-10: a tool whose description or schema changes under the same name deserves a look
            before = {r.tool.name: r.tool for r in self.registry.tools(info.name, include_quarantined=True)}
            for new in tools:
                old = before.get(new.name)
                if old is not None and (old.description, old.input_schema) != (new.description, new.input_schema):
                    log.warning("%s: tool %r changed its description or inputSchema", info.name, new.name)
            return set()
        quarantined: set[str] = set()
        for tool in tools:
            pin, change = await check_pin(self.pins, info.name, tool)
            if pin.quarantined:
                quarantined.add(tool.name)
            if change != "same" and change != "quarantined":
                self._pin_changed(info, pin, change)
        return quarantined

    def _pin_changed(self, info: ServerInfo, pin: Pin, change: PinChange | str, *, by: str | None = None) -> None:
        diff = None
        if change == "changed" and pin.pending_definition is not None:
            diff = definition_diff(pin.definition, pin.pending_definition, label=f"{info.name}/{pin.tool}")
            log.warning(
                "%s: tool %r changed its definition since it was pinned; quarantined until approved",
                info.name,
                pin.tool,
            )
        elif change == "reordered" and pin.reordered_definition is not None:
            diff = definition_diff(pin.definition, pin.reordered_definition, label=f"{info.name}/{pin.tool}")
            log.info(
                "%s: tool %r lists the words of its definition in another order; still pinned", info.name, pin.tool
            )
        elif change in ("reverted", "approved"):
            log.info(
                "%s: tool %r is %s",
                info.name,
                pin.tool,
                "back to its pinned definition" if change == "reverted" else "approved",
            )
        outcome = {
            "pinned": "pinned",
            "changed": "quarantined",
            "reordered": "pinned",
            "reverted": "pinned",
            "approved": "pinned",
        }[change]
        self._emit(info, "pin", pin=pin, change=change, diff=diff)
        self._record(
            AuditRecord(
                time=time.time(),
                kind="pin",
                server=info.name,
                tool=pin.tool,
                decision=change,
                outcome=outcome,
                diff=diff,
                by=by,
                arguments={"hash": pin.hash, "pending_hash": pin.pending_hash, "reordered_hash": pin.reordered_hash},
            )
        )

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
        cache = self._runtime[info.name].cache
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
