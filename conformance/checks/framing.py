"""Framing and JSON-RPC checks (spec-checklist 12.1, SV-01..SV-08)."""

from __future__ import annotations

from typing import Any

from ..context import Context
from ..harness import Frame, NoAnswer, WireBase, shutdown
from ..registry import check

BASIC = "basic/index.mdx"
#: 2024-11-05 kept the message rules on a page of their own
MESSAGES = "basic/messages.mdx"
#: legacy revisions describe stdio on the transports page; 2026-07-28 gives it a page of its own
TRANSPORTS = "basic/transports.mdx"
STDIO = "basic/transports/stdio.mdx"
MODERN = "2026-07-28"


async def _workload(ctx: Context, wire: WireBase) -> None:
    """Ordinary traffic: lists of every advertised feature and an unknown method."""
    if ctx.era == "legacy":
        await wire.request("ping", {}, timeout=ctx.timeout)
    else:
        await ctx.call(wire, "server/discover")
    for capability, method in (("tools", "tools/list"), ("resources", "resources/list"), ("prompts", "prompts/list")):
        if ctx.has(capability):
            await ctx.call(wire, method)
    await ctx.call(wire, "mcpwire/no_such_method")


def _ping_method(ctx: Context) -> str:
    return "ping" if ctx.era == "legacy" else "server/discover"


@check(
    id="SV-01",
    title="stdout carries only JSON-RPC messages",
    level="MUST",
    spec=TRANSPORTS + " §stdio",
    quote="The server MUST NOT write anything to its stdout that is not a valid MCP message.",
    quotes=((MODERN, STDIO, "The server MUST NOT write anything to its stdout that is not a valid MCP message."),),
    transports=("stdio",),
    tags=("framing",),
)
async def stdout_only_json(ctx: Context) -> None:
    async with ctx.session() as wire:
        await _workload(ctx, wire)
        await wire.drain(0.1)
        bad = [f for f in wire.frames if not f.is_json or not _is_message(f.value)]
        if bad:
            ctx.fail(f"{len(bad)} stdout line(s) are not JSON-RPC messages, first: {bad[0].text[:200]!r}")


def _is_message(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_is_message(v) for v in value)
    return isinstance(value, dict) and value.get("jsonrpc") == "2.0"


# JSON ids of several types: the answer must carry the same value with the same JSON type.
_IDS: tuple[Any, ...] = (0, -7, 9007199254740991, "abc", "ünï-☃-🙂", "42", " ")


@check(
    id="SV-02",
    title="responses echo the request id with the same JSON type",
    level="MUST",
    spec=MESSAGES + " §Responses",
    quote="Responses MUST include the same ID as the request they correspond to.",
    quotes=(
        ("2025-03-26", BASIC + " §Responses", "Responses MUST include the same ID as the request they correspond to."),
        (
            "2025-11-25",
            BASIC + " §Responses",
            "Result responses MUST include the same ID as the request they correspond to. ... Error responses MUST "
            "include the same ID as the request they correspond to (except in error cases where the ID could not be "
            "read due a malformed request).",
        ),
    ),
    tags=("framing", "jsonrpc"),
)
async def ids_echoed(ctx: Context) -> None:
    async with ctx.session() as wire:
        for rid in _IDS:
            await wire.send({"jsonrpc": "2.0", "id": rid, "method": _ping_method(ctx), "params": ctx.params()})
            frame = await _next_response(wire, ctx.timeout)
            if frame is None:
                ctx.fail(f"no response to the request with id {rid!r}")
            got = frame.value.get("id")
            if got != rid or type(got) is not type(rid):
                ctx.fail(f"request id {rid!r} ({type(rid).__name__}) answered with id {got!r} ({type(got).__name__})")


async def _next_response(wire: WireBase, timeout: float) -> Frame | None:
    while True:
        frame = await wire.recv(timeout)
        if frame is None or frame.is_response:
            return frame


