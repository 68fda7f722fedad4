"""A minimal MCP stdio server with one ``echo`` tool, for the benchmark (stdlib only).

It speaks both eras just enough for every client under test: the legacy ``initialize``
handshake (answering the client's revision when it knows it) and the 2026-07-28
``server/discover``. With ``--legacy-only`` it answers ``server/discover`` with -32601, as a
server that predates the stateless era does. With ``--cpu N`` it pins itself to CPU ``N`` (Linux),
so that the benchmark can keep the client and the server on separate cores.

It is deliberately as cheap as possible, so that the clients, not the server, are what the
benchmark measures: one decode and one encode per message (msgspec when the interpreter that
runs the server has it, as the project's does; the standard library's ``json`` otherwise); the answers to every
line of one read go out in one write (a client with one call in flight gets one answer per
write, one with many in flight is not held back by a system call per answer); no validation, no
threads, no asyncio.

    python -u bench/echo_server.py [--legacy-only] [--cpu N]
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

LEGACY_REVISIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
LATEST_LEGACY = "2025-11-25"
MODERN_REVISION = "2026-07-28"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "echo", "version": "1"}

TOOLS_LIST: dict[str, Any] = {
    "tools": [
        {
            "name": "echo",
            "description": "Returns its text argument.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        }
    ]
}

# 2026-07-28: tools/list is a cacheable result, so ttlMs and cacheScope are required.
TOOLS_LIST_MODERN: dict[str, Any] = {**TOOLS_LIST, "resultType": "complete", "ttlMs": 0, "cacheScope": "public"}

DISCOVER: dict[str, Any] = {
    "resultType": "complete",
    "supportedVersions": [MODERN_REVISION],
    "capabilities": {"tools": {}},
    "ttlMs": 0,
    "cacheScope": "public",
    "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
}


def _is_modern(params: dict[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


def _result(method: str, params: dict[str, Any], legacy_only: bool) -> tuple[bool, Any]:
    """``(True, result)`` or ``(False, error)`` for one request."""
    if method == "tools/call":
        text = (params.get("arguments") or {}).get("text", "")
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
        if _is_modern(params):
            result["resultType"] = "complete"
        return True, result
    if method == "tools/list":
        if _is_modern(params):
            return True, TOOLS_LIST_MODERN
        return True, TOOLS_LIST
    if method == "ping":
        return True, {}
    if method == "initialize":
        requested = params.get("protocolVersion")
        return True, {
            "protocolVersion": requested if requested in LEGACY_REVISIONS else LATEST_LEGACY,
            "capabilities": {"tools": {}},
            "serverInfo": SERVER_INFO,
        }
    if method == "server/discover" and not legacy_only:
        return True, DISCOVER
    return False, {"code": -32601, "message": f"Method not found: {method}"}


def _codec() -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]]:
    """The fastest JSON codec at hand: msgspec's, else the standard library's."""
    try:
        import msgspec
    except ImportError:
        encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
        return json.loads, lambda value: encode(value).encode()
    return msgspec.json.Decoder().decode, msgspec.json.Encoder().encode


def main() -> None:
    args = sys.argv[1:]
    legacy_only = "--legacy-only" in args
    if "--cpu" in args and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(args[args.index("--cpu") + 1])})
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    loads, dumps = _codec()
    pending = bytearray()
    while True:
        chunk = os.read(stdin, 1 << 20)
        if not chunk:
            return
        start = len(pending)  # no newline before this: search only the new bytes
        pending += chunk
        end = pending.rfind(b"\n", start)
        if end < 0:
            continue
        lines = bytes(pending[:end]).split(b"\n")
        del pending[: end + 1]
        replies: list[bytes] = []
        for line in lines:
            try:
                message = loads(line)
            except ValueError:  # msgspec.DecodeError is a ValueError too
                continue  # blank or garbage line: a benchmark server has no one to complain to
            if not isinstance(message, dict) or "method" not in message or "id" not in message:
                continue  # notifications (notifications/initialized, cancellations) and responses
            ok, body = _result(message["method"], message.get("params") or {}, legacy_only)
            replies.append(dumps({"jsonrpc": "2.0", "id": message["id"], "result" if ok else "error": body}))
        if replies:
            replies.append(b"")
            out = b"\n".join(replies)
            view = memoryview(out)
            while view:
                view = view[os.write(stdout, view) :]


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
