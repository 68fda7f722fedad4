"""An accepted TCP connection as a trio stream, at the cost of the system calls it makes.

Theory of operation: :class:`trio.SocketStream` wraps every ``send_all`` and ``receive_some`` in
two or three context managers (a generator-based one translating errors, an asynchronous one
around each socket call, a memoryview) that together cost more than the system call they guard:
about a fortieth of the work of an MCP call through ``mcpwire serve``. :class:`TcpStream` keeps
what callers of a trio stream rely on and drops the layers:

- each call is a checkpoint, as every trio stream's is: it raises ``Cancelled`` if its scope is
  cancelled on entry, and yields to the scheduler once (a call that had to wait for the socket
  yielded while it waited; one that did not yields after, shielded, as trio's own sockets do);
- it tries the socket first and waits for readiness only when the socket would block;
- beyond the contract, :meth:`~TcpStream.send_nowait` writes what the socket takes at once and
  neither waits nor yields: the built-in server writes a response with it (nearly every one goes
  whole), and its next receive gives the other tasks their turn. The pass of the scheduler it
  saves cost another fortieth of a call;
- errors are trio's: :class:`trio.ClosedResourceError` once this side closed the socket,
  :class:`trio.BrokenResourceError` for any failure of the connection (``OSError`` as the
  cause), :class:`trio.BusyResourceError` when two tasks send (or receive) at once.

It owns the socket it is given (taken from the accepted :class:`trio.SocketStream`, which is left
empty: closing that does nothing) and closes it in :meth:`aclose` or :meth:`close`. ``socket`` is
the standard library socket, for what is asked of it beyond bytes (addresses, options).
"""

from __future__ import annotations

import errno
import socket as stdlib_socket
from typing import Final

import trio

__all__ = ["TcpStream"]

#: bytes asked of the socket when the reader names no size
DEFAULT_RECEIVE_SIZE: Final = 65536
_CLOSED_ERRNOS: Final = frozenset({errno.EBADF, errno.ENOTSOCK})


class TcpStream(trio.abc.HalfCloseableStream):
    """A connected TCP socket as a :class:`trio.abc.HalfCloseableStream` (see the module)."""

    __slots__ = ("_eof_sent", "_receiving", "_sending", "socket")

    def __init__(self, accepted: trio.SocketStream) -> None:
        sock = stdlib_socket.socket(fileno=accepted.socket.detach())
        sock.setblocking(False)
        self.socket = sock
        self._sending = False
        self._receiving = False
        self._eof_sent = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        await trio.lowlevel.checkpoint_if_cancelled()
        sock = self.socket
        if self._eof_sent or sock.fileno() == -1:
            raise trio.ClosedResourceError("the stream is closed for sending")
        self._sending = True
        try:
            waited = False
            view = memoryview(data)
            total = len(view)
            sent = 0
            while sent < total:
                try:
                    sent += sock.send(view[sent:] if sent else view)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(sock)
                    waited = True
                except OSError as exc:
                    raise _translated(exc) from exc
            if not waited:
                await trio.lowlevel.cancel_shielded_checkpoint()
        finally:
            self._sending = False

    def send_nowait(self, data: bytes) -> int:
        """Writes what the socket takes of ``data`` now, without waiting or yielding; returns
        how many bytes that was (0 when the socket would block). Not a checkpoint.

        Raises:
            trio.BusyResourceError: another task is sending.
            trio.ClosedResourceError, trio.BrokenResourceError: as :meth:`send_all`.
        """
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        if self._eof_sent or self.socket.fileno() == -1:
            raise trio.ClosedResourceError("the stream is closed for sending")
        try:
            return self.socket.send(data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise _translated(exc) from exc

    async def wait_send_all_might_not_block(self) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        if self.socket.fileno() == -1:
            raise trio.ClosedResourceError("the stream is closed")
        self._sending = True
        try:
            await trio.lowlevel.wait_writable(self.socket)
        finally:
            self._sending = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if max_bytes is None:
            max_bytes = DEFAULT_RECEIVE_SIZE
        if max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        if self._receiving:
            raise trio.BusyResourceError("another task is receiving on this stream")
        await trio.lowlevel.checkpoint_if_cancelled()
        sock = self.socket
        if sock.fileno() == -1:
            raise trio.ClosedResourceError("the stream is closed")
        self._receiving = True
        try:
            try:
                data = sock.recv(max_bytes)
            except BlockingIOError:
                pass
            except OSError as exc:
                raise _translated(exc) from exc
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return data
            while True:
                await trio.lowlevel.wait_readable(sock)
                try:
                    return sock.recv(max_bytes)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise _translated(exc) from exc
        finally:
            self._receiving = False

    async def send_eof(self) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        await trio.lowlevel.checkpoint()
        if self._eof_sent:
            return
        if self.socket.fileno() == -1:
            raise trio.ClosedResourceError("the stream is closed")
        self._eof_sent = True
        try:
            self.socket.shutdown(stdlib_socket.SHUT_WR)
        except OSError as exc:
            raise _translated(exc) from exc

    def close(self) -> None:
        """Closes the socket now (idempotent); a task waiting on it gets ``ClosedResourceError``."""
        if self.socket.fileno() != -1:
            trio.lowlevel.notify_closing(self.socket)
            self.socket.close()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()


def _translated(exc: OSError) -> trio.ClosedResourceError | trio.BrokenResourceError:
    if exc.errno in _CLOSED_ERRNOS:
        return trio.ClosedResourceError("the stream is closed")
    return trio.BrokenResourceError(f"the connection broke: {exc}")