@check(
    id="SV-03",
    title="each response has exactly one of result/error; error codes are integers",
    level="MUST",
    spec=MESSAGES + " §Responses",
    quote="Either a result or an error MUST be set. A response MUST NOT set both. Error codes MUST be integers.",
    quotes=(
        (
            "2025-03-26",
            BASIC + " §Responses",
            "Either a result or an error MUST be set. A response MUST NOT set both. ... Error codes MUST be integers.",
        ),
        (
            "2025-11-25",
            BASIC + " §Responses",
            "Result responses MUST include a result field. ... Error responses MUST include an error field with a "
            "code and message. Error codes MUST be integers.",
        ),
    ),
    tags=("framing", "jsonrpc"),
)
async def response_shape(ctx: Context) -> None:
    async with ctx.session() as wire:
        await _workload(ctx, wire)
        await ctx.call(wire, "tools/call" if ctx.has("tools") else "mcpwire/other", {"name": "mcpwire-check-none"})
        for frame in wire.frames:
            items = frame.value if isinstance(frame.value, list) else [frame.value]
            for v in items:
                if not isinstance(v, dict) or "method" in v:
                    continue
                if ("result" in v) == ("error" in v):
                    ctx.fail(f"response id {v.get('id')!r} has {'both' if 'result' in v else 'neither'} result/error")
                if "error" in v:
                    err = v["error"]
                    if not isinstance(err, dict) or type(err.get("code")) is not int:
                        ctx.fail(f"error of response id {v.get('id')!r} has a non-integer code: {err!r:.200}")
                    if not isinstance(err.get("message"), str):
                        ctx.fail(f"error of response id {v.get('id')!r} has no string message: {err!r:.200}")


@check(
    id="SV-04",
    title="notifications are never answered",
    level="MUST",
    spec=MESSAGES + " §Notifications",
    quote="Notifications are sent from the client to the server or vice versa. They do not expect a response. ... "
    "Notifications MUST NOT include an ID.",
    quotes=(
        (
            "2025-03-26",
            BASIC + " §Notifications",
            "The receiver MUST NOT send a response. ... Notifications MUST NOT include an ID.",
        ),
    ),
    tags=("framing", "jsonrpc"),
)
async def notifications_unanswered(ctx: Context) -> None:
    async with ctx.session() as wire:
        await wire.notify("notifications/cancelled", {"requestId": "mcpwire-check-unknown", "reason": "check"})
        await wire.notify("notifications/mcpwire/unknown", {})
        sync = "mcpwire-check-sync"
        await wire.send({"jsonrpc": "2.0", "id": sync, "method": _ping_method(ctx), "params": ctx.params()})
        await wire.wait_response(sync, timeout=ctx.timeout)
        sent = _sent_request_ids(wire)
        for frame in wire.frames:
            v = frame.value
            if frame.is_response and (v.get("id"), type(v.get("id"))) not in sent:
                ctx.fail(f"a response to no request (a notification was answered?): {frame.text[:200]}")


def _sent_request_ids(wire: WireBase) -> set[tuple[Any, type]]:
    ids: set[tuple[Any, type]] = set()
    for value in wire.sent_messages():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, dict) and "method" in v and "id" in v:
                ids.add((v["id"], type(v["id"])))
    return ids


@check(
    id="SV-05",
    title="unknown method is answered with -32601",
    level="MUST",
    spec="JSON-RPC 2.0 §5.1",
    quote="-32601 Method not found: The method does not exist / is not available.",
    tags=("framing", "jsonrpc"),
)
async def unknown_method(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await ctx.call(wire, "mcpwire/no_such_method", {})
        code = (answer.get("error") or {}).get("code") if isinstance(answer.get("error"), dict) else None
        if code != -32601:
            ctx.fail(f"unknown method answered with {answer!r:.200}, not error -32601")


@check(
    id="SV-05b",
    title="a method of an unadvertised capability is answered with -32601",
    level="SHOULD",
    spec="basic/lifecycle.mdx §Operation",
    quote="Both parties SHOULD: Respect the negotiated protocol version Only use capabilities that were "
    "successfully negotiated",
    quotes=(
        (
            "2025-06-18",
            "basic/lifecycle.mdx §Operation",
            "Both parties MUST: Respect the negotiated protocol version Only use capabilities that were "
            "successfully negotiated",
        ),
        (
            MODERN,
            "schema.ts MethodNotFoundError",
            "In MCP, a server returns this error when a client invokes a method the server does not implement — "
            "either a genuinely unknown method, or one gated behind a server capability the server did not "
            "advertise (e.g., calling prompts/list when the prompts capability was not advertised).",
        ),
    ),
    tags=("capabilities",),
)
async def unadvertised_method(ctx: Context) -> None:
    lists = [("prompts", "prompts/list"), ("resources", "resources/list"), ("tools", "tools/list")]
    if ctx.revision >= "2025-03-26":  # 2024-11-05 had no completions capability
        lists.append(("completions", "completion/complete"))
    if ctx.era == "legacy":
        lists.append(("logging", "logging/setLevel"))
    missing = [(c, m) for c, m in lists if not ctx.has(c)]
    if not missing:
        ctx.skip("the server advertises every feature it could be asked for")
    async with ctx.session() as wire:
        samples: dict[str, dict[str, Any]] = {
            "completion/complete": {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "x", "value": ""}},
            "logging/setLevel": {"level": "error"},
        }
        for capability, method in missing:
            answer = await ctx.call(wire, method, samples.get(method))
            if "result" in answer:
                ctx.fail(f"{method} served although '{capability}' is not advertised")


