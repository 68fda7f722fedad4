"""A minimal Streamable HTTP MCP server with one ``echo`` tool, for the benchmark (stdlib only).

It listens on 127.0.0.1 (``--port 0``, the default, picks a free port) and prints its endpoint URL
as the first line on stdout, so that a client knows where to connect. HTTP/1.1 with keep-alive,
one thread per connection (:class:`http.server.ThreadingHTTPServer`), every request answered with
one ``application/json`` body (never an SSE stream): the clients, not the server, are what the
benchmark measures.

Both eras, as ``echo_server.py`` answers them: the legacy ``initialize`` (which sets an
``Mcp-Session-Id`` header), ``notifications/initialized`` and other notifications (202), DELETE
(200), and the 2026-07-28 ``server/discover``. It echoes the ``MCP-Protocol-Version`` request
header. ``--legacy-only`` refuses ``server/discover``; ``--cpu N`` pins it to CPU ``N`` (Linux).

    python -u bench/http_echo_server.py [--port N] [--legacy-only] [--cpu N]
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from echo_server import _result

_loads = json.loads
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    legacy_only = False

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response_only(status)
        if body:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        version = self.headers.get("MCP-Protocol-Version")
        if version:
            self.send_header("MCP-Protocol-Version", version)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self._headers_buffer.append(b"\r\n" + body)  # type: ignore[attr-defined]  # headers and body in one write
        self.flush_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            message = _loads(self.rfile.read(length))
        except ValueError:
            self._reply(400)
            return
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            self._reply(202)  # notifications and responses
            return
        method = message["method"]
        ok, body = _result(method, message.get("params") or {}, self.legacy_only)
        reply = {"jsonrpc": "2.0", "id": message["id"], "result" if ok else "error": body}
        extra = {"Mcp-Session-Id": uuid.uuid4().hex} if method == "initialize" else None
        self._reply(200, _dumps(reply).encode(), extra)

    def do_GET(self) -> None:
        self._reply(405, headers={"Allow": "POST, DELETE"})

    def do_DELETE(self) -> None:
        self._reply(200)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64


def main() -> None:
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1]) if "--port" in args else 0
    Handler.legacy_only = "--legacy-only" in args
    if "--cpu" in args and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(args[args.index("--cpu") + 1])})
    with Server(("127.0.0.1", port), Handler) as server:
        host, bound = server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        sys.stdout.write(f"http://{name}:{bound}/mcp\n")
        sys.stdout.flush()
        server.serve_forever()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
