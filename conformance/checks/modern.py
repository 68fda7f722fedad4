"""2026-07-28 (stateless era) checks (spec-checklist 12.2, SV-13..SV-18, SV-36, SV-37; caching).

The era has no handshake: a check's ``ctx.session()`` is a connected wire, every request carrying
its own ``_meta``; on stdio it may be a process that earlier checks of the revision left as new
(only read, every request answered, nothing unasked: see :mod:`conformance.pool`), which is what
the statelessness the era promises allows. Only the HTTP checks that need a client of their own
(headers, status codes of a first request) open ``ctx.raw()``.
"""

from __future__ import annotations

from typing import Any

import trio

from ..context import (
    CLIENT_INFO,
    META_CAPS,
    META_SUBSCRIPTION,
    META_VERSION,
    Context,
    list_if_served,
)
from ..harness import WireBase
from ..registry import check
from .toolcalls import call_each

MODERN = ("modern",)
#: every rule here is 2026-07-28 text: the results of other revisions (skipped) cite its pages
M = "2026-07-28/"


async def _workload(ctx: Context, wire: WireBase) -> None:
    await ctx.call(wire, "server/discover")
    for capability, method in (("tools", "tools/list"), ("resources", "resources/list"), ("prompts", "prompts/list")):
        if ctx.has(capability):
            await ctx.call(wire, method)


@check(
    id="SV-13",
    title="server/discover is implemented and complete",
    level="MUST",
    spec=M + "server/discover.mdx",
    quote="Servers MUST implement it.",
    eras=MODERN,
    tags=("modern", "lifecycle"),
)
async def discover(ctx: Context) -> None:
    async with ctx.session() as wire:
        result = await ctx.result(wire, "server/discover")
        if result.get("resultType") != "complete":
            ctx.fail(f"resultType is {result.get('resultType')!r}, not 'complete'")
        versions = result.get("supportedVersions")
        if not isinstance(versions, list) or not versions or not all(isinstance(v, str) for v in versions):
            ctx.fail(f"supportedVersions is not a non-empty array of strings: {versions!r:.200}")
        if not isinstance(result.get("capabilities"), dict):
            ctx.fail("no 'capabilities' object")
        ttl = result.get("ttlMs")
        if type(ttl) is not int or ttl < 0:
            ctx.fail(f"ttlMs is {ttl!r}, not an integer >= 0")
        if not isinstance(result.get("cacheScope"), str):
            ctx.fail(f"cacheScope is {result.get('cacheScope')!r}, not a string")


@check(
    id="SV-14",
    title="an unsupported _meta protocol version gets -32022 with data.supported and data.requested",
    level="MUST",
    spec=M + "basic/versioning.mdx §Protocol Version Negotiation",
    quote="If the server does not implement the requested version (whether the version is unknown to the server, "
    "or is a known version the server has chosen not to support), it MUST respond with an "
    "UnsupportedProtocolVersionError listing the versions it does support",
    eras=MODERN,
    tags=("modern", "versions"),
)
async def unsupported_version(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await wire.request(
            "server/discover", {"_meta": {META_VERSION: "2099-01-01", META_CAPS: {}}}, timeout=ctx.timeout
        )
        error = answer.get("error")
        if not isinstance(error, dict) or error.get("code") != -32022:
            ctx.fail(f"an unsupported version was answered with {answer!r:.200}, not -32022")
        data = error.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("supported"), list):
            ctx.fail(f"-32022 without data.supported: {data!r:.200}")
        if data.get("requested") != "2099-01-01":
            ctx.fail(f"-32022 data.requested is {data.get('requested')!r}, not the requested version")


