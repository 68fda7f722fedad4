"""HTTP transport checks (spec-checklist 12.3, SV-19..SV-28; HT-*, HS-01; Origin, Host and
authorization are in :mod:`.http_security`).

Every check here talks raw HTTP through :class:`~conformance.http_harness.HttpWire` and judges
status codes, headers and bodies exactly as they came back.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from ..context import Context
from ..http_harness import HttpReply, HttpWire
from ..model import SkipKind
from ..registry import check
from .httpkit import (
    HTTP,
    LEGACY,
    MODERN,
    T25,
    T26,
    T26_HERE,
    VISIBLE_ASCII,
    error_code,
    has_result,
    init_message,
    json_or_none,
    legacy_http,
    probe_message,
    summary,
)
from .toolcalls import call_each

_NOTIFICATION_2025_03_26 = (
    "If the input consists solely of (any number of) JSON-RPC responses or notifications: If the server accepts the "
    "input, the server MUST return HTTP status code 202 Accepted with no body. If the server cannot accept the "
    "input, it MUST return an HTTP error status code (e.g., 400 Bad Request)."
)
_REQUEST_2025_03_26 = (
    "If the input contains any number of JSON-RPC requests, the server MUST either return Content-Type: "
    "text/event-stream, to initiate an SSE stream, or Content-Type: application/json, to return one JSON object."
)


#: JSON-RPC 2.0 §5.1: "Internal JSON-RPC error", a failure inside the server
INTERNAL_ERROR = -32603


@check(
    id="SV-20",
    title="a POSTed notification is answered 202 Accepted with no body (or rejected with an error status)",
    level="MUST",
    spec="2025-03-26/" + T25 + " §Sending Messages to the Server",
    quote=_NOTIFICATION_2025_03_26,
    quotes=(
        ("2025-03-26", T25 + " §Sending Messages to the Server", _NOTIFICATION_2025_03_26),
        (
            "2025-06-18",
            T25 + " §Sending Messages to the Server",
            "If the input is a JSON-RPC response or notification: If the server accepts the input, the server MUST "
            "return HTTP status code 202 Accepted with no body. If the server cannot accept the input, it MUST "
            "return an HTTP error status code (e.g., 400 Bad Request).",
        ),
        (
            "2026-07-28",
            T26_HERE + " §Sending Messages",
            "If the body is a JSON-RPC notification: If the server accepts it, the server MUST return HTTP status "
            "code 202 Accepted with no body. If the server cannot accept it, it MUST return an HTTP error status code.",
        ),
    ),
    revisions=("2025-03-26", "9999-12-31"),
    transports=HTTP,
    tags=("http",),
)
async def notification_202(ctx: Context) -> None:
    async with ctx.session() as wire:
        await wire.notify("notifications/cancelled", {"requestId": "mcpwire-check-unknown", "reason": "check"})
        await wire.request(probe_message(ctx)["method"], ctx.params(), timeout=ctx.timeout)
        sent = [(r, json_or_none(r.request_body)) for r in wire.replies if r.method == "POST"]
        posted = [r for r, body in sent if isinstance(body, dict) and "id" not in body]
        if not posted:
            ctx.not_observed("no notification was POSTed")
        for reply in posted:
            if reply.status is None:
                ctx.cannot_judge(f"{reply.label}: no HTTP answer ({reply.error or 'in time'})")
            if reply.status >= 400:
                continue  # rejected, with an error status: allowed
            if reply.status != 202:
                ctx.fail(f"{reply.label}: a notification was answered {summary(reply)}, not 202 Accepted")
            if reply.body.strip():
                ctx.fail(f"{reply.label}: 202 with a body {reply.body[:200]!r}; the spec says no body")


@check(
    id="SV-21",
    title="a POSTed request is answered with application/json or text/event-stream carrying its response",
    level="MUST",
    spec="2025-03-26/" + T25 + " §Sending Messages to the Server",
    quote=_REQUEST_2025_03_26,
    quotes=(
        ("2025-03-26", T25 + " §Sending Messages to the Server", _REQUEST_2025_03_26),
        (
            "2025-06-18",
            T25 + " §Sending Messages to the Server",
            "If the input is a JSON-RPC request, the server MUST either return Content-Type: text/event-stream, to "
            "initiate an SSE stream, or Content-Type: application/json, to return one JSON object.",
        ),
        (
            "2026-07-28",
            T26_HERE + " §Sending Messages",
            "If the body is a JSON-RPC request, the server MUST return either Content-Type: application/json (a "
            "single JSON object) or Content-Type: text/event-stream (an SSE response stream).",
        ),
    ),
    revisions=("2025-03-26", "9999-12-31"),
    transports=HTTP,
    tags=("http",),
)
async def request_content_type(ctx: Context) -> None:
    async with ctx.session() as wire:
        methods = [probe_message(ctx)["method"]] + [m for c, m in (("tools", "tools/list"),) if ctx.has(c)]
        # the session's initialize is a request too
        judged = [(m["method"], m.get("id")) for m in wire.sent_messages() if isinstance(m, dict) and "id" in m]
        for method in methods:
            answer = await wire.request(method, ctx.params(), timeout=ctx.timeout)
            judged.append((method, answer.get("id")))
        for method, rid in judged:
            reply = wire.reply_for(rid)
            if reply is None or reply.status is None:
                ctx.cannot_judge(f"{method}: no HTTP answer")
            if reply.content_type not in ("application/json", "text/event-stream"):
                ctx.fail(f"{method} answered with Content-Type {reply.headers.get('content-type')!r}")
            if reply.content_type == "application/json":
                body = reply.json()
                if not isinstance(body, dict) and not (ctx.revision == "2025-03-26" and isinstance(body, list)):
                    ctx.fail(f"{method}: the JSON body is not one JSON-RPC object: {reply.body[:200]!r}")


@check(
    id="SV-21b",
    title="2026-07-28 response streams carry only notifications of their request, then its response",
    level="MUST",
    spec=T26 + " §Receiving Messages",
    quote="These notifications MUST relate to the originating client request. The server MUST NOT send "
    "independent JSON-RPC requests on this stream.",
    eras=MODERN,
    transports=HTTP,
    tags=("http", "modern"),
)
async def modern_stream_related(ctx: Context) -> None:
    async with ctx.raw() as wire:
        methods = ["server/discover"] + [
            m for c, m in (("tools", "tools/list"), ("prompts", "prompts/list")) if ctx.has(c)
        ]
        for n, method in enumerate(methods):
            await wire.request(
                method, ctx.params({"_meta": {"progressToken": f"mcpwire-check-{n}"}}), timeout=ctx.timeout
            )
        await _listen_briefly(ctx, wire)
        streams = [r for r in wire.replies if r.is_sse]
        if not streams:
            ctx.not_observed("every answer was application/json (no response stream to judge)")
        for reply in streams:
            sent = json_or_none(reply.request_body)
            token = (
                ((sent.get("params") or {}).get("_meta") or {}).get("progressToken") if isinstance(sent, dict) else None
            )
            listen = isinstance(sent, dict) and sent.get("method") == "subscriptions/listen"
            for message in reply.messages:
                if not isinstance(message, dict):
                    continue
                if "method" in message and "id" in message:
                    ctx.fail(f"{reply.label}: a request on a response stream: {message!r:.200}")
                note = message.get("method")
                if listen and note in _LISTEN_NOTIFICATIONS:
                    continue
                if note == "notifications/progress":
                    if (message.get("params") or {}).get("progressToken") != token:
                        ctx.fail(f"{reply.label}: progress for another token: {message!r:.200}")
                elif note == "notifications/message":
                    continue  # whether it was asked for is SV-36's question
                elif note is not None:
                    ctx.fail(f"{reply.label}: {note} is not about the request {sent.get('method')!r}")
                elif message.get("id") != sent.get("id"):
                    ctx.fail(f"{reply.label}: a response to another request: {message!r:.200}")


_LISTEN_NOTIFICATIONS = frozenset(
    {
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)


async def _listen_briefly(ctx: Context, wire: HttpWire) -> HttpReply | None:
    """Open ``subscriptions/listen`` for every list change the server advertises; read its first
    message (the acknowledgement), then close the stream (2026-07-28: that ends it)."""
    kinds = ("tools", "prompts", "resources")
    flags = {f"{k}ListChanged": True for k in kinds if (ctx.capabilities.get(k) or {}).get("listChanged")}
    if not flags:
        return None
    message = {
        "jsonrpc": "2.0",
        "id": "mcpwire-check-listen",
        "method": "subscriptions/listen",
        "params": ctx.params({"notifications": flags}),
    }
    # until the first message (the acknowledgement), within the answer timeout (a busy server may
    # take more than a moment to open the stream)
    return await wire.post(message, timeout=ctx.timeout, stop=lambda r: bool(r.messages))


@check(
    id="SV-23",
    title="after initialization an unsupported MCP-Protocol-Version header gets 400 Bad Request",
    level="MUST",
    **legacy_http(
        "2025-06-18",
        "Protocol Version Header",
        "If the server receives a request with an invalid or unsupported MCP-Protocol-Version, it MUST respond with "
        "400 Bad Request.",
    ),
    eras=LEGACY,
    revisions=("2025-06-18", "2025-11-25"),
    transports=HTTP,
    tags=("http", "versions"),
)
async def protocol_version_header(ctx: Context) -> None:
    async with ctx.session() as wire:
        reply = await wire.post(probe_message(ctx), headers={"MCP-Protocol-Version": "1999-01-01"}, timeout=ctx.timeout)
        if reply.status != 400:
            ctx.fail(f"ping with MCP-Protocol-Version 1999-01-01 was answered {summary(reply)}, not 400")


@check(
    id="SV-24",
    title="a session id uses only visible ASCII (0x21..0x7E)",
    level="MUST",
    **legacy_http(
        "2025-03-26",
        "Session Management",
        "The session ID MUST only contain visible ASCII characters (ranging from 0x21 to 0x7E).",
    ),
    eras=LEGACY,
    revisions=("2025-03-26", "2025-11-25"),
    transports=HTTP,
    tags=("http", "session"),
)
async def session_id_ascii(ctx: Context) -> None:
    async with ctx.session() as wire:
        assert isinstance(wire, HttpWire)
        if wire.session_id is None:
            ctx.skip("the server assigns no session id (sessions are optional)")
        if not VISIBLE_ASCII.match(wire.session_id):
            ctx.fail(f"session id {wire.session_id!r} has characters outside 0x21..0x7E")


@check(
    id="SV-24b",
    title="a server that requires the session header refuses a request without it with 400 Bad Request",
    level="SHOULD",
    **legacy_http(
        "2025-03-26",
        "Session Management",
        "Servers that require a session ID SHOULD respond to requests without an MCP-Session-Id header (other than "
        "initialization) with HTTP 400 Bad Request.",
    ),
    eras=LEGACY,
    revisions=("2025-03-26", "2025-11-25"),
    transports=HTTP,
    tags=("http", "session"),
)
async def session_required(ctx: Context) -> None:
    # Only a server that shows it requires the id is judged: issuing one does not mean requiring
    # it, and a server that serves the request without it evidently does not.
    async with ctx.session() as wire:
        assert isinstance(wire, HttpWire)
        if wire.session_id is None:
            ctx.skip("the server assigns no session id, so it does not require one")
        reply = await wire.post(probe_message(ctx), headers={"Mcp-Session-Id": None}, timeout=ctx.timeout)
        if reply.status is None:
            ctx.not_observed(f"a ping without Mcp-Session-Id got no HTTP answer ({reply.error or 'in time'})")
        if 200 <= reply.status < 300:
            ctx.skip(f"a ping without Mcp-Session-Id was served (HTTP {reply.status}): the server does not require one")
        if reply.status != 400:
            ctx.fail(f"a ping without Mcp-Session-Id was refused with {summary(reply)}, not 400 Bad Request")


@check(
    id="SV-24c",
    title="DELETE ends the session (2xx, or 405 if not supported); its id then gets 404 Not Found",
    level="MUST",
    **legacy_http(
        "2025-03-26",
        "Session Management",
        "The server MAY terminate the session at any time, after which it MUST respond to requests containing that "
        "session ID with HTTP 404 Not Found. ... The server MAY respond to this request with HTTP 405 Method Not "
        "Allowed, indicating that the server does not allow clients to terminate sessions.",
    ),
    eras=LEGACY,
    revisions=("2025-03-26", "2025-11-25"),
    transports=HTTP,
    tags=("http", "session"),
)
async def session_delete(ctx: Context) -> None:
    async with ctx.session() as wire:
        assert isinstance(wire, HttpWire)
        if wire.session_id is None:
            ctx.skip("the server assigns no session id")
        deleted = await wire.delete()
        if deleted.status == 405:
            wire.session_id = None  # nothing to end
            ctx.skip("the server does not let clients end sessions (405)")
        if deleted.status is None or not 200 <= deleted.status < 300:
            # the spec names 405 for "not supported" and pins no success status: anything else is
            # a deviation to look at, not a proven violation
            ctx.warn(f"DELETE of the session was answered {summary(deleted)}, neither 2xx nor 405")
        after = await wire.post(probe_message(ctx, "mcpwire-check-after-delete"), timeout=ctx.timeout)
        wire.session_id = None
        if after.status != 404:
            ctx.fail(f"a request with the deleted session id was answered {summary(after)}, not 404")


#: how long a GET stream is read when its messages are judged (SV-25, SV-26)
_GET_WINDOW_S = 1.0


@check(
    id="SV-25",
    title="GET with Accept: text/event-stream opens an SSE stream or gets 405; it carries no responses",
    level="MUST",
    **legacy_http(
        "2025-03-26",
        "Listening for Messages from the Server",
        "The server MUST either return Content-Type: text/event-stream in response to this HTTP GET, or else "
        "return HTTP 405 Method Not Allowed ... The server MUST NOT send a JSON-RPC response on the stream unless "
        "resuming a stream associated with a previous client request.",
    ),
    eras=LEGACY,
    revisions=("2025-03-26", "2025-11-25"),
    transports=HTTP,
    tags=("http", "sse"),
)
async def get_stream(ctx: Context) -> None:
    async with ctx.session() as wire:
        assert isinstance(wire, HttpWire)
        # an open stream is read for a moment (what it carries is judged); the moment is long
        # enough for the headers of a busy server to arrive (at 0.3 s a loaded machine saw none)
        waited = _GET_WINDOW_S
        reply = await wire.get(timeout=waited)
        if reply.status is None and reply.error is None:
            # no status line within the short read (a busy server): the rule is about the answer, so
            # wait for one as long as for any answer
            waited = ctx.timeout
            reply = await wire.get(timeout=waited)
        if reply.status == 405:
            return
        if reply.status is None:
            ctx.not_observed(f"GET got no HTTP answer within {waited:g} s ({reply.error or 'no headers'})")
        if reply.status != 200 or not reply.is_sse:
            ctx.fail(f"GET was answered {summary(reply)} (Content-Type {reply.content_type!r}), not SSE or 405")
        responses = [m for m in reply.messages if isinstance(m, dict) and "method" not in m]
        if responses:
            ctx.fail(f"a JSON-RPC response on the GET stream: {responses[0]!r:.200}")


def _sse_posts(wire: HttpWire) -> list[HttpReply]:
    return [r for r in wire.replies if r.method == "POST" and r.is_sse]


async def _sse_workload(ctx: Context, wire: HttpWire) -> None:
    for method in ["ping"] + [m for c, m in (("tools", "tools/list"), ("prompts", "prompts/list")) if ctx.has(c)]:
        await wire.request(method, ctx.params(), timeout=ctx.timeout)


@check(
    id="SV-26",
    title="SSE event ids are unique across a session's streams; Last-Event-ID replays only that stream",
    level="MUST",
    **legacy_http(
        "2025-03-26",
        "Resumability and Redelivery",
        "If present, the ID MUST be globally unique across all streams within that session ... The server MUST NOT "
        "replay messages that would have been delivered on a different stream.",
    ),
    eras=LEGACY,
    revisions=("2025-03-26", "2025-11-25"),
    transports=HTTP,
    tags=("http", "sse"),
)
async def sse_resumption(ctx: Context) -> None:
    async with ctx.session() as wire:
        assert isinstance(wire, HttpWire)
        await _sse_workload(ctx, wire)
        streams = [r for r in _sse_posts(wire) if any(e.id for e in r.events)]
        if not streams:
            ctx.not_observed("no POST answer was an SSE stream with event ids (the server does not offer resumption)")
        seen: dict[str, str] = {}
        for reply in streams:
            for event in reply.events:
                if event.id is None:
                    continue
                if event.id in seen and seen[event.id] != reply.label:
                    ctx.fail(f"event id {event.id!r} appears on {seen[event.id]} and {reply.label}")
                seen[event.id] = reply.label
        first = streams[0]
        first_id = next(e.id for e in first.events if e.id)
        own = {m.get("id") for m in first.messages if isinstance(m, dict) and "method" not in m}
        others = {
            m.get("id") for r in streams[1:] for m in r.messages if isinstance(m, dict) and "method" not in m
        } - own
        resumed = await wire.get(headers={"Last-Event-ID": first_id}, timeout=_GET_WINDOW_S)
        if resumed.status is not None and resumed.status >= 400:
            return  # not resumable after completion: nothing was replayed
        for message in resumed.messages:
            if isinstance(message, dict) and "method" not in message and message.get("id") in others:
                ctx.fail(
                    f"resuming {first.label} (Last-Event-ID {first_id}) replayed another stream's {message!r:.200}"
                )


def _closed_early(reply: HttpReply) -> bool:
    """A POST's SSE stream that ended (the server closed it) before the response to its request."""
    if reply.method != "POST" or reply.status != 200 or not reply.is_sse or not (reply.complete or reply.error):
        return False
    sent = json_or_none(reply.request_body)
    if not isinstance(sent, dict) or "id" not in sent:
        return False
    rid = sent["id"]
    return not any(
        isinstance(m, dict) and "method" not in m and m.get("id") == rid and type(m.get("id")) is type(rid)
        for m in reply.messages
    )


