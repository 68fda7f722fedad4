"""Checks that call tools (tag ``tool-calls``): structured output, errors, progress, cancellation,
logging levels, capability use and MRTR (spec-checklist SV-18, SV-30, SV-31, SV-35, SV-36, SV-38).

They run only when the run's tool policy lets them call something (``--call-tools read-only``
or ``all``, or ``--call-tool NAME``); otherwise they are skipped and say so. Arguments come from
each tool's ``inputSchema`` (:func:`~conformance.context.example_arguments`). In the legacy era the
checks answer the server's own requests (sampling, elicitation, roots) with harmless values, so
a tool that asks the client does not hang.
"""

from __future__ import annotations

import re
from typing import Any

import trio

from ..context import FULL_CAPS, META_LOG_LEVEL, Context, example_arguments
from ..harness import NoAnswer
from ..registry import check
from ..schema import SchemaProblem, compile_schema
from .toolcalls import call_each, canned_answer

TOOLS = "server/tools.mdx"
MODERN = "2026-07-28"
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_DURATION_NAMES = ("seconds", "duration", "delay", "durationseconds", "sleep", "wait")


@check(
    id="SV-29c",
    title="tool inputSchema and outputSchema are valid JSON Schema of their dialect (2020-12 by default)",
    level="MUST",
    spec="2025-11-25/basic/index.mdx §JSON Schema Usage",
    quote="Clients and servers MUST support JSON Schema 2020-12 for schemas without an explicit $schema field.",
    quotes=(
        (
            "2025-11-25",
            "basic/index.mdx §JSON Schema Usage",
            "Clients and servers MUST support JSON Schema 2020-12 for schemas without an explicit $schema field.",
        ),
    ),
    revisions=("2025-11-25", "9999-12-31"),
    needs=("tools",),
    tags=("tools", "schema"),
)
async def tool_schemas_compile(ctx: Context) -> None:
    async with ctx.session() as wire:
        for tool in await ctx.list_all(wire, "tools/list", "tools"):
            for key in ("inputSchema", "outputSchema"):
                if key not in tool:
                    continue
                try:
                    compile_schema(tool[key])
                except SchemaProblem as exc:
                    ctx.fail(f"tool {tool.get('name')!r}: {key} is not a valid JSON Schema: {exc}")


@check(
    id="SV-29d",
    title="2025-06-18/2025-11-25: an outputSchema is an object schema (type: object)",
    level="MUST",
    spec="schema.ts Tool.outputSchema",
    quote='outputSchema?: { type: "object"; properties?: { [key: string]: object }; required?: string[]; };',
    quotes=(
        (
            "2025-11-25",
            "schema.ts Tool.outputSchema",
            'outputSchema?: { $schema?: string; type: "object"; properties?: { [key: string]: object }; '
            "required?: string[]; };",
        ),
    ),
    revisions=("2025-06-18", "2025-11-25"),
    needs=("tools",),
    tags=("tools", "schema"),
)
async def output_schema_object(ctx: Context) -> None:
    async with ctx.session() as wire:
        for tool in await ctx.list_all(wire, "tools/list", "tools"):
            schema = tool.get("outputSchema")
            if schema is not None and (not isinstance(schema, dict) or schema.get("type") != "object"):
                ctx.fail(f"tool {tool.get('name')!r}: outputSchema is not an object schema: {schema!r:.200}")


