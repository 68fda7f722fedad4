"""The relay floor of the gateway benchmark: the least a relay on trio and mcpwire's HTTP/1.1 codec
does for one call.

One task per connection reads requests with the server's codec
(:class:`~mcpwire.protocol.http1_server.ServerConnection`; ``POST /mcp``, one JSON body each). A
``tools/call`` goes over stdio to one backend, its ``everything__`` prefix dropped, and the
backend's answer goes back as one JSON body; ``tools/list`` is relayed with the prefix added;
``initialize`` is answered here (with an ``Mcp-Session-Id``), notifications with 202, anything
else is relayed as it is. With ``--audit DB``, each call's row is made durable before its answer
as ``mcpwire serve`` makes it with its default store: appended to a journal file (one write),
then moved into a SQLite file (WAL mode, ``synchronous=NORMAL``) every 20 ms, in one transaction.

No sessions, no token, no validation, no timeouts, no approvals, no group commit: what a call
through the gateway's own stack (trio, the HTTP/1.1 codec, msgspec, the standard library's ``sqlite3``) costs at
the least, which the gateway and ``mcpwire serve`` are measured against.

    python bench/gateway_relay_floor.py [--port N] [--audit DB] -- COMMAND [ARG...]

It prints its endpoint URL on its first line.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sqlite3
import subprocess
import sys
import time
from functools import partial
from typing import Any

import msgspec
import trio

from mcpwire.protocol.http1_server import END, NEED_DATA, Request, ServerConnection

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode
PREFIX = "everything__"
BACKEND_REVISION = "2025-06-18"


class Backend:
    """One stdio server: requests written under a lock, answers matched by id."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._lock = trio.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[trio.Event, list[dict[str, Any]]]] = {}

    async def read(self) -> None:
        buffer = bytearray()
        while data := await self._stdout.receive_some(65536):
            buffer += data
            start = 0
            while (end := buffer.find(b"\n", start)) >= 0:
                await self._received(_decode(buffer[start:end]))
                start = end + 1
            del buffer[:start]

    async def _received(self, message: dict[str, Any]) -> None:
        if "method" in message:
            if "id" in message:  # a request of the backend's own: nothing here answers those
                error = {"code": -32601, "message": "Method not found"}
                await self._write({"jsonrpc": "2.0", "id": message["id"], "error": error})
            return
        waiting = self._waiting.pop(message.get("id"), None)  # type: ignore[arg-type]
        if waiting is not None:
            waiting[1].append(message)
            waiting[0].set()

    async def _write(self, message: dict[str, Any]) -> None:
        async with self._lock:
            await self._stdin.send_all(_encode(message) + b"\n")

    async def request(self, method: str, params: object) -> dict[str, Any]:
        number = next(self._ids)
        done = trio.Event()
        answer: list[dict[str, Any]] = []
        self._waiting[number] = (done, answer)
        await self._write({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        await done.wait()
        return answer[0]

    async def start(self) -> None:
        info = {"name": "relay-floor", "version": "0"}
        params = {"protocolVersion": BACKEND_REVISION, "capabilities": {}, "clientInfo": info}
        await self.request("initialize", params)
        await self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})


_INSERT = "INSERT INTO audit (time, server, tool, outcome, record) VALUES (?, ?, ?, ?, ?)"


class Audit:
    """One row per call, journaled before the answer and moved into SQLite in batches."""

    def __init__(self, path: str) -> None:
        self._journal = os.open(f"{path}-journal", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._rows: list[tuple[object, ...]] = []
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY, time REAL NOT NULL, server TEXT NOT NULL,"
            " tool TEXT NOT NULL, outcome TEXT NOT NULL, record TEXT NOT NULL)"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS audit_by_server ON audit (server, id)")

    def commit(self, tool: str, outcome: str, params: object) -> None:
        row = (time.time(), "everything", tool, outcome, _encode(params).decode())
        os.write(self._journal, _encode(row) + b"\n")
        self._rows.append(row)

    async def move(self) -> None:
        """Moves what was journaled into the database every 20 ms."""
        while True:
            await trio.sleep(0.02)
            if self._rows:
                rows, self._rows = self._rows, []
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(_INSERT, rows)
                self._db.execute("COMMIT")


def _renamed(tool: dict[str, Any]) -> dict[str, Any]:
    return {**tool, "name": PREFIX + str(tool.get("name", ""))}


async def _answer(backend: Backend, audit: Audit | None, message: dict[str, Any]) -> bytes:
    method = message.get("method")
    params = message.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "relay-floor", "version": "0"},
        }
        return _encode({"jsonrpc": "2.0", "id": message["id"], "result": result})
    if method == "tools/call":
        name = str(params.get("name", "")).removeprefix(PREFIX)
        answer = await backend.request("tools/call", {**params, "name": name})
        if audit is not None:
            audit.commit(name, "error" if "error" in answer else "ok", params)
    elif method == "tools/list":
        answer = await backend.request("tools/list", params)
        if "result" in answer:
            tools = [_renamed(t) for t in answer["result"].get("tools", [])]
            answer = {**answer, "result": {**answer["result"], "tools": tools}}
    else:
        answer = await backend.request(str(method), params)
    return _encode({**answer, "id": message["id"]})


async def _serve_connection(stream: trio.SocketStream, backend: Backend, audit: Audit | None) -> None:
    connection = ServerConnection()
    while True:
        request: Request | None = None
        body = bytearray()
        while True:
            event = connection.next_event()
            if event is NEED_DATA:
                try:
                    connection.receive_data(await stream.receive_some(65536))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                continue
            if isinstance(event, Request):
                request = event
            elif isinstance(event, bytes):
                body += event
            elif event is END:
                break
            else:  # CLOSED: the client is done
                return
        assert request is not None
        status, out, headers = 200, b"", [(b"content-type", b"application/json")]
        if request.method != b"POST":
            status = 405
        else:
            message = _decode(body)
            if "id" not in message:
                status = 202
            else:
                out = await _answer(backend, audit, message)
                if message.get("method") == "initialize":
                    headers.append((b"mcp-session-id", os.urandom(16).hex().encode()))
        headers.append((b"content-length", b"%d" % len(out)))
        data = connection.response(status, headers) + connection.body(out) + connection.end()
        try:
            await stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        if not connection.keep_alive:
            return
        connection.start_next_cycle()


async def main(port: int, audit_path: str | None, command: list[str]) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
    audit = Audit(audit_path) if audit_path else None
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        backend = Backend(process)
        nursery.start_soon(backend.read)
        if audit is not None:
            nursery.start_soon(audit.move)
        await backend.start()

        async def handle(stream: trio.SocketStream) -> None:
            await _serve_connection(stream, backend, audit)

        listeners = await nursery.start(partial(trio.serve_tcp, handle, port, host="127.0.0.1"))
        bound = listeners[0].socket.getsockname()
        print(f"http://127.0.0.1:{bound[1]}/mcp", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--audit", metavar="DB", help="journal one row per call, moved into this SQLite file")
    parser.add_argument("command", nargs="+", help="the backend's command (after --)")
    options = parser.parse_args()
    try:
        trio.run(main, options.port, options.audit, options.command)
    except KeyboardInterrupt:
        sys.exit(0)
