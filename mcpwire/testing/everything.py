"""The reference server's standard-library engine, and the entry point of the reference server.

    python -m mcpwire.testing.everything [--page-size N] [-v]                  # stdio
    python -m mcpwire.testing.everything --http [HOST:]PORT [--page-size N]    # HTTP on loopback

runs the reference server, which is built on :mod:`mcpwire.server` (:mod:`mcpwire.testing.reference`).
This module keeps :class:`EverythingServer`, the same server on the standard-library engine of
:mod:`mcpwire.testing.demo_server` and :mod:`mcpwire.testing.http_server`: the checker's broken
fixtures (``tests/checker/fixtures``) subclass it to break one rule each, and it needs nothing but
the standard library (over HTTP, also :mod:`mcpwire.protocol.serving`). What both engines serve
(the fixture tools, resources, prompts, completions and their contents) is
:mod:`mcpwire.testing.catalogue`.

Theory of operation: the protocol engine is :class:`mcpwire.testing.demo_server.DemoServer`
(both eras, tools, resources, templates, prompts, completion, logging, pagination,
subscriptions, MRTR); :class:`EverythingServer` adds the fixture names of the official
conformance runner (``test_simple_text``, ``test://static-text``, ``test_simple_prompt``, the
``test_input_required_result_*`` tools of the 2026-07-28 scenarios, ...) so that results can be
cross-checked, and annotates every tool (``readOnlyHint``) so that a checker knows which tools
are safe to call. Fixture tools that need the client (sampling, elicitation, roots) ask the
legacy way (a server request) in 2024-11-05..2025-11-25 and the 2026-07-28 way (an
``input_required`` result) in the modern era; the ``test_input_required_result_*`` tools exist
for the modern era only and answer a legacy call with an ``isError`` result.

Two 2026-07-28 extensions, declared under ``capabilities.extensions`` of ``server/discover``
(legacy revisions have no such field, so a legacy session sees neither):

- Tasks (``io.modelcontextprotocol/tasks``, SEP-2663; :mod:`mcpwire.testing.tasks`): a request
  that declares the extension in its client capabilities gets a ``CreateTaskResult`` from the
  task-supporting tools (``slow_compute``, ``confirm_delete``, ``multi_input``; ``failing_job``,
  ``protocol_error_job`` and ``test_tool_with_task`` run only as tasks, -32021 otherwise), polled
  with ``tasks/get``, answered with ``tasks/update``, cancelled with ``tasks/cancel``, and reported
  as ``notifications/tasks`` on a ``subscriptions/listen`` stream that names their ``taskIds``.
  Without the extension the same tools run inside their call (MRTR in 2026-07-28, server
  requests before); ``greet`` never becomes a task. Tasks live as long as the engine, so over
  HTTP they outlive the request that created them.
- Skills (``io.modelcontextprotocol/skills``, SEP-2640; :mod:`mcpwire.testing.skills`): two
  skills under ``skill://``, listed and read as resources in every era, enumerated with
  ``skills/list`` and ``skills/get``, and browsed with ``resources/directory/read``
  (``directoryRead: true``); both lists are paged small so that clients meet their cursors.

With ``--http`` the same engine is served by :mod:`mcpwire.testing.http_server` on
``http://HOST:PORT/mcp`` (Streamable HTTP, both eras) and ``/sse`` (the 2024-11-05 HTTP+SSE
transport); the first line on stdout is ``listening on <url>``. It is the default target of
``mcpwire check`` and must pass every check in every revision, over stdio and over HTTP.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from mcpwire.testing.catalogue import (
    ASK_CAPITAL,
    ASK_CONFIRM,
    ASK_GREETING,
    ASK_NAME,
    ASK_PROCEED,
    ASK_ROOTS,
    ASK_STEP1,
    ASK_STEP2,
    COMPLETIONS,
    DIRECTORY_PAGE_SIZE,
    ERROR_TEXT,
    FIXTURE_PROMPTS,
    FIXTURE_RESOURCES,
    FIXTURE_TEMPLATES,
    FIXTURE_TOOLS,
    JOB_STEP_S,
    LOG_STEP_S,
    MODERN_ONLY_TEXT,
    NEEDS,
    PNG_B64,
    RECONNECT_PAUSE_S,
    SIMPLE_TEXT,
    SKILLS_PAGE_SIZE,
    TASKS_ONLY_TEXT,
    TEMPLATE_URI,
    WAV_B64,
    MissingPromptArguments,
    Refused,
    action_text,
    answer_fits,
    elicitation_request,
    elicited,
    elicited_any,
    fixture_contents,
    fixture_prompt,
    llm_text,
    need_tasks,
    root_uris,
    sampling_request,
    sign_state,
    sort_answers,
    verify_state,
    with_fixture_tools,
)
from mcpwire.testing.demo_server import (
    CACHE_SCOPE,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LIST_TTL_MS,
    MAX_SLOW_S,
    META_SUBSCRIPTION_ID,
    MISSING_CLIENT_CAPABILITY,
    PROMPTS,
    READ_TTL_MS,
    RESOURCES,
    TEMPLATES,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    Abandoned,
    BadArguments,
    Call,
    DemoServer,
    ErrorAnswer,
    InputRequired,
    Message,
    RequestId,
    arg_number,
    arg_str,
    page_of,
    since,
    text_result,
)
from mcpwire.testing.skills import SKILLS_EXTENSION, SkillCatalogue, default_catalogue
from mcpwire.testing.tasks import TASKS_EXTENSION, Job, TaskStore, declares_tasks

__all__ = ["EverythingServer", "main"]

_Obj = dict[str, Any]
_log = logging.getLogger(__name__)


class EverythingServer(DemoServer):
    """The demo server plus the official runner's fixture tools, resources and prompts.

    Args:
        writer, era, page_size, name, input_timeout, exit_process: as for
            :class:`~mcpwire.testing.demo_server.DemoServer`.
        stream_control: called with a request id by ``test_reconnection`` to close that
            request's HTTP response stream without ending it (set by the HTTP server).
    """

    _tools: ClassVar[dict[str, str]] = {
        **DemoServer._tools,
        **{name: spec[2] for name, spec in FIXTURE_TOOLS.items()},
    }
    _handlers: ClassVar[dict[str, str]] = {
        **DemoServer._handlers,
        "tasks/get": "_tasks_get",
        "tasks/update": "_tasks_update",
        "tasks/cancel": "_tasks_cancel",
        "skills/list": "_skills_list",
        "skills/get": "_skills_get",
        "resources/directory/read": "_directory_read",
    }
    # 2026-07-28 only: both extensions are declared in server/discover (legacy revisions have no
    # capabilities.extensions), so a legacy session gets -32601 for these methods.
    _modern_methods: ClassVar[frozenset[str]] = DemoServer._modern_methods | {
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "skills/list",
        "skills/get",
        "resources/directory/read",
    }

    def __init__(
        self,
        writer: Callable[[Message], None],
        *,
        stream_control: Callable[[RequestId], None] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(writer, **options)
        self.stream_control = stream_control
        # 2026-07-28 basic/patterns/mrtr: "Servers MUST reject state that fails verification";
        # the key lives as long as the process, which is the scope of the state it signs.
        self._state_key = os.urandom(32)
        self._task_store = TaskStore(on_change=self._task_changed, fits=answer_fits)
        #: the skills served under skill:// (SEP-2640)
        self.skills: SkillCatalogue = default_catalogue()

    def close(self) -> None:
        """Cancel running tasks, then close as :meth:`DemoServer.close` does. Idempotent."""
        self._task_store.close()
        super().close()

    def _discover(self, call: Call) -> _Obj:
        result = super()._discover(call)
        capabilities = dict(result.get("capabilities") or {})
        # CF-T20, CF-X01: SEP-2663 §Capability Negotiation ("an empty object indicates support")
        # and SEP-2640 §Capability Declaration (directoryRead: resources/directory/read is served).
        capabilities["extensions"] = {TASKS_EXTENSION: {}, SKILLS_EXTENSION: {"directoryRead": True}}
        return {**result, "capabilities": capabilities}

    # -- listings ---------------------------------------------------------------------------

    def _tool_definitions(self, revision: str) -> list[_Obj]:
        return with_fixture_tools(super()._tool_definitions(revision), revision)

    def _resources_list(self, call: Call) -> _Obj:
        resources = [*RESOURCES, *FIXTURE_RESOURCES, *self.skills.listed_resources()]
        return self._paginated(call, "resources", resources)

    def _templates_list(self, call: Call) -> _Obj:
        return self._paginated(call, "resourceTemplates", [*TEMPLATES, *FIXTURE_TEMPLATES])

    def _prompts_list(self, call: Call) -> _Obj:
        return self._paginated(call, "prompts", [*PROMPTS, *FIXTURE_PROMPTS])

    # -- resources, prompts, completion -------------------------------------------------------

    def _resources_read(self, call: Call) -> _Obj:
        uri = call.params.get("uri")
        contents = fixture_contents(uri) or self.skills.contents(uri) if isinstance(uri, str) else None
        if contents is None:
            return super()._resources_read(call)
        result: _Obj = {"contents": [contents]}
        if call.era == "modern":
            result.update(ttlMs=0, cacheScope="public")
        return result

    def _prompts_get(self, call: Call) -> _Obj:
        arguments = call.params.get("arguments") or {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'arguments' must map names to strings")
        try:
            found = fixture_prompt(
                call.params.get("name"),
                arguments,
                modern=call.era == "modern",
                ask=lambda asks: self._answers(call, dict(asks)),
            )
        except MissingPromptArguments as exc:
            raise ErrorAnswer(INVALID_PARAMS, str(exc)) from None
        return found if found is not None else super()._prompts_get(call)

    def _complete(self, call: Call) -> _Obj:
        ref, argument = call.params.get("ref"), call.params.get("argument")
        if isinstance(ref, dict) and isinstance(argument, dict):
            key = (str(ref.get("type")), str(ref.get("name") or ref.get("uri")), str(argument.get("name")))
            value = argument.get("value")
            known_prompt = ref.get("type") == "ref/prompt" and any(
                p["name"] == ref.get("name") for p in FIXTURE_PROMPTS
            )
            known_template = ref.get("type") == "ref/resource" and ref.get("uri") == TEMPLATE_URI
            if (known_prompt or known_template) and isinstance(value, str):
                values = [v for v in COMPLETIONS.get(key, ()) if v.startswith(value)]
                return {"completion": {"values": values, "total": len(values), "hasMore": False}}
        return super()._complete(call)

    # -- fixture tools --------------------------------------------------------------------------

    def _fx_simple_text(self, call: Call, args: _Obj) -> _Obj:
        return text_result(SIMPLE_TEXT)

    def _fx_image(self, call: Call, args: _Obj) -> _Obj:
        return {"content": [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}]}

    def _fx_audio(self, call: Call, args: _Obj) -> _Obj:
        if not since(call.revision, V2025_03_26):  # audio content appeared in 2025-03-26
            return text_result("audio content needs protocol revision 2025-03-26 or later", is_error=True)
        return {"content": [{"type": "audio", "data": WAV_B64, "mimeType": "audio/wav"}]}

    def _fx_embedded(self, call: Call, args: _Obj) -> _Obj:
        resource = {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        }
        return {"content": [{"type": "resource", "resource": resource}]}

    def _fx_mixed(self, call: Call, args: _Obj) -> _Obj:
        resource = {
            "uri": "test://mixed-content-resource",
            "mimeType": "application/json",
            "text": json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
        }
        return {
            "content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": PNG_B64, "mimeType": "image/png"},
                {"type": "resource", "resource": resource},
            ]
        }

    def _fx_logging(self, call: Call, args: _Obj) -> _Obj:
        for n, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            if n and call.cancelled.wait(LOG_STEP_S):
                raise Abandoned
            self._log_to_client(call, "info", message)
        return text_result("Tool with logging executed successfully")

    def _fx_logging_short(self, call: Call, args: _Obj) -> _Obj:
        self._log_to_client(call, "info", "the logging tool ran")
        return text_result("logged")

    def _fx_error(self, call: Call, args: _Obj) -> _Obj:
        return text_result(ERROR_TEXT, is_error=True)

    def _fx_progress(self, call: Call, args: _Obj) -> _Obj:
        for n, progress in enumerate((0, 50, 100)):
            if n and call.cancelled.wait(LOG_STEP_S):
                raise Abandoned
            self._progress(call, progress, 100, f"{progress}% done")
        return text_result("Tool with progress executed successfully")

    def _fx_sampling(self, call: Call, args: _Obj) -> _Obj:
        prompt = arg_str(args, "prompt") or ""
        if not isinstance(call.caps.get("sampling"), dict):
            return self._missing_capability(call, "sampling", {"sampling": {}}, "client cannot sample")
        return self._with_input(call, args, "reply", sampling_request(prompt, 100), llm_text)

    def _fx_elicitation(self, call: Call, args: _Obj) -> _Obj:
        message = arg_str(args, "message") or ""
        properties = {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        }
        return self._elicit_tool(
            call, args, elicitation_request(message, properties, ["username", "email"]), "User response: "
        )

    def _fx_elicitation_defaults(self, call: Call, args: _Obj) -> _Obj:
        properties = {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        }
        request = elicitation_request("Please review your information", properties, [])
        return self._elicit_tool(call, args, request, "Elicitation completed: ")

    def _fx_elicitation_enums(self, call: Call, args: _Obj) -> _Obj:
        titled = [
            {"const": f"value{i}", "title": t}
            for i, t in enumerate(("First Option", "Second Option", "Third Option"), 1)
        ]
        choices = [
            {"const": f"value{i}", "title": t}
            for i, t in enumerate(("First Choice", "Second Choice", "Third Choice"), 1)
        ]
        properties = {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": choices}},
        }
        request = elicitation_request("Please choose", properties, [])
        return self._elicit_tool(call, args, request, "Elicitation completed: ")

    def _elicit_tool(self, call: Call, args: _Obj, request: _Obj, prefix: str) -> _Obj:
        if not since(call.revision, V2025_06_18) or not self._form_elicitation(call.caps):
            return self._missing_capability(call, "elicitation", {"elicitation": {"form": {}}}, "client cannot elicit")
        if since(call.revision, V2025_11_25):
            request = {**request, "params": {"mode": "form", **request["params"]}}
        return self._with_input(call, args, "answer", request, lambda result: prefix + action_text(result))

    def _fx_reconnection(self, call: Call, args: _Obj) -> _Obj:
        # 2025-11-25 basic/transports (SSE polling): the server may close the connection after
        # the priming event without ending the stream; the result goes to the resumed stream.
        if self.stream_control is not None and call.era == "legacy":
            self.stream_control(call.id)
            if call.cancelled.wait(RECONNECT_PAUSE_S):
                raise Abandoned
        return text_result("reconnection test complete")

    def _fx_json_schema(self, call: Call, args: _Obj) -> _Obj:
        return text_result(json.dumps(args, sort_keys=True))

    def _fx_header_param(self, call: Call, args: _Obj) -> _Obj:
        return text_result(f"region: {arg_str(args, 'region')}")

    def _fx_missing_capability(self, call: Call, args: _Obj) -> _Obj:
        if not isinstance(call.caps.get("sampling"), dict):
            return self._missing_capability(call, "sampling", {"sampling": {}}, "client cannot sample")
        return self._with_input(call, args, "reply", sampling_request("Say anything.", 20), llm_text)

    def _fx_streaming_elicitation(self, call: Call, args: _Obj) -> _Obj:
        request = elicitation_request("Continue?", {"ok": {"type": "boolean"}}, ["ok"])
        return self._elicit_tool(call, args, request, "Streaming elicitation: ")

    def _fx_trigger_tools(self, call: Call, args: _Obj) -> _Obj:
        self._announce(call, "toolsListChanged", "notifications/tools/list_changed")
        return text_result("tools list change announced")

    def _fx_trigger_prompts(self, call: Call, args: _Obj) -> _Obj:
        self._announce(call, "promptsListChanged", "notifications/prompts/list_changed")
        return text_result("prompts list change announced")

    def _announce(self, call: Call, flag: str, method: str) -> None:
        # legacy: to the session (listChanged is advertised); 2026-07-28: only to the listen
        # streams that asked for this type, tagged with their subscription id.
        with self._lock:
            if self._revision is not None and call.era == "legacy":
                self._notify(method)
            for listen in self._listens.values():
                if listen.granted.get(flag):
                    self._notify(method, {"_meta": {"io.modelcontextprotocol/subscriptionId": listen.call.id}})

    # -- 2026-07-28 MRTR fixture tools ----------------------------------------------------------

    def _ir_elicitation(self, call: Call, args: _Obj) -> _Obj:
        answers = self._answers(call, {"user_name": ASK_NAME})
        return text_result(f"Hello, {elicited(answers['user_name'], 'name')}!")

    def _ir_sampling(self, call: Call, args: _Obj) -> _Obj:
        answers = self._answers(call, {"capital_question": ASK_CAPITAL})
        return text_result(llm_text(answers["capital_question"]))

    def _ir_roots(self, call: Call, args: _Obj) -> _Obj:
        answers = self._answers(call, {"client_roots": ASK_ROOTS})
        return text_result("roots: " + ", ".join(root_uris(answers["client_roots"])))

    def _ir_request_state(self, call: Call, args: _Obj) -> _Obj:
        answers = self._answers(call, {"confirm": ASK_CONFIRM}, state={"step": "confirm"})
        return text_result(f"state-ok: confirmed={elicited_any(answers['confirm'], 'ok')}")

    def _ir_multiple(self, call: Call, args: _Obj) -> _Obj:
        asks = {"user_name": ASK_NAME, "greeting": ASK_GREETING, "client_roots": ASK_ROOTS}
        answers = self._answers(call, asks, state={"step": "all"})
        name = elicited(answers["user_name"], "name")
        return text_result(
            f"{llm_text(answers['greeting'])} {name}; roots: {', '.join(root_uris(answers['client_roots']))}"
        )

    def _ir_multi_round(self, call: Call, args: _Obj) -> _Obj:
        state = self._state(call)
        if "requestState" in call.params and state is None:
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'requestState' failed verification")
        if state is None or state.get("round") == 1:
            first = self._answers(call, {"step1": ASK_STEP1}, state={"round": 1})
            name = elicited(first["step1"], "name")
            raise InputRequired(self._input_required(call, {"step2": ASK_STEP2}, {"round": 2, "name": name}))
        second = self._answers(call, {"step2": ASK_STEP2}, state={"round": 2, "name": state.get("name")})
        return text_result(f"{state.get('name')} likes {elicited(second['step2'], 'color')}")

    def _ir_tampered(self, call: Call, args: _Obj) -> _Obj:
        answers = self._answers(call, {"confirm": ASK_CONFIRM}, state={"step": "confirm"})
        return text_result(f"verified state, confirmed={elicited_any(answers['confirm'], 'ok')}")

    def _ir_capabilities(self, call: Call, args: _Obj) -> _Obj:
        if call.era == "legacy":
            return text_result(MODERN_ONLY_TEXT, is_error=True)
        wanted = {"user_name": ASK_NAME, "capital_question": ASK_CAPITAL, "client_roots": ASK_ROOTS}
        # 2026-07-28 basic/patterns/mrtr: "Servers MUST NOT send an inputRequests that the client
        # has not declared support for in its capabilities."
        asks = {k: v for k, v in wanted.items() if isinstance(call.caps.get(NEEDS[v["method"]]), dict)}
        if not asks:
            return text_result("the client declared no capability to ask with")
        answers = self._answers(call, asks, check_caps=False)
        return text_result(f"received {', '.join(sorted(answers))}")

    # -- MRTR helpers ---------------------------------------------------------------------------

    def _answers(
        self, call: Call, asks: dict[str, _Obj], *, state: _Obj | None = None, check_caps: bool = True
    ) -> dict[str, object]:
        """The client's answers to ``asks`` (all of them), or raise the ``input_required`` result.

        The first call (or a retry missing answers) gets an ``input_required`` result asking for
        what is missing; with ``state`` the result carries an HMAC-protected ``requestState``,
        and a retry whose state does not verify is rejected with -32602.
        """
        if call.era == "legacy":
            raise _LegacyCall
        try:
            answers, missing = sort_answers(
                asks,
                call.caps,
                call.params,
                state=state,
                verify=lambda: self._state(call),
                responses=lambda: _responses(call),
                check_caps=check_caps,
            )
        except Refused as exc:
            raise ErrorAnswer(exc.code, exc.message, exc.data) from None
        if missing:
            # 2026-07-28 basic/patterns/mrtr: a retry without the requested answers is asked again.
            raise InputRequired(self._input_required(call, missing, state))
        return answers

    def _input_required(self, call: Call, asks: dict[str, _Obj], state: _Obj | None) -> _Obj:
        result: _Obj = {"resultType": "input_required", "inputRequests": dict(asks)}
        if state is not None:
            result["requestState"] = self._sign({"tool": call.params.get("name"), **state})
        return result

    def _sign(self, payload: _Obj) -> str:
        return sign_state(self._state_key, payload)

    def _state(self, call: Call) -> _Obj | None:
        """The verified ``requestState`` of this call (None when absent or forged)."""
        return verify_state(self._state_key, call.params.get("requestState"), call.params.get("name"))

    def _tools_call(self, call: Call) -> _Obj:
        try:
            return super()._tools_call(call)
        except _LegacyCall:
            return text_result(MODERN_ONLY_TEXT, is_error=True)

    # -- the Tasks extension (SEP-2663) -----------------------------------------------------------

    def _run_job(
        self, call: Call, body: Callable[[Job], _Obj], *, required: bool = False, needs: Sequence[str] = ()
    ) -> _Obj:
        """Run a tool's ``body`` as a task when the request declares the tasks extension, else
        inside this ``tools/call`` (``required``: never; the client must declare the extension).

        CF-T21, SEP-2663 §Capability Negotiation: the server "MAY return CreateTaskResult ... at
        its own discretion" to a declaring request (this one always does), and "MUST NOT return
        CreateTaskResult to a client that did not include the extension capability on its
        request".
        """
        if call.era == "modern" and declares_tasks(call.caps):
            for capability in needs:
                if not isinstance(call.caps.get(capability), dict):
                    # 2026-07-28 basic/patterns/mrtr: "Servers MUST NOT send an inputRequests that
                    # the client has not declared support for"; a task would have to.
                    raise ErrorAnswer(
                        MISSING_CLIENT_CAPABILITY,
                        f"Missing required client capability: {capability}",
                        {"requiredCapabilities": {capability: {}}},
                    )
            created = self._task_store.start(str(call.params.get("name")), lambda job: self._decorate(call, body(job)))
            # SEP-2663 §Polymorphic Results: "Servers MUST set resultType to "task" when returning
            # a CreateTaskResult"; the result is the flat task, without result/error/inputRequests.
            return {"resultType": "task", **created}
        if required:
            if call.era == "legacy":
                return text_result(TASKS_ONLY_TEXT, is_error=True)
            # SEP-2663: "If a server is unable to service a request to a client that does not
            # declare this extension capability without returning CreateTaskResult, the server
            # MUST return an error with the code -32021 ... indicating the required extension".
            message = f"Missing required client capability: extension {TASKS_EXTENSION}"
            raise ErrorAnswer(MISSING_CLIENT_CAPABILITY, message, need_tasks())
        if "elicitation" in needs and not (since(call.revision, V2025_06_18) and self._form_elicitation(call.caps)):
            return self._missing_capability(call, "elicitation", {"elicitation": {"form": {}}}, "client cannot elicit")
        try:
            return body(_CallJob(self, call))
        except _NoAnswer as exc:
            return text_result(str(exc), is_error=True)

    def _require_tasks(self, call: Call) -> None:
        if not declares_tasks(call.caps):
            # SEP-2663 §Protocol Errors: "Servers MUST return this error for non-declaring clients
            # issuing tasks/get, tasks/update, and tasks/cancel requests."
            raise ErrorAnswer(
                MISSING_CLIENT_CAPABILITY,
                f"Missing required client capability: extension {TASKS_EXTENSION} ({call.method} is part of it)",
                need_tasks(),
            )

    def _tasks_get(self, call: Call) -> _Obj:
        self._require_tasks(call)
        # SEP-2663 §Task Polling: a DetailedTask; "The resultType field MUST be set to "complete""
        # (added by _decorate).
        return self._task_store.get(call.params.get("taskId"))

    def _tasks_update(self, call: Call) -> _Obj:
        self._require_tasks(call)
        # CF-T23: answers by the keys of inputRequests; unknown keys are ignored
        self._task_store.update(call.params.get("taskId"), call.params.get("inputResponses"))
        return {}  # "On success, the server MUST acknowledge the request with an empty result."

    def _tasks_cancel(self, call: Call) -> _Obj:
        self._require_tasks(call)
        self._task_store.cancel(call.params.get("taskId"))  # CF-T24: cooperative, ack only
        return {}  # "The server MUST acknowledge the request with an empty result."

    def _listen_grants(self, call: Call, wanted: _Obj) -> _Obj:
        grants = super()._listen_grants(call, wanted)
        task_ids = wanted.get("taskIds")
        if task_ids is None:
            return grants
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'taskIds' must be a list of strings")
        # CF-T26, SEP-2663 §Task Status Notifications: "If a client requests task status
        # notifications but does not declare the io.modelcontextprotocol/tasks extension
        # capability, the server MUST return a JSON-RPC error specifying the missing capabilities".
        self._require_tasks(call)
        # the acknowledgement lists "the task IDs it has agreed to send task status notifications for"
        return {**grants, "taskIds": self._task_store.known(task_ids)}

    def _task_changed(self, task: _Obj) -> None:
        # SEP-2663: "Each notification carries a complete DetailedTask for the current status,
        # identical to what tasks/get would have returned at that moment."
        with self._lock:
            if self._closed:
                return
            for listen in self._listens.values():
                if task["taskId"] in listen.granted.get("taskIds", ()):
                    self._notify("notifications/tasks", {**task, "_meta": {META_SUBSCRIPTION_ID: listen.call.id}})

    def _tk_greet(self, call: Call, args: _Obj) -> _Obj:
        return text_result(f"Hello, {arg_str(args, 'name')}!")

    def _tk_slow_compute(self, call: Call, args: _Obj) -> _Obj:
        seconds = arg_number(args, "seconds")
        if not 0 <= seconds <= MAX_SLOW_S:
            raise BadArguments(f"'seconds' must be from 0 to {MAX_SLOW_S:g}")
        label = arg_str(args, "label", required=False) or "slow_compute"

        def body(job: Job) -> _Obj:
            job.sleep(seconds)
            return text_result(f"{label}: done after {seconds:g} s")

        return self._run_job(call, body)

    def _tk_failing_job(self, call: Call, args: _Obj) -> _Obj:
        def body(job: Job) -> _Obj:
            job.sleep(JOB_STEP_S)
            # a tool error, not a protocol error: the task ends `completed` with isError
            return text_result("the job failed: this fixture always ends with a tool error", is_error=True)

        return self._run_job(call, body, required=True)

    def _tk_protocol_error_job(self, call: Call, args: _Obj) -> _Obj:
        def body(job: Job) -> _Obj:
            job.sleep(JOB_STEP_S)
            raise ErrorAnswer(INTERNAL_ERROR, "Internal error: the job crashed (this fixture always does)")

        return self._run_job(call, body, required=True)

    def _tk_confirm_delete(self, call: Call, args: _Obj) -> _Obj:
        filename = arg_str(args, "filename") or ""
        ask = elicitation_request(f"Delete {filename}?", {"confirm": {"type": "boolean"}}, ["confirm"])

        def body(job: Job) -> _Obj:
            answer = job.ask({"confirm": ask})["confirm"]
            if elicited_any(answer, "confirm") is True:
                return text_result(f"{filename}: deletion confirmed (nothing was deleted: this is a fixture)")
            return text_result(f"{filename}: deletion not confirmed")

        return self._run_job(call, body, needs=("elicitation",))

    def _tk_multi_input(self, call: Call, args: _Obj) -> _Obj:
        def body(job: Job) -> _Obj:
            # both at once: as a task, two keys are outstanding and may be answered one by one
            answers = job.ask({"name": ASK_NAME, "confirm": ASK_PROCEED})
            name, proceed = elicited(answers["name"], "name"), elicited_any(answers["confirm"], "confirm")
            return text_result(f"name: {name}, proceed: {proceed}")

        return self._run_job(call, body, needs=("elicitation",))

    def _tk_tool_with_task(self, call: Call, args: _Obj) -> _Obj:
        if call.era == "legacy":
            return text_result(TASKS_ONLY_TEXT, is_error=True)
        self._require_tasks(call)
        # CF-T27, SEP-2663 §Task Creation: MRTR exchanges "SHOULD [be resolved] synchronously before
        # responding with a CreateTaskResult": first input_required, then the task.
        answers = self._answers(call, {"user_name": ASK_NAME})
        name = elicited(answers["user_name"], "name")

        def body(job: Job) -> _Obj:
            job.sleep(JOB_STEP_S)
            return text_result(f"Hello, {name}!")

        return self._run_job(call, body, required=True)

    # -- the Skills extension (SEP-2640) ----------------------------------------------------------

    def _skills_list(self, call: Call) -> _Obj:
        # SEP-2640 §Enumeration: "Pagination mirrors the base protocol's list methods ... An
        # entry is atomic"; in 2026-07-28 with ttlMs and cacheScope.
        return self._extension_page(call, "skills", "skills", self.skills.entries(), SKILLS_PAGE_SIZE)

    def _skills_get(self, call: Call) -> _Obj:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: skills/get needs 'uri', a string")
        entry = self.skills.entry(uri)
        if entry is None:
            # SEP-2640 §Retrieval: "If the URI does not identify a skill the server serves, the
            # server MUST return error -32602 (Invalid params)".
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: {uri!r} is not the SKILL.md of a skill served here")
        # a single entry carries no cursor; ttlMs/cacheScope as on resources/read
        return {"skill": entry, "ttlMs": READ_TTL_MS, "cacheScope": CACHE_SCOPE}

    def _directory_read(self, call: Call) -> _Obj:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise ErrorAnswer(INVALID_PARAMS, "Invalid params: resources/directory/read needs 'uri', a string")
        children = self.skills.children(uri)
        if children is None:
            # SEP-2640 §resources/directory/read: "If the URI does not exist, or exists but is not a
            # directory resource, the server MUST return error -32602 (Invalid params)".
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: {uri!r} is not a directory resource", {"uri": uri})
        # "Pagination mirrors resources/list: when the result includes nextCursor, the client
        # passes it back as cursor to retrieve the next page."
        return self._extension_page(call, f"directory {uri}", "resources", children, DIRECTORY_PAGE_SIZE)

    def _extension_page(self, call: Call, scope: str, key: str, items: Sequence[_Obj], size: int) -> _Obj:
        """One page of an extension's list: ``size`` items (``--page-size`` wins when set); a
        cursor is valid only for the list (``scope``) that issued it, else -32602."""
        result = page_of(items, call.params.get("cursor"), key, {"scope": scope}, self._page_size or size)
        if result is None:
            raise ErrorAnswer(INVALID_PARAMS, f"Invalid params: invalid cursor for {call.method}")
        return {**result, "ttlMs": LIST_TTL_MS, "cacheScope": CACHE_SCOPE}


class _NoAnswer(Exception):
    """A legacy server request got no usable answer (the tool reports it as an isError result)."""


class _CallJob:
    """The :class:`~mcpwire.testing.tasks.Job` of a tool run inside its own ``tools/call``.

    Cancellation is the call's own; input is asked the era's way: an ``input_required`` result
    in 2026-07-28 (the retry runs the body again, with the answers), a server request before.
    """

    __slots__ = ("_call", "_server")

    def __init__(self, server: EverythingServer, call: Call) -> None:
        self._server = server
        self._call = call

    def sleep(self, seconds: float) -> None:
        if self._call.cancelled.wait(seconds):
            raise Abandoned

    def ask(self, asks: Mapping[str, _Obj]) -> dict[str, object]:
        call = self._call
        if call.era == "modern":
            return self._server._answers(call, dict(asks))
        answers: dict[str, object] = {}
        for name, request in asks.items():
            if request["method"] == "elicitation/create" and since(call.revision, V2025_11_25):
                request = {**request, "params": {"mode": "form", **request["params"]}}
            response = self._server._ask_client(call, request)
            if response is None:
                raise _NoAnswer(f"no answer to {request['method']} in time")
            if "error" in response:
                error = response["error"]
                detail = error.get("message") if isinstance(error, dict) else error
                raise _NoAnswer(f"{request['method']} failed: {detail}")
            answers[name] = response.get("result")
        return answers


class _LegacyCall(Exception):
    """A 2026-07-28-only fixture tool was called in the legacy era."""


def _responses(call: Call) -> dict[str, object]:
    responses = call.params.get("inputResponses")
    if responses is None and "inputResponses" not in call.params:
        return {}
    if not isinstance(responses, dict):
        # 2026-07-28 basic/patterns/mrtr: malformed input is a protocol error.
        raise ErrorAnswer(INVALID_PARAMS, "Invalid params: 'inputResponses' must be an object")
    return responses


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the reference server (on :mod:`mcpwire.server`; see :mod:`mcpwire.testing.reference`)."""
    from mcpwire.testing.reference import main as serve_reference

    return serve_reference(argv)


if __name__ == "__main__":
    os._exit(main())
