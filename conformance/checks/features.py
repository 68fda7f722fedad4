"""Tools, resources, prompts, pagination (spec-checklist 12.4, SV-29..SV-33)."""

from __future__ import annotations

import base64
import binascii
import re

from ..context import Context, list_if_served
from ..registry import check

TOOLS = "server/tools.mdx"
RESOURCES = "server/resources.mdx"
MODERN = "2026-07-28"
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@check(
    id="SV-29",
    title="every tool has a name and an object inputSchema",
    level="MUST",
    spec=TOOLS + " §Tool",
    quote="inputSchema: JSON Schema defining expected parameters",
    quotes=(
        (
            "2025-11-25",
            TOOLS + " §Tool",
            "inputSchema: JSON Schema defining expected parameters ... MUST be a valid JSON Schema object (not null)",
        ),
    ),
    needs=("tools",),
    tags=("tools",),
)
async def tools_shape(ctx: Context) -> None:
    async with ctx.session() as wire:
        tools = await ctx.list_all(wire, "tools/list", "tools")
        for tool in tools:
            name = tool.get("name")
            if not isinstance(name, str) or not name:
                ctx.fail(f"a tool without a string name: {tool!r:.200}")
            schema = tool.get("inputSchema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                ctx.fail(f"tool {name!r}: inputSchema is not a JSON object schema with type 'object': {schema!r:.200}")


@check(
    id="SV-29b",
    title="tool names are unique and use only A-Z a-z 0-9 _ - . (1..128 chars)",
    level="SHOULD",
    spec="2025-11-25/" + TOOLS + " §Tool Names",
    quote="Tool names SHOULD be between 1 and 128 characters in length (inclusive). ... Tool names SHOULD be "
    "unique within a server.",
    quotes=(
        (
            "2025-11-25",
            TOOLS + " §Tool Names",
            "Tool names SHOULD be between 1 and 128 characters in length (inclusive). ... Tool names SHOULD be "
            "unique within a server.",
        ),
    ),
    revisions=("2025-11-25", "9999-12-31"),
    needs=("tools",),
    tags=("tools",),
)
async def tool_names(ctx: Context) -> None:
    async with ctx.session() as wire:
        names = [str(t.get("name")) for t in await ctx.list_all(wire, "tools/list", "tools")]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            ctx.fail(f"duplicate tool names: {', '.join(dupes)}")
        bad = [n for n in names if not _TOOL_NAME.match(n)]
        if bad:
            ctx.fail(f"tool names outside [A-Za-z0-9_.-]{{1,128}}: {', '.join(map(repr, bad[:5]))}")


@check(
    id="SV-31",
    title="calling an unknown tool is a JSON-RPC error (-32602)",
    level="SHOULD",
    spec=TOOLS + " §Error Handling",
    quote="Protocol Errors: Standard JSON-RPC errors for issues like: Unknown tools",
    quotes=(
        (
            MODERN,
            TOOLS + " §Error Handling",
            "Protocol Errors indicate issues with the request structure itself that models are less likely to be "
            "able to fix: Unknown tool ... They are returned as standard JSON-RPC errors",
        ),
    ),
    needs=("tools",),
    tags=("tools", "errors"),
)
async def unknown_tool(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await ctx.call(wire, "tools/call", {"name": "mcpwire_check_no_such_tool", "arguments": {}})
        error = answer.get("error")
        if not isinstance(error, dict):
            ctx.fail("an unknown tool was answered with a result, not a JSON-RPC error")
        if error.get("code") != -32602:
            ctx.fail(f"an unknown tool was answered with code {error.get('code')!r}, not -32602")


@check(
    id="SV-32",
    title="reading a non-existent resource is an error (-32602 in 2026-07-28), never empty contents",
    level="MUST",
    spec=RESOURCES + " §Error Handling",
    quote="Servers SHOULD return standard JSON-RPC errors for common failure cases: Resource not found: -32002",
    quotes=(
        (
            MODERN,
            RESOURCES + " §Error Handling",
            "If the requested resource does not exist, servers MUST return a JSON-RPC error with code -32602 "
            "(Invalid Params). ... Servers MUST NOT return an empty contents array for a non-existent resource.",
        ),
    ),
    # spec-checklist SV-32: the MUST is 2026-07-28 text; before, an error for a missing resource is a SHOULD
    levels=(("2024-11-05", "SHOULD"), (MODERN, "MUST")),
    needs=("resources",),
    tags=("resources", "errors"),
)
async def resource_not_found(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await ctx.call(wire, "resources/read", {"uri": "mcpwire-check://no/such/resource"})
        error = answer.get("error")
        if not isinstance(error, dict):
            result = answer.get("result") or {}
            if isinstance(result, dict) and result.get("contents") == []:
                ctx.fail("a non-existent resource was read as an empty contents array")
            ctx.fail("a non-existent resource was read without an error")
        if ctx.era == "modern" and error.get("code") != -32602:
            ctx.fail(f"not-found answered with code {error.get('code')!r}, expected -32602")


@check(
    id="SV-32c",
    title="legacy: reading a non-existent resource is answered with -32002",
    level="SHOULD",
    spec=RESOURCES + " §Error Handling",
    quote="Servers SHOULD return standard JSON-RPC errors for common failure cases: Resource not found: -32002",
    quotes=(
        (
            MODERN,
            "2025-11-25/" + RESOURCES + " §Error Handling",
            "Servers SHOULD return standard JSON-RPC errors for common failure cases: Resource not found: -32002",
        ),
    ),
    eras=("legacy",),
    needs=("resources",),
    tags=("resources", "errors"),
)
async def resource_not_found_code(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await ctx.call(wire, "resources/read", {"uri": "mcpwire-check://no/such/resource"})
        error = answer.get("error")
        if not isinstance(error, dict):
            ctx.skip("no error answer to judge (SV-32 covers that)")
        if error.get("code") != -32002:
            ctx.fail(f"not-found answered with code {error.get('code')!r}, expected -32002")


@check(
    id="SV-32b",
    title="resource contents carry uri and exactly one of text/blob (valid base64)",
    level="MUST",
    spec=RESOURCES + " §Resource Contents",
    quote="Resources can contain either text or binary data.",
    needs=("resources",),
    tags=("resources",),
)
async def resource_contents(ctx: Context) -> None:
    async with ctx.session() as wire:
        resources = await ctx.list_all(wire, "resources/list", "resources")
        if not resources:
            ctx.not_observed("the server lists no resources")
        for resource in resources[:5]:
            uri = resource.get("uri")
            if not isinstance(uri, str):
                ctx.fail(f"a listed resource without a string uri: {resource!r:.200}")
            result = await ctx.result(wire, "resources/read", {"uri": uri})
            contents = result.get("contents")
            if not isinstance(contents, list) or not contents:
                ctx.fail(f"reading {uri!r} returned no contents")
            for item in contents:
                if not isinstance(item, dict) or not isinstance(item.get("uri"), str):
                    ctx.fail(f"reading {uri!r}: a content item without uri")
                if ("text" in item) == ("blob" in item):
                    which = "both" if "text" in item else "neither"
                    ctx.fail(f"reading {uri!r}: a content item with {which} text/blob")
                if "blob" in item:
                    try:
                        base64.b64decode(str(item["blob"]), validate=True)
                    except binascii.Error:
                        ctx.fail(f"reading {uri!r}: blob is not valid base64")


@check(
    id="SV-33",
    title="an invalid cursor is answered with -32602",
    level="SHOULD",
    spec="server/utilities/pagination.mdx §Error Handling",
    quote="Invalid cursors SHOULD result in an error with code -32602 (Invalid params).",
    # the same sentence in every revision's pagination page, 2024-11-05 included
    needs=("tools",),
    tags=("pagination",),
)
async def invalid_cursor(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await ctx.call(wire, "tools/list", {"cursor": "mcpwire-check-invalid-cursor!"})
        error = answer.get("error")
        if not isinstance(error, dict) or error.get("code") != -32602:
            ctx.fail(f"an invalid cursor was answered with {answer!r:.200}")


@check(
    id="SV-33b",
    title="pagination terminates without repeating a cursor",
    level="MUST",
    spec="server/utilities/pagination.mdx §Response Format",
    quote="Pagination starts when the server sends a response that includes: The current page of results An "
    "optional nextCursor field if more results exist",
    tags=("pagination",),
)
async def pagination_terminates(ctx: Context) -> None:
    kinds = [
        (c, m, k)
        for c, m, k in (
            ("tools", "tools/list", "tools"),
            ("resources", "resources/list", "resources"),
            ("prompts", "prompts/list", "prompts"),
        )
        if ctx.has(c)
    ]
    if not kinds:
        ctx.skip("the server advertises no listable feature")
    async with ctx.session() as wire:
        for _, method, key in kinds:
            await ctx.list_all(wire, method, key, judge=True)


@check(
    id="PR-01",
    title="every prompt has a name; arguments have names",
    level="MUST",
    spec="server/prompts.mdx §Prompt",
    quote="A prompt definition includes: name: Unique identifier for the prompt",
    needs=("prompts",),
    tags=("prompts",),
)
async def prompts_shape(ctx: Context) -> None:
    async with ctx.session() as wire:
        for prompt in await ctx.list_all(wire, "prompts/list", "prompts"):
            if not isinstance(prompt.get("name"), str):
                ctx.fail(f"a prompt without a string name: {prompt!r:.200}")
            for argument in prompt.get("arguments") or []:
                if not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
                    ctx.fail(f"prompt {prompt['name']!r}: an argument without a name")


@check(
    id="LG-01",
    title="logging/setLevel is answered with an empty result",
    level="MUST",
    spec="server/utilities/logging.mdx §Setting Log Level",
    quote="To configure the minimum log level, clients MAY send a logging/setLevel request",
    quotes=(
        (
            MODERN,
            "2025-11-25/server/utilities/logging.mdx §Setting Log Level",
            "To configure the minimum log level, clients MAY send a logging/setLevel request",
        ),
    ),
    eras=("legacy",),
    needs=("logging",),
    tags=("logging",),
    ends_session=True,
)
async def set_level(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await wire.request("logging/setLevel", {"level": "warning"}, timeout=ctx.timeout)
        if not isinstance(answer.get("result"), dict):
            ctx.fail(f"logging/setLevel answered with {answer!r:.200}")


@check(
    id="SV-34",
    title="tools/list is the same set on two independent processes",
    level="MUST",
    spec=MODERN + "/" + TOOLS + " §Capabilities",
    quote="Servers that declare the tools capability MUST respond to tools/list requests with the set of tools "
    "currently available to the requesting client. ... but MUST NOT vary per-connection or as a side effect of "
    "other requests on the connection.",
    eras=("modern",),
    needs=("tools",),
    tags=("tools",),
)
async def tools_stable(ctx: Context) -> None:
    names: list[list[str]] = []
    for _ in range(2):
        async with ctx.session() as wire:
            names.append(sorted(str(t.get("name")) for t in await ctx.list_all(wire, "tools/list", "tools")))
    if names[0] != names[1]:
        ctx.fail(f"two processes listed different tools: {names[0]} vs {names[1]}")


@check(
    id="PR-02",
    title="prompts/get of an argument-less prompt returns messages with role and content",
    level="MUST",
    spec="server/prompts.mdx §PromptMessage",
    quote='Messages in a prompt can contain: role: Either "user" or "assistant" to indicate the speaker content: '
    "One of the following content types:",
    needs=("prompts",),
    tags=("prompts",),
)
async def prompt_get(ctx: Context) -> None:
    async with ctx.session() as wire:
        prompts = await ctx.list_all(wire, "prompts/list", "prompts")
        plain = [p for p in prompts if not _required_arguments(p)]
        if not plain:
            ctx.not_observed("every listed prompt has a required argument")
        name = plain[0].get("name")
        result = await ctx.result(wire, "prompts/get", {"name": name, "arguments": {}})
        messages = result.get("messages")
        if not isinstance(messages, list):
            ctx.fail(f"prompts/get {name!r}: no messages array")
        for m in messages:
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
                ctx.fail(f"prompts/get {name!r}: a message without role user/assistant: {m!r:.200}")
            content = m.get("content")
            if not isinstance(content, dict) or not isinstance(content.get("type"), str):
                ctx.fail(f"prompts/get {name!r}: a message without a typed content block: {m!r:.200}")


def _required_arguments(prompt: dict[str, object]) -> list[object]:
    arguments = prompt.get("arguments")
    return [a for a in arguments if isinstance(a, dict) and a.get("required")] if isinstance(arguments, list) else []


@check(
    id="RS-03",
    title="resource templates carry a uriTemplate and a name",
    level="MUST",
    spec=RESOURCES + " §Resource Templates",
    quote="Resource templates allow servers to expose parameterized resources using URI templates.",
    needs=("resources",),
    tags=("resources",),
)
async def templates_shape(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await ctx.call(wire, "resources/templates/list")
        if "error" in answer:
            # a server without templates may not implement the method; only a result is checked
            ctx.not_observed(f"resources/templates/list answered an error: {answer['error']!r:.200}")
        for template in await ctx.list_all(wire, "resources/templates/list", "resourceTemplates"):
            if not isinstance(template.get("uriTemplate"), str) or not isinstance(template.get("name"), str):
                ctx.fail(f"a resource template without string uriTemplate and name: {template!r:.200}")


@check(
    id="CP-01",
    title="completion/complete for a prompt argument returns at most 100 string values",
    level="MUST",
    spec="server/utilities/completion.mdx §Completion Results",
    quote="Servers return an array of completion values ranked by relevance, with: Maximum 100 items per response",
    revisions=("2025-03-26", "9999-12-31"),
    needs=("completions", "prompts"),
    tags=("completion",),
)
async def completion(ctx: Context) -> None:
    async with ctx.session() as wire:
        prompts = await ctx.list_all(wire, "prompts/list", "prompts")
        with_args = [(p, a) for p in prompts for a in (p.get("arguments") or []) if isinstance(a, dict)]
        if not with_args:
            ctx.not_observed("no listed prompt has an argument")
        prompt, argument = with_args[0]
        params = {
            "ref": {"type": "ref/prompt", "name": prompt.get("name")},
            "argument": {"name": argument.get("name"), "value": ""},
        }
        result = await ctx.result(wire, "completion/complete", params)
        completion_ = result.get("completion")
        values = completion_.get("values") if isinstance(completion_, dict) else None
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            ctx.fail(f"completion has no array of string values: {result!r:.200}")
        if len(values) > 100:
            ctx.fail(f"completion returned {len(values)} values (more than 100)")


@check(
    id="PR-03",
    title="prompts/get of an unknown prompt is a JSON-RPC error (-32602)",
    level="SHOULD",
    spec="server/prompts.mdx §Error Handling",
    quote="Servers SHOULD return standard JSON-RPC errors for common failure cases: Invalid prompt name: -32602 "
    "(Invalid params)",
    needs=("prompts",),
    tags=("prompts", "errors"),
)
async def unknown_prompt(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await ctx.call(wire, "prompts/get", {"name": "mcpwire_check_no_such_prompt", "arguments": {}})
        error = answer.get("error")
        if not isinstance(error, dict) or error.get("code") != -32602:
            ctx.fail(f"an unknown prompt was answered with {answer!r:.200}, not error -32602")


@check(
    id="CP-02",
    title="completion/complete for an unknown prompt is a JSON-RPC error (-32602)",
    level="SHOULD",
    spec="2025-03-26/server/utilities/completion.mdx §Error Handling",
    quote="Servers SHOULD return standard JSON-RPC errors for common failure cases: ... Invalid prompt name: "
    "-32602 (Invalid params)",
    quotes=(
        (
            "2025-03-26",
            "server/utilities/completion.mdx §Error Handling",
            "Servers SHOULD return standard JSON-RPC errors for common failure cases: ... Invalid prompt name: "
            "-32602 (Invalid params)",
        ),
    ),
    revisions=("2025-03-26", "9999-12-31"),
    needs=("completions",),
    tags=("completion", "errors"),
)
async def completion_unknown_prompt(ctx: Context) -> None:
    async with ctx.session() as wire:
        params = {
            "ref": {"type": "ref/prompt", "name": "mcpwire_check_no_such_prompt"},
            "argument": {"name": "x", "value": ""},
        }
        answer = await ctx.call(wire, "completion/complete", params)
        error = answer.get("error")
        if not isinstance(error, dict) or error.get("code") != -32602:
            ctx.fail(f"completion for an unknown prompt was answered with {answer!r:.200}, not error -32602")


@check(
    id="SV-34b",
    title="tools/list returns the tools in the same order every time",
    level="SHOULD",
    spec=MODERN + "/" + TOOLS + " §Capabilities",
    quote="Servers SHOULD return tools in a deterministic order",
    eras=("modern",),
    needs=("tools",),
    tags=("tools",),
)
async def tools_order(ctx: Context) -> None:
    async with ctx.session() as wire:
        first = [str(t.get("name")) for t in await ctx.list_all(wire, "tools/list", "tools")]
        second = [str(t.get("name")) for t in await ctx.list_all(wire, "tools/list", "tools")]
        if first != second:
            ctx.fail(f"two tools/list calls gave different orders: {first[:6]}... vs {second[:6]}...")


@check(
    id="SV-06",
    title="every result and server notification validates against the official schema of the revision",
    level="MUST",
    spec="basic/index.mdx §Schema",
    quote="The full specification of the protocol is defined as a TypeScript schema. This is the source of truth "
    "for all protocol messages and structures.",
    tags=("framing", "schema"),
)
async def schema_valid(ctx: Context) -> None:
    # The rules other checks judge stay theirs (ids SV-02, result/error SV-03, resultType SV-16,
    # tool schemas SV-29*, structuredContent SV-30, initialize SV-09, discover SV-13). Every result
    # any check of the run receives is validated by the run's schema audit (conformance/audit.py),
    # which adds its defects, one line each, to this check's result once the run is done (tool
    # results come from the checks that call tools: SV-35 calls every callable tool); this check
    # makes sure the lists are among them, and judges what the server sends on its own.
    from ..schema import message_validator

    if message_validator(ctx.revision, "JSONRPCNotification") is None:
        ctx.skip("no official schema.json for this revision (set MCPWIRE_SCHEMA_DIR to <dir>/<revision>/schema.json)")
    async with ctx.session() as wire:
        start = len(wire.frames)
        for capability, method, key in LISTS:
            # an error answer is no list result to validate (and is schema-valid: SV-03 judges its
            # shape); e.g. -32601 for resources/templates/list from a server without templates
            if ctx.has(capability):
                await list_if_served(ctx, wire, method, key)
        notification = message_validator(ctx.revision, "ServerNotification") or message_validator(
            ctx.revision, "JSONRPCNotification"
        )
        request = message_validator(ctx.revision, "ServerRequest")
        # every request the server sent in the session (on a reused process, one it sent before this
        # check is found among the frames the handshake left: see conformance/pool.py), and every
        # notification since the lists began
        frames = [f for f in wire.frames[:start] if f.is_request] + list(wire.frames[start:])
        for frame in frames:
            validator = notification if frame.is_notification else request if frame.is_request else None
            if validator is None:
                continue
            errors = sorted(validator.iter_errors(frame.value), key=lambda e: len(list(e.path)))
            if errors:
                ctx.fail(f"{frame.value.get('method')} does not validate: {errors[0].message[:200]}")
        # the defects seen so far (this check's own results among them) fail it here, with its
        # exchanges as evidence; those other checks meet later are added when the run ends
        defects = ctx.audit.findings(ctx.revision) if ctx.audit is not None else []
        if defects:
            ctx.fail("; ".join(d.line() for d in defects) + f" (first: {defects[0].example})")


LISTS = (
    ("tools", "tools/list", "tools"),
    ("resources", "resources/list", "resources"),
    ("resources", "resources/templates/list", "resourceTemplates"),
    ("prompts", "prompts/list", "prompts"),
)