@check(
    id="SV-30",
    title="structuredContent validates against the tool's outputSchema",
    level="MUST",
    spec="2025-06-18/" + TOOLS + " §Output Schema",
    quote="If an output schema is provided: Servers MUST provide structured results that conform to this schema.",
    quotes=(
        (
            "2025-06-18",
            TOOLS + " §Output Schema",
            "If an output schema is provided: Servers MUST provide structured results that conform to this schema.",
        ),
    ),
    revisions=("2025-06-18", "9999-12-31"),
    needs=("tools",),
    tags=("tools", "schema", "tool-calls"),
)
async def structured_output(ctx: Context) -> None:
    ctx.require_tool_calls()
    async with ctx.session() as wire:
        tools = [t for t in await ctx.callable_tools(wire) if "outputSchema" in t]
        if not tools:
            ctx.not_observed("no callable tool declares an outputSchema")
        judged = 0
        for tool, answer in await call_each(ctx, wire, tools):
            result = answer.get("result")
            if not isinstance(result, dict) or result.get("isError") or result.get("resultType") == "input_required":
                continue
            judged += 1
            name = tool.get("name")
            if "structuredContent" not in result:
                ctx.fail(f"tool {name!r} has an outputSchema but its result has no structuredContent")
            content = result["structuredContent"]
            if ctx.revision < "2026-07-28" and not isinstance(content, dict):
                ctx.fail(f"tool {name!r}: structuredContent is not an object: {content!r:.200}")
            try:
                validator = compile_schema(tool["outputSchema"])
            except SchemaProblem as exc:
                ctx.fail(f"tool {name!r}: the outputSchema cannot be used: {exc}")
            errors = sorted(validator.iter_errors(content), key=lambda e: list(e.path))
            if errors:
                ctx.fail(f"tool {name!r}: structuredContent does not match the outputSchema: {errors[0].message}")
        if not judged:
            ctx.not_observed("every call of a tool with an outputSchema ended in an error")


@check(
    id="SV-31b",
    title="arguments that break the inputSchema are a tool error (isError), not a protocol error",
    level="SHOULD",
    spec="2025-11-25/" + TOOLS + " §Error Handling",
    quote="Tool Execution Errors: Reported in tool results with isError: true ... Input validation errors (e.g., "
    "date in wrong format, value out of range)",
    quotes=(
        (
            "2025-11-25",
            TOOLS + " §Error Handling",
            "Tool Execution Errors: Reported in tool results with isError: true ... Input validation errors (e.g., "
            "date in wrong format, value out of range)",
        ),
        (
            MODERN,
            TOOLS + " §Error Handling",
            "Tool Execution Errors contain actionable feedback that language models can use to self-correct and "
            "retry with adjusted parameters: ... Input validation errors (e.g., date in wrong format, value out of "
            "range) ... They are reported in tool results with isError: true",
        ),
    ),
    revisions=("2025-11-25", "9999-12-31"),
    needs=("tools",),
    tags=("tools", "errors", "tool-calls"),
)
async def argument_errors(ctx: Context) -> None:
    ctx.require_tool_calls()
    async with ctx.session() as wire:
        wire.responder = canned_answer
        candidates = []
        for tool in await ctx.callable_tools(wire):
            schema = tool.get("inputSchema") or {}
            props = schema.get("properties") or {}
            typed = [p for p in schema.get("required") or [] if (props.get(p) or {}).get("type") == "string"]
            if typed:
                candidates.append((tool, typed[0]))
        if not candidates:
            ctx.not_observed("no callable tool has a required string argument to get wrong")
        tool, prop = candidates[0]
        arguments = example_arguments(tool.get("inputSchema"))
        arguments[prop] = {"mcpwire-check": ["not", "a", "string"]}
        answer = await ctx.call(wire, "tools/call", {"name": tool["name"], "arguments": arguments})
        if "error" in answer:
            ctx.fail(f"tool {tool['name']!r} with a non-string {prop!r}: a JSON-RPC error {answer['error']!r:.200}")
        result = answer.get("result") or {}
        if result.get("resultType") != "input_required" and result.get("isError") is not True:
            ctx.fail(f"tool {tool['name']!r} accepted a non-string {prop!r} without isError: {result!r:.200}")


_PROGRESS = (
    "The progress value MUST increase with each notification, even if the total is unknown. ... Progress "
    "notifications MUST only reference tokens that: Were provided in an active request Are associated with an "
    "in-progress operation"
)


