"""The 2026-07-28 extensions the gateway relays: Tasks (SEP-2663) and Skills (SEP-2640).

Theory of operation: an extension is the gateway's to declare only when it can route the
extension's methods, so it declares (in ``server/discover``, under ``capabilities.extensions``)
those of :data:`RELAYED` that a connected 2026-07-28 backend declares, with that backend's
settings (several backends: merged, a ``true`` flag winning). Every request is relayed to one
backend with the gateway's client's own capabilities in ``_meta`` (they also opt the request into
an extension: SEP-2663 §Capability Negotiation, "A server MUST NOT return CreateTaskResult to a
client that did not include the extension capability on its request"), and the backend's answer,
result or JSON-RPC error, goes back as the backend sent it. These requests go straight to the
backend's connection, like ``completion/complete``: they are not calls of a tool, so the host's
policies (approval, cache, audit) are not theirs.

Tasks: a ``tools/call`` the backend answers with a task (``resultType: "task"``) comes back
through the host's call as a :class:`~mcpwire.client.relay.TaskCreated`; its ``taskId`` is wrapped
(:meth:`Extensions.wrap_task`: the server's name and the backend's id) so that ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` reach the backend that made it, with the backend's own id,
whichever backends the gateway fronts meanwhile. The wrapped id is what the client sees
everywhere: in the ``CreateTaskResult``, in every ``DetailedTask``, and in the ``Mcp-Name`` header
it sends with the task's requests (SEP-2663 §Streamable HTTP: Routing Headers), which the
gateway's HTTP layer checks as for any request. A backend's task ids are unguessable (SEP-2663
§Security), and the wrapping keeps them so: it only adds where they live. A request naming no
task the gateway issued is -32602, after the capability check the backend itself would make
(-32021 for a client that did not declare the extension). A ``subscriptions/listen`` whose filter
names tasks (``taskIds``) is followed on their backends (:meth:`Extensions.following`): for each
backend, a listen stream of the gateway's connection for the backend's ids, with the client's
capabilities, lives as long as the client's; the client's acknowledgement grants the wrapped ids
of the tasks the backends acknowledged, and each backend's ``notifications/tasks`` reaches the
client's stream with its id wrapped, the ``DetailedTask`` otherwise as the backend sent it.

Skills: ``skills/list`` walks the skills backends one after another, each page the backend's own,
under a cursor of the gateway's that names the backend and the backend's cursor; ``skills/get``
and ``resources/directory/read`` go to the backend that serves the URI (the one that lists it, or
a resource under it; else the only skills backend).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Final

import trio

from ..client.relay import Relay, RelayedRound
from ..errors import HostError, MCPWireError, RPCError
from ..protocol.serving import INTERNAL_ERROR, INVALID_PARAMS, MISSING_CLIENT_CAPABILITY
from ..protocol.types import META_CLIENT_CAPABILITIES
from ..server import JSONObject, Notify, RequestContext, RequestError
from .gateway_relay import b64, unb64

if TYPE_CHECKING:
    from ..client import Client, Subscription
    from ..host import Host

__all__ = ["RELAYED", "SKILLS_EXTENSION", "TASKS_EXTENSION", "Extensions"]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
#: the extensions the gateway can relay -> the methods each adds
RELAYED: Final = {
    TASKS_EXTENSION: ("tasks/get", "tasks/update", "tasks/cancel"),
    SKILLS_EXTENSION: ("skills/list", "skills/get", "resources/directory/read"),
}
#: the prefix of a task id the gateway wrapped
_TASK: Final = "t."
#: seconds a backend has to acknowledge the listen stream that follows a client's tasks
LISTEN_ACK_S: Final = 10.0

log = logging.getLogger("mcpwire.service.gateway")


class Extensions:
    """The extensions of the host's 2026-07-28 backends, relayed (see the module's theory of
    operation)."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def routes(self) -> Iterator[tuple[str, Callable[[RequestContext], Awaitable[JSONObject]]]]:
        """(method, handler) for every relayed method (2026-07-28 only)."""
        handlers = {
            "tasks/get": self.task_request,
            "tasks/update": self.task_request,
            "tasks/cancel": self.task_request,
            "skills/list": self.skills_list,
            "skills/get": self.skill_request,
            "resources/directory/read": self.skill_request,
        }
        for methods in RELAYED.values():
            for method in methods:
                yield method, handlers[method]

    # -- declaring ---------------------------------------------------------------------------------

    def _declaring(self, extension: str) -> list[tuple[str, Mapping[str, object]]]:
        """(server, settings) of each connected 2026-07-28 backend declaring ``extension``, in the
        host's order."""
        out: list[tuple[str, Mapping[str, object]]] = []
        for info in self.host.list():
            caps = info.capabilities
            if info.client is None or info.era != "modern" or caps is None or not isinstance(caps.extensions, dict):
                continue
            settings = caps.extensions.get(extension)
            if isinstance(settings, dict):
                out.append((info.name, settings))
        return out

    def declared(self) -> JSONObject:
        """``capabilities.extensions`` of the gateway's ``server/discover``: the relayed
        extensions its backends declare (an empty object when none does)."""
        out: JSONObject = {}
        for extension in RELAYED:
            declaring = self._declaring(extension)
            if not declaring:
                continue
            merged: JSONObject = {}
            for _, settings in declaring:
                for key, value in settings.items():
                    if key not in merged or value is True:
                        merged[key] = value
            out[extension] = merged
        return out

    # -- relaying ------------------------------------------------------------------------------------

    async def _relay(self, ctx: RequestContext, server: str, params: JSONObject) -> JSONObject:
        """``ctx``'s request, with ``params``, to ``server`` for ``ctx``'s client; the backend's
        result (its JSON-RPC error is raised as the backend sent it)."""
        client = self._client(server)
        if client is None:
            raise RequestError(INTERNAL_ERROR, f"Internal error: server {server!r} is not connected")
        sent = {k: v for k, v in params.items() if k != "_meta"}  # the connection sends its own
        try:
            result = await client.request(ctx.method, sent, relay=_relay_for(ctx))
        except RPCError as exc:
            raise RequestError(exc.code, exc.message, exc.data) from None
        except MCPWireError as exc:
            raise RequestError(INTERNAL_ERROR, f"Internal error: server {server!r}: {exc}") from None
        if not isinstance(result, dict):
            raise RequestError(INTERNAL_ERROR, f"Internal error: server {server!r} answered {ctx.method} wrongly")
        return dict(result)

    def _client(self, server: str) -> Client | None:
        try:
            return self.host.get(server).client
        except HostError:
            return None

    # -- tasks -----------------------------------------------------------------------------------------

    @staticmethod
    def wrap_task(server: str, task_id: str) -> str:
        """The id the gateway's client knows a backend's task by."""
        return f"{_TASK}{b64(server)}.{task_id}"

    def unwrap_task(self, task_id: object) -> tuple[str, str] | None:
        """(server, the backend's id) of a wrapped task id; None for an id the gateway did not issue."""
        if not isinstance(task_id, str) or not task_id.startswith(_TASK):
            return None
        server, _, inner = task_id.removeprefix(_TASK).partition(".")
        name = unb64(server)
        if not name or not inner:
            return None
        return name, inner

    def task_result(self, server: str, result: JSONObject) -> JSONObject:
        """A backend's ``CreateTaskResult`` or ``DetailedTask`` with its ``taskId`` wrapped."""
        task_id = result.get("taskId")
        if isinstance(task_id, str):
            return {**result, "taskId": self.wrap_task(server, task_id)}
        return result

    @staticmethod
    def _require_tasks(ctx: RequestContext, what: str) -> None:
        if not _declares(ctx, TASKS_EXTENSION):
            # SEP-2663 §Protocol Errors: "Servers MUST return this error for non-declaring clients
            # issuing tasks/get, tasks/update, and tasks/cancel requests" (and task notifications)
            raise RequestError(
                MISSING_CLIENT_CAPABILITY,
                f"Missing required client capability: extension {TASKS_EXTENSION} ({what} is part of it)",
                {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )

    @asynccontextmanager
    async def following(self, ctx: RequestContext, wanted: JSONObject, notify: Notify) -> AsyncIterator[JSONObject]:
        """A client's ``subscriptions/listen`` that names tasks, followed on their backends for
        as long as the block lasts; yields its grants (see the module's theory of operation).

        Raises:
            RequestError: the request is one the backend would refuse (malformed ``taskIds``, a
                client that did not declare the extension).
        """
        task_ids = wanted.get("taskIds")
        if task_ids is None:
            yield {}
            return
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'taskIds' must be a list of strings")
        self._require_tasks(ctx, "the taskIds filter")
        routable = {server for server, _ in self._declaring(TASKS_EXTENSION)}
        by_server: dict[str, list[str]] = {}
        for wrapped in task_ids:
            found = self.unwrap_task(wrapped)
            if found is not None and found[0] in routable:
                by_server.setdefault(found[0], []).append(found[1])
        granted: list[str] = []
        async with AsyncExitStack() as stack:
            followed: list[tuple[str, Subscription]] = []
            for server, ids in by_server.items():
                client = self._client(server)
                if client is None:
                    continue
                try:
                    sub = await stack.enter_async_context(
                        client.subscribe(task_ids=ids, relay=_relay_for(ctx), timeout=LISTEN_ACK_S)
                    )
                except MCPWireError as exc:  # the backend's refusal or failure: its tasks are not granted
                    log.info("%s: cannot follow tasks for a client's listen stream: %s", server, exc)
                    continue
                acknowledged = (sub.acknowledged or {}).get("taskIds")
                ids_granted = [t for t in acknowledged if t in ids] if isinstance(acknowledged, list) else []
                granted += [self.wrap_task(server, t) for t in ids_granted if isinstance(t, str)]
                followed.append((server, sub))
            async with trio.open_nursery() as nursery:
                for server, sub in followed:
                    nursery.start_soon(self._forward_tasks, server, sub, notify)
                yield {"taskIds": granted}
                nursery.cancel_scope.cancel()

    async def _forward_tasks(self, server: str, sub: Subscription, notify: Notify) -> None:
        """A backend's ``notifications/tasks`` on the client's stream, with the ids wrapped, until
        the backend's stream ends."""
        async for note in sub:
            task: JSONObject = {k: v for k, v in note.params.items() if k != "_meta"}  # its subscription id
            try:
                await notify(note.method, self.task_result(server, task))
            except (trio.BrokenResourceError, trio.ClosedResourceError):  # the client stopped reading
                return

    async def task_request(self, ctx: RequestContext) -> JSONObject:
        """``tasks/get``, ``tasks/update`` or ``tasks/cancel``, relayed to the task's backend."""
        self._require_tasks(ctx, ctx.method)
        found = self.unwrap_task(ctx.params.get("taskId"))
        if found is None or not any(server == found[0] for server, _ in self._declaring(TASKS_EXTENSION)):
            raise RequestError(INVALID_PARAMS, f"Invalid params: {ctx.method}: no task with that taskId here")
        server, task_id = found
        result = await self._relay(ctx, server, {**ctx.params, "taskId": task_id})
        return self.task_result(server, result)

    # -- skills ----------------------------------------------------------------------------------------

    async def skills_list(self, ctx: RequestContext) -> JSONObject:
        """``skills/list``: every skills backend's pages in turn."""
        servers = [server for server, _ in self._declaring(SKILLS_EXTENSION)]
        cursor = ctx.params.get("cursor")
        if cursor is None:
            if not servers:
                return {"skills": []}
            server, inner = servers[0], None
        else:
            decoded = _unb64_json(cursor) if isinstance(cursor, str) else None
            if (
                not isinstance(decoded, list)
                or len(decoded) != 2
                or decoded[0] not in servers
                or not (decoded[1] is None or isinstance(decoded[1], str))
            ):
                raise RequestError(INVALID_PARAMS, "Invalid params: invalid cursor for skills/list")
            server, inner = decoded
        params: JSONObject = {} if inner is None else {"cursor": inner}
        page = await self._relay(ctx, server, params)
        following = page.pop("nextCursor", None)
        if isinstance(following, str):
            page["nextCursor"] = _b64_json([server, following])
        elif servers.index(server) + 1 < len(servers):
            page["nextCursor"] = _b64_json([servers[servers.index(server) + 1], None])
        return page

    async def skill_request(self, ctx: RequestContext) -> JSONObject:
        """``skills/get`` and ``resources/directory/read``, relayed to the backend serving the URI."""
        uri = ctx.params.get("uri")
        if not isinstance(uri, str):
            raise RequestError(INVALID_PARAMS, f"Invalid params: {ctx.method} needs 'uri', a string")
        return await self._relay(ctx, self._skills_server(uri, ctx.method), dict(ctx.params))

    def _skills_server(self, uri: str, method: str) -> str:
        servers = [server for server, _ in self._declaring(SKILLS_EXTENSION)]
        if len(servers) == 1:
            return servers[0]
        below = uri.rstrip("/") + "/"
        serving = {r.server for r in self.host.resources() if r.uri == uri or r.uri.startswith(below)}
        serving &= set(servers)
        if len(serving) == 1:
            return serving.pop()
        # SEP-2640: a URI no server serves is -32602 (Invalid params)
        if not serving:
            raise RequestError(INVALID_PARAMS, f"Invalid params: {method}: {uri!r} is served by no skills server here")
        raise RequestError(
            INVALID_PARAMS,
            f"Invalid params: {method}: {uri!r} is served by several servers here ({', '.join(sorted(serving))})",
        )


def _declares(ctx: RequestContext, extension: str) -> bool:
    extensions = ctx.client_capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(extension), dict)


def _b64_json(value: object) -> str:
    return b64(json.dumps(value, separators=(",", ":")))


def _unb64_json(text: str) -> object:
    decoded = unb64(text)
    if decoded is None:
        return None
    try:
        value: object = json.loads(decoded)
    except ValueError:
        return None
    return value


def _relay_for(ctx: RequestContext) -> Relay:
    """The gateway's client, for a request relayed to a backend: its capabilities in ``_meta``
    (which also opt it into the extensions it declared)."""
    return Relay(round=RelayedRound(meta={META_CLIENT_CAPABILITIES: ctx.client_capabilities}))
