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
(-32021 for a client that did not declare the extension). ``notifications/tasks`` on a
``subscriptions/listen`` stream are not relayed (the gateway's connections listen without task
filters): the acknowledgement grants no ``taskIds``, and the client polls ``tasks/get``.

Skills: ``skills/list`` walks the skills backends one after another, each page the backend's own,
under a cursor of the gateway's that names the backend and the backend's cursor; ``skills/get``
and ``resources/directory/read`` go to the backend that serves the URI (the one that lists it, or
a resource under it; else the only skills backend).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Final

from ..client.relay import Relay, RelayedRound
from ..errors import HostError, MCPWireError, RPCError
from ..protocol.serving import INTERNAL_ERROR, INVALID_PARAMS, MISSING_CLIENT_CAPABILITY
from ..protocol.types import META_CLIENT_CAPABILITIES
from ..server import JSONObject, RequestContext, RequestError
from .gateway_relay import b64, unb64

if TYPE_CHECKING:
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
        try:
            client = self.host.get(server).client
        except HostError:
            client = None
        if client is None:
            raise RequestError(INTERNAL_ERROR, f"Internal error: server {server!r} is not connected")
        sent = {k: v for k, v in params.items() if k != "_meta"}  # the connection sends its own
        relay = Relay(round=RelayedRound(meta={META_CLIENT_CAPABILITIES: ctx.client_capabilities}))
        try:
            result = await client.request(ctx.method, sent, relay=relay)
        except RPCError as exc:
            raise RequestError(exc.code, exc.message, exc.data) from None
        except MCPWireError as exc:
            raise RequestError(INTERNAL_ERROR, f"Internal error: server {server!r}: {exc}") from None
        if not isinstance(result, dict):
            raise RequestError(INTERNAL_ERROR, f"Internal error: server {server!r} answered {ctx.method} wrongly")
        return dict(result)

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

    def listen_grants(self, ctx: RequestContext, wanted: JSONObject) -> JSONObject:
        """What a ``subscriptions/listen`` filter's ``taskIds`` is granted: none (see the module's
        theory of operation), once the request is one the backend would have accepted."""
        task_ids = wanted.get("taskIds")
        if task_ids is None:
            return {}
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'taskIds' must be a list of strings")
        self._require_tasks(ctx, "the taskIds filter")
        return {"taskIds": []}

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