@check(
    id="SV-35",
    title="progress only for tokens of active requests, strictly increasing, none after the response",
    level="MUST",
    spec="basic/utilities/progress.mdx §Behavior Requirements",
    quote=_PROGRESS,
    quotes=((MODERN, "basic/patterns/progress.mdx §Behavior Requirements", _PROGRESS),),
    needs=("tools",),
    tags=("progress", "tool-calls"),
)
async def progress(ctx: Context) -> None:
    ctx.require_tool_calls()
    async with ctx.session() as wire:
        tools = await ctx.callable_tools(wire)
        before = len(wire.frames)
        await call_each(ctx, wire, tools, token_prefix="mcpwire-check-progress")
        await wire.drain(0.2)
        active: set[Any] = set()
        finished: set[Any] = set()
        last: dict[Any, float] = {}
        seen = 0
        requests = {}
        for value in wire.sent_messages():
            if isinstance(value, dict) and value.get("method") == "tools/call":
                token = ((value.get("params") or {}).get("_meta") or {}).get("progressToken")
                requests[value.get("id")] = token
        # frames arrive in order per connection; over HTTP each request has its own stream
        for frame in wire.frames[before:]:
            v = frame.value
            if frame.is_response and v.get("id") in requests:
                finished.add(requests[v["id"]])
                active.discard(requests[v["id"]])
                continue
            if not (frame.is_notification and v.get("method") == "notifications/progress"):
                continue
            seen += 1
            params = v.get("params") or {}
            token = params.get("progressToken")
            if token not in requests.values():
                ctx.fail(f"progress for a token no request carried: {frame.text[:200]}")
            if token in finished:
                ctx.fail(f"progress after the response of its request: {frame.text[:200]}")
            active.add(token)
            value = params.get("progress")
            if not isinstance(value, int | float) or isinstance(value, bool):
                ctx.fail(f"progress is not a number: {frame.text[:200]}")
            if token in last and value <= last[token]:
                ctx.fail(f"progress for {token!r} went from {last[token]} to {value}: {frame.text[:200]}")
            last[token] = value
        if not seen:
            ctx.not_observed("no callable tool reported progress")


def _duration_argument(tool: dict[str, Any]) -> str | None:
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    for name, spec in props.items():
        if name.lower() in _DURATION_NAMES and (spec or {}).get("type") in ("number", "integer"):
            return str(name)
    return None


@check(
    id="CN-01",
    title="a cancelled in-flight request is not answered, and the server keeps serving",
    level="SHOULD",
    spec="basic/utilities/cancellation.mdx §Behavior Requirements",
    quote="Receivers of cancellation notifications SHOULD: Stop processing the cancelled request Free associated "
    "resources Not send a response for the cancelled request",
    quotes=(
        (
            MODERN,
            "basic/patterns/cancellation.mdx §Behavior Requirements",
            "Servers receiving cancellation notifications SHOULD: Stop processing the cancelled request Free "
            "associated resources Not send a response for the cancelled request",
        ),
    ),
    transports=("stdio", "http", "sse"),
    needs=("tools",),
    tags=("cancellation", "tool-calls"),
)
async def cancellation(ctx: Context) -> None:
    ctx.require_tool_calls()
    if ctx.era == "modern" and ctx.transport == "http":
        ctx.skip("2026-07-28 HTTP cancels by closing the response stream; there is nothing left to observe")
    async with ctx.session() as wire:
        wire.responder = canned_answer
        slow = [(t, arg) for t in await ctx.callable_tools(wire) if (arg := _duration_argument(t))]
        if not slow:
            ctx.not_observed("no callable tool takes a duration argument to keep it running")
        tool, arg = slow[0]
        arguments = example_arguments(tool.get("inputSchema"))
        arguments[arg] = 1.5 if (tool["inputSchema"]["properties"][arg].get("type") == "number") else 2
        rid = "mcpwire-check-cancel"
        params = ctx.params({"name": tool["name"], "arguments": arguments})
        message = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
        early: list[Any] = []
        late: list[Any] = []
        stalled = False
        async with trio.open_nursery() as nursery:
            # over HTTP a JSON answer only comes when the call ends, and a POST returns with its
            # answer's headers: the call waits in the background while the cancellation goes out
            nursery.start_soon(wire.send, message)
            early = await wire.drain(0.3)
            if not any(f.is_response and f.value.get("id") == rid for f in early):
                cancel = ctx.params({"requestId": rid, "reason": "mcpwire check"})
                await wire.notify("notifications/cancelled", cancel)
                try:
                    await ctx.call(wire, "ping" if ctx.era == "legacy" else "server/discover")
                except NoAnswer:
                    stalled = True
                late = await wire.drain(2.2)
            nursery.cancel_scope.cancel()
        if any(f.is_response and f.value.get("id") == rid for f in early):
            ctx.not_observed(f"tool {tool['name']!r} answered before the cancellation could be sent")
        if stalled:
            await ctx.still_answering(wire, "a cancellation")
        if any(f.is_response and f.value.get("id") == rid for f in late):
            ctx.fail(f"the cancelled tools/call {tool['name']!r} was answered anyway")


