"""The reference server's tools, as async handlers on :mod:`mcpwire.server`.

Theory of operation: every tool is ``async def tool(ref, ctx, args) -> result``, where ``ref``
is the :class:`~mcpwire.testing.reference.ReferenceServer`, ``ctx`` the request's
:class:`~mcpwire.server.RequestContext` and ``args`` the call's arguments. The catalogue (names,
descriptions, schemas, fixture contents) is shared with the standard-library engine of
:mod:`mcpwire.testing.demo_server` and :mod:`mcpwire.testing.everything`, so both serve the same
tools; only the handlers are written again, for trio. A tool that needs the client asks the
era's way (:func:`ask_one`, :meth:`ReferenceServer.answers`): a server-to-client request in a
legacy session, an ``input_required`` result in 2026-07-28. Tools that may run as tasks
(SEP-2663) hand their body to :meth:`ReferenceServer.run_job`.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final, Protocol

import trio

from ..protocol.serving import INTERNAL_ERROR, INVALID_PARAMS, MISSING_CLIENT_CAPABILITY
from ..protocol.versions import V2025_03_26, V2025_06_18, V2025_11_25
from ..server import ClientRequestError, InputRequired, JSONObject, RequestContext, RequestError
from .catalogue import (
    ASK_CAPITAL,
    ASK_CONFIRM,
    ASK_GREETING,
    ASK_NAME,
    ASK_PROCEED,
    ASK_ROOTS,
    ASK_STEP1,
    ASK_STEP2,
    ERROR_TEXT,
    JOB_STEP_S,
    LOG_STEP_S,
    MODERN_ONLY_TEXT,
    NEEDS,
    PNG_B64,
    RECONNECT_PAUSE_S,
    SIMPLE_TEXT,
    TASKS_ONLY_TEXT,
    WAV_B64,
    action_text,
    elicitation_request,
    elicited,
    elicited_any,
    llm_text,
    root_uris,
    sampling_request,
)
from .demo_server import (
    CRASH_EXIT_STATUS,
    MAX_BIG_CHARS,
    MAX_SLOW_S,
    MAX_SLOW_STEPS,
    BadArguments,
    arg_int,
    arg_number,
    arg_str,
    b64_json,
    elicit_text,
    roots_text,
    sample_text,
    text_result,
)
from .reference_tasks import Body, Job

__all__ = ["TOOLS", "ModernOnly", "Reference", "NoAnswer", "ask_one", "form_elicitation", "missing_capability"]


class Reference(Protocol):
    """What the tools use of the :class:`~mcpwire.testing.reference.ReferenceServer` that runs them."""

    def answers(
        self,
        ctx: RequestContext,
        asks: dict[str, JSONObject],
        *,
        state: JSONObject | None = None,
        check_caps: bool = True,
    ) -> dict[str, object]: ...

    def input_required(
        self, ctx: RequestContext, asks: dict[str, JSONObject], state: JSONObject | None
    ) -> InputRequired: ...

    def verified_state(self, ctx: RequestContext) -> JSONObject | None: ...

    def require_tasks(self, ctx: RequestContext) -> None: ...

    async def run_job(
        self, ctx: RequestContext, body: Body, *, required: bool = False, needs: Sequence[str] = ()
    ) -> JSONObject: ...

    async def list_changed(self, kind: str, *, origin: RequestContext | None = None) -> None: ...

    async def resource_updated(self, uri: str, *, origin: RequestContext | None = None) -> None: ...


Tool = Callable[[Reference, RequestContext, JSONObject], Awaitable[JSONObject]]


class ModernOnly(Exception):
    """A 2026-07-28-only fixture was called in the legacy era (an ``isError`` result)."""


class NoAnswer(Exception):
    """A legacy server-to-client request got no usable answer (an ``isError`` result)."""


# -- asking the client -------------------------------------------------------------------------


def form_elicitation(caps: JSONObject) -> bool:
    # 2025-11-25 client/elicitation: an empty elicitation object means form mode is supported.
    declared = caps.get("elicitation")
    return isinstance(declared, dict) and (not declared or "form" in declared)


def missing_capability(ctx: RequestContext, capability: str, required: JSONObject, legacy_text: str) -> JSONObject:
    """A legacy ``isError`` result, or (2026-07-28) -32021.

    2026-07-28 basic: "If processing a request requires a capability the client did not include
    ..., the server MUST return a MissingRequiredClientCapabilityError (-32021)".
    """
    if not ctx.modern:
        return text_result(legacy_text, is_error=True)
    raise RequestError(
        MISSING_CLIENT_CAPABILITY,
        f"Missing required client capability: {capability}",
        {"requiredCapabilities": required},
    )


async def ask_one(
    ctx: RequestContext, args: JSONObject, key: str, request: JSONObject, interpret: Callable[[object], str]
) -> JSONObject:
    """The demo tools' way to ask: the client's answer to ``request``, as the tool's text.

    Legacy: a server-to-client request (an ``isError`` result when it fails). 2026-07-28
    basic/patterns/mrtr: the state travels in ``requestState`` (it only names the call it
    belongs to, so tampering can cause nothing worse than a failed request); the retry carries
    the answer in ``inputResponses``; a retry without it is asked again.
    """
    method = str(request["method"])
    if not ctx.modern:
        try:
            result = await ctx.request(method, request.get("params"), timeout=ctx.connection.input_timeout)  # type: ignore[arg-type]
        except ClientRequestError as exc:
            return text_result(str(exc), is_error=True)
        try:
            return text_result(interpret(result))
        except ValueError as exc:
            return text_result(f"invalid {method} result: {exc}", is_error=True)
    state = b64_json({"tool": ctx.params.get("name"), "arguments": args})
    if "requestState" in ctx.params:
        if ctx.params["requestState"] != state:
            raise RequestError(INVALID_PARAMS, "Invalid params: 'requestState' does not belong to this tool call")
        responses = ctx.params.get("inputResponses")
        if isinstance(responses, dict) and key in responses:
            try:
                return text_result(interpret(responses[key]))
            except ValueError as exc:
                raise RequestError(INVALID_PARAMS, f"Invalid params: inputResponses[{key!r}]: {exc}") from None
    raise InputRequired({key: request}, state)


class CallJob:
    """The :class:`~mcpwire.testing.reference_tasks.Job` of a tool run inside its own ``tools/call``.

    Cancellation is the call's own; input is asked the era's way: an ``input_required`` result
    in 2026-07-28 (the retry runs the body again, with the answers), a server request before.
    """

    __slots__ = ("_ctx", "_ref")

    def __init__(self, ref: Reference, ctx: RequestContext) -> None:
        self._ref = ref
        self._ctx = ctx

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def ask(self, asks: Mapping[str, JSONObject]) -> dict[str, object]:
        ctx = self._ctx
        if ctx.modern:
            return self._ref.answers(ctx, dict(asks))
        answers: dict[str, object] = {}
        for name, request in asks.items():
            params = request["params"]
            assert isinstance(params, dict)
            if request["method"] == "elicitation/create" and ctx.since(V2025_11_25):
                params = {"mode": "form", **params}
            try:
                answers[name] = await ctx.request(str(request["method"]), params, timeout=ctx.connection.input_timeout)
            except ClientRequestError as exc:
                raise NoAnswer(str(exc)) from None
        return answers


# -- the demo tools ------------------------------------------------------------------------------


async def echo(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    return text_result(arg_str(args, "text") or "")


async def add(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    total = arg_number(args, "a") + arg_number(args, "b")
    if not math.isfinite(total):
        raise BadArguments("the sum is not a finite number")
    result = text_result(json.dumps(total))
    if ctx.since(V2025_06_18):  # 2025-06-18 server/tools: structuredContent appears
        result["structuredContent"] = {"sum": total}
    return result


async def fail(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    message = arg_str(args, "message", required=False)
    return text_result("the tool failed" if message is None else message, is_error=True)


async def slow(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    seconds = arg_number(args, "seconds")
    if not 0 <= seconds <= MAX_SLOW_S:
        raise BadArguments(f"'seconds' must be from 0 to {MAX_SLOW_S:g}")
    steps = arg_int(args, "steps", default=5, minimum=1, maximum=MAX_SLOW_STEPS)
    for step in range(1, steps + 1):
        await trio.sleep(seconds / steps)
        await ctx.progress(step, steps, f"step {step} of {steps}")
    return text_result(f"done after {steps} steps")


async def big(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    return text_result("x" * arg_int(args, "size", maximum=MAX_BIG_CHARS))


async def ask(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    question = arg_str(args, "question") or ""
    # 2025-06-18 introduced elicitation; 2025-11-25 added modes ("form" is the default) and
    # string defaults.
    if not ctx.since(V2025_06_18) or not form_elicitation(ctx.client_capabilities):
        return missing_capability(ctx, "elicitation", {"elicitation": {"form": {}}}, "client cannot elicit")
    answer: JSONObject = {"type": "string"}
    params: JSONObject = {"message": question}
    if ctx.since(V2025_11_25):
        answer["default"] = "yes"
        params = {"mode": "form", **params}
    params["requestedSchema"] = {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}
    return await ask_one(ctx, args, "answer", {"method": "elicitation/create", "params": params}, elicit_text)


async def sample(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    prompt = arg_str(args, "prompt") or ""
    if not isinstance(ctx.client_capabilities.get("sampling"), dict):
        return missing_capability(ctx, "sampling", {"sampling": {}}, "client cannot sample")
    params: JSONObject = {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 100}
    return await ask_one(ctx, args, "reply", {"method": "sampling/createMessage", "params": params}, sample_text)


async def roots(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    if not isinstance(ctx.client_capabilities.get("roots"), dict):
        return missing_capability(ctx, "roots", {"roots": {}}, "client cannot list roots")
    return await ask_one(ctx, args, "roots", {"method": "roots/list"}, roots_text)


async def notify(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    await ctx.log("info", "the notify tool was called", logger="demo")
    await ref.list_changed("tools", origin=ctx)
    return text_result("ok")


async def touch(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    await ref.resource_updated(arg_str(args, "uri") or "", origin=ctx)
    return text_result("ok")


async def crash(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    sys.stderr.write(f"reference server: the crash tool was called, exiting with status {CRASH_EXIT_STATUS}\n")
    sys.stderr.flush()
    os._exit(CRASH_EXIT_STATUS)


# -- the official runner's fixtures ------------------------------------------------------------


async def simple_text(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    return text_result(SIMPLE_TEXT)


async def image(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    return {"content": [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}]}


async def audio(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    if not ctx.since(V2025_03_26):  # audio content appeared in 2025-03-26
        return text_result("audio content needs protocol revision 2025-03-26 or later", is_error=True)
    return {"content": [{"type": "audio", "data": WAV_B64, "mimeType": "audio/wav"}]}


async def embedded(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    resource = {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return {"content": [{"type": "resource", "resource": resource}]}


async def mixed(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
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


async def logging_tool(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    for n, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if n:
            await trio.sleep(LOG_STEP_S)
        await ctx.log("info", message, logger="demo")
    return text_result("Tool with logging executed successfully")


async def logging_short(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    await ctx.log("info", "the logging tool ran", logger="demo")
    return text_result("logged")


async def error(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    return text_result(ERROR_TEXT, is_error=True)


async def progress(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    for n, done in enumerate((0, 50, 100)):
        if n:
            await trio.sleep(LOG_STEP_S)
        await ctx.progress(done, 100, f"{done}% done")
    return text_result("Tool with progress executed successfully")


async def sampling(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    prompt = arg_str(args, "prompt") or ""
    if not isinstance(ctx.client_capabilities.get("sampling"), dict):
        return missing_capability(ctx, "sampling", {"sampling": {}}, "client cannot sample")
    return await ask_one(ctx, args, "reply", sampling_request(prompt, 100), llm_text)


async def _elicit_tool(ctx: RequestContext, args: JSONObject, request: JSONObject, prefix: str) -> JSONObject:
    if not ctx.since(V2025_06_18) or not form_elicitation(ctx.client_capabilities):
        return missing_capability(ctx, "elicitation", {"elicitation": {"form": {}}}, "client cannot elicit")
    if ctx.since(V2025_11_25):
        request = {**request, "params": {"mode": "form", **request["params"]}}  # type: ignore[dict-item]
    return await ask_one(ctx, args, "answer", request, lambda result: prefix + action_text(result))


async def elicitation(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    message = arg_str(args, "message") or ""
    properties = {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    }
    return await _elicit_tool(
        ctx, args, elicitation_request(message, properties, ["username", "email"]), "User response: "
    )


async def elicitation_defaults(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    properties = {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    }
    request = elicitation_request("Please review your information", properties, [])
    return await _elicit_tool(ctx, args, request, "Elicitation completed: ")


async def elicitation_enums(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    titled = [
        {"const": f"value{i}", "title": t} for i, t in enumerate(("First Option", "Second Option", "Third Option"), 1)
    ]
    choices = [
        {"const": f"value{i}", "title": t} for i, t in enumerate(("First Choice", "Second Choice", "Third Choice"), 1)
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
    return await _elicit_tool(
        ctx, args, elicitation_request("Please choose", properties, []), "Elicitation completed: "
    )


async def reconnection(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    # 2025-11-25 basic/transports (SSE polling): the server may close the connection after the
    # priming event without ending the stream; the result goes to the resumed stream.
    if not ctx.modern:
        ctx.drop_connection()
        await trio.sleep(RECONNECT_PAUSE_S)
    return text_result("reconnection test complete")


async def json_schema(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    return text_result(json.dumps(args, sort_keys=True))


async def header_param(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    return text_result(f"region: {arg_str(args, 'region')}")


async def missing_capability_tool(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    if not isinstance(ctx.client_capabilities.get("sampling"), dict):
        return missing_capability(ctx, "sampling", {"sampling": {}}, "client cannot sample")
    return await ask_one(ctx, args, "reply", sampling_request("Say anything.", 20), llm_text)


async def streaming_elicitation(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    request = elicitation_request("Continue?", {"ok": {"type": "boolean"}}, ["ok"])
    return await _elicit_tool(ctx, args, request, "Streaming elicitation: ")


async def trigger_tools(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    await ref.list_changed("tools", origin=ctx)
    return text_result("tools list change announced")


async def trigger_prompts(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    await ref.list_changed("prompts", origin=ctx)
    return text_result("prompts list change announced")


# -- 2026-07-28 MRTR fixtures ------------------------------------------------------------------


async def ir_elicitation(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    answers = ref.answers(ctx, {"user_name": ASK_NAME})
    return text_result(f"Hello, {elicited(answers['user_name'], 'name')}!")


async def ir_sampling(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    answers = ref.answers(ctx, {"capital_question": ASK_CAPITAL})
    return text_result(llm_text(answers["capital_question"]))


async def ir_roots(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    answers = ref.answers(ctx, {"client_roots": ASK_ROOTS})
    return text_result("roots: " + ", ".join(root_uris(answers["client_roots"])))


async def ir_request_state(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    answers = ref.answers(ctx, {"confirm": ASK_CONFIRM}, state={"step": "confirm"})
    return text_result(f"state-ok: confirmed={elicited_any(answers['confirm'], 'ok')}")


async def ir_multiple(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    asks = {"user_name": ASK_NAME, "greeting": ASK_GREETING, "client_roots": ASK_ROOTS}
    answers = ref.answers(ctx, asks, state={"step": "all"})
    name = elicited(answers["user_name"], "name")
    return text_result(
        f"{llm_text(answers['greeting'])} {name}; roots: {', '.join(root_uris(answers['client_roots']))}"
    )


async def ir_multi_round(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    state = ref.verified_state(ctx)
    if "requestState" in ctx.params and state is None:
        raise RequestError(INVALID_PARAMS, "Invalid params: 'requestState' failed verification")
    if state is None or state.get("round") == 1:
        first = ref.answers(ctx, {"step1": ASK_STEP1}, state={"round": 1})
        name = elicited(first["step1"], "name")
        raise ref.input_required(ctx, {"step2": ASK_STEP2}, {"round": 2, "name": name})
    second = ref.answers(ctx, {"step2": ASK_STEP2}, state={"round": 2, "name": state.get("name")})
    return text_result(f"{state.get('name')} likes {elicited(second['step2'], 'color')}")


async def ir_tampered(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    answers = ref.answers(ctx, {"confirm": ASK_CONFIRM}, state={"step": "confirm"})
    return text_result(f"verified state, confirmed={elicited_any(answers['confirm'], 'ok')}")


async def ir_capabilities(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    if not ctx.modern:
        return text_result(MODERN_ONLY_TEXT, is_error=True)
    wanted = {"user_name": ASK_NAME, "capital_question": ASK_CAPITAL, "client_roots": ASK_ROOTS}
    # 2026-07-28 basic/patterns/mrtr: "Servers MUST NOT send an inputRequests that the client has
    # not declared support for in its capabilities."
    caps = ctx.client_capabilities
    asks = {k: v for k, v in wanted.items() if isinstance(caps.get(NEEDS[str(v["method"])]), dict)}
    if not asks:
        return text_result("the client declared no capability to ask with")
    answers = ref.answers(ctx, asks, check_caps=False)
    return text_result(f"received {', '.join(sorted(answers))}")


# -- the Tasks extension's fixtures (SEP-2663) -------------------------------------------------


async def greet(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    return text_result(f"Hello, {arg_str(args, 'name')}!")


async def slow_compute(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    seconds = arg_number(args, "seconds")
    if not 0 <= seconds <= MAX_SLOW_S:
        raise BadArguments(f"'seconds' must be from 0 to {MAX_SLOW_S:g}")
    label = arg_str(args, "label", required=False) or "slow_compute"

    async def body(job: Job) -> JSONObject:
        await job.sleep(seconds)
        return text_result(f"{label}: done after {seconds:g} s")

    return await ref.run_job(ctx, body)


async def failing_job(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    async def body(job: Job) -> JSONObject:
        await job.sleep(JOB_STEP_S)
        # a tool error, not a protocol error: the task ends `completed` with isError
        return text_result("the job failed: this fixture always ends with a tool error", is_error=True)

    return await ref.run_job(ctx, body, required=True)


async def protocol_error_job(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    async def body(job: Job) -> JSONObject:
        await job.sleep(JOB_STEP_S)
        raise RequestError(INTERNAL_ERROR, "Internal error: the job crashed (this fixture always does)")

    return await ref.run_job(ctx, body, required=True)


async def confirm_delete(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    filename = arg_str(args, "filename") or ""
    question = elicitation_request(f"Delete {filename}?", {"confirm": {"type": "boolean"}}, ["confirm"])

    async def body(job: Job) -> JSONObject:
        answer = (await job.ask({"confirm": question}))["confirm"]
        if elicited_any(answer, "confirm") is True:
            return text_result(f"{filename}: deletion confirmed (nothing was deleted: this is a fixture)")
        return text_result(f"{filename}: deletion not confirmed")

    return await ref.run_job(ctx, body, needs=("elicitation",))


async def multi_input(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    async def body(job: Job) -> JSONObject:
        # both at once: as a task, two keys are outstanding and may be answered one by one
        answers = await job.ask({"name": ASK_NAME, "confirm": ASK_PROCEED})
        name, proceed = elicited(answers["name"], "name"), elicited_any(answers["confirm"], "confirm")
        return text_result(f"name: {name}, proceed: {proceed}")

    return await ref.run_job(ctx, body, needs=("elicitation",))


async def tool_with_task(ref: Reference, ctx: RequestContext, args: JSONObject) -> JSONObject:
    if not ctx.modern:
        return text_result(TASKS_ONLY_TEXT, is_error=True)
    ref.require_tasks(ctx)
    # CF-T27, SEP-2663 §Task Creation: MRTR exchanges "SHOULD [be resolved] synchronously before
    # responding with a CreateTaskResult": first input_required, then the task.
    name = elicited(ref.answers(ctx, {"user_name": ASK_NAME})["user_name"], "name")

    async def body(job: Job) -> JSONObject:
        await job.sleep(JOB_STEP_S)
        return text_result(f"Hello, {name}!")

    return await ref.run_job(ctx, body, required=True)


#: tool name -> handler; the definitions (descriptions, schemas) are the shared catalogue's
TOOLS: Final[dict[str, Tool]] = {
    "echo": echo,
    "add": add,
    "fail": fail,
    "slow": slow,
    "big": big,
    "ask": ask,
    "sample": sample,
    "roots": roots,
    "notify": notify,
    "touch": touch,
    "crash": crash,
    "test_simple_text": simple_text,
    "test_image_content": image,
    "test_audio_content": audio,
    "test_embedded_resource": embedded,
    "test_multiple_content_types": mixed,
    "test_tool_with_logging": logging_tool,
    "test_logging_tool": logging_short,
    "test_error_handling": error,
    "test_tool_with_progress": progress,
    "test_sampling": sampling,
    "test_elicitation": elicitation,
    "test_elicitation_sep1034_defaults": elicitation_defaults,
    "test_elicitation_sep1330_enums": elicitation_enums,
    "test_reconnection": reconnection,
    "json_schema_2020_12_tool": json_schema,
    "test_header_param": header_param,
    "test_missing_capability": missing_capability_tool,
    "test_streaming_elicitation": streaming_elicitation,
    "test_trigger_tool_change": trigger_tools,
    "test_trigger_prompt_change": trigger_prompts,
    "test_input_required_result_elicitation": ir_elicitation,
    "test_input_required_result_sampling": ir_sampling,
    "test_input_required_result_list_roots": ir_roots,
    "test_input_required_result_request_state": ir_request_state,
    "test_input_required_result_multiple_inputs": ir_multiple,
    "test_input_required_result_multi_round": ir_multi_round,
    "test_input_required_result_tampered_state": ir_tampered,
    "test_input_required_result_capabilities": ir_capabilities,
    "greet": greet,
    "slow_compute": slow_compute,
    "failing_job": failing_job,
    "protocol_error_job": protocol_error_job,
    "confirm_delete": confirm_delete,
    "multi_input": multi_input,
    "test_tool_with_task": tool_with_task,
}