@check(
    id="SV-26b",
    title="2025-11-25 SSE streams with event ids start with a priming event (id, empty data); a stream closed "
    "before its response sent a retry field first",
    level="SHOULD",
    spec="2025-11-25/" + T25 + " §Sending Messages to the Server",
    quote="The server SHOULD immediately send an SSE event consisting of an event ID and an empty data field in "
    "order to prime the client to reconnect (using that event ID as Last-Event-ID). ... If the server does close "
    "the connection prior to terminating the SSE stream, it SHOULD send an SSE event with a standard retry field "
    "before closing the connection.",
    quotes=(
        (
            "2026-07-28",
            "2025-11-25/" + T25 + " §Sending Messages to the Server",
            "The server SHOULD immediately send an SSE event consisting of an event ID and an empty data field in "
            "order to prime the client to reconnect (using that event ID as Last-Event-ID). ... If the server does "
            "close the connection prior to terminating the SSE stream, it SHOULD send an SSE event with a standard "
            "retry field before closing the connection.",
        ),
    ),
    eras=LEGACY,
    revisions=("2025-11-25", "2025-11-25"),
    transports=HTTP,
    tags=("http", "sse"),
)
async def sse_priming(ctx: Context) -> None:
    async with ctx.session() as wire:
        assert isinstance(wire, HttpWire)
        await _sse_workload(ctx, wire)
        if ctx.has("tools") and (ctx.tools.mode != "none" or ctx.tools.allow):
            # a tool that takes a while is where a server closes the connection before the response
            # ("the server MAY close the connection ... at any time"); the wire then resumes it

            tools = [t for t in await ctx.list_all(wire, "tools/list", "tools") if ctx.tools.refuses(t) is None]
            await call_each(ctx, wire, tools)
        streams = [r for r in _sse_posts(wire) if any(e.id for e in r.events)]
        if not streams:
            ctx.not_observed("no POST answer was an SSE stream with event ids")
        for reply in streams:
            first = reply.events[0]
            if first.id is None or first.data.strip():
                ctx.fail(f"{reply.label}: the first event is not a priming event (id + empty data): {first!r:.200}")
        for reply in _sse_posts(wire):
            if _closed_early(reply) and not any(e.retry is not None for e in reply.events):
                ctx.fail(
                    f"{reply.label}: the server closed the stream before the response without sending a retry field "
                    "(the client resumed it without knowing how long to wait)"
                )


