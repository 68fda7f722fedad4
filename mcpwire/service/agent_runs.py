"""``POST /api/v1/agent/runs``: a run of the agent over the service's host, its events streamed.

Theory of operation: the body names a preset of the service's mcp.json (provider, model, servers,
tools, system prompt, approval policy, budgets: :mod:`mcpwire.agent.presets`), optionally the
servers and tools this run may use instead of the preset's, and a prompt, or a whole
conversation (:class:`mcpwire.agent.Message` values, as a previous run's ``final`` left it in
``messages``). The answer is a server-sent event stream: one event per run event (``event:``
its type, ``id:`` its place in the run, ``data:`` its JSON, :mod:`mcpwire.agent.events`), the
last one ``final`` or ``failed``, then a ``messages`` event with the conversation to continue.
With a store, the conversation is kept there (:mod:`mcpwire.service.agent_conversations`): the
first event, ``run``, names it (``conversation_id``), and a request giving ``conversation`` and a
prompt continues a stored one; one run at a time continues a conversation (a second one asked
for while it runs gets a ``409`` problem, as their messages would otherwise interleave).
The run's calls go through the host as every call does: its approvals are opened in the host's
queue with the run's id in their context, so ``GET /api/v1/approvals`` lists them and
``POST /api/v1/approvals/{id}`` decides them (a CRITICAL call twice), and the audit records carry
the run's id and the request's trace id. The host's policy is the service's (mcp.json's
per-server settings): a preset's ``rules``, ``ask_at`` and ``approval_timeout`` apply to
``mcpwire chat`` only, not to a host many callers share. Closing the stream cancels the run and
its calls.
Presets are read from the config file when a request comes, so an edit applies to the next run.
The API's operation (:mod:`mcpwire.service.api.agent`, which the OpenAPI document describes)
and the console's chat page both start runs through :class:`AgentRuns`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import msgspec
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from ..agent import Agent, Message, Preset, PresetError, Run, load_presets
from ..agent.events import Failed
from ..host import Host
from ..redaction import shorten
from .agent_conversations import ConversationKeeper, load_messages
from .problems import ProblemError
from .store import Store

__all__ = ["AGENT_RUNS_PATH", "AgentRoutes", "AgentRuns", "RunRequest", "agent_routes"]

log = logging.getLogger("mcpwire.service.agent")

AGENT_RUNS_PATH: Final = "/api/v1/agent/runs"
#: the largest request body read
MAX_BODY_BYTES: Final = 4 * 1024 * 1024


class RunRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What ``POST /api/v1/agent/runs`` takes: a preset and a prompt, or a conversation; and the
    servers and tools this run may use, instead of the preset's."""

    preset: str
    prompt: str | None = None
    messages: list[Message] | None = None
    #: a stored conversation to continue (with ``prompt``)
    conversation: str | None = None
    #: only these servers (by name), instead of the preset's
    servers: list[str] | None = None
    #: only the tools matching these globs of namespaced names (``time__*``), instead of the preset's
    tools: list[str] | None = None


_decoder = msgspec.json.Decoder(RunRequest)


def _problem(exc: ProblemError) -> Response:
    problem = exc.problem(instance=AGENT_RUNS_PATH)
    return Response(msgspec.json.encode(problem), status_code=exc.status, media_type="application/problem+json")


