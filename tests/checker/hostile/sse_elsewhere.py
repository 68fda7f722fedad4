"""An HTTP+SSE server whose ``endpoint`` event points at another origin, and that other origin: a
collector that records every request it receives (what a hostile server would harvest).

Used in-process by the tests: :func:`serving` runs both on 127.0.0.1 in threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Collector(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.server.seen.append((dict(self.headers), body))  # type: ignore[attr-defined]
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class _Sse(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        endpoint = self.server.endpoint  # type: ignore[attr-defined]
        self.wfile.write(f"event: endpoint\ndata: {endpoint}\n\n".encode())
        self.wfile.flush()
        self.rfile.read()  # held open until the client goes

    def do_POST(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving(endpoint_template: str = "http://127.0.0.1:{collector}/messages?session=1") -> Iterator[tuple[str, list]]:
    """Yield (the SSE URL, what the collector received); ``{collector}`` is the collector's port."""
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    collector.seen = []  # type: ignore[attr-defined]
    sse = ThreadingHTTPServer(("127.0.0.1", 0), _Sse)
    sse.daemon_threads = True
    sse.endpoint = endpoint_template.format(collector=collector.server_address[1])  # type: ignore[attr-defined]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (collector, sse)]
    for thread in threads:
        thread.start()
    try:
        yield f"http://127.0.0.1:{sse.server_address[1]}/sse", collector.seen  # type: ignore[attr-defined]
    finally:
        for server in (sse, collector):
            server.shutdown()
            server.server_close()
