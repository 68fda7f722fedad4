"""2026-07-28 (stateless era) checks (spec-checklist 12.2, SV-13..SV-17, SV-36)."""

from __future__ import annotations

from conformance.context import META_CAPS, META_VERSION, Context
from conformance.harness import Wire
from conformance.registry import check

MODERN = ("modern",)


async def _workload(ctx: Context, wire: Wire) -> None:
    await ctx.call(wire, "server/discover")
    for capability, method in (("tools", "tools/list"), ("resources", "resources/list"), ("prompts", "prompts/list")):
        if ctx.has(capability):
            await ctx.call(wire, method)


@check(
    id="SV-13",
    title="server/discover is implemented and complete",
    level="MUST",
    spec="server/discover.mdx",
    quote="Servers MUST implement it.",
    eras=MODERN,
    tags=("modern", "lifecycle"),
)
async def discover(ctx: Context) -> None:
    async with ctx.raw() as wire:
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
    spec="basic/versioning.mdx",
    quote="it MUST respond with an UnsupportedProtocolVersionError listing the versions it does support",
    eras=MODERN,
    tags=("modern", "versions"),
)
async def unsupported_version(ctx: Context) -> None:
    async with ctx.raw() as wire:
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
    title="a request whose _meta lacks clientCapabilities is rejected with -32602",
    level="MUST",
    spec="basic/index.mdx §_meta",
    quote="A request missing any required field is malformed; the server MUST reject it with JSON-RPC error "
    "code -32602 (Invalid params).",
    eras=MODERN,
    tags=("modern",),
)
async def missing_meta_field(ctx: Context) -> None:
    async with ctx.raw() as wire:
        answer = await wire.request("server/discover", {"_meta": {META_VERSION: ctx.revision}}, timeout=ctx.timeout)
        error = answer.get("error")
        if not isinstance(error, dict) or error.get("code") != -32602:
            ctx.fail(f"a request without {META_CAPS} was answered with {answer!r:.200}, not -32602")


@check(
    id="SV-16",
    title="every result carries resultType",
    level="MUST",
    spec="basic/index.mdx §Result Responses",
    quote="The result MUST include a resultType field",
    eras=MODERN,
    tags=("modern",),
)
async def result_type(ctx: Context) -> None:
    async with ctx.raw() as wire:
        await _workload(ctx, wire)
        for frame in wire.frames:
            result = frame.value.get("result") if frame.is_response else None
            if isinstance(result, dict) and result.get("resultType") not in ("complete", "input_required"):
                ctx.fail(f"a result (id {frame.value.get('id')!r}) with resultType {result.get('resultType')!r}")


@check(
    id="SV-17",
    title="the server never initiates requests, even when the client declares capabilities",
    level="MUST",
    spec="basic/patterns/index.mdx",
    quote="Servers MUST NOT initiate JSON-RPC requests",
    eras=MODERN,
    tags=("modern",),
)
async def no_server_requests(ctx: Context) -> None:
    caps: dict[str, object] = {"sampling": {}, "elicitation": {}, "roots": {}}
    async with ctx.raw() as wire:
        await wire.request("server/discover", ctx.params(capabilities=caps), timeout=ctx.timeout)
        if ctx.has("tools"):
            await wire.request("tools/list", ctx.params(capabilities=caps), timeout=ctx.timeout)
        await wire.drain(0.2)
        for frame in wire.frames:
            if frame.is_request:
                ctx.fail(f"the server sent a request: {frame.text[:200]}")


@check(
    id="SV-36",
    title="no notifications/message for requests without a logLevel",
    level="MUST",
    spec="server/utilities/logging.mdx §Per-request log level",
    quote="The server MUST NOT emit notifications/message for a request that does not include this field.",
    eras=MODERN,
    tags=("modern", "logging"),
)
async def no_unrequested_logs(ctx: Context) -> None:
    async with ctx.raw() as wire:
        await _workload(ctx, wire)
        await wire.drain(0.2)
        for frame in wire.frames:
            if frame.is_notification and frame.value.get("method") == "notifications/message":
                ctx.fail(f"notifications/message without a requested log level: {frame.text[:200]}")


@check(
    id="LG-02",
    title="an unknown per-request logLevel is rejected with -32602",
    level="SHOULD",
    spec="server/utilities/logging.mdx §Per-request log level",
    quote="Servers SHOULD return -32602 (Invalid params) for an unrecognized log level.",
    eras=MODERN,
    needs=("logging",),
    tags=("modern", "logging"),
)
async def bad_log_level(ctx: Context) -> None:
    async with ctx.raw() as wire:
        params = ctx.params({"_meta": {"io.modelcontextprotocol/logLevel": "mcpwire-check-level"}})
        answer = await wire.request("server/discover", params, timeout=ctx.timeout)
        error = answer.get("error")
        if not isinstance(error, dict) or error.get("code") != -32602:
            ctx.fail(f"an unknown log level was answered with {answer!r:.200}")