@check(
    id="SV-27",
    title="2026-07-28 standard headers are validated: missing or mismatched ones get 400 + -32020",
    level="MUST",
    spec=T26 + " §Server Validation",
    quote="Servers that process the request body MUST reject requests where the values specified in the headers "
    "do not match the corresponding values in the request body. ... When rejecting a request due to header "
    "validation failure, servers MUST return HTTP status 400 Bad Request and MUST include a JSON-RPC error response "
    "using the following error code: ... -32020",
    eras=MODERN,
    transports=HTTP,
    tags=("http", "modern", "headers"),
)
async def header_validation(ctx: Context) -> None:
    async with ctx.raw() as wire:
        assert isinstance(wire, HttpWire)
        discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": ctx.params()}
        # tools/call of a tool that does not exist: a server that skips validation answers
        # "unknown tool", one that validates refuses before dispatching; nothing runs either way
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": ctx.params({"name": "mcpwire_check_no_such_tool", "arguments": {}}),
        }
        cases: list[tuple[str, dict[str, Any], dict[str, str | None]]] = [
            ("no Mcp-Method", discover, {"Mcp-Method": None}),
            ("Mcp-Method naming another method", discover, {"Mcp-Method": "tools/list"}),
            ("Mcp-Method in other letter case", discover, {"Mcp-Method": "SERVER/DISCOVER"}),
            ("MCP-Protocol-Version not matching _meta", discover, {"MCP-Protocol-Version": "2099-01-01"}),
            ("tools/call without Mcp-Name", call, {"Mcp-Name": None}),
            ("tools/call with another Mcp-Name", call, {"Mcp-Name": "another_tool"}),
        ]
        if not any(r < "2025-06-18" for r in ctx.supported):
            # streamable-http §Protocol Version Header: "A server that supports clients implementing
            # protocol versions earlier than 2025-06-18 ... MAY treat a request that omits the header
            # as protocol version 2025-03-26. A server that does not support such clients MUST
            # reject a request without the header per Server Validation."
            cases.append(("no MCP-Protocol-Version", discover, {"MCP-Protocol-Version": None}))
        for what, message, headers in cases:
            reply = await wire.post(message, headers=headers, timeout=ctx.timeout)
            if reply.status != 400 or error_code(reply) != -32020:
                ctx.fail(f"{what}: answered {summary(reply)}, not HTTP 400 with error -32020")