@check(
    id="SV-15",
    title="a request whose _meta lacks clientCapabilities or protocolVersion is rejected with -32602",
    level="MUST",
    spec=M + "basic/index.mdx §_meta",
    quote="A request missing any required field is malformed; the server MUST reject it with JSON-RPC error "
    "code -32602 (Invalid params).",
    eras=MODERN,
    tags=("modern",),
)
async def missing_meta_field(ctx: Context) -> None:
    async with ctx.session() as wire:
        cases: tuple[tuple[str, dict[str, Any]], ...] = (
            (META_CAPS, {META_VERSION: ctx.revision}),
            (META_VERSION, {META_CAPS: {}}),
        )
        for missing, meta in cases:
            answer = await wire.request("server/discover", {"_meta": meta}, timeout=ctx.timeout)
            error = answer.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            # HTTP: the MCP-Protocol-Version header still names the revision, so a server that
            # validates headers first may call the body's missing version a mismatch (-32020)
            allowed = (-32602, -32020) if missing == META_VERSION and ctx.transport == "http" else (-32602,)
            if code not in allowed:
                ctx.fail(f"a request whose _meta lacks {missing} was answered with {answer!r:.200}, not -32602")


@check(
    id="SV-16",
    title="every result carries resultType",
    level="MUST",
    spec=M + "basic/index.mdx §Result Responses",
    quote="The result MUST include a resultType field",
    eras=MODERN,
    tags=("modern",),
)
async def result_type(ctx: Context) -> None:
    async with ctx.session() as wire:
        await _workload(ctx, wire)
        for frame in wire.frames:
            result = frame.value.get("result") if frame.is_response else None
            # discover and the lists are not among the requests that may ask for input
            # (2026-07-28 mrtr: "Servers MUST NOT send InputRequiredResult responses on any other
            # client requests"), so each of these results is complete
            if isinstance(result, dict) and result.get("resultType") != "complete":
                ctx.fail(f"a result (id {frame.value.get('id')!r}) with resultType {result.get('resultType')!r}")


@check(
    id="SV-17",
    title="the server never initiates requests, even when the client declares capabilities",
    level="MUST",
    spec=M + "basic/patterns/index.mdx",
    quote="Servers MUST NOT initiate JSON-RPC requests",
    eras=MODERN,
    tags=("modern",),
)
async def no_server_requests(ctx: Context) -> None:
    caps: dict[str, object] = {"sampling": {}, "elicitation": {}, "roots": {}}
    async with ctx.session() as wire:
        await wire.request("server/discover", ctx.params(capabilities=caps), timeout=ctx.timeout)
        if ctx.has("tools"):
            await wire.request("tools/list", ctx.params(capabilities=caps), timeout=ctx.timeout)
            tools = await ctx.list_all(wire, "tools/list", "tools")
            if any(ctx.tools.refuses(t) is None for t in tools):
                await call_each(ctx, wire, [t for t in tools if ctx.tools.refuses(t) is None], capabilities=caps)
        await wire.drain(0.2)
        for frame in wire.frames:
            if frame.is_request:
                ctx.fail(f"the server sent a request: {frame.text[:200]}")


@check(
    id="SV-36",
    title="no notifications/message for requests without a logLevel",
    level="MUST",
    spec=M + "server/utilities/logging.mdx §Per-request log level",
    quote="The server MUST NOT emit notifications/message for a request that does not include this field.",
    eras=MODERN,
    tags=("modern", "logging"),
)
async def no_unrequested_logs(ctx: Context) -> None:
    async with ctx.session() as wire:
        await _workload(ctx, wire)
        await wire.drain(0.2)
        for frame in wire.frames:
            if frame.is_notification and frame.value.get("method") == "notifications/message":
                ctx.fail(f"notifications/message without a requested log level: {frame.text[:200]}")


@check(
    id="LG-02",
    title="an unknown per-request logLevel is rejected with -32602",
    level="SHOULD",
    spec=M + "server/utilities/logging.mdx §Error Handling",
    quote="If the io.modelcontextprotocol/logLevel value carried in a request's _meta is not a recognized log "
    "level, the server SHOULD reject that request with a standard JSON-RPC error: Invalid log level: -32602 "
    "(Invalid params)",
    eras=MODERN,
    needs=("logging",),
    tags=("modern", "logging"),
)
async def bad_log_level(ctx: Context) -> None:
    async with ctx.session() as wire:
        params = ctx.params({"_meta": {"io.modelcontextprotocol/logLevel": "mcpwire-check-level"}})
        answer = await wire.request("server/discover", params, timeout=ctx.timeout)
        error = answer.get("error")
        if not isinstance(error, dict) or error.get("code") != -32602:
            ctx.fail(f"an unknown log level was answered with {answer!r:.200}")