@check(
    id="LG-03",
    title="legacy: after logging/setLevel, no log messages below that level",
    level="SHOULD",
    spec="schema.ts SetLevelRequest",
    quote="The level of logging that the client wants to receive from the server. The server should send all logs "
    "at this level and higher (i.e., more severe) to the client as notifications/message.",
    eras=("legacy",),
    needs=("logging", "tools"),
    tags=("logging", "tool-calls"),
)
async def legacy_log_filter(ctx: Context) -> None:
    ctx.require_tool_calls()
    async with ctx.session() as wire:
        tools = await ctx.callable_tools(wire)
        await wire.request("logging/setLevel", {"level": "debug"}, timeout=ctx.timeout)
        start = len(wire.frames)
        calls = await call_each(ctx, wire, tools)
        await wire.drain(0.2)
        levels = [_log_level(f) for f in wire.frames[start:] if _log_level(f) is not None]
        if not levels:
            ctx.not_observed("no tool sent a log message at level debug")
        loggers = [tool for tool, _ in calls]
        await wire.request("logging/setLevel", {"level": "error"}, timeout=ctx.timeout)
        start = len(wire.frames)
        await call_each(ctx, wire, loggers)
        await wire.drain(0.2)
        low = [f for f in wire.frames[start:] if _log_level(f) in LEVELS[:4]]
        if low:
            ctx.fail(f"after setLevel error: {low[0].text[:200]}")


def _log_level(frame: Any) -> str | None:
    v = frame.value
    if frame.is_notification and v.get("method") == "notifications/message":
        level = (v.get("params") or {}).get("level")
        return level if isinstance(level, str) else "?"
    return None


@check(
    id="SV-36b",
    title="2026-07-28: log messages only for requests with a logLevel, and only at or above it",
    level="MUST",
    spec=MODERN + "/server/utilities/logging.mdx §Per-request log level",
    quote="The server MUST NOT emit notifications/message for a request that does not include this field. When the "
    "field is present, the server MAY send notifications/message notifications at or above the requested level on "
    "the response stream of that request",
    eras=("modern",),
    needs=("tools",),
    tags=("logging", "modern", "tool-calls"),
)
async def modern_log_filter(ctx: Context) -> None:
    ctx.require_tool_calls()
    async with ctx.session() as wire:
        tools = await ctx.callable_tools(wire)
        start = len(wire.frames)
        await call_each(ctx, wire, tools)
        await wire.drain(0.2)
        unasked = [f for f in wire.frames[start:] if _log_level(f) is not None]
        if unasked:
            ctx.fail(f"notifications/message for a tools/call without a logLevel: {unasked[0].text[:200]}")
        start = len(wire.frames)
        await call_each(ctx, wire, tools, meta={META_LOG_LEVEL: "debug"})
        await wire.drain(0.2)
        if not any(_log_level(f) is not None for f in wire.frames[start:]):
            ctx.not_observed("no tool sent a log message at logLevel debug")
        start = len(wire.frames)
        await call_each(ctx, wire, tools, meta={META_LOG_LEVEL: "error"})
        await wire.drain(0.2)
        low = [f for f in wire.frames[start:] if _log_level(f) in LEVELS[:4]]
        if low:
            # "at or above the requested level": a SHOULD-level part of this MUST check
            ctx.violation(f"a message below the requested logLevel error: {low[0].text[:200]}", "SHOULD")


