"""HTTP security checks: DNS rebinding (Origin, and the Host advice) per transport, and the
authorization challenge (spec-checklist SV-22, SV-39; HS-08).

The Origin rule is the transport's: Streamable HTTP has it from 2025-03-26 (a 2024-11-05 session
over it is judged by that page), the 2024-11-05 HTTP+SSE transport by its own page in every
revision, so each transport has a check of its own and every result quotes the transport used.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from ..context import Context
from ..http_harness import HttpWire
from ..registry import check
from .httpkit import HTTP, T24, T25, T26_HERE, init_message, is_loopback, probe_message, summary, target_origin

_ORIGIN = "Servers MUST validate the Origin header on all incoming connections to prevent DNS rebinding attacks"
_ORIGIN_403 = "If the Origin header is present and invalid, servers MUST respond with HTTP 403 Forbidden."
_STREAMABLE = "When implementing Streamable HTTP transport: "
_REBINDING = (
    "Without these protections, attackers could use DNS rebinding to interact with local MCP servers from remote "
    "websites."
)


@check(
    id="SV-22",
    title="Streamable HTTP: a request with a foreign Origin is refused (403 from 2025-11-25); the server's own "
    "origin is accepted",
    level="MUST",
    # the Streamable HTTP transport came with 2025-03-26: a 2024-11-05 session over it is judged by
    # that page (2024-11-05's own Origin sentence belongs to HTTP+SSE: HS-08)
    spec="2025-03-26/" + T25 + " §Security Warning",
    quote=_STREAMABLE + _ORIGIN,
    quotes=(
        ("2025-03-26", T25 + " §Security Warning", _STREAMABLE + _ORIGIN),
        ("2025-11-25", T25 + " §Security Warning", f"{_STREAMABLE}{_ORIGIN} ... {_ORIGIN_403}"),
        ("2026-07-28", T26_HERE + " §Security & Endpoint", f"{_STREAMABLE}{_ORIGIN}. ... {_ORIGIN_403}"),
    ),
    transports=HTTP,
    tags=("http", "security"),
)
async def origin_validation(ctx: Context) -> None:
    await _judge_origin(ctx, wanted=403 if ctx.revision >= "2025-11-25" else None)


@check(
    id="HS-08",
    title="HTTP+SSE: the SSE stream is refused to a foreign Origin",
    level="MUST",
    spec=T24 + " §Security Warning",
    quote="When implementing HTTP with SSE transport: Servers MUST validate the Origin header on all incoming "
    "connections to prevent DNS rebinding attacks",
    transports=("sse",),
    tags=("http", "sse", "security"),
)
async def sse_origin_validation(ctx: Context) -> None:
    await _judge_origin(ctx, wanted=None)


async def _judge_origin(ctx: Context, *, wanted: int | None) -> None:
    """A foreign Origin must get a 4xx (``wanted``, when the revision names one); over Streamable
    HTTP the server's own origin must still be served."""
    if not is_loopback(ctx):
        ctx.skip("which origins a remote server allows is its own policy; checked for loopback servers only")
    async with ctx.raw() as wire:
        assert isinstance(wire, HttpWire)
        message = probe_message(ctx) if ctx.era == "modern" else init_message(ctx)
        foreign = {"Origin": "http://evil.example.com"}
        if wire.transport == "sse":
            # a refusal ends the body; an accepted stream is read until its first event
            bad = await wire.get(
                headers=foreign, url=ctx.target.url, timeout=ctx.timeout, stop=lambda r: bool(r.events)
            )
        else:
            bad = await wire.post(message, headers=foreign, timeout=ctx.timeout)
        if bad.status is None:
            ctx.not_observed(f"a request with a foreign Origin got no HTTP answer ({bad.error or 'in time'})")
        if bad.status < 400 or bad.status >= 500:
            ctx.fail(f"Origin http://evil.example.com was accepted: {summary(bad)}")
        if wanted is not None and bad.status != wanted:
            ctx.fail(f"a foreign Origin was refused with HTTP {bad.status}, not {wanted}")
        if wire.transport == "http":
            good = await wire.post(message, headers={"Origin": target_origin(ctx)}, timeout=ctx.timeout)
            if good.status is None or not 200 <= good.status < 300:
                ctx.fail(f"the server's own Origin {target_origin(ctx)} was refused: {summary(good)}")