def _http_status(wire: Any, rid: Any) -> int | None:
    """The HTTP status that carried the answer to ``rid`` (None on stdio)."""
    reply_for = getattr(wire, "reply_for", None)
    reply = reply_for(rid) if reply_for is not None else None
    return reply.status if reply is not None else None


@check(
    id="SV-14b",
    title="2026-07-28 HTTP: UnsupportedProtocolVersionError and malformed _meta are answered with 400",
    level="MUST",
    spec=M + "basic/transports/streamable-http.mdx §Protocol Version Header",
    quote="If the server does not implement the requested protocol version ... it MUST respond with 400 Bad "
    "Request and an UnsupportedProtocolVersionError listing its supported versions.",
    eras=MODERN,
    transports=("http",),
    tags=("modern", "http", "versions"),
)
async def modern_error_statuses(ctx: Context) -> None:
    async with ctx.raw() as wire:
        cases = [
            ("an unsupported version", {"_meta": {META_VERSION: "2099-01-01", META_CAPS: {}}}, -32022),
            ("_meta without clientCapabilities", {"_meta": {META_VERSION: ctx.revision}}, -32602),
        ]
        for n, (what, params, code) in enumerate(cases):
            rid = f"mcpwire-check-status-{n}"
            answer = await wire.request("server/discover", params, request_id=rid, timeout=ctx.timeout)
            if (answer.get("error") or {}).get("code") != code:
                ctx.skip(f"{what} was not answered with {code} (SV-14/SV-15 judge that)")
            status = _http_status(wire, rid)
            if status != 400:
                ctx.fail(f"{what}: error {code} carried by HTTP {status}, not 400 Bad Request")


@check(
    id="SV-05c",
    title="2026-07-28 HTTP: an unknown method is 404 Not Found with error -32601",
    level="MUST",
    spec=M + "basic/transports/streamable-http.mdx §Protocol Version Header",
    quote="If the server does not implement the requested RPC method, it MUST respond with 404 Not Found and a "
    "JSON-RPC error with code -32601 (Method not found).",
    eras=MODERN,
    transports=("http",),
    tags=("modern", "http", "jsonrpc"),
)
async def unknown_method_404(ctx: Context) -> None:
    async with ctx.raw() as wire:
        for n, method in enumerate(("mcpwire/no_such_method", "ping", "initialize")):
            rid = f"mcpwire-check-404-{n}"
            answer = await wire.request(method, ctx.params(), request_id=rid, timeout=ctx.timeout)
            code = (answer.get("error") or {}).get("code")
            status = _http_status(wire, rid)
            if code != -32601 or status != 404:
                ctx.fail(f"{method} (not a 2026-07-28 method) was answered HTTP {status} with {answer!r:.200}")


@check(
    id="SV-15b",
    title="no state carries over: after a full request, a request without _meta is still rejected (-32602)",
    level="MUST",
    spec=M + "basic/index.mdx §Statelessness",
    quote="Servers MUST NOT rely on prior requests over the same connection to establish context (e.g., "
    "capabilities, protocol version, client identity).",
    eras=MODERN,
    tags=("modern",),
)
async def stateless(ctx: Context) -> None:
    async with ctx.session() as wire:
        await ctx.result(wire, "server/discover")
        send = getattr(wire, "send_with", None)
        rid = "mcpwire-check-no-meta"
        message = {"jsonrpc": "2.0", "id": rid, "method": "server/discover", "params": {}}
        if send is not None:
            # the headers still name the revision: only the body lacks its _meta
            await send(message, {"MCP-Protocol-Version": ctx.revision})
        else:
            await wire.send(message)
        answer = await wire.wait_response(rid, timeout=ctx.timeout, what="server/discover")
        if (answer.get("error") or {}).get("code") != -32602:
            ctx.fail(f"a request without _meta after a complete one was answered {answer!r:.200}, not -32602")


_LIST_FLAGS = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}