_INPUT_METHODS = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


def _input_answer(request: Any) -> Any:
    method = request.get("method") if isinstance(request, dict) else None
    if method == "elicitation/create":
        schema = (request.get("params") or {}).get("requestedSchema")
        return {"action": "accept", "content": example_arguments(schema)}
    answer = canned_answer({"method": method, "id": 0})
    return (answer or {}).get("result")


@check(
    id="SV-38",
    title="2026-07-28 MRTR: input_required results are well formed and a retry with the answers completes",
    level="MUST",
    spec=MODERN + "/basic/patterns/mrtr.mdx §Server Requirements (Basic Workflow)",
    quote="Servers MUST include at least one of inputRequests or requestState ... Servers MUST NOT send "
    "InputRequiredResult responses on any other client requests.",
    eras=("modern",),
    needs=("tools",),
    tags=("modern", "mrtr", "tool-calls"),
)
async def mrtr(ctx: Context) -> None:
    ctx.require_tool_calls()
    async with ctx.session() as wire:
        tools = await ctx.callable_tools(wire)
        calls = await call_each(ctx, wire, tools, capabilities=FULL_CAPS)
        asked = [(t, a["result"]) for t, a in calls if (a.get("result") or {}).get("resultType") == "input_required"]
        if not asked:
            ctx.not_observed("no callable tool asked for input")
        for tool, result in asked:
            name = tool.get("name")
            for _ in range(3):
                requests = result.get("inputRequests")
                if requests is None and "requestState" not in result:
                    ctx.fail(f"tool {name!r}: input_required with neither inputRequests nor requestState")
                for key, request in (requests or {}).items():
                    if not isinstance(request, dict) or request.get("method") not in _INPUT_METHODS:
                        ctx.fail(f"tool {name!r}: inputRequests[{key!r}] is not elicitation, sampling or roots")
                params: dict[str, Any] = {
                    "name": name,
                    "arguments": example_arguments(tool.get("inputSchema")),
                    "inputResponses": {k: _input_answer(v) for k, v in (requests or {}).items()},
                }
                if "requestState" in result:
                    params["requestState"] = result["requestState"]
                answer = await ctx.call(wire, "tools/call", params, capabilities=FULL_CAPS)
                error = answer.get("error")
                if isinstance(error, dict) and error.get("code") in (-32600, -32601, -32700):
                    ctx.fail(f"tool {name!r}: the retry with the requested answers was refused: {error!r:.200}")
                if error is not None:
                    # the tool may reject the made-up answers for reasons of its own
                    ctx.warn(f"tool {name!r}: the retry with synthesized answers failed: {error!r:.200}")
                result = answer.get("result") or {}
                if result.get("resultType") != "input_required":
                    break
            else:
                ctx.fail(f"tool {name!r} still asks for input after three answered rounds")


