"""Lifecycle, version negotiation and ping (spec-checklist 12.2, SV-09..SV-12)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..context import CLIENT_INFO, Context
from ..harness import Frame
from ..registry import check

LIFECYCLE = "basic/lifecycle.mdx"
MODERN = "2026-07-28"
#: 2026-07-28 has no initialize and no lifecycle page: its results (skipped) cite the last legacy one
LAST_LEGACY = "2025-11-25/"
LISTS = (("tools", "tools/list"), ("resources", "resources/list"), ("prompts", "prompts/list"))
KNOWN = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")


def _init_params(version: str, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": CLIENT_INFO}


def _after_legacy(spec: str, quote: str) -> tuple[tuple[str, str, str], ...]:
    """A ``quotes`` entry citing the last legacy page for 2026-07-28, where the check never runs."""
    return ((MODERN, LAST_LEGACY + spec, quote),)


def _legacy(supported: tuple[str, ...]) -> list[str]:
    """The revisions an ``initialize`` can negotiate: the legacy ones the server accepts."""
    return [r for r in supported if r < MODERN]


@check(
    id="SV-09",
    title="initialize answers the requested version if supported, else another version it supports; with "
    "capabilities and serverInfo",
    level="MUST",
    spec=LIFECYCLE + " §Version Negotiation",
    quote="If the server supports the requested protocol version, it MUST respond with the same version. "
    "Otherwise, the server MUST respond with another protocol version it supports.",
    quotes=_after_legacy(
        LIFECYCLE + " §Version Negotiation",
        "If the server supports the requested protocol version, it MUST respond with the same version. "
        "Otherwise, the server MUST respond with another protocol version it supports.",
    ),
    eras=("legacy",),
    tags=("lifecycle", "versions"),
    on_counter_offer=True,
)
async def initialize_result(ctx: Context) -> None:
    # Run in every accepted legacy revision, and in every one the server answered with another
    # version (the runner's probe): there the answer must be a version the server accepts when it
    # is asked for that version directly.
    legacy = _legacy(ctx.supported)
    async with ctx.raw() as wire:
        answer = await wire.request("initialize", _init_params(ctx.revision), timeout=ctx.timeout)
        result = answer.get("result")
        if not isinstance(result, dict):
            ctx.fail(f"initialize {ctx.revision} was not answered with a result: {answer!r:.300}")
        version = result.get("protocolVersion")
        if ctx.revision in legacy and version != ctx.revision:
            ctx.fail(f"requested {ctx.revision} (supported), answered {version!r}")
        if version != ctx.revision and version not in legacy:
            accepted = ", ".join(legacy) or "none"
            ctx.fail(
                f"requested {ctx.revision}, which it does not accept, and was offered {version!r:.60}, which it "
                f"does not accept either (initialize is accepted for: {accepted})"
            )
        if not isinstance(result.get("capabilities"), dict):
            ctx.fail("initialize result has no 'capabilities' object")
        info = result.get("serverInfo")
        if (
            not isinstance(info, dict)
            or not isinstance(info.get("name"), str)
            or not isinstance(info.get("version"), str)
        ):
            ctx.fail(f"initialize result has no serverInfo with string name and version: {info!r:.200}")


@check(
    id="SV-09b",
    title="an unknown requested version gets a counter-offer the server supports",
    level="MUST",
    spec=LIFECYCLE + " §Version Negotiation",
    quote="Otherwise, the server MUST respond with another protocol version it supports.",
    quotes=_after_legacy(
        LIFECYCLE + " §Version Negotiation",
        "Otherwise, the server MUST respond with another protocol version it supports.",
    ),
    eras=("legacy",),
    tags=("lifecycle", "versions"),
)
async def bogus_version(ctx: Context) -> None:
    async with ctx.raw() as wire:
        answer = await wire.request("initialize", _init_params("1900-01-01"), timeout=ctx.timeout)
        if "error" in answer:
            # spec-checklist AMB-02: the page's own example answers with an error; a deviation only.
            ctx.warn(f"answered an unknown version with an error, not a counter-offer: {answer['error']!r:.200}")
        result = answer.get("result")
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        legacy = _legacy(ctx.supported)
        if version not in legacy:
            ctx.fail(f"counter-offered {version!r}, which is not a version it accepts ({', '.join(legacy)})")


@check(
    id="SV-10",
    title="no server requests other than ping before notifications/initialized",
    level="SHOULD",
    spec=LIFECYCLE + " §Initialization",
    quote="The server SHOULD NOT send requests other than pings and logging before receiving the "
    "initialized notification.",
    quotes=_after_legacy(
        LIFECYCLE + " §Initialization",
        "The server SHOULD NOT send requests other than pings and logging before receiving the initialized "
        "notification.",
    ),
    eras=("legacy",),
    tags=("lifecycle",),
)
async def quiet_before_initialized(ctx: Context) -> None:
    caps = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
    async with ctx.session(capabilities=caps, initialized=False) as wire:
        await wire.drain(0.3)
        for frame in wire.frames:
            if frame.is_request and frame.value.get("method") != "ping":
                ctx.fail(f"sent {frame.value.get('method')!r} before notifications/initialized")


#: seconds SV-11 watches a session for unasked server requests and notifications, at least
SV11_WATCH_S = 3.0


@check(
    id="SV-11",
    title="no server requests, list_changed or log notifications that were not negotiated",
    level="MUST",
    spec=LIFECYCLE + " §Operation",
    quote="Both parties SHOULD: Respect the negotiated protocol version Only use capabilities that were "
    "successfully negotiated",
    quotes=(
        (
            "2025-06-18",
            LIFECYCLE + " §Operation",
            "Both parties MUST: Respect the negotiated protocol version Only use capabilities that were "
            "successfully negotiated",
        ),
        (
            MODERN,
            LAST_LEGACY + LIFECYCLE + " §Operation",
            "Both parties MUST: Respect the negotiated protocol version Only use capabilities that were "
            "successfully negotiated",
        ),
    ),
    # spec-checklist SV-11 (LC-14): a SHOULD until 2025-06-18 made it a MUST
    levels=(("2024-11-05", "SHOULD"), ("2025-06-18", "MUST")),
    eras=("legacy",),
    tags=("lifecycle", "capabilities"),
)
async def capability_honesty(ctx: Context) -> None:
    async with ctx.session(capabilities={}) as wire:
        await wire.request("ping", {}, timeout=ctx.timeout)
        for capability, method in LISTS:
            if ctx.has(capability):
                await ctx.call(wire, method)
        # what the session brought so far is judged first: a violation seen needs no more watching
        # (on a reused process, a request the server sent unasked earlier is among the frames)
        _unnegotiated(ctx, wire.frames)
        # what a server sends on its own comes when it likes: a proxy relays its backend's requests
        # once the backend is up, seconds after the handshake on a busy machine (FastMCP's proxy
        # sends roots/list then), so the session is watched for as long as a start-up takes
        await wire.watch(SV11_WATCH_S if ctx.pace is None else ctx.pace.watch_window(SV11_WATCH_S, ctx.timeout))
        _unnegotiated(ctx, wire.frames)


def _unnegotiated(ctx: Context, frames: Iterable[Frame]) -> None:
    """Fails SV-11 at the first of ``frames`` that uses a capability not negotiated."""
    for frame in frames:
        v = frame.value
        if frame.is_request and v.get("method") in ("sampling/createMessage", "elicitation/create", "roots/list"):
            ctx.fail(f"sent {v['method']} to a client that declared no capabilities")
        if frame.is_notification and str(v.get("method")).endswith("/list_changed"):
            kind = str(v["method"]).split("/")[1]
            if not (ctx.capabilities.get(kind) or {}).get("listChanged"):
                ctx.fail(f"sent {v['method']} without advertising {kind}.listChanged")
        if frame.is_notification and v.get("method") == "notifications/message" and not ctx.has("logging"):
            ctx.fail("sent notifications/message without advertising the logging capability")
        subscribe = (ctx.capabilities.get("resources") or {}).get("subscribe")
        if frame.is_notification and v.get("method") == "notifications/resources/updated" and not subscribe:
            ctx.fail("sent notifications/resources/updated without advertising resources.subscribe")


@check(
    id="SV-12",
    title="ping is answered promptly with an empty result",
    level="MUST",
    spec="basic/utilities/ping.mdx §Behavior Requirements",
    quote="The receiver MUST respond promptly with an empty response",
    quotes=_after_legacy(
        "basic/utilities/ping.mdx §Behavior Requirements", "The receiver MUST respond promptly with an empty response"
    ),
    eras=("legacy",),
    tags=("lifecycle", "ping"),
)
async def ping(ctx: Context) -> None:
    async with ctx.session() as wire:
        answer = await wire.request("ping", timeout=ctx.timeout)
        if answer.get("result") != {}:
            ctx.fail(f"ping answered with {answer!r:.200}, not an empty result")