class _RunStream(Response):
    """The run's events as server-sent events, written as they come (the run lives as long as the
    response: a closed connection cancels it)."""

    def __init__(
        self,
        agent: Agent,
        messages: list[Message],
        context: dict[str, str],
        keeper: ConversationKeeper | None,
        release: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(media_type="text/event-stream")
        self.agent = agent
        self.conversation = messages
        self.context = context
        self.keeper = keeper
        #: frees the conversation for the next run (called once the run is over, however it ends)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        started: Run | None = None
        try:
            async with self.agent.run(self.conversation, context=self.context) as run:
                started = run
                head: dict[str, str] = {"run_id": run.id}
                if self.keeper is not None:
                    await self.keeper.begin(self.conversation, run.id)
                    head["conversation_id"] = self.keeper.id
                await send(_chunk("run", msgspec.json.encode(head)))
                async for event in run:
                    data = msgspec.json.encode(event)
                    await send(_chunk(type(event).__struct_config__.tag or "event", data, event.seq))
            if not isinstance(run.outcome, Failed):
                await send(_chunk("messages", msgspec.json.encode(run.messages)))
        finally:
            try:
                if self.keeper is not None and started is not None:
                    await self.keeper.finish(started.messages, started.outcome)
                provider = self.agent.provider
                await provider.aclose()
            finally:
                self.release()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _chunk(name: object, data: bytes, seq: int | None = None) -> dict[str, object]:
    head = f"event: {name}\n" + (f"id: {seq}\n" if seq is not None else "")
    return {"type": "http.response.body", "body": head.encode() + b"data: " + data + b"\n\n", "more_body": True}


class AgentRuns:
    """Starts runs over ``host`` with the presets of the file at ``config_path``, keeping their
    conversations in ``store`` when there is one (the API's route and the console's chat page)."""

    def __init__(self, host: Host, config_path: str | Path | None, store: Store | None = None) -> None:
        self.host = host
        self.config_path = config_path
        self.store = store
        #: the stored conversations a run of this process is continuing now: a second run on one
        #: of them is refused (both would append to it, and their messages would interleave)
        self.busy: set[str] = set()

    def presets(self) -> dict[str, Preset]:
        """The config file's presets, read now.

        Raises:
            PresetError: the file's presets are not valid.
        """
        return load_presets(self.config_path) if self.config_path is not None else {}

    async def start(self, body: bytes, state: Mapping[str, object], *, caller: str = "api") -> Response:
        """The run ``body`` (a :class:`RunRequest` as JSON) asks for, as an event stream, or a problem."""
        if len(body) > MAX_BODY_BYTES:
            return _problem(ProblemError(413, f"the body is larger than {MAX_BODY_BYTES} bytes"))
        try:
            wanted = _decoder.decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return _problem(ProblemError(422, f"the body is not a run request: {shorten(str(exc), 300)}"))
        try:
            return await self.run(wanted, state, caller=caller)
        except ProblemError as exc:
            return _problem(exc)

    async def run(self, wanted: RunRequest, state: Mapping[str, object], *, caller: str = "api") -> Response:
        """The run ``wanted`` asks for, as an event stream.

        Raises:
            ProblemError: the request cannot run (422: it is not one; 404: no such preset,
                server or conversation; 409: the presets are invalid, or the conversation busy).
        """
        if (wanted.prompt is None) == (wanted.messages is None):
            raise ProblemError(422, "give either prompt or messages")
        if wanted.conversation is not None and wanted.prompt is None:
            raise ProblemError(422, "continue a conversation with a prompt, not messages")
        store = self.store
        if wanted.conversation is not None and store is None:
            raise ProblemError(409, "this service keeps no conversations", title="No store")
        if wanted.conversation is not None and wanted.conversation in self.busy:
            detail = f"a run is continuing conversation {wanted.conversation!r}; send the next message when it ends"
            raise ProblemError(409, detail, title="Conversation busy")
        if wanted.conversation is None:
            return await self._start(wanted, state, caller)
        self.busy.add(wanted.conversation)  # no await since the check: no other run got in between
        answer: Response | None = None
        try:
            answer = await self._start(wanted, state, caller)
        finally:
            if not isinstance(answer, _RunStream):  # a problem, or an error: no run holds it
                self.busy.discard(wanted.conversation)
        return answer

    def _preset(self, wanted: RunRequest) -> Preset:
        """The preset the request names, with its servers and tools."""
        try:
            presets = self.presets()
        except PresetError as exc:
            raise ProblemError(409, str(exc), title="Invalid presets") from None
        preset = presets.get(wanted.preset)
        if preset is None:
            known = ", ".join(sorted(presets)) or "none"
            raise ProblemError(404, f"no preset {wanted.preset!r}; the presets are: {known}", title="Unknown preset")
        changes: dict[str, tuple[str, ...]] = {}
        if wanted.servers is not None:
            known_servers = [info.name for info in self.host.list()]
            missing = [name for name in wanted.servers if name not in known_servers]
            if missing:
                listed = ", ".join(repr(name) for name in missing)
                raise ProblemError(
                    404, f"no server {listed}; the servers are: {', '.join(known_servers) or 'none'}",
                    title="Unknown server",
                )  # fmt: skip
            changes["servers"] = tuple(wanted.servers)
        if wanted.tools is not None:
            changes["tools"] = tuple(wanted.tools)
        return msgspec.structs.replace(preset, **changes) if changes else preset

    async def _start(self, wanted: RunRequest, state: Mapping[str, object], caller: str) -> Response:
        store = self.store
        preset = self._preset(wanted)
        try:
            agent = Agent.from_preset(self.host, preset, caller=caller)
        except (PresetError, ValueError) as exc:
            raise ProblemError(409, str(exc), title="Preset cannot run") from None
        earlier: list[Message] = []
        if wanted.conversation is not None and store is not None:
            found = await load_messages(store, wanted.conversation)
            if found is None:
                await agent.provider.aclose()
                raise ProblemError(404, f"no conversation {wanted.conversation!r}", title="Unknown conversation")
            earlier = found
        given = list(wanted.messages or [])
        messages = [*earlier, Message.user(wanted.prompt)] if wanted.prompt is not None else given
        context = {k: str(state[k]) for k in ("trace_id", "caller") if state.get(k)}
        if store is None:
            return _RunStream(agent, messages, context, None)
        keeper = ConversationKeeper(
            store, preset=wanted.preset, conversation_id=wanted.conversation, stored=len(earlier)
        )
        self.busy.add(keeper.id)  # a new one's id too: its caller learns it from the run's first event
        return _RunStream(agent, messages, context, keeper, lambda: self.busy.discard(keeper.id))


class AgentRoutes(list[BaseRoute]):
    """The agent's routes for the app's ``extra_routes`` (the console's chat page), carrying the
    runs that the API's agent operations start (``build_app`` hands them to the service)."""

    def __init__(self, runs: AgentRuns, routes: Sequence[BaseRoute] = ()) -> None:
        super().__init__(routes)
        self.runs = runs


def agent_routes(host: Host, config_path: str | Path | None, store: Store | None = None) -> AgentRoutes:
    """The agent over ``host``, with the presets of the file at ``config_path``: the runs the
    API's ``/api/v1/agent/runs`` starts, and, with a ``store`` (where runs keep their
    conversations), the console's chat page (when the console is installed)."""
    runs = AgentRuns(host, config_path, store)
    if store is None:
        return AgentRoutes(runs)
    try:
        from .console import chat
    except ImportError:  # the console's dependencies (jinja2) are missing
        return AgentRoutes(runs)
    return AgentRoutes(runs, chat.routes(runs))
