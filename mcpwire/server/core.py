"""The application side of an MCP server: routes, capabilities, and what every connection shares.

Theory of operation: a :class:`Server` is what is served, independent of transport and era. It
maps methods to async handlers (:meth:`Server.route`), says which capabilities it has in each
revision (:meth:`Server.capabilities`), and holds what all connections share: the legacy
sessions that are open and the 2026-07-28 ``subscriptions/listen`` streams, so that a change
(:meth:`Server.list_changed`, :meth:`Server.resource_updated`, :meth:`Server.notify_listeners`)
reaches every client that asked for it. The protocol itself (eras, admission, the lifecycle,
cancellation, batches) is :mod:`mcpwire.server.connection`'s; a handler sees one request through
a :class:`~mcpwire.server.context.RequestContext` and answers with a result, or raises
:class:`RequestError` (a JSON-RPC error answer) or :class:`InputRequired` (a 2026-07-28
``input_required`` result).

Outgoing messages go to an :class:`Outlet`: stdout for stdio, one response stream per HTTP
request. ``send(..., final=True)`` marks the answer that ends a request's stream.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypeAlias

from ..protocol.types import META_SERVER_INFO, META_SUBSCRIPTION_ID
from ..protocol.versions import MODERN_REVISIONS, V2025_03_26
from .base import InputRequired, JSONObject, Outlet, RequestError
from .context import RequestContext

__all__ = [
    "DISCOVER_TTL_MS",
    "JSONObject",
    "EraMode",
    "Handler",
    "InputRequired",
    "LIST_KINDS",
    "Listen",
    "Notify",
    "Outlet",
    "RequestError",
    "Route",
    "Server",
]

log = logging.getLogger("mcpwire.server")

#: Which lifecycles a server offers: both eras, or one of them.
EraMode: TypeAlias = Literal["both", "legacy", "modern"]
Handler: TypeAlias = Callable[[RequestContext], Awaitable[JSONObject]]
#: Sends one notification (method, params) on a ``subscriptions/listen`` stream.
Notify: TypeAlias = Callable[[str, JSONObject], Awaitable[None]]
#: The list kinds that change, and the 2026-07-28 ``subscriptions/listen`` flag of each.
LIST_KINDS: Final[Mapping[str, str]] = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}
#: 2026-07-28 server/utilities/caching: the hints on ``server/discover``.
DISCOVER_TTL_MS: Final = 60_000


class Session(Protocol):
    """What the server needs of a connection it tells of changes (a
    :class:`~mcpwire.server.connection.Connection`)."""

    @property
    def subscriptions(self) -> set[str]:
        """The resource URIs the client subscribed to."""
        ...

    async def notify_unrelated(
        self, method: str, params: JSONObject | None, *, origin: RequestContext | None = None
    ) -> None:
        """Send a notification unrelated to any request (to those who asked for it)."""
        ...


@dataclass(slots=True)
class Route:
    """A method served, and in which eras."""

    handler: Handler
    legacy: bool = True
    modern: bool = True


@dataclass(slots=True, eq=False)
class Listen:
    """An open 2026-07-28 ``subscriptions/listen`` stream and the filter it was granted."""

    context: RequestContext
    granted: JSONObject
    outlet: Outlet
    #: the notifications' ``_meta.subscriptionId``: the listen request's own id
    subscription: object = field(init=False)

    def __post_init__(self) -> None:
        self.subscription = self.context.id

    def wants(self, flag: str) -> bool:
        return self.granted.get(flag) is True

    def wants_uri(self, uri: str) -> bool:
        uris = self.granted.get("resourceSubscriptions")
        return isinstance(uris, list) and uri in uris

    async def notify(self, method: str, params: JSONObject | None = None) -> None:
        tagged = {**(params or {}), "_meta": {**_meta_of(params), META_SUBSCRIPTION_ID: self.subscription}}
        await self.outlet.send({"jsonrpc": "2.0", "method": method, "params": tagged})


def _meta_of(params: JSONObject | None) -> JSONObject:
    meta = (params or {}).get("_meta")
    return dict(meta) if isinstance(meta, dict) else {}


class Server:
    """An MCP server's application: its identity, capabilities and method handlers.

    Subclass it (override :meth:`capabilities`, add routes in ``__init__``) or build one and
    call :meth:`route`. The connection machinery serves ``initialize``, ``ping``,
    ``logging/setLevel``, ``resources/subscribe``/``unsubscribe`` (legacy), ``server/discover``
    and ``subscriptions/listen`` (2026-07-28) itself.

    Args:
        name, version, title: ``serverInfo``.
        instructions: sent in ``initialize`` and ``server/discover`` results.
        era: the lifecycles offered: ``"both"``, ``"legacy"`` (``server/discover`` is -32601)
            or ``"modern"`` (``initialize`` is -32601).
    """

    def __init__(
        self,
        name: str,
        version: str = "1.0.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        era: EraMode = "both",
    ) -> None:
        if era not in ("both", "legacy", "modern"):
            raise ValueError(f"era must be 'both', 'legacy' or 'modern', not {era!r}")
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self.era: EraMode = era
        self._routes: dict[str, Route] = {}
        #: open legacy sessions (stdio connections and HTTP sessions after ``initialize``)
        self.sessions: set[Session] = set()
        #: open 2026-07-28 ``subscriptions/listen`` streams
        self.listens: set[Listen] = set()

    # -- what is served ---------------------------------------------------------------------

    def route(self, method: str, handler: Handler, *, legacy: bool = True, modern: bool = True) -> None:
        """Serve ``method`` with ``handler`` in the given eras (replacing an earlier route)."""
        self._routes[method] = Route(handler, legacy, modern)

    def route_for(self, method: str, *, modern: bool) -> Route | None:
        """The route of ``method`` in one era, or None (-32601)."""
        route = self._routes.get(method)
        if route is None or not (route.modern if modern else route.legacy):
            return None
        return route

    def capabilities(self, revision: str) -> JSONObject:
        """The server capabilities in ``revision``; by default derived from the routes."""
        caps: JSONObject = {}
        if "tools/list" in self._routes:
            caps["tools"] = {"listChanged": True}
        if "resources/list" in self._routes:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if "prompts/list" in self._routes:
            caps["prompts"] = {"listChanged": True}
        caps["logging"] = {}
        # the completions capability did not exist in 2024-11-05
        if "completion/complete" in self._routes and revision >= V2025_03_26:
            caps["completions"] = {}
        return caps

    def server_info(self) -> JSONObject:
        info: JSONObject = {"name": self.name, "version": self.version}
        if self.title is not None:
            info["title"] = self.title
        return info

    def discover(self) -> JSONObject:
        """The ``server/discover`` result (2026-07-28)."""
        result: JSONObject = {
            "supportedVersions": list(MODERN_REVISIONS),
            "capabilities": self.capabilities(MODERN_REVISIONS[0]),
        }
        if self.instructions is not None:
            result["instructions"] = self.instructions
        result.update(ttlMs=DISCOVER_TTL_MS, cacheScope="public")
        return result

    async def subscribed(self, uri: str, subscribe: bool) -> None:
        """A legacy session (un)subscribed ``uri`` (``resources/subscribe``); nothing by default."""

    async def background(self) -> None:
        """Work that lasts as long as the server is served (a transport starts it beside its
        connections and cancels it when it stops); nothing by default."""

    def listen_grants(self, context: RequestContext, wanted: JSONObject) -> JSONObject:
        """Grants for ``subscriptions/listen`` filter fields beyond the standard ones (extensions).

        Raises:
            RequestError: the filter cannot be granted.
        """
        return {}

    def following(
        self, context: RequestContext, wanted: JSONObject, notify: Notify
    ) -> AbstractAsyncContextManager[JSONObject]:
        """The life of one ``subscriptions/listen`` stream, for what it follows beyond the
        standard filter (an extension's notifications that come from elsewhere, such as a
        proxy's backends): entering it gives the grants (:meth:`listen_grants` by default); it
        may send notifications on the stream with ``notify`` (they wait for the stream's
        acknowledgement) until the stream ends and the block is left.

        Raises:
            RequestError: the filter cannot be granted (on entering).
        """
        del notify
        return _granted(self.listen_grants(context, wanted))

    def tool_input_schema(self, name: str) -> Mapping[str, object] | None:
        """The inputSchema of a tool (2026-07-28 HTTP checks its ``x-mcp-header`` arguments)."""
        return None

    def decorate(self, era_modern: bool, result: JSONObject) -> JSONObject:
        """A result as sent: 2026-07-28 results carry ``resultType`` and ``serverInfo`` in ``_meta``."""
        if not era_modern:
            return result
        decorated: JSONObject = {"resultType": "complete", **result}
        decorated["_meta"] = {**_meta_of(result), META_SERVER_INFO: self.server_info()}
        return decorated

    # -- changes, to every client that asked -----------------------------------------------

    async def list_changed(self, kind: str, *, origin: RequestContext | None = None) -> None:
        """Announce that the ``kind`` list (tools, prompts, resources) changed.

        Legacy sessions get ``notifications/<kind>/list_changed`` (the session of ``origin`` on
        the request's own stream when it has no standalone stream); 2026-07-28 listen streams
        that asked for ``<kind>ListChanged`` get it tagged with their subscription id.
        """
        flag = LIST_KINDS[kind]
        method = f"notifications/{kind}/list_changed"
        for session in list(self.sessions):
            await session.notify_unrelated(method, None, origin=origin)
        await self.notify_listeners(lambda listen: listen.wants(flag), method)

    async def resource_updated(self, uri: str, *, origin: RequestContext | None = None) -> None:
        """``notifications/resources/updated`` to every subscriber of ``uri`` (both eras)."""
        params: JSONObject = {"uri": uri}
        for session in list(self.sessions):
            if uri in session.subscriptions:
                await session.notify_unrelated("notifications/resources/updated", params, origin=origin)
        await self.notify_listeners(lambda listen: listen.wants_uri(uri), "notifications/resources/updated", params)

    async def notify_listeners(
        self, wanted: Callable[[Listen], bool], method: str, params: JSONObject | None = None
    ) -> None:
        """Send a notification on every open listen stream that ``wanted`` accepts."""
        for listen in list(self.listens):
            if listen.outlet.closed:
                self.listens.discard(listen)
            elif wanted(listen):
                await listen.notify(method, params)


@asynccontextmanager
async def _granted(grants: JSONObject) -> AsyncIterator[JSONObject]:
    yield grants