async def _listen(ctx: Context, wire: Any, rid: Any, flags: dict[str, Any]) -> list[Any]:
    """Open a subscription and collect what arrives for it within a short window, then end it."""
    message = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "subscriptions/listen",
        "params": ctx.params({"notifications": flags}),
    }
    if getattr(wire, "transport", "stdio") == "http":
        # read until the first message of this subscription (what SV-37 judges), within the
        # answer timeout: a busy server may take more than a moment to open the stream
        reply = await wire.post(
            message,
            timeout=wire.answer_window(ctx.timeout),
            stop=lambda r: any(_of_subscription(m, rid) for m in r.messages),
        )
        return list(reply.messages)
    await wire.send(message)
    first = await wire.recv(wire.answer_window(ctx.timeout))  # a fresh server: its start-up too
    frames = ([first] if first is not None else []) + await wire.drain(0.3)
    # stdio: notifications/cancelled ends a subscription (2026-07-28 subscriptions §Cancellation)
    await wire.notify("notifications/cancelled", ctx.params({"requestId": rid, "reason": "check done"}))
    return [f.value for f in frames if f.is_json]


def _of_subscription(message: Any, rid: Any) -> bool:
    if not isinstance(message, dict):
        return False
    if "method" not in message:
        return message.get("id") == rid and type(message.get("id")) is type(rid)
    meta = (message.get("params") or {}).get("_meta") or {}
    sid = meta.get(META_SUBSCRIPTION)
    return sid == rid and type(sid) is type(rid)


@check(
    id="SV-37",
    title="subscriptions/listen: the first message is the acknowledgement, tagged with the listen id",
    level="MUST",
    spec=M + "basic/patterns/subscriptions.mdx §Acknowledgment",
    quote="The server MUST send notifications/subscriptions/acknowledged as the first message carrying the "
    "subscription's ID",
    eras=MODERN,
    tags=("modern", "subscriptions"),
)
async def subscription_ack(ctx: Context) -> None:
    flags = {flag: True for kind, flag in _LIST_FLAGS.items() if (ctx.capabilities.get(kind) or {}).get("listChanged")}
    if not flags:
        ctx.skip("the server advertises no listChanged capability to subscribe to")
    async with ctx.session() as wire:
        for rid in (7001, "mcpwire-check-listen"):
            messages = [m for m in await _listen(ctx, wire, rid, flags) if _of_subscription(m, rid)]
            if not messages:
                # nothing at all within the window: a busy server, or a missing acknowledgement;
                # only a stream that carries something else first proves the rule broken
                ctx.cannot_judge(f"nothing arrived for subscriptions/listen (id {rid!r}) within the window")
            first = messages[0]
            if first.get("method") != "notifications/subscriptions/acknowledged":
                ctx.fail(f"the first message for subscription {rid!r} is not the acknowledgement: {first!r:.200}")
            granted = (first.get("params") or {}).get("notifications")
            if not isinstance(granted, dict):
                ctx.fail(f"the acknowledgement has no notifications filter: {first!r:.200}")
            extra = [k for k, v in granted.items() if v and k not in flags]
            if extra:
                ctx.fail(f"the acknowledgement grants {', '.join(extra)}, which were not requested")


