"""Serving a :class:`~mcpwire.server.core.Server` over stdio: one JSON text per line each way.

Theory of operation: :func:`serve_stdio` reads stdin in chunks, splits lines with
:class:`~mcpwire.protocol.framing.LineBuffer` and feeds each decoded line to one
:class:`~mcpwire.server.connection.Connection`; a line that is not JSON is answered with a parse
error, and the server keeps serving. Every message goes out through one :class:`StdioOutlet`,
whose lock keeps concurrent writers from interleaving their lines. At end of input the
connection is closed (in-flight requests are cancelled, listen streams end with their
completion result) and the function returns: 2026-07-28 basic/transports/stdio: "Servers
SHOULD exit promptly when their standard input is closed or reads return end-of-file."
"""

from __future__ import annotations

import logging
import os
from typing import Final

import trio

from ..errors import FrameTooLarge
from ..protocol.framing import DEFAULT_MAX_MESSAGE_BYTES, LineBuffer
from ..protocol.serving import PARSE_ERROR, decode, encode, error_message
from .connection import Connection
from .core import JSONObject, Server

__all__ = ["StdioOutlet", "serve_stdio"]

log = logging.getLogger("mcpwire.server")

_READ_BYTES: Final = 256 * 1024
#: How long requests in flight at end of input may take before they are cancelled.
_EOF_GRACE_S: Final = 0.5
#: How long answers of cancelled requests and closed listens may take at end of input.
_DRAIN_S: Final = 2.0


class StdioOutlet:
    """Every message of a stdio connection, one line each, in the order they are sent."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self._stream = stream
        self._lock = trio.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def drop_connection(self) -> None:
        """Nothing to drop on stdio."""

    async def send(self, message: JSONObject | list[JSONObject], *, final: bool = False) -> None:
        """Write one line; a closed stdout marks the outlet closed (the message is lost).

        Raises:
            trio.BrokenResourceError: stdout is closed (nobody reads any more).
        """
        data = encode(message) + b"\n"
        async with self._lock:
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self._closed = True
                raise trio.BrokenResourceError("stdout is closed") from exc


async def serve_stdio(
    server: Server,
    *,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    input_timeout: float = 30.0,
) -> None:
    """Serve ``server`` on stdin/stdout (or the given streams) until end of input.

    Cancellation: cancelling the caller cancels every request in flight, unanswered.

    Raises:
        trio.BrokenResourceError: stdout was closed (nobody is listening any more).
        FrameTooLarge: a line longer than ``max_message_bytes``.
    """
    owned: list[trio.lowlevel.FdStream] = []
    if stdin is None:
        stdin = trio.lowlevel.FdStream(os.dup(0))
        owned.append(stdin)
    if stdout is None:
        stdout = trio.lowlevel.FdStream(os.dup(1))
        owned.append(stdout)
    outlet = StdioOutlet(stdout)
    failure: FrameTooLarge | trio.BrokenResourceError | None = None
    try:
        async with trio.open_nursery() as nursery:
            connection = Connection(server, nursery, standalone=outlet, input_timeout=input_timeout, label="stdio")
            nursery.start_soon(server.background)
            try:
                await _read(connection, stdin, outlet, max_message_bytes)
                # requests read just before the end of input are answered if they are quick
                with trio.move_on_after(_EOF_GRACE_S):
                    await connection.wait_idle(listens=False)
            except (FrameTooLarge, trio.BrokenResourceError) as exc:
                failure = exc  # raised as itself below, not inside the nursery's exception group
            finally:
                with trio.CancelScope(shield=True):
                    await connection.close()
            # listens answer their completion result, cancelled requests stop; then nothing is left
            with trio.move_on_after(_DRAIN_S):
                await connection.wait_idle()
            nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
    finally:
        for stream in owned:
            with trio.CancelScope(shield=True):
                await stream.aclose()


async def _read(connection: Connection, stdin: trio.abc.ReceiveStream, outlet: StdioOutlet, limit: int) -> None:
    lines = LineBuffer(limit)
    while True:
        chunk = await stdin.receive_some(_READ_BYTES)
        if not chunk:
            return
        try:
            complete = lines.feed(chunk)
        except FrameTooLarge:
            log.error("stdio: a line is longer than %d bytes; closing", limit)
            raise
        for line in complete:
            if not line.strip():
                continue  # blank lines (white space only) are not messages
            try:
                message = decode(line)
            except ValueError as exc:
                await outlet.send(error_message(None, PARSE_ERROR, f"Parse error: {exc}"))
                continue
            await connection.receive(message, outlet)
