"""The built-in server's TCP stream: trio's own conformance checks, and the write that never waits."""

from __future__ import annotations

import socket
import struct

import pytest
import trio
import trio.testing

from mcpwire.server.tcp import TcpStream


async def _pair() -> tuple[TcpStream, TcpStream]:
    """Two ends of one loopback TCP connection, each a TcpStream."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    listener = listeners[0]
    try:
        port = listener.socket.getsockname()[1]
        client = await trio.open_tcp_stream("127.0.0.1", port)
        server = await listener.accept()
    finally:
        await listener.aclose()
    return TcpStream(client), TcpStream(server)


def _clog(stream: TcpStream) -> int:
    """Fills the socket's buffers until it takes nothing more; the bytes written."""
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    written = 0
    chunk = b"x" * 65536
    while (sent := stream.send_nowait(chunk)) > 0:
        written += sent
    return written


async def _clogged_pair() -> tuple[TcpStream, TcpStream]:
    """A pair whose buffers are full both ways (trio's checks flip the pair)."""
    left, right = await _pair()
    for stream in (left, right):
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    _clog(left)
    _clog(right)
    return left, right


async def test_passes_trios_checks_of_a_half_closeable_stream() -> None:
    await trio.testing.check_half_closeable_stream(_pair, _clogged_pair)


async def test_the_accepted_trio_stream_is_left_empty() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    accepted = await listeners[0].accept()
    stream = TcpStream(accepted)
    await accepted.aclose()  # closes nothing: the socket is the TcpStream's now
    await client.send_all(b"still open")
    assert await stream.receive_some(100) == b"still open"
    await stream.aclose()
    assert await client.receive_some(100) == b""
    await client.aclose()
    await listeners[0].aclose()


async def test_send_nowait_writes_what_the_socket_takes_and_never_waits() -> None:
    left, right = await _pair()
    async with left, right:
        assert left.send_nowait(b"hello") == 5
        assert await right.receive_some(100) == b"hello"
        right.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        written = _clog(left)
        assert written > 0
        with trio.testing.assert_no_checkpoints():
            assert left.send_nowait(b"more") == 0  # full: nothing taken, no wait
        received = 0
        while received < written:
            received += len(await right.receive_some(65536))
        assert received == written
        assert left.send_nowait(b"after") == 5


async def test_send_nowait_on_a_closed_or_broken_stream() -> None:
    left, right = await _pair()
    await left.send_eof()
    with pytest.raises(trio.ClosedResourceError):
        left.send_nowait(b"x")
    await left.aclose()
    with pytest.raises(trio.ClosedResourceError):
        left.send_nowait(b"x")
    with pytest.raises(trio.ClosedResourceError):
        await left.receive_some(1)
    await right.aclose()
    # the peer resets the connection: writes fail as a broken stream, not as an OSError
    ours, theirs = await _pair()
    theirs.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    await theirs.aclose()
    with pytest.raises(trio.BrokenResourceError), trio.fail_after(5):
        while True:
            ours.send_nowait(b"x" * 1024)
            await trio.sleep(0.01)
    await ours.aclose()


async def test_a_second_sender_is_refused_while_one_waits() -> None:
    left, right = await _pair()
    async with left, right:
        right.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        _clog(left)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(left.send_all, b"y" * 100_000)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(trio.BusyResourceError):
                left.send_nowait(b"z")
            nursery.cancel_scope.cancel()