@check(
    id="SV-37b",
    title="subscription notifications carry the subscription id; only requested types arrive",
    level="MUST",
    spec=M + "basic/patterns/subscriptions.mdx",
    quote="The server MUST NOT send notification types the client has not explicitly requested.",
    eras=MODERN,
    needs=("tools",),
    tags=("modern", "subscriptions", "tool-calls"),
)
async def subscription_filter(ctx: Context) -> None:
    ctx.require_tool_calls()
    if not (ctx.capabilities.get("prompts") or {}).get("listChanged"):
        ctx.skip("the server advertises no prompts.listChanged to open a narrow subscription with")
    async with ctx.session() as wire:
        tools = await ctx.callable_tools(wire)
        rid = "mcpwire-check-narrow"
        flags = {"promptsListChanged": True}
        message = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "subscriptions/listen",
            "params": ctx.params({"notifications": flags}),
        }
        http = getattr(wire, "transport", "stdio") == "http"
        async with trio.open_nursery() as nursery:
            if http:
                nursery.start_soon(lambda: wire.post(message, timeout=ctx.timeout))
                await trio.sleep(0.3)
            else:
                await wire.send(message)

            await call_each(ctx, wire, tools, limit=len(tools))
            await trio.sleep(0.3)
            nursery.cancel_scope.cancel()  # HTTP: closing the stream ends the subscription
        if http:
            listens = [r for r in wire.replies if rid.encode() in r.request_body]
            seen: list[Any] = [m for r in listens for m in r.messages]
        else:
            seen = [f.value for f in wire.frames if f.is_notification]
            await wire.notify("notifications/cancelled", ctx.params({"requestId": rid, "reason": "check done"}))
        notes = [m for m in seen if isinstance(m, dict) and str(m.get("method", "")).startswith("notifications/")]
        if not any(
            m.get("method") == "notifications/subscriptions/acknowledged" for m in notes if _of_subscription(m, rid)
        ):
            ctx.fail("the narrow subscription was not acknowledged")
        for m in notes:
            method = m.get("method")
            if method in ("notifications/progress", "notifications/message"):
                continue  # request-scoped (stdio shares one channel)
            if method == "notifications/subscriptions/acknowledged" and not _of_subscription(m, rid):
                continue
            if not _of_subscription(m, rid):
                ctx.fail(f"{method} without this subscription's id in _meta: {m!r:.200}")
            if method not in ("notifications/subscriptions/acknowledged", "notifications/prompts/list_changed"):
                ctx.fail(f"{method} on a subscription that asked only for prompts list changes")


@check(
    id="CA-01",
    title="list and read results carry ttlMs (integer >= 0) and cacheScope; one scope across pages",
    level="MUST",
    spec=M + "server/utilities/caching.mdx §Cacheable Results",
    quote='Servers MUST include caching hints on results with resultType: "complete" returned by the following '
    "operations ... Servers MUST apply the same cacheScope to all response pages",
    eras=MODERN,
    tags=("modern", "caching"),
)
async def caching_hints(ctx: Context) -> None:
    async with ctx.session() as wire:
        results: list[tuple[str, dict[str, Any]]] = []  # server/discover: SV-13 judges it
        for capability, method, key in (
            ("tools", "tools/list", "tools"),
            ("prompts", "prompts/list", "prompts"),
            ("resources", "resources/list", "resources"),
            ("resources", "resources/templates/list", "resourceTemplates"),
        ):
            if not ctx.has(capability):
                continue
            pages: list[dict[str, Any]] = []
            # an error (e.g. -32601 for resources/templates/list) is no result to carry hints
            listed = await list_if_served(ctx, wire, method, key, pages=pages)
            if listed is None:
                continue
            items = listed
            scopes = {p.get("cacheScope") for p in pages}
            if len(scopes) > 1:
                ctx.fail(f"{method}: pages carry different cacheScope values {sorted(map(str, scopes))}")
            results.extend((method, p) for p in pages)
            if method == "resources/list" and items:
                read = await ctx.call(wire, "resources/read", {"uri": items[0].get("uri")})
                if isinstance(read.get("result"), dict) and read["result"].get("resultType", "complete") == "complete":
                    results.append(("resources/read", read["result"]))
        if not results:
            ctx.skip("no list result to judge (no listable feature advertised, or every list answered an error)")
        for method, result in results:
            ttl, scope = result.get("ttlMs"), result.get("cacheScope")
            if type(ttl) is not int or ttl < 0:
                ctx.fail(f"{method}: ttlMs is {ttl!r}, not an integer >= 0")
            if scope not in ("public", "private"):
                ctx.fail(f"{method}: cacheScope is {scope!r}, not 'public' or 'private'")


#: (capability, list method, result key, the field that names an item)
_FEATURES: tuple[tuple[str, str, str, str], ...] = (
    ("tools", "tools/list", "tools", "name"),
    ("prompts", "prompts/list", "prompts", "name"),
    ("resources", "resources/list", "resources", "uri"),
)


