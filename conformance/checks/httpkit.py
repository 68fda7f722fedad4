"""What the HTTP checks share (no checks here): spec pages, the probe and initialize messages, and
readings of an :class:`~conformance.http_harness.HttpReply`."""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

from ..context import CLIENT_INFO, Context
from ..http_harness import HttpReply

__all__ = [
    "HTTP",
    "LEGACY",
    "MODERN",
    "T24",
    "T25",
    "T26",
    "T26_HERE",
    "VISIBLE_ASCII",
    "error_code",
    "has_result",
    "init_message",
    "is_loopback",
    "json_or_none",
    "legacy_http",
    "probe_message",
    "summary",
    "target_origin",
]

HTTP = ("http",)
LEGACY = ("legacy",)
MODERN = ("modern",)
T25 = "basic/transports.mdx"
#: the 2026-07-28 transport page, pinned: the modern-only rules cite it in every revision's result
T26 = "2026-07-28/basic/transports/streamable-http.mdx"
T26_HERE = "basic/transports/streamable-http.mdx"
#: the 2024-11-05 HTTP+SSE transport's own page: its rules hold whatever revision runs over it
T24 = "2024-11-05/" + T25


def legacy_http(first: str, section: str, quote: str) -> dict[str, Any]:
    """``spec``, ``quote`` and ``quotes`` of a rule of the legacy Streamable HTTP transport (``first``
    .. 2025-11-25): the revisions before ``first`` cite its page in ``first``, 2026-07-28 (which has no
    such page) the 2025-11-25 one."""
    return {
        "spec": f"{first}/{T25} §{section}",
        "quote": quote,
        "quotes": ((first, f"{T25} §{section}", quote), ("2026-07-28", f"2025-11-25/{T25} §{section}", quote)),
    }


VISIBLE_ASCII = re.compile(r"^[\x21-\x7e]+$")
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def probe_message(ctx: Context, rid: Any = "mcpwire-check-probe") -> dict[str, Any]:
    """A harmless request of the revision under test (ping, or server/discover when modern)."""
    if ctx.era == "modern":
        return {"jsonrpc": "2.0", "id": rid, "method": "server/discover", "params": ctx.params()}
    return {"jsonrpc": "2.0", "id": rid, "method": "ping"}


def init_message(ctx: Context, rid: Any = "mcpwire-check-init") -> dict[str, Any]:
    params = {"protocolVersion": ctx.revision, "capabilities": {}, "clientInfo": CLIENT_INFO}
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}


def error_code(reply: HttpReply) -> int | None:
    for message in reply.messages:
        if isinstance(message, dict) and isinstance(message.get("error"), dict):
            code = message["error"].get("code")
            return code if isinstance(code, int) else None
    return None


def has_result(reply: HttpReply) -> bool:
    return any(isinstance(m, dict) and "result" in m for m in reply.messages)


def summary(reply: HttpReply) -> str:
    text = f"HTTP {reply.status}" if reply.status is not None else f"no HTTP answer ({reply.error})"
    if reply.messages:
        text += f" {reply.messages[0]!r:.200}"
    elif reply.body and not reply.is_sse:
        text += f" body {reply.body[:200]!r}"
    return text


def is_loopback(ctx: Context) -> bool:
    host = urllib.parse.urlsplit(ctx.target.url or "").hostname or ""
    return host in _LOOPBACK


def target_origin(ctx: Context) -> str:
    parts = urllib.parse.urlsplit(ctx.target.url or "")
    return f"{parts.scheme}://{parts.netloc}"


def json_or_none(data: bytes) -> Any:
    """``data`` decoded as JSON, or None."""
    try:
        return json.loads(data)
    except ValueError:
        return None
