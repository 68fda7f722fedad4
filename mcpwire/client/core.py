"""The MCP client: one typed surface over both eras and every transport.

Theory of operation: a :class:`Client` is a thin typed surface over four parts that share one
:class:`~mcpwire.client.state.Link`: the :class:`~mcpwire.client.connection.Connector`
(transport, era detection, the legacy session's life), the :class:`~mcpwire.client.engine.Engine`
(ids, waiters, deadlines, re-sends, cancellation on the wire), the
:class:`~mcpwire.client.dispatch.Dispatcher` (the transport's sink: answers, progress,
notifications, server requests) and :class:`~mcpwire.client.subscriptions.Subscriptions`. Each
method here builds its params, asks the engine, and decodes the result into its type.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Final

import msgspec
import trio

from .._version import __version__
from ..errors import ClientClosed, InvalidResponse, RequestTimeout
from ..protocol import jsonrpc
from ..protocol.http import HeaderSpec, tool_header_spec
from ..protocol.lifecycle import SessionState
from ..protocol.session import ClientSession, ToolCallResponse
from ..protocol.types import (
    CallToolWire,
    CallToolWireLenient,
    CompleteResult,
    Completion,
    ContentBlock,
    DiscoverResult,
    GetPromptResult,
    Implementation,
    JSONValue,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ServerCapabilities,
    Tool,
    ToolResult,
    decode_content,
    decode_tools,
)
from ..protocol.versions import Era
from .connection import Connector
from .dispatch import LOG_LEVELS, Dispatcher
from .engine import Engine, decode, decoder_for
from .options import ClientOptions, ProgressCallback, declared_capabilities
from .pages import PromptsPage, ResourcesPage, TemplatesPage, ToolsPage
from .relay import Relay
from .state import Link, ServerSpec
from .subscriptions import Subscription, Subscriptions
from .validation import ToolCatalog
from .values import ClientStatistics, ServerNotification
from .wire import headers_for, send

__all__ = ["Client"]

log = logging.getLogger(__name__)

_LOG_LEVEL_NAMES: Final = tuple(LOG_LEVELS)


class Client:
    """A connection to one MCP server. Create it with :func:`~mcpwire.open_client` (or
    :func:`~mcpwire.connect_client`).

    Attributes:
        spec: where the server is.
        label: the server's name in logs and errors.
        options: how this connection behaves.
    """

    def __init__(
        self,
        spec: ServerSpec,
        nursery: trio.Nursery,
        options: ClientOptions | None = None,
        **overrides: object,
    ) -> None:
        if overrides:  # the former keyword form, Client(spec, nursery, timeout=..., ...)
            options = (options or ClientOptions()).replace(**overrides)
        options = options or ClientOptions()
        self.spec = spec
        self.options = options
        self.label = options.name or spec.label
        info = options.client_info or Implementation(name="mcpwire", version=__version__)
        session: ClientSession[object] = ClientSession(info, declared_capabilities(options, None), label=self.label)
        self._link = link = Link(spec, self.label, options, nursery, session)  # type: ignore[arg-type]
        self._catalog = ToolCatalog()
        self._dispatcher = Dispatcher(link, self._catalog, self._session_lost)
        self._engine = Engine(
            link, fulfil=self._dispatcher.fulfil, renew_session=self._renew_session, relist_tools=self._relist_tools
        )
        self._connector = Connector(link, self._dispatcher, self._engine)
        self._subscriptions = Subscriptions(link, self._engine, self._dispatcher, self._connector.open_server_stream)
        self._closed = trio.Event()

    # The parts' hooks into each other, resolved late (each part is made before the next).
    def _session_lost(self, exc: BaseException) -> None:
        self._connector.session_lost(exc)

    async def _renew_session(self, generation: int) -> None:
        await self._connector.renew(generation)

    async def _relist_tools(self, timeout: float | None) -> object:
        return await self.list_tools(timeout=timeout)

    async def connect(self) -> None:
        """Starts the server and completes the handshake (called by :func:`~mcpwire.open_client`).

        Raises:
            ServerNotFound, ConnectError, UnsupportedVersion, EraDetectionError: see
                :func:`~mcpwire.open_client`.
        """
        await self._connector.connect()

    # -- public attributes ------------------------------------------------------------------

    @property
    def era(self) -> Era | None:
        """``Era.LEGACY`` or ``Era.MODERN`` once connected."""
        return self._link.session.era

    @property
    def protocol_version(self) -> str | None:
        """The negotiated revision, e.g. ``"2025-11-25"``."""
        rev = self._link.session.revision
        return rev.version if rev else None

    @property
    def server_info(self) -> Implementation | None:
        return self._link.session.server_info

    @property
    def server_capabilities(self) -> ServerCapabilities:
        return self._link.session.server_capabilities

    @property
    def instructions(self) -> str | None:
        """The server's instructions for the model (untrusted text, DS-03)."""
        return self._link.session.instructions

    @property
    def state(self) -> SessionState:
        return self._link.session.state

    @property
    def pid(self) -> int | None:
        transport = self._link.transport
        return transport.pid if transport else None

    def statistics(self) -> ClientStatistics:
        link = self._link
        table = link.session.table
        transport = link.transport
        counters = link.counters
        return ClientStatistics(
            requests_sent=counters.requests_sent,
            pending=len(table),
            late_responses=table.late,
            unknown_responses=table.unknown,
            notifications_received=counters.notifications,
            notifications_dropped=counters.dropped,
            server_requests=counters.server_requests,
            non_protocol_lines=counters.noise,
            protocol_violations=counters.violations,
            restarts=counters.restarts,
            bytes_sent=transport.bytes_sent if transport else 0,
            bytes_received=transport.bytes_received if transport else 0,
        )

    # -- generic ------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        check: bool = False,
        relay: Relay | None = None,
    ) -> JSONValue:
        """Sends any request and returns its decoded result.

        Capability checks are off by default (``check=False``) so extensions and experiments
        pass; input rounds of 2026-07-28 are handled as for typed calls. ``relay``: the request
        is made for another client (see :mod:`mcpwire.client.relay`).

        Cancellation: if cancelled, the request is abandoned and ``notifications/cancelled`` is
        sent (shielded, at most 1 s).
        """
        raw = await self._engine.request(
            method, params, timeout=timeout, on_progress=on_progress, check=check, relay=relay
        )
        try:
            value: JSONValue = jsonrpc.decode_json(raw)  # type: ignore[assignment]
        except msgspec.DecodeError as exc:
            raise InvalidResponse(f"server '{self.label}' answered '{method}' with an invalid result: {exc}") from exc
        return value

    async def notify(self, method: str, params: Mapping[str, object] | None = None) -> None:
        """Sends a notification."""
        link = self._link
        if link.session.state is not SessionState.READY:
            raise ClientClosed(f"cannot notify '{method}': the client of '{self.label}' is {link.session.state.name}")
        await send(link, link.session.encode_notification(method, params), headers=headers_for(link, method, params))

    async def ping(self, *, timeout: float | None = None) -> None:
        """Checks that the server answers: ``ping`` (legacy) or ``server/discover`` (2026-07-28 has no ping)."""
        if self.era is Era.MODERN:
            await self.discover(timeout=timeout)
        else:
            await self._engine.answer("ping", None, timeout=timeout)

    async def discover(self, *, timeout: float | None = None) -> DiscoverResult:
        """``server/discover``. For a legacy server, the same facts from its ``initialize`` answer."""
        if self.era is not Era.MODERN:
            return DiscoverResult(
                supported_versions=[self.protocol_version or ""],
                capabilities=self.server_capabilities,
                instructions=self.instructions,
            )
        raw = await self._engine.request("server/discover", {}, timeout=timeout)
        result = decode(raw, DiscoverResult, "server/discover", self.label)
        self._connector.discovered = result
        return result

    # -- tools ------------------------------------------------------------------------------------

    async def list_tools(self, *, timeout: float | None = None) -> list[Tool]:
        """Every tool, following pagination. Invalid tool definitions are dropped with a warning."""
        # TL-02: an invalid definition costs that tool, not the listing.
        raw_items = await self._engine.pages("tools/list", ToolsPage, "tools", timeout)
        if not raw_items and await self._connector.cross_check_legacy("tools/list", timeout):
            raw_items = await self._engine.pages("tools/list", ToolsPage, "tools", timeout)
        tools, problems = decode_tools(raw_items)
        transport = self._link.transport
        if transport is not None and transport.wants_headers:
            kept: list[Tool] = []
            headers: dict[str, HeaderSpec] = {}
            for tool in tools:
                try:
                    spec = tool_header_spec(tool.input_schema)
                except ValueError as exc:
                    # HT-M08: "Clients using the Streamable HTTP transport MUST reject tool definitions
                    # where any x-mcp-header value violates these constraints".
                    problems.append(f"tool {tool.name!r}: {exc}")
                    continue
                if spec:
                    headers[tool.name] = spec
                kept.append(tool)
            tools = kept
            self._link.tool_headers = headers
        for problem in problems:
            log.warning("%s: skipping an invalid tool: %s", self.label, problem)
        self._catalog.update(tools)
        return tools

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        relay: Relay | None = None,
        deadline: float | None = None,
    ) -> ToolResult:
        """Calls a tool. ``isError`` results are returned, not raised (use ``raise_for_error()``).

        ``structuredContent`` is validated against the tool's ``outputSchema`` when the tool is
        known from :meth:`list_tools`. ``relay``: the call is made for another client (a proxy's,
        see :mod:`mcpwire.client.relay`). ``deadline``: a hard end on trio's clock for the whole
        call, progress or not (``timeout`` still bounds each wait for an answer); past it the
        call is cancelled on the wire and :class:`RequestTimeout` raised.

        Raises:
            RPCError: the server refused the call (unknown tool, bad arguments).
            RequestTimeout: no answer in time; the call was cancelled on the wire.
            OutputSchemaError: the structured result breaks the declared schema.
            RelayedAnswer: a relayed round was answered with a result its asker follows.

        Cancellation: the call is abandoned and ``notifications/cancelled`` sent (shielded, ≤ 1 s).
        """
        # TL-11 (output schemas), UT-C02 (cancellation).
        params: dict[str, object] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        link = self._link
        link.tool_calls += 1
        try:
            answer = await self._engine.answer(
                "tools/call",
                params,
                timeout=timeout,
                on_progress=on_progress,
                typed_tool=True,
                relay=relay,
                deadline=deadline,
            )
        finally:
            link.tool_calls -= 1
        raw = answer.result
        content: list[ContentBlock]
        # The common answer is decoded once: a complete result whose blocks are all of known
        # types (its resultType read on the way; a large one already by classify()). Anything
        # else takes the general path: input rounds (MRTR), an unknown resultType (JR-10),
        # blocks of other types.
        wire: CallToolWire | CallToolWireLenient | None
        if type(answer) is ToolCallResponse:
            wire = answer.tool
        else:
            try:
                wire = decoder_for(CallToolWire).decode(raw)
            except jsonrpc.DECODE_ERRORS:
                wire = None
        revision = link.session.revision
        modern = revision is not None and revision.modern
        if isinstance(wire, CallToolWire) and (not modern or wire.result_type == "complete"):
            content = list(wire.content)
        else:
            with trio.move_on_at(math.inf if deadline is None else deadline) as rounds:
                raw = await self._engine.complete(
                    "tools/call", params, raw, timeout=timeout, on_progress=on_progress, check=True, relay=relay
                )
            if rounds.cancelled_caught:
                raise RequestTimeout(
                    f"'tools/call' {name!r} to server '{self.label}' got no complete answer by its caller's deadline",
                    method="tools/call",
                    server=self.label,
                    timeout=timeout if timeout is not None else self.options.timeout,
                )
            try:
                wire = decoder_for(CallToolWire).decode(raw)
                content = list(wire.content)
            except jsonrpc.DECODE_ERRORS:
                wire = decode(raw, CallToolWireLenient, "tools/call", self.label)
                content = decode_content(wire.content)
        result = ToolResult(
            content=content,
            structured_content=wire.structured_content,
            is_error=wire.is_error,
            meta=wire.meta,
            tool=name,
            server=self.label,
        )
        if self.options.validate_output and not result.is_error and name in self._catalog.output_schemas:
            self._catalog.check(name, result, link.session.revision, self.label)
        return result

    # -- resources --------------------------------------------------------------------------------

    async def list_resources(self, *, timeout: float | None = None) -> list[Resource]:
        resources: list[Resource] = await self._engine.pages("resources/list", ResourcesPage, "resources", timeout)
        if not resources and await self._connector.cross_check_legacy("resources/list", timeout):
            resources = await self._engine.pages("resources/list", ResourcesPage, "resources", timeout)
        return resources

    async def list_resource_templates(self, *, timeout: float | None = None) -> list[ResourceTemplate]:
        return await self._engine.pages("resources/templates/list", TemplatesPage, "resource_templates", timeout)

    async def read_resource(
        self, uri: str, *, timeout: float | None = None, relay: Relay | None = None
    ) -> ReadResourceResult:
        """Reads a resource. A missing one raises RPCError with ``is_not_found`` true. ``relay``:
        the read is made for another client (see :mod:`mcpwire.client.relay`)."""
        raw = await self._engine.request("resources/read", {"uri": uri}, timeout=timeout, relay=relay)
        return decode(raw, ReadResourceResult, "resources/read", self.label)

    @asynccontextmanager
    async def subscribe(
        self,
        resources: Sequence[str] = (),
        *,
        tools_list_changed: bool = False,
        prompts_list_changed: bool = False,
        resources_list_changed: bool = False,
        buffer: int = 256,
        timeout: float | None = None,
        task_ids: Sequence[str] = (),
        relay: Relay | None = None,
    ) -> AsyncIterator[Subscription]:
        """Subscribes to resource updates and list changes, in either era.

        Legacy: ``resources/subscribe`` per URI (needs ``resources.subscribe``), unsubscribed on
        exit; list-changed notifications are filtered from the session's stream. 2026-07-28:
        one ``subscriptions/listen`` stream, acknowledged before this returns; on exit it is
        cancelled with ``notifications/cancelled``. ``task_ids`` (2026-07-28, the Tasks
        extension): ``notifications/tasks`` of those tasks the server acknowledges; the request's
        ``_meta`` must declare the extension, as a relay's round does for a proxy's client
        (``relay``, see :mod:`mcpwire.client.relay`).

        Raises:
            LocalProtocolError: ``task_ids`` for a server speaking a revision before 2026-07-28.

        Cancellation: leaving the block ends the subscription (bounded, shielded).
        """
        async with self._subscriptions.subscribe(
            resources,
            tools_list_changed=tools_list_changed,
            prompts_list_changed=prompts_list_changed,
            resources_list_changed=resources_list_changed,
            buffer=buffer,
            timeout=timeout,
            task_ids=task_ids,
            relay=relay,
        ) as sub:
            yield sub

    # -- prompts ------------------------------------------------------------------------------------

    async def list_prompts(self, *, timeout: float | None = None) -> list[Prompt]:
        prompts: list[Prompt] = await self._engine.pages("prompts/list", PromptsPage, "prompts", timeout)
        if not prompts and await self._connector.cross_check_legacy("prompts/list", timeout):
            prompts = await self._engine.pages("prompts/list", PromptsPage, "prompts", timeout)
        return prompts

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        relay: Relay | None = None,
    ) -> GetPromptResult:
        """Renders a prompt. Argument values must be strings. ``relay``: the prompt is rendered
        for another client (see :mod:`mcpwire.client.relay`)."""
        params: dict[str, object] = {"name": name}
        if arguments:
            bad = [k for k, v in arguments.items() if not isinstance(v, str)]
            if bad:
                raise TypeError(f"prompt arguments must be strings; not: {', '.join(bad)}")
            params["arguments"] = dict(arguments)
        raw = await self._engine.request("prompts/get", params, timeout=timeout, relay=relay)
        return decode(raw, GetPromptResult, "prompts/get", self.label)

    # -- completion, logging --------------------------------------------------------------------------

    async def complete(
        self,
        ref: Mapping[str, object],
        argument: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """``completion/complete`` for a prompt (``{"type": "ref/prompt", "name": ...}``) or a
        resource template (``{"type": "ref/resource", "uri": ...}``) argument."""
        params: dict[str, object] = {"ref": dict(ref), "argument": {"name": argument, "value": value}}
        if context:
            params["context"] = {"arguments": dict(context)}
        raw = await self._engine.request("completion/complete", params, timeout=timeout)
        return decode(raw, CompleteResult, "completion/complete", self.label).completion

    async def set_logging_level(self, level: str, *, timeout: float | None = None) -> None:
        """Legacy: ``logging/setLevel``. 2026-07-28: adds the level to every later request's
        ``_meta``. ``level`` is an RFC 5424 name ("debug" ... "emergency")."""
        # UT-L03 (2026-07-28 _meta), HT-L13 (restored on a renewed legacy session).
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; one of {', '.join(_LOG_LEVEL_NAMES)}")
        if self.era is Era.MODERN:
            self._engine.log_level = level
            return
        await self._engine.answer("logging/setLevel", {"level": level}, timeout=timeout)
        self._engine.log_level = level
        if self._link.legacy is not None:
            self._link.legacy.level_set(level)

    async def notify_roots_changed(self) -> None:
        """Legacy: ``notifications/roots/list_changed`` (no such notification in 2026-07-28)."""
        if self.era is Era.LEGACY:
            await self.notify("notifications/roots/list_changed")

    # -- notifications -----------------------------------------------------------------------------------

    async def notifications(self) -> AsyncIterator[ServerNotification]:
        """Every notification from the server, in order, until the connection ends: progress
        (also given to the call's ``on_progress``), log messages, list changes, resource updates,
        cancellations.

        The buffer is bounded (``notification_buffer``); when nobody reads, the newest are
        dropped and counted in :meth:`statistics`. Over legacy Streamable HTTP, iterating opens
        the server's GET stream.
        """
        await self._connector.open_server_stream()
        async for note in self._dispatcher.notify_recv:
            yield note

    # -- closing ----------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Closes the connection in order; idempotent.

        Pending calls fail with :class:`~mcpwire.errors.ClientClosed`; the server is shut down
        (stdin closed, then SIGTERM, then SIGKILL, each bounded). Cancellation: shielded.
        """
        link = self._link
        if link.closing:
            await self._closed.wait()
            return
        link.closing = True
        link.session.closing()
        if link.legacy is not None:
            link.legacy.closed()
        with trio.CancelScope(shield=True):
            await self._subscriptions.end_all()
            # Pending calls fail first: the transport's close lets queued writes go out, and an
            # answer that comes meanwhile is no longer anyone's (dropped quietly as late).
            self._dispatcher.fail_pending_on_close()
            if link.transport is not None:
                await link.transport.aclose()
            self._dispatcher.fail_pending_on_close()  # sent while the transport was closing
            link.session.state = SessionState.CLOSED
            self._dispatcher.notify_send.close()
            for scope in self._dispatcher.server_request_scopes.values():
                scope.cancel()
            self._engine.deadlines.close()
        self._closed.set()

    async def wait_closed(self) -> None:
        """Waits until the connection is closed, by either side."""
        if self._link.transport is not None:
            await self._link.transport.wait_closed()
