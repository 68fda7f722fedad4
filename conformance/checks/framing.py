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
    """Ordinary traffic: lists of every advertised feature and an unknown method.

    An unknown method left without a JSON-RPC answer is noted, not judged: SV-05 judges it (one
    defect, one failure).
    """
    if ctx.era == "legacy":
        await wire.request("ping", {}, timeout=ctx.timeout)
    else:
        # the first answer of a fresh process gets initialize's allowance (harness.FIRST_ANSWER_FACTOR)
        await ctx.call(wire, "server/discover")
    for capability, method in (("tools", "tools/list"), ("resources", "resources/list"), ("prompts", "prompts/list")):
        if ctx.has(capability):
            await ctx.call(wire, method)
    await _call_unknown(ctx, wire, "mcpwire/no_such_method")


async def _call_unknown(ctx: Context, wire: WireBase, method: str, params: dict[str, Any] | None = None) -> None:
    """A request another check judges the answer to (SV-05, SV-31): no answer is only noted."""
    try:
        await ctx.call(wire, method, params)
    except NoAnswer as exc:
        ctx.note(f"{method}: {exc} (judged by the check for that request)")


def response_problem(value: dict[str, Any]) -> str | None:
    """What keeps ``value`` (an object without ``method``) from being a JSON-RPC response, or None."""
    rid = value.get("id")
    if ("result" in value) == ("error" in value):
        return f"response id {rid!r} has {'both' if 'result' in value else 'neither'} result/error"
    if "error" in value:
        error = value["error"]
        if not isinstance(error, dict) or type(error.get("code")) is not int:
            return f"error of response id {rid!r} has a non-integer code: {error!r:.200}"
        if not isinstance(error.get("message"), str):
            return f"error of response id {rid!r} has no string message: {error!r:.200}"
    return None


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
            frame = await _next_response(wire, wire.answer_window(ctx.timeout))
            if frame is None:
                # a missing answer says nothing about the ids of answers (a busy server, or a
                # process still starting): not judged
                ctx.cannot_judge(f"no response to the request with id {rid!r} within the window")
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
    # Judges the shape of every response the server sent. A request left without any JSON-RPC
    # answer (an HTTP error with a text body, silence) is the rule of its own check (SV-05 for an
    # unknown method), so one defect is one failure.
    async with ctx.session() as wire:
        await _workload(ctx, wire)
        await _call_unknown(
            ctx, wire, "tools/call" if ctx.has("tools") else "mcpwire/other", {"name": "mcpwire-check-none"}
        )
        for frame in wire.frames:
            items = frame.value if isinstance(frame.value, list) else [frame.value]
            for v in items:
                if not isinstance(v, dict) or "method" in v:
                    continue
                problem = response_problem(v)
                if problem is not None:
                    ctx.fail(problem)


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
    title="an unknown method is answered with a JSON-RPC error -32601",
    level="MUST",
    spec="JSON-RPC 2.0 §5",
    quote="When a rpc call is made, the Server MUST reply with a Response, except for in the case of "
    "Notifications. ... When a rpc call encounters an error, the Response Object MUST contain the error member "
    "... code: A Number that indicates the error type that occurred. ... -32601 Method not found: The method "
    "does not exist / is not available.",
    tags=("framing", "jsonrpc"),
)
async def unknown_method(ctx: Context) -> None:
    if ctx.era == "modern" and ctx.transport == "http":
        # 2026-07-28 Streamable HTTP adds the status (404 Not Found and -32601): SV-05c judges both
        ctx.skip("over 2026-07-28 Streamable HTTP, SV-05c judges unknown methods (status and code)")
    rid = "mcpwire-check-unknown-method"
    async with ctx.session() as wire:
        try:
            answer = await wire.request("mcpwire/no_such_method", ctx.params({}), request_id=rid, timeout=ctx.timeout)
        except NoAnswer as exc:
            if _malformed_answer(wire, rid):
                ctx.skip("the answer is not a well-formed JSON-RPC response: SV-03 judges its shape")
            # an HTTP answer without JSON-RPC, or a closed wire, is the evidence; a window that
            # ended proves nothing until a later request is answered
            proof = f" ({await ctx.silence_proven(wire, 'an unknown method')})" if exc.timed_out else ""
            ctx.fail(f"an unknown method got no JSON-RPC response (error -32601 expected): {exc}{proof}")
        if response_problem(answer) is not None:
            ctx.skip("the answer is not a well-formed JSON-RPC response: SV-03 judges its shape")
        if "result" in answer:
            ctx.fail(f"an unknown method was answered with a result: {answer!r:.200}")
        if answer["error"]["code"] != -32601:
            ctx.fail(f"an unknown method was answered with error {answer['error']!r:.200}, not -32601")