#: No revision's text names the Host header: the MUST is Origin validation "to prevent DNS
#: rebinding attacks". A rebound page's requests carry the attacker's host name in Host and, when
#: same-origin (a GET), no Origin at all, so checking Host is how a local server keeps that
#: promise (the official runner's dns-rebinding-protection scenario and the SDKs' protection check
#: it). Advice, not a rule: level MAY, reported as a warning whatever --strict says.
_HOST_ADVICE = "hardening advice (no spec keyword)"


@check(
    id="SV-22b",
    title=f"Streamable HTTP, {_HOST_ADVICE}: a loopback server refuses a Host header naming another host (DNS "
    "rebinding)",
    level="MAY",
    spec="2025-03-26/" + T25 + " §Security Warning",
    quote=_REBINDING,
    quotes=(
        ("2025-03-26", T25 + " §Security Warning", _REBINDING),
        ("2026-07-28", T26_HERE + " §Security & Endpoint", _REBINDING),
    ),
    transports=HTTP,
    tags=("http", "security"),
)
async def host_validation(ctx: Context) -> None:
    await _judge_host(ctx)


@check(
    id="HS-08b",
    title=f"HTTP+SSE, {_HOST_ADVICE}: a loopback server refuses the SSE stream to a Host header naming another "
    "host (DNS rebinding)",
    level="MAY",
    spec=T24 + " §Security Warning",
    quote=_REBINDING,
    transports=("sse",),
    tags=("http", "sse", "security"),
)
async def sse_host_validation(ctx: Context) -> None:
    await _judge_host(ctx)


async def _judge_host(ctx: Context) -> None:
    if not is_loopback(ctx):
        ctx.skip("a remote server is reached by its own name; the Host check is for loopback servers")
    async with ctx.raw() as wire:
        assert isinstance(wire, HttpWire)
        foreign = {"Host": "evil.example.com"}
        if wire.transport == "sse":
            bad = await wire.get(
                headers=foreign, url=ctx.target.url, timeout=ctx.timeout, stop=lambda r: bool(r.events)
            )
        else:
            message = probe_message(ctx) if ctx.era == "modern" else init_message(ctx)
            bad = await wire.post(message, headers=foreign, timeout=ctx.timeout)
        if bad.status is None:
            ctx.not_observed(f"a request with a foreign Host got no HTTP answer ({bad.error or 'in time'})")
        if not 400 <= bad.status < 500:
            ctx.warn(
                f"{_HOST_ADVICE}: a request to this loopback server with Host: evil.example.com was served: "
                f"{summary(bad)}"
            )


def _identifies(resource: str, url: str) -> bool:
    """Whether ``resource`` is ``url`` or a URL it lives under (same origin, a prefix of its path)."""

    def parts(text: str) -> tuple[str, str, int | None, list[str]]:
        split = urllib.parse.urlsplit(text.strip())
        scheme = split.scheme.lower()
        try:
            port = split.port or {"http": 80, "https": 443}.get(scheme)
        except ValueError:
            port = None
        return scheme, (split.hostname or "").lower(), port, [p for p in split.path.split("/") if p]

    scheme, host, port, path = parts(resource)
    url_scheme, url_host, url_port, url_path = parts(url)
    if not host or (scheme, host, port) != (url_scheme, url_host, url_port):
        return False
    return url_path[: len(path)] == path


