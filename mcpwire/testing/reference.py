"""The reference server of ``mcpwire check``, on :mod:`mcpwire.server`: both eras, stdio and HTTP.

    python -m mcpwire.testing.everything [--page-size N] [-v]                  # stdio
    python -m mcpwire.testing.everything --http [HOST:]PORT [--page-size N]    # HTTP on loopback

Theory of operation: :class:`ReferenceServer` is a :class:`~mcpwire.server.Server` whose routes
serve the reference catalogue: the demo server's tools, resources, templates and prompts, the
official conformance runner's fixture names (``test_simple_text``, ``test://static-text``,
``test_simple_prompt``, the ``test_input_required_result_*`` tools of the 2026-07-28
scenarios...), every tool annotated (``readOnlyHint``) so that a checker knows which tools are
safe to call, and two 2026-07-28 extensions declared under ``capabilities.extensions`` of
``server/discover`` (legacy revisions have no such field): Tasks (SEP-2663,
:mod:`mcpwire.testing.reference_tasks`) and Skills (SEP-2640, :mod:`mcpwire.testing.skills`).
The catalogue is shared with the standard-library engine (:mod:`mcpwire.testing.everything`,
which the checker's broken fixtures subclass); the tools are
:mod:`mcpwire.testing.reference_tools`. The protocol (eras, sessions, cancellation, batches,
SSE streams and their resumption) is :mod:`mcpwire.server`'s.

2026-07-28 input requests carry an HMAC-protected ``requestState`` where the fixture needs state
(:meth:`ReferenceServer.answers`): "Servers MUST reject state that fails verification"; the key
lives as long as the process, which is the scope of the state it signs.

With ``--http`` the first line on stdout is ``listening on <url>``; the server answers
Streamable HTTP on ``/mcp`` (both eras) and HTTP+SSE on ``/sse`` (2024-11-05), loopback only.
It must pass every check of ``mcpwire check`` in every revision, over stdio and over HTTP.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Final

import trio

from ..protocol.serving import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, RESOURCE_NOT_FOUND
from ..protocol.versions import MODERN_REVISIONS, V2025_03_26, V2025_06_18
from ..server import InputRequired, JSONObject, RequestContext, RequestError, Server, StreamableHTTPApp, serve_stdio
from .catalogue import (
    COMPLETIONS,
    DIRECTORY_PAGE_SIZE,
    FIXTURE_PROMPTS,
    FIXTURE_RESOURCES,
    FIXTURE_TEMPLATES,
    MODERN_ONLY_TEXT,
    SKILLS_PAGE_SIZE,
    TASKS_ONLY_TEXT,
    TEMPLATE_URI,
    MissingPromptArguments,
    Refused,
    answer_fits,
    fixture_contents,
    fixture_prompt,
    need_tasks,
    parse_listen,
    sign_state,
    sort_answers,
    verify_state,
    with_fixture_tools,
)
from .demo_server import (
    BLOB_URI,
    CACHE_SCOPE,
    GREET_NAMES,
    HELLO_URI,
    INSTRUCTIONS,
    ITEM_IDS,
    ITEMS_TEMPLATE,
    LIST_TTL_MS,
    PROMPTS,
    READ_TTL_MS,
    RESOURCES,
    TEMPLATES,
    BadArguments,
    page_of,
    read_resource,
    text_result,
    tool_list,
)
from .reference_tasks import Body, Job, TaskStore, declares_tasks
from .reference_tools import TOOLS, CallJob, ModernOnly, NoAnswer, form_elicitation, missing_capability
from .skills import SKILLS_EXTENSION, SkillCatalogue, default_catalogue
from .tasks import TASKS_EXTENSION

__all__ = ["NAME", "ReferenceServer", "main"]

log = logging.getLogger("mcpwire.testing.reference")

NAME: Final = "mcpwire-everything"
_MODERN: Final = MODERN_REVISIONS[0]
_EXTENSION_METHODS: Final = (
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
    "resources/directory/read",
)


class ReferenceServer(Server):
    """The reference catalogue, served on :mod:`mcpwire.server`.

    Args:
        background: the nursery task bodies run in (they outlive their requests).
        page_size: items per page of the list methods (0: one page).
        name: ``serverInfo.name``.
    """

    def __init__(self, background: trio.Nursery, *, page_size: int = 0, name: str = NAME) -> None:
        super().__init__(name, "1.0.0", instructions=INSTRUCTIONS)
        self.page_size = page_size
        self.skills: SkillCatalogue = default_catalogue()
        self._state_key = os.urandom(32)
        self.tasks = TaskStore(background, on_change=self._task_changed, fits=answer_fits)
        self._tool_schemas = {t["name"]: t["inputSchema"] for t in self.tool_definitions(_MODERN)}
        for method, handler in (
            ("tools/list", self._tools_list),
            ("tools/call", self._tools_call),
            ("resources/list", self._resources_list),
            ("resources/templates/list", self._templates_list),
            ("resources/read", self._resources_read),
            ("prompts/list", self._prompts_list),
            ("prompts/get", self._prompts_get),
            ("completion/complete", self._complete),
        ):
            self.route(method, handler)
        # 2026-07-28 only: both extensions are declared in server/discover, so a legacy session
        # gets -32601 for these methods
        extension_handlers = (
            self._tasks_get,
            self._tasks_update,
            self._tasks_cancel,
            self._skills_list,
            self._skills_get,
            self._directory_read,
        )
        for method, handler in zip(_EXTENSION_METHODS, extension_handlers, strict=True):
            self.route(method, handler, legacy=False)

    # -- identity ----------------------------------------------------------------------------

    def capabilities(self, revision: str) -> JSONObject:
        caps: JSONObject = {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "logging": {},
        }
        if revision >= V2025_03_26:  # the completions capability did not exist in 2024-11-05
            caps["completions"] = {}
        return caps

    def discover(self) -> JSONObject:
        result = super().discover()
        capabilities = dict(result["capabilities"])  # type: ignore[call-overload]
        # CF-T20, CF-X01: SEP-2663 §Capability Negotiation ("an empty object indicates support")
        # and SEP-2640 §Capability Declaration (directoryRead: resources/directory/read is served).
        capabilities["extensions"] = {TASKS_EXTENSION: {}, SKILLS_EXTENSION: {"directoryRead": True}}
        return {**result, "capabilities": capabilities}

    def tool_input_schema(self, name: str) -> Mapping[str, object] | None:
        schema = self._tool_schemas.get(name)
        return schema if isinstance(schema, dict) else None

    async def close(self) -> None:
        """Cancel running tasks (the connections close themselves)."""
        self.tasks.close()

    # -- listings --------------------------------------------------------------------------------

    def tool_definitions(self, revision: str) -> list[JSONObject]:
        """Every tool as listed in ``revision``."""
        return with_fixture_tools(tool_list(revision), revision)

    def _page(self, ctx: RequestContext, kind: str, items: Sequence[JSONObject]) -> JSONObject:
        result = page_of(items, ctx.params.get("cursor"), kind, {"list": kind}, self.page_size)
        if result is None:
            raise RequestError(INVALID_PARAMS, f"Invalid params: invalid cursor for {ctx.method}")
        if ctx.modern:
            result.update(ttlMs=LIST_TTL_MS, cacheScope=CACHE_SCOPE)
        return result

    async def _tools_list(self, ctx: RequestContext) -> JSONObject:
        return self._page(ctx, "tools", self.tool_definitions(ctx.revision))

    async def _resources_list(self, ctx: RequestContext) -> JSONObject:
        return self._page(ctx, "resources", [*RESOURCES, *FIXTURE_RESOURCES, *self.skills.listed_resources()])

    async def _templates_list(self, ctx: RequestContext) -> JSONObject:
        return self._page(ctx, "resourceTemplates", [*TEMPLATES, *FIXTURE_TEMPLATES])

    async def _prompts_list(self, ctx: RequestContext) -> JSONObject:
        return self._page(ctx, "prompts", [*PROMPTS, *FIXTURE_PROMPTS])

    # -- tools -------------------------------------------------------------------------------------

    async def _tools_call(self, ctx: RequestContext) -> JSONObject:
        name = ctx.params.get("name")
        args = ctx.params.get("arguments", {})
        tool = TOOLS.get(name) if isinstance(name, str) else None
        if tool is None:
            raise RequestError(INVALID_PARAMS, f"Invalid params: unknown tool {name!r}")
        if not isinstance(args, dict):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'arguments' must be an object")
        try:
            return await tool(self, ctx, args)
        except BadArguments as exc:
            # 2025-11-25 server/tools: input validation errors are tool execution errors (isError),
            # so that the model can correct itself.
            return text_result(f"invalid arguments for tool {name!r}: {exc}", is_error=True)
        except ModernOnly:
            return text_result(MODERN_ONLY_TEXT, is_error=True)

    # -- resources, prompts, completion ----------------------------------------------------------

    async def _resources_read(self, ctx: RequestContext) -> JSONObject:
        uri = ctx.params.get("uri")
        if not isinstance(uri, str):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'uri' must be a string")
        contents = fixture_contents(uri) or self.skills.contents(uri) or read_resource(uri)
        if contents is None:
            if not ctx.modern:
                raise RequestError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})
            raise RequestError(INVALID_PARAMS, f"Invalid params: resource not found: {uri}", {"uri": uri})
        result: JSONObject = {"contents": [contents]}
        if ctx.modern:
            result.update(ttlMs=READ_TTL_MS, cacheScope=CACHE_SCOPE)
        return result

    async def _prompts_get(self, ctx: RequestContext) -> JSONObject:
        name = ctx.params.get("name")
        arguments = ctx.params.get("arguments") or {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'arguments' must map names to strings")
        messages = self._prompt_messages(ctx, name, arguments)
        if messages is not None:
            return messages
        if name == "greet":
            if "name" not in arguments:
                raise RequestError(INVALID_PARAMS, "Invalid params: prompt 'greet' needs the argument 'name'")
            return {"description": "Greet someone by name.", "messages": [_user(f"Hello, {arguments['name']}!")]}
        if name == "plain":
            return {"description": "A prompt without arguments.", "messages": [_user("Say something nice.")]}
        raise RequestError(INVALID_PARAMS, f"Invalid params: unknown prompt {name!r}")

    def _prompt_messages(self, ctx: RequestContext, name: object, arguments: dict[str, str]) -> JSONObject | None:
        """The fixture prompts (None for another name)."""
        try:
            return fixture_prompt(name, arguments, modern=ctx.modern, ask=lambda asks: self.answers(ctx, dict(asks)))
        except MissingPromptArguments as exc:
            raise RequestError(INVALID_PARAMS, str(exc)) from None

    async def _complete(self, ctx: RequestContext) -> JSONObject:
        ref, argument = ctx.params.get("ref"), ctx.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'ref' and 'argument' must be objects")
        arg_name, value = argument.get("name"), argument.get("value")
        if not isinstance(arg_name, str) or not isinstance(value, str):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'argument' needs string 'name' and 'value'")
        kind, target = ref.get("type"), ref.get("name") if ref.get("type") == "ref/prompt" else ref.get("uri")
        candidates: tuple[str, ...]
        fixture = any(p["name"] == target for p in FIXTURE_PROMPTS) if kind == "ref/prompt" else target == TEMPLATE_URI
        if fixture:
            candidates = COMPLETIONS.get((str(kind), str(target), arg_name), ())
        elif kind == "ref/prompt":
            if target not in ("greet", "plain"):
                raise RequestError(INVALID_PARAMS, f"Invalid params: unknown prompt {target!r}")
            candidates = GREET_NAMES if (target, arg_name) == ("greet", "name") else ()
        elif kind == "ref/resource":
            if target not in (ITEMS_TEMPLATE, HELLO_URI, BLOB_URI):
                raise RequestError(INVALID_PARAMS, f"Invalid params: unknown resource {target!r}")
            candidates = ITEM_IDS if (target, arg_name) == (ITEMS_TEMPLATE, "id") else ()
        else:
            raise RequestError(INVALID_PARAMS, "Invalid params: 'ref.type' must be 'ref/prompt' or 'ref/resource'")
        values = [c for c in candidates if c.startswith(value)]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    # -- MRTR ------------------------------------------------------------------------------------------

    def answers(
        self,
        ctx: RequestContext,
        asks: dict[str, JSONObject],
        *,
        state: JSONObject | None = None,
        check_caps: bool = True,
    ) -> dict[str, object]:
        """The client's answers to ``asks`` (all of them), or raise the ``input_required`` result.

        The first call (or a retry missing answers) gets an ``input_required`` result asking for
        what is missing; with ``state`` the result carries an HMAC-protected ``requestState``,
        and a retry whose state does not verify is rejected with -32602.

        Raises:
            ModernOnly: in the legacy era.
            InputRequired: answers are missing.
            RequestError: -32021 for an undeclared capability, -32602 for state that fails.
        """
        if not ctx.modern:
            raise ModernOnly
        try:
            answers, missing = sort_answers(
                asks,
                ctx.client_capabilities,
                ctx.params,
                state=state,
                verify=lambda: self.verified_state(ctx),
                responses=lambda: ctx.input_responses,
                check_caps=check_caps,
            )
        except Refused as exc:
            raise RequestError(exc.code, exc.message, exc.data) from None
        if missing:
            # 2026-07-28 basic/patterns/mrtr: a retry without the requested answers is asked again.
            raise self.input_required(ctx, missing, state)
        return answers

    def input_required(
        self, ctx: RequestContext, asks: dict[str, JSONObject], state: JSONObject | None
    ) -> InputRequired:
        signed = None if state is None else sign_state(self._state_key, {"tool": ctx.params.get("name"), **state})
        return InputRequired(asks, signed)

    def verified_state(self, ctx: RequestContext) -> JSONObject | None:
        """The verified ``requestState`` of this call (None when absent or forged)."""
        return verify_state(self._state_key, ctx.params.get("requestState"), ctx.params.get("name"))

    # -- the Tasks extension (SEP-2663) ------------------------------------------------------------

    async def run_job(
        self, ctx: RequestContext, body: Body, *, required: bool = False, needs: Sequence[str] = ()
    ) -> JSONObject:
        """Run a tool's ``body`` as a task when the request declares the tasks extension, else
        inside this ``tools/call`` (``required``: never; the client must declare the extension).

        CF-T21, SEP-2663 §Capability Negotiation: the server "MAY return CreateTaskResult ... at
        its own discretion" to a declaring request (this one always does), and "MUST NOT return
        CreateTaskResult to a client that did not include the extension capability on its
        request".
        """
        caps = ctx.client_capabilities
        if ctx.modern and declares_tasks(caps):
            for capability in needs:
                if not isinstance(caps.get(capability), dict):
                    # 2026-07-28 basic/patterns/mrtr: "Servers MUST NOT send an inputRequests that
                    # the client has not declared support for"; a task would have to.
                    raise RequestError(
                        MISSING_CLIENT_CAPABILITY,
                        f"Missing required client capability: {capability}",
                        {"requiredCapabilities": {capability: {}}},
                    )

            async def decorated(job: Job) -> JSONObject:
                return self.decorate(True, await body(job))

            created = self.tasks.start(str(ctx.params.get("name")), decorated)
            # SEP-2663 §Polymorphic Results: "Servers MUST set resultType to "task" when returning
            # a CreateTaskResult"; the result is the flat task, without result/error/inputRequests.
            return {"resultType": "task", **created}
        if required:
            if not ctx.modern:
                return text_result(TASKS_ONLY_TEXT, is_error=True)
            # SEP-2663: "If a server is unable to service a request to a client that does not
            # declare this extension capability without returning CreateTaskResult, the server MUST
            # return an error with the code -32021 ... indicating the required extension".
            raise RequestError(
                MISSING_CLIENT_CAPABILITY,
                f"Missing required client capability: extension {TASKS_EXTENSION}",
                need_tasks(),
            )
        if "elicitation" in needs and not (ctx.since(V2025_06_18) and form_elicitation(caps)):
            return missing_capability(ctx, "elicitation", {"elicitation": {"form": {}}}, "client cannot elicit")
        try:
            return await body(CallJob(self, ctx))
        except NoAnswer as exc:
            return text_result(str(exc), is_error=True)

    def require_tasks(self, ctx: RequestContext) -> None:
        if not declares_tasks(ctx.client_capabilities):
            # SEP-2663 §Protocol Errors: "Servers MUST return this error for non-declaring clients
            # issuing tasks/get, tasks/update, and tasks/cancel requests."
            raise RequestError(
                MISSING_CLIENT_CAPABILITY,
                f"Missing required client capability: extension {TASKS_EXTENSION} ({ctx.method} is part of it)",
                need_tasks(),
            )

    async def _tasks_get(self, ctx: RequestContext) -> JSONObject:
        self.require_tasks(ctx)
        # SEP-2663 §Task Polling: a DetailedTask; "The resultType field MUST be set to "complete""
        return self.tasks.get(ctx.params.get("taskId"))

    async def _tasks_update(self, ctx: RequestContext) -> JSONObject:
        self.require_tasks(ctx)
        # CF-T23: answers by the keys of inputRequests; unknown keys are ignored
        await self.tasks.update(ctx.params.get("taskId"), ctx.params.get("inputResponses"))
        return {}  # "On success, the server MUST acknowledge the request with an empty result."

    async def _tasks_cancel(self, ctx: RequestContext) -> JSONObject:
        self.require_tasks(ctx)
        await self.tasks.cancel(ctx.params.get("taskId"))  # CF-T24: cooperative, ack only
        return {}  # "The server MUST acknowledge the request with an empty result."

    def listen_grants(self, context: RequestContext, wanted: JSONObject) -> JSONObject:
        task_ids = wanted.get("taskIds")
        if task_ids is None:
            return {}
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'taskIds' must be a list of strings")
        # CF-T26, SEP-2663 §Task Status Notifications: "If a client requests task status
        # notifications but does not declare the io.modelcontextprotocol/tasks extension
        # capability, the server MUST return a JSON-RPC error specifying the missing capabilities".
        self.require_tasks(context)
        # the acknowledgement lists "the task IDs it has agreed to send task status notifications for"
        return {"taskIds": self.tasks.known(task_ids)}

    async def _task_changed(self, task: JSONObject) -> None:
        # SEP-2663: "Each notification carries a complete DetailedTask for the current status,
        # identical to what tasks/get would have returned at that moment."
        def wants(listen: object) -> bool:
            granted = getattr(listen, "granted", {})
            return task["taskId"] in granted.get("taskIds", ())

        await self.notify_listeners(wants, "notifications/tasks", task)

    # -- the Skills extension (SEP-2640) ----------------------------------------------------------

    async def _skills_list(self, ctx: RequestContext) -> JSONObject:
        # SEP-2640 §Enumeration: "Pagination mirrors the base protocol's list methods ... An entry
        # is atomic"; in 2026-07-28 with ttlMs and cacheScope.
        return self._extension_page(ctx, "skills", "skills", self.skills.entries(), SKILLS_PAGE_SIZE)

    async def _skills_get(self, ctx: RequestContext) -> JSONObject:
        uri = ctx.params.get("uri")
        if not isinstance(uri, str):
            raise RequestError(INVALID_PARAMS, "Invalid params: skills/get needs 'uri', a string")
        entry = self.skills.entry(uri)
        if entry is None:
            # SEP-2640 §Retrieval: "If the URI does not identify a skill the server serves, the
            # server MUST return error -32602 (Invalid params)".
            raise RequestError(INVALID_PARAMS, f"Invalid params: {uri!r} is not the SKILL.md of a skill served here")
        return {"skill": entry, "ttlMs": READ_TTL_MS, "cacheScope": CACHE_SCOPE}

    async def _directory_read(self, ctx: RequestContext) -> JSONObject:
        uri = ctx.params.get("uri")
        if not isinstance(uri, str):
            raise RequestError(INVALID_PARAMS, "Invalid params: resources/directory/read needs 'uri', a string")
        children = self.skills.children(uri)
        if children is None:
            # SEP-2640 §resources/directory/read: "If the URI does not exist, or exists but is not a
            # directory resource, the server MUST return error -32602 (Invalid params)".
            raise RequestError(INVALID_PARAMS, f"Invalid params: {uri!r} is not a directory resource", {"uri": uri})
        return self._extension_page(ctx, f"directory {uri}", "resources", children, DIRECTORY_PAGE_SIZE)

    def _extension_page(
        self, ctx: RequestContext, scope: str, key: str, items: Sequence[JSONObject], size: int
    ) -> JSONObject:
        """One page of an extension's list: ``size`` items (``--page-size`` wins when set); a
        cursor is valid only for the list (``scope``) that issued it, else -32602."""
        result = page_of(items, ctx.params.get("cursor"), key, {"scope": scope}, self.page_size or size)
        if result is None:
            raise RequestError(INVALID_PARAMS, f"Invalid params: invalid cursor for {ctx.method}")
        return {**result, "ttlMs": LIST_TTL_MS, "cacheScope": CACHE_SCOPE}


def _user(text: str) -> JSONObject:
    return {"role": "user", "content": {"type": "text", "text": text}}


# -- the shells --------------------------------------------------------------------------------------


async def serve_reference_stdio(*, page_size: int = 0, name: str = NAME) -> None:
    """Serve the reference server on stdin/stdout until end of input."""
    async with trio.open_nursery() as background:
        server = ReferenceServer(background, page_size=page_size, name=name)
        try:
            await serve_stdio(server)
        finally:
            await server.close()
            background.cancel_scope.cancel()


async def serve_reference_http(host: str, port: int, *, page_size: int = 0, name: str = NAME) -> None:
    """Serve the reference server over HTTP until cancelled; the first stdout line is its URL."""
    from ..server.http import serve_http

    async with trio.open_nursery() as background:
        server = ReferenceServer(background, page_size=page_size, name=name)
        app = StreamableHTTPApp(server)
        try:
            [url, *_] = await background.start(partial(serve_http, app, host=host, port=port))
            sys.stdout.write(f"listening on {url}/mcp\n")
            sys.stdout.flush()
            await trio.sleep_forever()
        finally:
            await server.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve on stdin/stdout until end of input, or on HTTP until interrupted; the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m mcpwire.testing.everything", description="The mcpwire reference MCP server (stdio or HTTP)."
    )
    parser.add_argument("--page-size", type=int, default=0, metavar="N", help="items per list page (0 = one page)")
    parser.add_argument("--http", type=parse_listen, metavar="[HOST:]PORT", help="serve Streamable HTTP (port 0 = any)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    options = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if options.verbose else logging.WARNING,
        format="reference server %(levelname)s: %(message)s",
    )
    page_size = max(0, options.page_size)
    try:
        if options.http is not None:
            host, port = options.http
            trio.run(lambda: serve_reference_http(host, port, page_size=page_size))
        else:
            trio.run(lambda: serve_reference_stdio(page_size=page_size))
    except KeyboardInterrupt:
        return 130
    except trio.BrokenResourceError:
        log.warning("stdout is closed; exiting")
    return 0