@check(
    id="SV-18",
    title="2026-07-28: input needing an undeclared capability is -32021 (HTTP 400), never an inputRequest",
    level="MUST",
    spec=MODERN + "/basic/index.mdx §_meta",
    quote="If processing a request requires a capability the client did not include in "
    "io.modelcontextprotocol/clientCapabilities, the server MUST return a MissingRequiredClientCapabilityError "
    "(-32021) whose data.requiredCapabilities lists the missing capabilities.",
    eras=("modern",),
    needs=("tools",),
    tags=("modern", "mrtr", "capabilities", "tool-calls"),
)
async def capability_errors(ctx: Context) -> None:
    ctx.require_tool_calls()
    async with ctx.session() as wire:
        tools = await ctx.callable_tools(wire)
        observed = 0
        for tool, answer in await call_each(ctx, wire, tools, capabilities={}):
            name = tool.get("name")
            result = answer.get("result") or {}
            for key, request in (result.get("inputRequests") or {}).items():
                method = request.get("method") if isinstance(request, dict) else None
                observed += 1
                if method in _INPUT_METHODS:
                    ctx.fail(f"tool {name!r} asked for {method} ({key!r}) from a client that declared no capabilities")
            error = answer.get("error")
            if isinstance(error, dict) and error.get("code") == -32021:
                observed += 1
                required = (error.get("data") or {}).get("requiredCapabilities")
                if not isinstance(required, dict) or not required:
                    ctx.fail(f"tool {name!r}: -32021 without data.requiredCapabilities: {error!r:.200}")
                reply = getattr(wire, "reply_for", lambda _: None)(answer.get("id"))
                if reply is not None and reply.status != 400:
                    ctx.fail(f"tool {name!r}: -32021 carried by HTTP {reply.status}, not 400")
        if not observed:
            ctx.not_observed("no callable tool needed a client capability")


_SECRET_NAMES = re.compile(r"pass(word|phrase)?|secret|api[_-]?key|token|credential|private[_-]?key", re.I)


@check(
    id="SV-40",
    title="no tool-enabled sampling unless sampling.tools is declared; no secrets asked for in form elicitation",
    level="MUST",
    spec="2025-06-18/client/elicitation.mdx §User Interaction Model",
    quote="Servers MUST NOT use elicitation to request sensitive information.",
    quotes=(
        (
            "2025-06-18",
            "client/elicitation.mdx §User Interaction Model",
            "Servers MUST NOT use elicitation to request sensitive information.",
        ),
        (
            "2025-11-25",
            "client/sampling.mdx §Tools in Sampling",
            "Servers MUST NOT send tool-enabled sampling requests to Clients that have not declared support for tool "
            "use via the sampling.tools capability.",
        ),
    ),
    revisions=("2025-06-18", "9999-12-31"),
    needs=("tools",),
    tags=("sampling", "elicitation", "tool-calls"),
)
async def sampling_and_secrets(ctx: Context) -> None:
    ctx.require_tool_calls()
    caps: dict[str, Any] = {"sampling": {}, "elicitation": {}}
    async with ctx.session(capabilities=caps) as wire:
        tools = await ctx.callable_tools(wire)
        start = len(wire.frames)
        calls = await call_each(ctx, wire, tools, capabilities=caps, limit=len(tools))
        asked: list[dict[str, Any]] = [f.value for f in wire.frames[start:] if f.is_request]
        for _, answer in calls:
            result = answer.get("result") or {}
            asked.extend(r for r in (result.get("inputRequests") or {}).values() if isinstance(r, dict))
        relevant = [r for r in asked if r.get("method") in ("sampling/createMessage", "elicitation/create")]
        if not relevant:
            ctx.not_observed("no callable tool asked for sampling or elicitation")
        for request in relevant:
            params = request.get("params") or {}
            if request["method"] == "sampling/createMessage" and params.get("tools"):
                ctx.fail(f"tool-enabled sampling to a client without sampling.tools: {request!r:.200}")
            if request["method"] == "elicitation/create" and params.get("mode", "form") == "form":
                props = ((params.get("requestedSchema") or {}).get("properties") or {}).keys()
                secret = [p for p in props if _SECRET_NAMES.search(str(p))]
                if secret:
                    # a heuristic on names: reported as a warning, for a person to judge
                    ctx.warn(f"form elicitation asks for {', '.join(map(repr, secret))}, which looks like a secret")