@check(
    id="SV-27b",
    title="a base64-sentinel Mcp-Name is decoded, and header names match case-insensitively",
    level="MUST",
    spec=T26 + " §Value Encoding",
    quote="servers MUST decode an encoded Mcp-Name or Mcp-Param-{Name} value before comparing it to the "
    "corresponding request body value during Server Validation. ... Clients and servers MUST use "
    "case-insensitive comparisons for header names.",
    eras=MODERN,
    transports=HTTP,
    tags=("http", "modern", "headers"),
)
async def header_encoding(ctx: Context) -> None:
    import base64

    async with ctx.raw() as wire:
        assert isinstance(wire, HttpWire)
        name = "mcpwire_check_no_such_prompt"
        message = {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": ctx.params({"name": name})}
        sentinel = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
        reply = await wire.post(message, headers={"Mcp-Name": sentinel}, timeout=ctx.timeout)
        if error_code(reply) == -32020:
            ctx.fail(f"Mcp-Name {sentinel} (base64 of the body's name) was refused as a mismatch: {summary(reply)}")
        lower = {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": ctx.params()}
        reply = await wire.post(
            lower, headers={"Mcp-Method": None, "mcp-method": "server/discover"}, timeout=ctx.timeout
        )
        if error_code(reply) == INTERNAL_ERROR:
            # the header passed (the request was processed), and then the server failed on its
            # own: no evidence about the header either way
            ctx.cannot_judge(f"server/discover with a lower-case mcp-method header failed inside: {summary(reply)}")
        if not has_result(reply):
            ctx.fail(f"a lower-case mcp-method header was not accepted: {summary(reply)}")


@check(
    id="SV-27c",
    title="Mcp-Param-* headers of x-mcp-header arguments are required and must match the body",
    level="MUST",
    spec=T26 + " §Server Behavior for Custom Headers",
    quote="Any server that processes the message body MUST validate that encoded header values, after decoding if "
    "Base64-encoded, match the corresponding values in the request body. Servers MUST reject requests with a 400 "
    "Bad Request HTTP status and JSON-RPC error code -32020 (HeaderMismatch) if any validation fails.",
    eras=MODERN,
    transports=HTTP,
    needs=("tools",),
    tags=("http", "modern", "headers", "tool-calls"),
)
async def param_headers(ctx: Context) -> None:
    ctx.require_tool_calls()
    async with ctx.raw() as wire:
        assert isinstance(wire, HttpWire)
        tools = await ctx.list_all(wire, "tools/list", "tools")
        annotated = [t for t in tools if str(t.get("name")) in wire.param_headers]
        if not annotated:
            ctx.skip("no tool has an x-mcp-header argument")
        # a server that does not validate runs the tool: only tools the policy allows
        allowed = [t for t in annotated if ctx.tools.refuses(t) is None]
        if not allowed:
            off = SkipKind.TOOLS_OFF if ctx.tools.mode == "none" else None  # else the refusal says why
            ctx.skip(ctx.tools.refuses(annotated[0]) or "no tool may be called", kind=off)
        from ..context import example_arguments

        tool = allowed[0]
        name = str(tool["name"])
        prop, header = next(iter(wire.param_headers[name].items()))
        arguments = example_arguments(tool.get("inputSchema"))
        arguments.setdefault(prop, "mcpwire-check")
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": ctx.params({"name": name, "arguments": arguments}),
        }
        missing = await wire.post(message, headers={f"Mcp-Param-{header}": None}, timeout=ctx.timeout)
        if missing.status != 400 or error_code(missing) != -32020:
            ctx.fail(f"tools/call {name!r} without Mcp-Param-{header}: {summary(missing)}, not 400 with -32020")
        wrong = await wire.post(message, headers={f"Mcp-Param-{header}": "mcpwire-check-other"}, timeout=ctx.timeout)
        if wrong.status != 400 or error_code(wrong) != -32020:
            ctx.fail(f"tools/call {name!r} with a mismatched Mcp-Param-{header}: {summary(wrong)}, not 400 with -32020")


@check(
    id="SV-28",
    title="2026-07-28 SSE responses carry X-Accel-Buffering: no",
    level="SHOULD",
    spec=T26 + " §Receiving Messages",
    quote="When initiating an SSE stream, servers SHOULD include the X-Accel-Buffering: no header in the HTTP "
    "response.",
    eras=MODERN,
    transports=HTTP,
    tags=("http", "modern", "sse"),
)
async def accel_buffering(ctx: Context) -> None:
    async with ctx.raw() as wire:
        assert isinstance(wire, HttpWire)
        await wire.request("server/discover", ctx.params(), timeout=ctx.timeout)
        await _listen_briefly(ctx, wire)
        streams = [r for r in wire.replies if r.is_sse]
        if not streams:
            ctx.not_observed("no answer was an SSE stream")
        for reply in streams:
            if reply.headers.get("x-accel-buffering", "").lower() != "no":
                ctx.fail(f"{reply.label}: an SSE response without X-Accel-Buffering: no")


@check(
    id="SV-19",
    title="a 2026-07-28-only server answers GET/DELETE with 405 and names its versions when refusing initialize",
    level="SHOULD",
    spec=T26 + " §Earlier Streamable HTTP Revisions",
    quote="A server that supports only this revision and receives such traffic from an older client SHOULD respond "
    "as follows: HTTP GET or DELETE to the MCP endpoint: respond with 405 Method Not Allowed.",
    eras=MODERN,
    transports=HTTP,
    tags=("http", "modern", "versions"),
)
async def modern_only(ctx: Context) -> None:
    if any(not r.startswith("2026") for r in ctx.supported):
        ctx.skip("the server also accepts legacy revisions (dual-era)")
    async with ctx.raw() as wire:
        assert isinstance(wire, HttpWire)
        headers = {"MCP-Protocol-Version": ctx.revision}
        got = await wire.get(headers=headers, timeout=0.5)
        if got.status != 405:
            ctx.fail(f"GET was answered {summary(got)}, not 405")
        deleted = await wire.delete(headers=headers)
        if deleted.status != 405:
            ctx.fail(f"DELETE was answered {summary(deleted)}, not 405")
        init = await wire.post(init_message(ctx), headers={"MCP-Protocol-Version": None, "Mcp-Method": None})
        text = repr(init.messages) + init.body.decode("utf-8", "replace")
        if ctx.revision not in text:
            ctx.fail(f"initialize was refused without naming the supported versions: {summary(init)}")


@check(
    id="HS-01",
    title="HTTP+SSE: the stream opens with an endpoint event; POSTed messages are answered on the stream",
    level="MUST",
    spec="2024-11-05/basic/transports.mdx §HTTP with SSE",
    quote="When a client connects, the server MUST send an endpoint event containing a URI for the client to use "
    "for sending messages. ... Server messages are sent as SSE message events, with the message content encoded "
    "as JSON in the event data.",
    eras=LEGACY,
    transports=("sse",),
    tags=("http", "sse"),
)
async def sse_transport(ctx: Context) -> None:
    async with ctx.session() as wire:
        assert isinstance(wire, HttpWire)
        stream = wire.replies[0]
        if not stream.events or stream.events[0].event != "endpoint":
            ctx.fail(f"the first event of the SSE stream is not 'endpoint': {stream.events[:1]!r}")
        endpoint = urllib.parse.urlsplit(wire.endpoint or "")
        origin = urllib.parse.urlsplit(ctx.target.url or "")
        if (endpoint.scheme, endpoint.netloc) != (origin.scheme, origin.netloc):
            ctx.warn(f"the endpoint {wire.endpoint} is on another origin than the stream {ctx.target.url}")
        answer = await wire.request("ping", {}, timeout=ctx.timeout)
        if answer.get("result") != {}:
            ctx.fail(f"ping over the stream was answered {answer!r:.200}")
        posts = [r for r in wire.replies if r.method == "POST"]
        bad = [r for r in posts if r.status is None or not 200 <= r.status < 300]
        if bad:
            ctx.fail(f"{bad[0].label}: a POSTed message was answered {summary(bad[0])}")