@check(
    id="ERA-01",
    title="a dual-era server offers in 2026-07-28 every tool, prompt and resource of its latest legacy revision",
    # No sentence requires parity; the text quoted says a server "MAY implement both behaviors",
    # and a client in auto mode talks 2026-07-28 and should not see less than a legacy client.
    # Labelled as the text is, MAY: a warning naming what is missing (FastMCP 4.1.2's proxy lists no
    # tools there), also with --strict.
    level="MAY",
    spec=M + "basic/versioning.mdx §Backward Compatibility with Initialization-Based Versions",
    quote="A server that wishes to support both legacy clients (which expect an initialize handshake) and modern "
    "clients (which use per-request metadata) MAY implement both behaviors. ... A dual-era server selects its "
    "behavior from how the client opens: A request carrying modern per-request _meta is served statelessly "
    "according to this revision. An initialize request selects legacy semantics",
    eras=MODERN,
    tags=("modern", "versions"),
)
async def era_parity(ctx: Context) -> None:
    legacy = sorted(r for r in ctx.supported if r < "2026-07-28")
    if not legacy:
        ctx.skip("the server accepts no legacy revision")
    latest = legacy[-1]
    # one era after the other: a proxy may serve one backend connection at a time (FastMCP 4.1.2
    # over HTTP refuses an initialize while a 2026-07-28 request holds its backend)
    async with ctx.session() as wire:
        new_caps = (await ctx.result(wire, "server/discover")).get("capabilities") or {}
        new = await _features(ctx, wire, new_caps)
    old_ctx = Context(ctx.target, latest, "legacy", ctx.capabilities, ctx.supported, timeout=ctx.timeout)
    old_ctx.wires, old_ctx.pace = ctx.wires, ctx.pace  # its exchanges are this check's evidence
    old_ctx.pool = ctx.pool  # a new process of the run's pool (a fork, for a Python server)
    async with old_ctx.raw() as wire:
        params = {"protocolVersion": latest, "capabilities": {}, "clientInfo": CLIENT_INFO}
        answer = await wire.request("initialize", params, timeout=ctx.timeout)
        result = answer.get("result")
        if not isinstance(result, dict):
            # accepted by the probe, refused now: no legacy lists to compare with
            ctx.not_observed(f"initialize {latest} was refused this time ({answer!r:.200}): nothing to compare")
        await wire.notify("notifications/initialized")
        old_caps = result.get("capabilities") or {}
        old = await _features(old_ctx, wire, old_caps)
    # What 2026-07-28 lacks is the finding (a client in auto mode loses it); what only 2026-07-28
    # offers is named with it but is no finding alone (a tool may rest on 2026-07-28 features).
    lost, added = [], []
    for capability in ("tools", "prompts", "resources", "completions"):
        if capability in old_caps and capability not in new_caps:
            lost.append(f"the {capability} capability")
        if capability in new_caps and capability not in old_caps:
            added.append(f"the {capability} capability")
    for capability, _, _, _ in _FEATURES:
        lost += _named(old.get(capability, set()) - new.get(capability, set()), capability)
        added += _named(new.get(capability, set()) - old.get(capability, set()), capability)
    if lost:
        message = f"2026-07-28 lacks what {latest} offers: {'; '.join(lost)}"
        if added:
            message += f" (only in 2026-07-28: {'; '.join(added)})"
        ctx.fail(message)


def _named(names: set[str], capability: str) -> list[str]:
    if not names:
        return []
    ordered = sorted(names)
    shown = ", ".join(repr(n[:60]) for n in ordered[:8]) + (" ..." if len(ordered) > 8 else "")
    return [f"{len(ordered)} {capability}: {shown}"]


async def _features(ctx: Context, wire: Any, capabilities: dict[str, Any]) -> dict[str, set[str]]:
    """The names (uris) of every declared feature's items; a list answered with an error is empty."""
    out: dict[str, set[str]] = {}
    for capability, method, key, field_ in _FEATURES:
        if capability in capabilities:
            items = await list_if_served(ctx, wire, method, key)
            out[capability] = {str(i.get(field_)) for i in items or ()}
    return out
