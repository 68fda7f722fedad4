"""The MCP gateway: every enabled server of a host behind one MCP endpoint, with the host's policies.

    gateway = Gateway(host)                      # namespaced: server__tool
    app = gateway.asgi_app()                     # Streamable HTTP, both eras (mount it at /mcp)
    await gateway.serve_stdio()                  # or: stdin/stdout (``mcpwire serve --stdio``)

Theory of operation: the gateway is a :class:`~mcpwire.server.Server` (the protocol of both
eras, sessions, SSE streams and their resumption are :mod:`mcpwire.server`'s) whose handlers
translate MCP requests into host calls and back. Lists come from the host's registry and
catalog, under the host's names (``namespacing=False``: the servers' own names, a pure proxy for
a single backend); quarantined tools (pinned, then changed) are not listed. Calls go through
:meth:`Host.call_tool <mcpwire.host.Host.call_tool>`, :meth:`~mcpwire.host.Host.get_prompt` and
:meth:`~mcpwire.host.Host.read_resource`, so every policy applies exactly as for the service's
API (filters, timeout, retry, breaker, cache, approval, audit, metrics); the call carries the
trace id and caller the service's middleware found, and its progress goes back to the client.
A call that waits for a decision lives only as long as its client waits for it (see
:mod:`mcpwire.service.gateway_relay`); a quarantined tool is refused with a result saying that
its changed definition awaits review (not as an unknown tool).
Each call names its client explicitly on its way through the host (``relay=``, see
:mod:`mcpwire.client.relay`): a backend's questions (sampling, elicitation, roots) and the
approval policy's "ask" reach that client through :mod:`mcpwire.service.gateway_relay`; when the
client and the backend both speak 2026-07-28, a tool call's input rounds are relayed between them
as they are, and so is a task the backend creates for it. The 2026-07-28 extensions the backends
declare and the gateway can route (Tasks, Skills) are the gateway's too
(:mod:`mcpwire.service.gateway_extensions`).

Changes reach connected clients: a host event about a server's tools (its status, its list, a
pin), prompts or resources becomes ``notifications/<kind>/list_changed`` to every legacy session
and every ``subscriptions/listen`` stream that asked, coalesced (at most one per kind every
:data:`COALESCE_S`, so a backend that floods cannot flood the clients); ``resources/updated``
goes to the clients that subscribed. A backend's log message goes to the client of the one call
to that server in flight, at the level that client asked for; with none or several in flight it
is dropped (a backend does not say whose it is, and another client must not see it). The same
rule finds the client of a legacy backend's server-to-client request.

Errors: an unknown name is -32602; a backend's JSON-RPC error is passed on with its code; a call
the host refuses (denied, circuit open) or that fails (timeout, server gone) is a tool result
with ``isError``, so that a model sees why.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, TypeVar

import msgspec
import trio

from .._version import __version__
from ..client import ServerNotification
from ..client.relay import InputRequested, RelayedAnswer, RelayedRound, TaskCreated
from ..errors import HostError, MCPWireError, RPCError
from ..host import Host
from ..host.catalog import UnknownPrompt
from ..host.events import EventKind
from ..host.registry import RegisteredTool
from ..host.settings import ServerConfig
from ..protocol.serving import INVALID_PARAMS, LOG_LEVELS, RESOURCE_NOT_FOUND
from ..protocol.types import META_CLIENT_CAPABILITIES, ToolResult
from ..protocol.versions import V2025_03_26, V2025_06_18, V2025_11_25
from ..redaction import clean_terminal, shorten
from ..server import (
    InputRequired,
    JSONObject,
    Notify,
    RequestContext,
    RequestError,
    Server,
    StreamableHTTPApp,
    serve_stdio,
)
from ..server.streamable_app import MAX_BODY_BYTES
from .gateway_extensions import Extensions
from .gateway_relay import DEFAULT_CALLER_GRACE, DEFAULT_INPUT_TIMEOUT, GatewayRelay, Pending, Unanswerable

__all__ = ["ANSWER_GRACE_S", "COALESCE_S", "Gateway", "GatewayServer"]

log = logging.getLogger("mcpwire.service.gateway")
T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

#: Least seconds between two list_changed notifications of one kind.
COALESCE_S: Final = 0.1
#: Seconds a request of the gateway's own to a backend may take (setting its log level).
BACKEND_REQUEST_S: Final = 10.0
#: Backend log messages held for relaying at once (more are dropped: a flood stays bounded).
MAX_PENDING_LOGS: Final = 1000
#: Seconds a legacy request waits for its answer before its SSE stream starts: a call answered
#: sooner (most are) is one JSON body (see StreamableHTTPApp's ``answer_grace_s``).
ANSWER_GRACE_S: Final = 0.5
#: 2026-07-28 server/utilities/caching: how long a client may keep the gateway's lists.
LIST_TTL_MS: Final = 5_000
INSTRUCTIONS: Final = (
    "The mcpwire gateway: the tools, prompts and resources of the host's servers, under the host's policies."
)
_LIST_KINDS: Final = {
    "tools": "tools",
    "status": "tools",
    "pin": "tools",
    "prompts": "prompts",
    "resources": "resources",
}
#: the host events the gateway listens to (the keys of _LIST_KINDS)
_EVENT_KINDS: Final[tuple[EventKind, ...]] = ("tools", "status", "pin", "prompts", "resources")
#: tool fields by the revision that introduced them (older clients get a tool without them)
_TOOL_FIELDS: Final = (
    ("annotations", V2025_03_26),
    ("title", V2025_06_18),
    ("outputSchema", V2025_06_18),
    ("icons", V2025_11_25),
)
_TEMPLATE_VAR: Final = re.compile(r"\{[^}]*\}")


class Gateway:
    """The host's servers as one MCP server.

    Args:
        host: the host whose servers are served (entered by the caller, before or after).
        namespacing: expose the host's namespaced names; False exposes the servers' own names (a
            pure proxy for one backend; of two servers with a tool of the same name, the first
            registered wins).
        name, instructions: the gateway's ``serverInfo.name`` and instructions.
        input_timeout: seconds a call waits for its client's answer to a backend's question.
    """

    def __init__(
        self,
        host: Host,
        *,
        namespacing: bool = True,
        name: str = "mcpwire-gateway",
        instructions: str | None = None,
        input_timeout: float = DEFAULT_INPUT_TIMEOUT,
        caller_grace: float = DEFAULT_CALLER_GRACE,
    ) -> None:
        self.host = host
        self.namespacing = namespacing
        self._app: StreamableHTTPApp | None = None
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()
        self._stopped = trio.Event()
        self.relay = GatewayRelay(
            self._background, input_timeout=input_timeout, caller_grace=caller_grace, era_of=self._era_of
        )
        self.server = GatewayServer(
            self, name=name, instructions=INSTRUCTIONS if instructions is None else instructions
        )
        # the host's connections answer their servers' questions through the relay, and tell
        # the gateway what their servers notify (log messages as they are read, so that those
        # sent before a call's answer are known to belong to that call when the answer arrives)
        host.client_options_for = self._client_options
        host.on_notification = self.server.backend_notified

    def _era_of(self, server: str) -> str | None:
        try:
            return self.host.get(server).era
        except HostError:
            return None

    def _client_options(self, config: ServerConfig) -> Mapping[str, object]:
        server = config.name

        def notified(note: ServerNotification) -> None:
            if note.method == "notifications/message":
                self.server.log_to_call(server, note.params)

        return {**self.relay.client_options(config), "on_notification": notified}

    def asgi_app(
        self,
        *,
        allowed_hosts: frozenset[str] | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        admit_batch: Callable[[Mapping[str, Any], int], float | None] | None = None,
        mcp_path: str | None = None,
        sse_path: str | None = None,
        messages_path: str | None = None,
    ) -> StreamableHTTPApp:
        """The gateway over HTTP: Streamable HTTP (both eras) at ``mcp_path`` (None: whatever
        path it is mounted at), and the 2024-11-05 HTTP+SSE transport at ``sse_path`` (its event
        stream) and ``messages_path`` (its POSTs) when they are given.

        Host/Origin checks, authentication and rate limits are the service's middleware
        (``allowed_hosts`` checks them here too). It starts its sessions' nursery on first use,
        or runs in :meth:`run`.
        """
        if self._app is None:
            self._app = StreamableHTTPApp(
                self.server,
                mcp_path=mcp_path,
                sse_path=sse_path,
                messages_path=messages_path,
                allowed_hosts=allowed_hosts,
                max_body_bytes=max_body_bytes,
                answer_grace_s=ANSWER_GRACE_S,
                # the gateway's handlers never end a response early: a legacy call runs in its
                # POST's task, one task and two task switches fewer per call
                hold_requests=True,
                admit_batch=admit_batch,
            )
        return self._app

    async def run(self, *, task_status: trio.TaskStatus[Gateway] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the HTTP endpoint's sessions and the gateway's work until cancelled;
        ``nursery.start(gateway.run)`` returns the gateway once they run."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.asgi_app().run)
            task_status.started(self)
            await trio.sleep_forever()

    async def serve_stdio(
        self, *, stdin: trio.abc.ReceiveStream | None = None, stdout: trio.abc.SendStream | None = None
    ) -> None:
        """Serve the gateway on stdin/stdout (or the given streams) until end of input
        (``mcpwire serve --stdio``).

        Cancellation: cancelling it cancels every call in flight.
        """
        await serve_stdio(self.server, stdin=stdin, stdout=stdout)

    async def _background(self) -> trio.Nursery:
        await self._ready.wait()
        assert self._nursery is not None
        return self._nursery

    async def _work(self) -> None:
        """The gateway's own tasks: pending calls, and list changes for connected clients.

        Each transport runs it (the service's :meth:`run` and :meth:`serve_stdio` may both be
        running): one does the work, another waits and takes over if the first stops.
        """
        while self._nursery is not None:
            await self._stopped.wait()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._stopped = trio.Event()
            self._ready.set()
            try:
                await self.server.relay_changes()
            finally:
                self._nursery = None
                self._ready = trio.Event()
                self._stopped.set()


class GatewayServer(Server):
    """The gateway's MCP surface (see :class:`Gateway`)."""

    def __init__(self, gateway: Gateway, *, name: str, instructions: str) -> None:
        super().__init__(name, __version__, instructions=instructions)
        self.gateway = gateway
        self.host = gateway.host
        self.extensions = Extensions(self.host)
        self._dirty: set[str] = set()
        #: calls with backend log messages to relay
        self._logging: set[Pending] = set()
        self._dirty_event = trio.Event()
        for method, handler in (
            ("tools/list", self._tools_list),
            ("tools/call", self._tools_call),
            ("prompts/list", self._prompts_list),
            ("prompts/get", self._prompts_get),
            ("resources/list", self._resources_list),
            ("resources/templates/list", self._templates_list),
            ("resources/read", self._resources_read),
            ("completion/complete", self._complete),
        ):
            self.route(method, handler)
        for extension_method, relayed in self.extensions.routes():
            self.route(extension_method, relayed, legacy=False)

    def capabilities(self, revision: str) -> JSONObject:
        caps: JSONObject = {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "logging": {},
        }
        if revision >= V2025_03_26:  # the completions capability did not exist in 2024-11-05
            caps["completions"] = {}
        return caps

    def following(
        self, context: RequestContext, wanted: JSONObject, notify: Notify
    ) -> AbstractAsyncContextManager[JSONObject]:
        return self.extensions.following(context, wanted, notify)

    def discover(self) -> JSONObject:
        result = super().discover()
        extensions = self.extensions.declared()
        if extensions:  # 2026-07-28 basic/versioning: extensions are declared in server/discover
            capabilities = result["capabilities"]
            assert isinstance(capabilities, dict)
            result["capabilities"] = {**capabilities, "extensions": extensions}
        return result

    async def background(self) -> None:
        await self.gateway._work()

    # -- names -----------------------------------------------------------------------------------

    def _exposed(self) -> dict[str, RegisteredTool]:
        """Exposed name -> registered tool (quarantined tools are not exposed)."""
        tools = self.host.tools()
        if self.gateway.namespacing:
            return {t.name: t for t in tools}
        exposed: dict[str, RegisteredTool] = {}
        for tool in tools:
            if tool.tool.name in exposed:
                log.warning(
                    "two servers have a tool named %r; only %r's is served",
                    tool.tool.name,
                    exposed[tool.tool.name].server,
                )
                continue
            exposed[tool.tool.name] = tool
        return exposed

    def _lookup(self, name: str) -> RegisteredTool | None:
        """The registered tool an exposed name stands for (None: not exposed). Namespaced names
        are the registry's own, found without listing every tool (this is on every call)."""
        if not self.gateway.namespacing:
            return self._exposed().get(name)
        registry = self.host.registry
        if name not in registry:
            return None
        reg = registry.resolve(name)
        return None if reg.quarantined or reg.name != name else reg

    def _quarantined(self, name: str) -> str | None:
        """Why an exposed name is not served when its tool is quarantined (its definition changed
        since it was pinned); None for a name that is not a quarantined tool's."""
        registry = self.host.registry
        if self.gateway.namespacing:
            reg = registry.resolve(name) if name in registry else None
        else:
            reg = next((r for r in self.host.tools(include_quarantined=True) if r.tool.name == name), None)
        if reg is None or not reg.quarantined:
            return None
        return (
            f"tool {name!r} is quarantined: its definition changed since it was pinned, and the change awaits "
            "review by an operator of this gateway; it cannot be called until the new definition is approved"
        )

    def tool_input_schema(self, name: str) -> Mapping[str, object] | None:
        tool = self._lookup(name)
        return None if tool is None else tool.tool.input_schema

    def _prompt_name(self, name: str) -> str:
        """The host's name of an exposed prompt name."""
        if self.gateway.namespacing:
            return name
        for prompt in self.host.prompts():
            if prompt.prompt.name == name:
                return prompt.name
        return name

    def _server_of(self, uri: str) -> str:
        """The server that serves ``uri``: the one that lists it, else the one whose template
        matches, else the only server with resources.

        Raises:
            RequestError: no server (or more than one) could serve it.
        """
        servers = {r.server for r in self.host.resources() if r.uri == uri}
        if not servers:
            servers = {t.server for t in self.host.resource_templates() if _matches(t.uri_template, uri)}
        if not servers:
            servers = {
                info.name
                for info in self.host.list()
                if info.capabilities is not None and info.capabilities.resources is not None
            }
        if len(servers) == 1:
            return servers.pop()
        raise _not_found(uri, modern=True)

    # -- lists -----------------------------------------------------------------------------------

    async def _tools_list(self, ctx: RequestContext) -> JSONObject:
        tools = [_tool(name, reg, ctx.revision) for name, reg in self._exposed().items()]
        return _list(ctx, "tools", tools)

    async def _prompts_list(self, ctx: RequestContext) -> JSONObject:
        prompts = [
            {**_wire(p.prompt), "name": p.name if self.gateway.namespacing else p.prompt.name}
            for p in self.host.prompts()
        ]
        return _list(ctx, "prompts", prompts)

    async def _resources_list(self, ctx: RequestContext) -> JSONObject:
        resources = [
            {**_wire(r.resource), "name": r.name if self.gateway.namespacing else r.resource.name or r.uri}
            for r in self.host.resources()
        ]
        return _list(ctx, "resources", resources)

    async def _templates_list(self, ctx: RequestContext) -> JSONObject:
        templates = [
            {**_wire(t.template), "name": t.name if self.gateway.namespacing else t.template.name or t.uri_template}
            for t in self.host.resource_templates()
        ]
        return _list(ctx, "resourceTemplates", templates)

    # -- calls -----------------------------------------------------------------------------------

    def _call_context(self, ctx: RequestContext) -> dict[str, str]:
        """The call's context for approvals and audit records: the trace id the service's
        middleware found, and the caller as ``mcp <address> (<client name>)``, like the API's
        ``api <address>`` (the client's name is its own claim, cleaned and shortened)."""
        context = dict(ctx.transport)
        claimed = _claimed(str(ctx.client_info.get("name") or "client")[:120])
        address = context.get("caller")
        context["caller"] = f"mcp {address} ({claimed})" if address else f"mcp ({claimed})"
        return context

    async def _tools_call(self, ctx: RequestContext) -> JSONObject:
        relay = self.gateway.relay
        if ctx.modern and "requestState" in ctx.params and not relay.is_wrapped(ctx.params["requestState"]):
            outcome = await relay.resume(ctx)
            return self._tool_outcome(outcome)
        name = ctx.params.get("name")
        arguments = ctx.params.get("arguments", {})
        reg = self._lookup(name) if isinstance(name, str) else None
        if reg is None:
            held = self._quarantined(name) if isinstance(name, str) else None
            if held is not None:
                return {"content": [{"type": "text", "text": held}], "isError": True}
            raise RequestError(INVALID_PARAMS, f"Invalid params: unknown tool {name!r}")
        if not isinstance(arguments, dict):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'arguments' must be an object")
        relayed = self._relayed(ctx, reg.server)
        # the backend is asked for progress only when someone takes it: a legacy request's
        # client asks with a token of its own (a 2026-07-28 call may be resumed by a request that
        # carries one, so it always asks)
        wants_progress = ctx.modern or ctx.progress_token is not None

        async def work(pending: Pending) -> object:
            async def progress(update: Any) -> None:
                await pending.context.progress(update.progress, update.total, update.message)

            try:
                return await self.host.call_tool(
                    reg.name,
                    arguments,
                    caller_approver=relay.approver(pending),
                    caller=relay.caller(pending),
                    context=self._call_context(pending.context),
                    on_progress=progress if wants_progress else None,
                    relay=relay.relay_for(pending, relayed),
                )
            except HostError as exc:
                return exc
            finally:
                if pending.logs:  # (as _logged relays them: before the answer)
                    await self.flush_logs(pending)

        return self._tool_outcome(await relay.call(ctx, reg.server, work), reg.server)

    def _relayed(self, ctx: RequestContext, server: str) -> RelayedRound | None:
        """The round to relay when the client and the backend both speak 2026-07-28 (the client's
        capabilities and inputResponses, the backend's own requestState); else None.

        Raises:
            RequestError: -32602 for a requestState that does not verify or names another server.
        """
        state = ctx.params.get("requestState")
        if not ctx.modern or self.host.get(server).era != "modern":
            if state is not None:  # wrapped for a backend that speaks 2026-07-28 no more
                raise RequestError(INVALID_PARAMS, "Invalid params: 'requestState' is not one this gateway can use")
            return None
        params: JSONObject = {}
        if "inputResponses" in ctx.params:
            params["inputResponses"] = ctx.input_responses
        if isinstance(state, str):
            params["requestState"] = self.gateway.relay.unwrap_state(server, state)
        elif state is not None:
            raise RequestError(INVALID_PARAMS, "Invalid params: 'requestState' must be a string")
        return RelayedRound(params, {META_CLIENT_CAPABILITIES: ctx.client_capabilities})

    def _logged(self, work: Callable[[Pending], Awaitable[T]]) -> Callable[[Pending], Awaitable[T]]:
        """``work``, then the backend's log messages for the call not relayed yet (before the answer)."""

        async def run(pending: Pending) -> T:
            try:
                return await work(pending)
            finally:
                if pending.logs:
                    await self.flush_logs(pending)

        return run

    def _tool_outcome(self, outcome: object, server: str | None = None) -> JSONObject:
        if isinstance(outcome, HostError):
            created = _cause(outcome, TaskCreated)
            if created is not None and server is not None:  # SEP-2663: the backend made a task of it
                return self.extensions.task_result(server, dict(created.result))
            requested = _cause(outcome, InputRequested)
            if requested is not None and server is not None:  # a relayed round: the backend's questions
                asks, state = requested.result.get("inputRequests"), requested.result.get("requestState")
                wrapped = self.gateway.relay.wrap_state(server, state) if isinstance(state, str) else None
                raise InputRequired(
                    {k: v for k, v in asks.items() if isinstance(v, dict)} if isinstance(asks, dict) else {}, wrapped
                )
            rpc = _rpc_cause(outcome)
            if rpc is not None:  # the backend refused the call: its error, as it said it
                raise RequestError(rpc.code, rpc.message, rpc.data)
            return {"content": [{"type": "text", "text": str(outcome)}], "isError": True}
        result = getattr(outcome, "result", outcome)
        assert isinstance(result, ToolResult)
        return _tool_result(result)

    async def _prompts_get(self, ctx: RequestContext) -> JSONObject:
        if ctx.modern and "requestState" in ctx.params:
            return _wire(await self.gateway.relay.resume(ctx))
        name = ctx.params.get("name")
        arguments = ctx.params.get("arguments") or {}
        if not isinstance(name, str):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'name' must be a string")
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'arguments' must map names to strings")
        try:
            reg = self.host.catalog.resolve_prompt(self._prompt_name(name))
        except UnknownPrompt:
            raise RequestError(INVALID_PARAMS, f"Invalid params: unknown prompt {name!r}") from None

        async def work(pending: Pending) -> object:
            return await self.host.get_prompt(
                reg.name,
                arguments,
                context=self._call_context(pending.context),
                relay=self.gateway.relay.relay_for(pending),
            )

        return _wire(await self._backend(ctx, reg.server, work))

    async def _resources_read(self, ctx: RequestContext) -> JSONObject:
        if ctx.modern and "requestState" in ctx.params:
            return _wire(await self.gateway.relay.resume(ctx))
        uri = ctx.params.get("uri")
        if not isinstance(uri, str):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'uri' must be a string")
        try:
            server = self._server_of(uri)
        except RequestError:
            raise _not_found(uri, modern=ctx.modern) from None

        async def work(pending: Pending) -> object:
            return await self.host.read_resource(
                server, uri, context=self._call_context(pending.context), relay=self.gateway.relay.relay_for(pending)
            )

        try:
            result = await self._backend(ctx, server, work)
        except RequestError as exc:
            # "Resource not found" is -32002 up to 2025-11-25 and -32602 in 2026-07-28
            if exc.code in (RESOURCE_NOT_FOUND, INVALID_PARAMS) and "not found" in exc.message.lower():
                exc.code = INVALID_PARAMS if ctx.modern else RESOURCE_NOT_FOUND
            raise
        read = _wire(result)
        if ctx.modern:  # 2026-07-28 server/utilities/caching: every read carries its hints
            read.setdefault("ttlMs", 0)
            read.setdefault("cacheScope", "private")
        return read

    async def _backend(self, ctx: RequestContext, server: str, work: Callable[[Pending], Awaitable[T]]) -> T:
        """Run a host request; a backend's JSON-RPC error is passed on as it came, a failure is -32603."""
        try:
            return await self.gateway.relay.call(ctx, server, self._logged(work))
        except HostError as exc:
            rpc = _rpc_cause(exc)
            if rpc is not None:
                raise RequestError(rpc.code, rpc.message, rpc.data) from None
            raise RequestError(-32603, f"Internal error: {exc}") from None

    async def _complete(self, ctx: RequestContext) -> JSONObject:
        ref, argument = ctx.params.get("ref"), ctx.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'ref' and 'argument' must be objects")
        params = dict(ctx.params)
        params.pop("_meta", None)
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            try:
                reg = self.host.catalog.resolve_prompt(self._prompt_name(str(ref["name"])))
            except UnknownPrompt:
                raise RequestError(INVALID_PARAMS, f"Invalid params: unknown prompt {ref['name']!r}") from None
            server = reg.server
            params["ref"] = {**ref, "name": reg.prompt.name}
        elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
            server = self._server_of(str(ref["uri"]))
        else:
            raise RequestError(INVALID_PARAMS, "Invalid params: 'ref.type' must be 'ref/prompt' or 'ref/resource'")
        client = self.host.get(server).client
        if client is None:
            raise RequestError(-32603, f"Internal error: server {server!r} is not connected")
        try:
            result = await client.request("completion/complete", params)
        except RPCError as exc:
            raise RequestError(exc.code, exc.message, exc.data) from None
        if not isinstance(result, dict):
            raise RequestError(-32603, f"Internal error: server {server!r} answered completion/complete with no object")
        return dict(result)

    # -- changes ----------------------------------------------------------------------------------

    def backend_notified(self, server: str, method: str, params: Mapping[str, object]) -> None:
        """A backend's notification (called by the host, synchronously): logs and resource
        updates are relayed by :meth:`relay_changes`."""
        if method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            self._dirty.add(f"updated:{params['uri']}")
        elif method.endswith("/list_changed") and method.split("/")[1] in ("tools", "prompts", "resources"):
            # the host refreshes its lists too, but tells only when they differ; the backend said so
            self._dirty.add(method.split("/")[1])
        else:  # log messages come through the connection's own hook (see Gateway)
            return
        self._dirty_event.set()

    async def subscribed(self, uri: str, subscribe: bool) -> None:
        """A client (un)subscribed ``uri``: so does the gateway, on the server that serves it."""
        try:
            info = self.host.get(self._server_of(uri))
        except (RequestError, HostError):
            return
        client = info.client
        if client is None or info.era == "modern":  # a 2026-07-28 backend has listen streams instead
            return
        method = "resources/subscribe" if subscribe else "resources/unsubscribe"
        try:
            await client.request(method, {"uri": uri})
        except MCPWireError as exc:
            log.info("%s: %s %s failed: %s", info.name, method, uri, exc)

    async def relay_changes(self) -> None:
        """Turn host events into list_changed notifications, coalesced, until the host closes;
        ask every connected backend for its log messages."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._send_changes)
            # list changes and reconnections only: not the audit record of every call
            events = self.host.events(buffer=1000, kinds=_EVENT_KINDS)
            for info in self.host.list():
                nursery.start_soon(self._want_logs, info.name)
            async for event in events:
                kind = _LIST_KINDS.get(event.kind)
                if kind is not None:
                    self._dirty.add(kind)
                    self._dirty_event.set()
                if event.kind == "status" and event.status == "connected":
                    nursery.start_soon(self._want_logs, event.server)
            nursery.cancel_scope.cancel()

    async def _want_logs(self, server: str) -> None:
        """Ask a backend that has the logging capability for every log message (the gateway
        relays what each client wants)."""
        try:
            client = self.host.get(server).client
            if client is not None and client.server_capabilities.logging is not None:
                with trio.move_on_after(BACKEND_REQUEST_S):
                    await client.set_logging_level("debug")
        except (MCPWireError, HostError) as exc:
            log.info("%s: cannot set its log level: %s", server, exc)

    async def _send_changes(self) -> None:
        while True:
            await self._dirty_event.wait()
            self._dirty_event = trio.Event()
            dirty, self._dirty = self._dirty, set()
            logging, self._logging = self._logging, set()
            for item in sorted(dirty):
                if item.startswith("updated:"):
                    await self.resource_updated(item.removeprefix("updated:"))
                else:
                    await self.list_changed(item)
            for pending in logging:  # while their calls run (what is left goes before their answer)
                await self.flush_logs(pending)
            await trio.sleep(COALESCE_S)

    def log_to_call(self, server: str, params: Mapping[str, object]) -> None:
        """A backend's log message (as its connection reads it) goes to the client of the one
        gateway call to that server in flight, if that client wants that level (a legacy session
        at its level, a 2026-07-28 request only at its ``_meta`` level); it is relayed while the
        call runs, and at the latest before its answer. With no call, or several, nobody can
        tell whose it is: it is dropped rather than shown to another client. (Calls waiting for
        a 2026-07-28 client's retry do not count: their backend is waiting for the answer.)"""
        level = params.get("level")
        calls = self.gateway.relay.calls_to(server, parked=False)
        if not isinstance(level, str) or level not in LOG_LEVELS or len(calls) != 1:
            log.debug("%s: a log message for no single call; not relayed", server)
            return
        pending = calls[0]
        threshold = pending.context.log_level
        if threshold is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return
        if len(pending.logs) < MAX_PENDING_LOGS:
            relayed = {**params, "logger": f"{server}/{params.get('logger') or ''}".rstrip("/")}
            pending.logs.append(relayed)
            self._logging.add(pending)
            self._dirty_event.set()

    async def flush_logs(self, pending: Pending) -> None:
        """Relay the call's waiting log messages, in order, on the stream of its request (a
        legacy session's standalone stream when it has one)."""
        if pending.log_lock is None:
            pending.log_lock = trio.Lock()
        async with pending.log_lock:
            while pending.logs:
                relayed = pending.logs.pop(0)
                context = pending.context
                if context.modern:
                    await context.notify("notifications/message", relayed)
                else:
                    await context.connection.notify_unrelated("notifications/message", relayed, origin=context)


# -- shapes ---------------------------------------------------------------------------------------


def _wire(value: object) -> JSONObject:
    out = msgspec.to_builtins(value)
    if not isinstance(out, dict):
        raise RequestError(-32603, f"Internal error: a backend answered with {type(out).__name__}")
    return {k: v for k, v in out.items() if v is not None}


def _tool(name: str, reg: RegisteredTool, revision: str) -> JSONObject:
    tool = _wire(reg.tool)
    tool["name"] = name
    for key, since in _TOOL_FIELDS:
        if revision < since:
            tool.pop(key, None)
    return tool


@functools.lru_cache(maxsize=256)
def _claimed(name: str) -> str:
    """A client's name as a caller shows it: terminal-safe, at most 60 characters (the same for a
    name cut at 120 first, as callers pass it: that keeps what is cached small)."""
    return shorten(clean_terminal(name, newlines=False), 60)


def _tool_result(result: ToolResult) -> JSONObject:
    out: JSONObject = {"content": [msgspec.to_builtins(block) for block in result.content]}
    if result.structured_content is not msgspec.UNSET:
        out["structuredContent"] = result.structured_content
    if result.is_error:
        out["isError"] = True
    return out


def _list(ctx: RequestContext, key: str, items: list[JSONObject]) -> JSONObject:
    # the gateway's lists are one page: it issues no cursor, so any cursor is one it did not issue
    if ctx.params.get("cursor") is not None:
        raise RequestError(INVALID_PARAMS, f"Invalid params: invalid cursor for {ctx.method}")
    result: JSONObject = {key: items}
    if ctx.modern:
        result.update(ttlMs=LIST_TTL_MS, cacheScope="private")
    return result


def _not_found(uri: str, *, modern: bool) -> RequestError:
    """Resource not found: -32002 up to 2025-11-25, -32602 in 2026-07-28."""
    if modern:
        return RequestError(INVALID_PARAMS, f"Invalid params: resource not found: {uri}", {"uri": uri})
    return RequestError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})


def _rpc_cause(exc: BaseException) -> RPCError | None:
    """The backend's JSON-RPC error behind a host error (not one the gateway's own handlers raised)."""
    cause = _cause(exc, RPCError)
    return None if isinstance(cause, Unanswerable | RelayedAnswer) else cause


def _cause(exc: BaseException, kind: type[E]) -> E | None:
    """The first exception of ``kind`` in the ``__cause__`` chain behind ``exc``."""
    cause = exc.__cause__
    while cause is not None and not isinstance(cause, kind):
        cause = cause.__cause__
    return cause


def _matches(template: str, uri: str) -> bool:
    """Whether ``uri`` fits an RFC 6570 template's simple form (each ``{var}`` one segment)."""
    pattern = "^" + "[^/]+".join(re.escape(part) for part in _TEMPLATE_VAR.split(template)) + "$"
    return re.match(pattern, uri) is not None