def _malformed_answer(wire: WireBase, rid: Any) -> bool:
    """Whether something response-like came back for ``rid`` that is not a JSON-RPC response (an
    object without ``method``, with this id, or in the HTTP answer to the request)."""
    reply_for = getattr(wire, "reply_for", None)
    reply = reply_for(rid) if reply_for is not None else None
    candidates = list(reply.messages) if reply is not None else []
    candidates += [f.value for f in wire.frames if isinstance(f.value, dict) and f.value.get("id") == rid]
    return any(isinstance(m, dict) and "method" not in m for m in candidates)


_DECLARE = (
    "Servers that support prompts MUST declare the prompts capability during initialization ... Servers that "
    "support tools MUST declare the tools capability ... Servers that support resources MUST declare the resources "
    "capability"
)


@check(
    id="SV-05b",
    title="a server that offers prompts, resources, tools or completions declares that capability",
    # The rule binds the server's own declaration: each feature page says "Servers that support X
    # MUST declare the X capability" (prompts, tools and resources pages alike; completions from
    # 2025-03-26; the prompts page is cited). Asking for an undeclared feature is the client's
    # fault (basic/lifecycle §Operation binds the sender), so an answer alone proves nothing: only
    # a feature actually offered (a non-empty list, completion values) without its capability is
    # a violation; an empty list or an error is not.
    level="MUST",
    spec="server/prompts.mdx §Capabilities",
    quote=_DECLARE,
    quotes=(
        (
            "2025-03-26",
            "server/prompts.mdx §Capabilities",
            _DECLARE + " ... Servers that support completions MUST declare the completions capability",
        ),
        (
            MODERN,
            "server/prompts.mdx §Capabilities",
            "Servers that support prompts MUST declare the prompts capability in their DiscoverResult ... Servers "
            "that support tools MUST declare the tools capability ... Servers that support resources MUST declare "
            "the resources capability ... Servers that support completions MUST declare the completions capability",
        ),
    ),
    tags=("capabilities",),
)
async def unadvertised_method(ctx: Context) -> None:
    lists = [("prompts", "prompts/list", "prompts"), ("resources", "resources/list", "resources")]
    lists.append(("tools", "tools/list", "tools"))
    if ctx.revision >= "2025-03-26":  # 2024-11-05 had no completions capability
        lists.append(("completions", "completion/complete", ""))
    missing = [entry for entry in lists if not ctx.has(entry[0])]
    if not missing:
        ctx.skip("the server declares every feature it could offer")
    complete = {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "x", "value": ""}}
    async with ctx.session() as wire:
        for capability, method, key in missing:
            answer = await ctx.call(wire, method, complete if not key else None)
            result = answer.get("result")
            if not isinstance(result, dict):
                continue  # an error, or no result: nothing offered
            if key:
                items = result.get(key)
                offered = [str(i.get("name") or i.get("uri")) for i in items or () if isinstance(i, dict)]
            else:
                values = (
                    (result.get("completion") or {}).get("values")
                    if isinstance(result.get("completion"), dict)
                    else None
                )
                offered = [str(v) for v in values] if isinstance(values, list) else []
            if offered:
                shown = ", ".join(repr(o[:40]) for o in offered[:3]) + (" ..." if len(offered) > 3 else "")
                ctx.fail(
                    f"{method} offers {len(offered)} item(s) ({shown}) but the '{capability}' capability is not "
                    "declared"
                )


@check(
    id="SV-07",
    title="no JSON-RPC batches after 2025-03-26",
    level="MUST",
    spec="2025-06-18/changelog.mdx",
    quote="Remove support for JSON-RPC batching.",
    revisions=("2025-06-18", "9999-12-31"),
    tags=("framing", "jsonrpc"),
    ends_session=True,
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
    title="2025-03-26 batches are answered: one array of responses (over Streamable HTTP, an SSE stream may carry "
    "them one by one)",
    level="MUST",
    spec="2025-03-26/basic/index.mdx §Batching",
    quote="MCP implementations MAY support sending JSON-RPC batches, but MUST support receiving JSON-RPC batches.",
    eras=("legacy",),
    revisions=("2025-03-26", "2025-03-26"),
    tags=("framing", "jsonrpc"),
    ends_session=True,
)
async def batch_2025_03_26(ctx: Context) -> None:
    # JSON-RPC 2.0 §6 answers a batch with one array (stdio, and the HTTP+SSE transport, whose
    # stream carries JSON-RPC messages as they are). 2025-03-26 Streamable HTTP lets the SSE
    # stream of a POSTed batch carry one event per response: "These responses MAY be batched"
    # (basic/transports §Sending Messages to the Server), so there any packaging passes.
    batch = [{"jsonrpc": "2.0", "id": f"b{i}", "method": "ping"} for i in range(2)]
    async with ctx.session() as wire:
        if wire.transport == "http":
            await _batch_over_streamable_http(ctx, wire, batch)
            return
        await wire.send(batch)
        # a later single request bounds the wait: its answer comes after the batch's (or the batch was dropped)
        try:
            await wire.request("ping", {}, request_id="sync", timeout=ctx.timeout)
        except NoAnswer:
            await ctx.still_answering(wire, "a batch")
        await wire.drain(0.1)
        arrays = [f.value for f in wire.frames if isinstance(f.value, list)]
        if not arrays:
            singles = sorted(
                str(f.value.get("id")) for f in wire.frames if f.is_response and f.value.get("id") in ("b0", "b1")
            )
            if singles:
                ctx.fail(
                    f"a batch of two pings was answered with separate responses ({', '.join(singles)}), not one array"
                )
            ctx.fail("no array answer to a batch of two pings" + _batch_post_refusal(wire))
        ids = sorted(str(v.get("id")) for v in arrays[0] if isinstance(v, dict))
        if ids != ["b0", "b1"]:
            ctx.fail(f"batch answer carries ids {ids}, expected b0 and b1")