_PRM = (
    "MCP servers MUST implement the OAuth 2.0 Protected Resource Metadata (RFC9728) specification to indicate the "
    "locations of authorization servers. The Protected Resource Metadata document returned by the MCP server MUST "
    "include the authorization_servers field containing at least one authorization server."
)


@check(
    id="SV-39",
    title="without credentials a protected server answers 401 with a Bearer challenge and resource metadata that "
    "names an authorization server and this server",
    level="MUST",
    spec="2025-06-18/basic/authorization.mdx §Authorization Server Location",
    quote=_PRM,
    quotes=(
        (
            "2025-06-18",
            "basic/authorization.mdx §Authorization Server Location",
            _PRM + " ... MCP servers MUST use the HTTP header WWW-Authenticate when returning a 401 Unauthorized "
            "to indicate the location of the resource server metadata URL",
        ),
        ("2025-11-25", "basic/authorization.mdx §Authorization Server Location", _PRM),
        ("2026-07-28", "basic/authorization/authorization-server-discovery.mdx §Authorization Server Location", _PRM),
    ),
    revisions=("2025-06-18", "9999-12-31"),
    transports=HTTP,
    tags=("http", "auth"),
)
async def auth_challenge(ctx: Context) -> None:
    async with ctx.raw(auth=False) as wire:
        assert isinstance(wire, HttpWire)
        message = probe_message(ctx) if ctx.era == "modern" else init_message(ctx)
        reply = await wire.post(message, timeout=ctx.timeout)
        if reply.status != 401:
            ctx.skip(f"the server answers without credentials (HTTP {reply.status}): no authorization to check")
        challenge = reply.headers.get("www-authenticate", "")
        if not challenge.lower().startswith("bearer"):
            ctx.fail(f"401 without a WWW-Authenticate: Bearer challenge (got {challenge!r})")
        match = re.search(r'resource_metadata="([^"]+)"', challenge)
        parts = urllib.parse.urlsplit(ctx.target.url or "")
        candidates = [match.group(1)] if match else []
        if not candidates:
            base = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource"
            candidates = [base + parts.path.rstrip("/"), base]
        document: Any = None
        for url in candidates:
            got = await wire.get(url=url, headers={"Accept": "application/json", "Mcp-Session-Id": None}, timeout=3.0)
            if got.status == 200:
                document = got.json()
                break
        if isinstance(document, dict) and match is None and ctx.revision < "2025-11-25":
            ctx.fail("the 401 challenge has no resource_metadata (required in 2025-06-18)")
        if not isinstance(document, dict):
            if match is None:
                # no sign of MCP authorization at all (no resource_metadata, no metadata document):
                # the server guards itself with credentials of its own, as MCP allows ("Authorization
                # is OPTIONAL for MCP implementations"); there is no OAuth flow here to grade
                ctx.skip(
                    "the server needs credentials but does not use MCP authorization (no resource metadata in "
                    f"its challenge nor at {', '.join(candidates)}): not graded"
                )
            ctx.fail(f"no protected resource metadata at {', '.join(candidates)}")
        servers = document.get("authorization_servers")
        if not isinstance(servers, list) or not servers:
            ctx.fail(f"the protected resource metadata has no authorization_servers: {document!r:.200}")
        # RFC 9728 §3.3 (the MCP server "MUST implement" it): "The resource value returned MUST be
        # identical to the protected resource's resource identifier"; accepted: this server's URL or
        # a URL it lives under (metadata served at the root names the origin)
        resource = document.get("resource")
        if not isinstance(resource, str) or not _identifies(resource, ctx.target.url or ""):
            ctx.fail(f"the protected resource metadata names resource {resource!r:.200}, not {ctx.target.url}")
        bogus = await wire.post(
            message, headers={"Authorization": "Bearer mcpwire-check-not-a-token"}, timeout=ctx.timeout
        )
        if bogus.status != 401:
            ctx.fail(f"a made-up bearer token was answered {summary(bogus)}, not 401")