@check(
    id="SV-07",
    title="no JSON-RPC batches after 2025-03-26",
    level="MUST",
    spec="2025-06-18/changelog.mdx",
    quote="Remove support for JSON-RPC batching.",
    revisions=("2025-06-18", "9999-12-31"),
    tags=("framing", "jsonrpc"),
)
async def no_batches(ctx: Context) -> None:
    async with ctx.session() as wire:
        await wire.send([{"jsonrpc": "2.0", "id": "b1", "method": _ping_method(ctx), "params": ctx.params()}])
        await wire.drain(0.3)
        for frame in wire.frames:
            if isinstance(frame.value, list):
                ctx.fail("the server answered a batch with a batch array")


@check(
    id="SV-07b",
    title="2025-03-26 batches are answered with one array of responses",
    level="MUST",
    spec="2025-03-26/basic/index.mdx §Batching",
    quote="MCP implementations MAY support sending JSON-RPC batches, but MUST support receiving JSON-RPC batches.",
    eras=("legacy",),
    revisions=("2025-03-26", "2025-03-26"),
    tags=("framing", "jsonrpc"),
)
async def batch_2025_03_26(ctx: Context) -> None:
    async with ctx.session() as wire:
        batch = [{"jsonrpc": "2.0", "id": f"b{i}", "method": "ping"} for i in range(2)]
        await wire.send(batch)
        # a later single request bounds the wait: its answer comes after the batch's (or the batch was dropped)
        try:
            await wire.request("ping", {}, request_id="sync", timeout=ctx.timeout)
        except NoAnswer:
            ctx.fail("the server stopped answering after a batch")
        await wire.drain(0.1)
        arrays = [f.value for f in wire.frames if isinstance(f.value, list)]
        if not arrays:
            ctx.fail("no array answer to a batch of two pings")
        ids = sorted(str(v.get("id")) for v in arrays[0] if isinstance(v, dict))
        if ids != ["b0", "b1"]:
            ctx.fail(f"batch answer carries ids {ids}, expected b0 and b1")


@check(
    id="SV-08",
    title="server exits promptly after stdin EOF",
    level="SHOULD",
    spec="basic/lifecycle.mdx §Shutdown",
    quote="For the stdio transport, the client SHOULD initiate shutdown by: 1. First, closing the input stream to "
    "the child process (the server) 2. Waiting for the server to exit, or sending SIGTERM if the server does not "
    "exit within a reasonable time",
    quotes=(
        (
            MODERN,
            STDIO + " §Shutdown",
            "Servers SHOULD exit promptly when their standard input is closed or reads return end-of-file.",
        ),
    ),
    transports=("stdio",),
    tags=("lifecycle", "stdio"),
)
async def exit_on_eof(ctx: Context) -> None:
    async with ctx.session() as wire:
        if ctx.era == "modern":
            # the clock starts when the server is up: one answered request proves it (a server
            # still importing its code when stdin closes is slow to start, not slow to stop)
            await ctx.call(wire, "server/discover")
        await shutdown(wire, eof_grace=ctx.target.eof_grace)
        if wire.exit_step != "eof":
            step = (wire.exit_step or "?").upper()
            ctx.fail(f"still running {ctx.target.eof_grace:g} s after stdin EOF; {step} was needed")


@check(
    id="FR-01",
    title="malformed JSON gets a -32700 parse error (or is ignored), never a crash",
    level="SHOULD",
    spec="JSON-RPC 2.0 §5.1",
    quote="Parse error: Invalid JSON was received by the server.",
    tags=("framing", "jsonrpc"),
)
async def parse_error(ctx: Context) -> None:
    async with ctx.session() as wire:
        await wire.send_bytes(b'{"jsonrpc": "2.0", "id": 99, "method": \n')
        try:
            await ctx.call(wire, _ping_method(ctx))
        except NoAnswer:
            ctx.fail("the server stopped answering after a malformed line")
        for frame in wire.frames:
            v = frame.value
            error = v.get("error") if isinstance(v, dict) else None
            if isinstance(error, dict) and v.get("id") is None and error.get("code") != -32700:
                ctx.fail(f"malformed JSON answered with code {error.get('code')!r}, not -32700")