def _batch_post_refusal(wire: Any) -> str:
    """HTTP+SSE: how the POST that carried the batch was refused, if it was."""
    for reply in getattr(wire, "replies", ()):
        if reply.method == "POST" and reply.request_body.startswith(b"[") and (reply.status or 0) >= 400:
            return f" (its POST was refused: HTTP {reply.status} body {reply.body[:120]!r})"
    return ""


async def _batch_over_streamable_http(ctx: Context, wire: Any, batch: list[dict[str, Any]]) -> None:
    wanted = {str(m["id"]) for m in batch}

    def answered(reply: Any) -> set[str]:
        return {str(m.get("id")) for m in reply.messages if isinstance(m, dict) and "method" not in m} & wanted

    reply = await wire.post(batch, timeout=ctx.timeout, stop=lambda r: answered(r) == wanted)
    if answered(reply) == wanted:
        return
    if reply.status is None:
        # no HTTP answer: a dropped batch, or a busy server; a single ping answered after it tells
        try:
            await ctx.call(wire, _ping_method(ctx))
        except NoAnswer:
            ctx.cannot_judge(f"a POSTed batch of two pings got no HTTP answer ({reply.error or 'no answer in time'})")
        ctx.fail(
            f"a POSTed batch of two pings got no HTTP answer ({reply.error or 'no answer in time'}), while a single "
            f"{_ping_method(ctx)} after it was answered"
        )
    got = ", ".join(sorted(answered(reply))) or "neither"
    body = f" body {reply.body[:200]!r}" if reply.body and not reply.is_sse else ""
    ctx.fail(
        f"a POSTed batch of two pings (b0, b1) was answered HTTP {reply.status}{body} with responses to {got} "
        "(as one array or one SSE event each: either is allowed)"
    )


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
    ends_session=True,
)
async def exit_on_eof(ctx: Context) -> None:
    async with ctx.session() as wire:
        if ctx.era == "modern":
            # the clock starts when the server is up: one answered request proves it (a server
            # still importing its code when stdin closes is slow to start, not slow to stop); the
            # wait is initialize's (the first answer of a fresh process includes its start-up)
            await ctx.call(wire, "server/discover")
        # "promptly" on this machine: a process that took seconds to start (a busy machine) gets
        # as many to stop (measured on this very process; see pace.exit_grace)
        base = ctx.target.eof_grace
        grace = base if ctx.pace is None else ctx.pace.exit_grace(base, wire.startup_s, ctx.timeout)
        await shutdown(wire, eof_grace=grace)
        if wire.exit_step != "eof":
            step = (wire.exit_step or "?").upper()
            started = "" if grace == base or wire.startup_s is None else f" (it took {wire.startup_s:.1f} s to start)"
            ctx.fail(f"still running {grace:.3g} s after stdin EOF{started}; {step} was needed")


@check(
    id="FR-01",
    title="malformed JSON gets a -32700 parse error (or is ignored), never a crash",
    level="SHOULD",
    spec="JSON-RPC 2.0 §5.1",
    quote="Parse error: Invalid JSON was received by the server.",
    tags=("framing", "jsonrpc"),
    ends_session=True,
)
async def parse_error(ctx: Context) -> None:
    async with ctx.session() as wire:
        if ctx.era == "modern":
            # the server is up first (legacy: initialize proved it): a server still starting when
            # the line arrives is slow to start, not stopped by the line
            await ctx.call(wire, "server/discover")
        await wire.send_bytes(b'{"jsonrpc": "2.0", "id": 99, "method": \n')
        await ctx.still_answering(wire, "a malformed line")
        for frame in wire.frames:
            v = frame.value
            error = v.get("error") if isinstance(v, dict) else None
            if isinstance(error, dict) and v.get("id") is None and error.get("code") != -32700:
                ctx.fail(f"malformed JSON answered with code {error.get('code')!r}, not -32700")
