"""The default client's HTTP/1.1 transport: connections are reused only when that is safe, every
failure is the ``httpx`` exception the default transport would raise, every wait is bounded, and
TLS verifies."""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

import httpx
import pytest
import trio
import trustme

from mcpwire.actors.http_common import open_http_client, tls_context
from mcpwire.actors.http_pool import DirectSender, PooledTransport

Reply = Callable[[trio.abc.Stream, bytes, int], Awaitable[bool]]
"""What the test server does with one request (its head and body, and the connection's number);
returns whether to keep the connection open for another."""


class Server:
    """A loopback HTTP/1.1 server whose answers a test scripts, counting connections."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, stream: trio.abc.Stream) -> None:
        self.connections += 1
        number = self.connections
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += await stream.receive_some(65536)
                body, buffer = buffer[:length], buffer[length:]
                self.requests.append(head + b"\r\n\r\n" + body)
                if not await self.reply(stream, body, number):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()


def answer(body: bytes, *extra: str) -> bytes:
    head = "".join(f"{line}\r\n" for line in (f"Content-Length: {len(body)}", *extra))
    return b"HTTP/1.1 200 OK\r\n" + head.encode() + b"\r\n" + body


async def echo(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
    await stream.send_all(answer(b"%d:" % number + body))
    return True


@asynccontextmanager
async def serving(reply: Reply, tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[Server, str]]:
    server = Server(reply)
    async with trio.open_nursery() as nursery:
        if tls is None:
            (listener,) = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
            scheme = "http"
        else:
            listeners = await nursery.start(
                partial(trio.serve_ssl_over_tcp, server.handle, 0, tls, host="127.0.0.1", https_compatible=True)
            )
            listener = listeners[0].transport_listener
            scheme = "https"
        port = listener.socket.getsockname()[1]
        yield server, f"{scheme}://127.0.0.1:{port}/mcp"
        nursery.cancel_scope.cancel()


def client(**options: float) -> httpx.AsyncClient:
    transport = PooledTransport(tls=partial(tls_context, "https:"), **options)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(5.0))


async def test_sequential_requests_reuse_one_connection() -> None:
    async with serving(echo) as (server, url), client() as http:
        answers = [(await http.post(url, content=b"x%d" % n)).content for n in range(5)]
    assert answers == [b"1:x0", b"1:x1", b"1:x2", b"1:x3", b"1:x4"]
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /mcp HTTP/1.1\r\n") and b"\r\ncontent-length: 2\r\n" in first.lower()


async def test_concurrent_requests_get_their_own_answers() -> None:
    async def slow_echo(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await trio.sleep(0.01 * (int(body) % 3))
        await stream.send_all(answer(body))
        return True

    results: dict[int, bytes] = {}
    async with serving(slow_echo) as (server, url), client(max_connections=8) as http:

        async def one(n: int) -> None:
            results[n] = (await http.post(url, content=b"%d" % n)).content

        async with trio.open_nursery() as nursery:
            for n in range(40):
                nursery.start_soon(one, n)
    assert results == {n: b"%d" % n for n in range(40)}
    assert server.connections <= 8


async def test_connection_close_is_honoured() -> None:
    async def closing(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(answer(b"%d" % number, "Connection: close"))
        return False

    async with serving(closing) as (server, url), client() as http:
        assert [(await http.get(url)).content for _ in range(3)] == [b"1", b"2", b"3"]
    assert server.connections == 3


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    async def once(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(answer(b"%d" % number))
        return False  # closes without saying so

    async with serving(once) as (server, url), client() as http:
        assert (await http.get(url)).content == b"1"
        await trio.sleep(0.05)  # the close reaches us
        assert (await http.get(url)).content == b"2"
    assert server.connections == 2


async def test_idle_connections_expire() -> None:
    async with serving(echo) as (server, url), client(idle_expiry=0.0) as http:
        await http.get(url)
        await trio.sleep(0.01)
        await http.get(url)
    assert server.connections == 2


async def test_a_body_left_early_closes_its_connection_and_frees_its_slot() -> None:
    async def streaming(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await trio.sleep(0.05)
        await stream.send_all(b"6\r\nsecond\r\n0\r\n\r\n")
        return True

    async with serving(streaming) as (server, url), client(max_connections=1) as http:
        async with http.stream("GET", url) as response:
            async for chunk in response.aiter_raw():
                assert chunk == b"first"
                break
        async with http.stream("GET", url) as response:
            assert [chunk async for chunk in response.aiter_raw()] == [b"first", b"second"]
        async with http.stream("GET", url) as response:  # read to the end: this one is reused
            await response.aread()
    assert server.connections == 2


async def test_a_cancelled_request_closes_its_connection_and_frees_its_slot() -> None:
    async def late(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        if number == 1:
            await trio.sleep_forever()
        await stream.send_all(answer(b"%d" % number))
        return True

    async with serving(late) as (server, url), client(max_connections=1) as http:
        with trio.move_on_after(0.1) as scope:
            await http.get(url)
        assert scope.cancelled_caught
        with trio.fail_after(5):
            assert (await http.get(url)).content == b"2"
    assert server.connections == 2  # the cancelled one was closed, not reused


async def test_informational_answers_are_passed_over() -> None:
    async def early_hints(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + answer(b"done"))
        return True

    async with serving(early_hints) as (_, url), client() as http:
        response = await http.get(url)
    assert (response.status_code, response.content, response.http_version) == (200, b"done", "HTTP/1.1")


@pytest.mark.parametrize(
    ("sent", "message"),
    [
        (b"", "Server disconnected without sending a response."),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf", "peer closed connection without sending complete"),
        (b"NOT HTTP AT ALL\r\n\r\n", "illegal status line"),
    ],
)
async def test_broken_answers_are_remote_protocol_errors(sent: bytes, message: str) -> None:
    async def broken(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(sent)
        return False

    async with serving(broken) as (_, url), client() as http:
        with pytest.raises(httpx.RemoteProtocolError, match=message):
            await http.get(url)


async def test_a_head_over_the_bound_is_refused() -> None:
    async def huge(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 300_000 + b"\r\n\r\n")
        return False

    async with serving(huge) as (_, url), client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url)


async def test_timeouts_are_the_httpx_ones() -> None:
    async def silent(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await trio.sleep_forever()
        return False

    async with serving(silent) as (_, url), client(max_connections=1) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(url, timeout=httpx.Timeout(5.0, read=0.05))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(http.get, url, timeout=httpx.Timeout(5.0, read=1.0)))
            await trio.sleep(0.05)
            with pytest.raises(httpx.PoolTimeout):  # the one connection is busy
                await http.get(url, timeout=httpx.Timeout(5.0, pool=0.05))
            nursery.cancel_scope.cancel()


async def test_a_refused_connection_is_a_connect_error() -> None:
    with trio.socket.socket() as probe:
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with client() as http:
        with pytest.raises(httpx.ConnectError) as caught:
            await http.get(f"http://127.0.0.1:{port}/")
    assert caught.value.request.url.port == port


async def test_tls_verifies_the_server() -> None:
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    async with serving(echo, tls=server_context) as (server, url):
        transport = PooledTransport(tls=lambda: trusting)
        async with httpx.AsyncClient(transport=transport) as http:
            assert [(await http.post(url, content=b"x")).content for _ in range(2)] == [b"1:x", b"1:x"]
        async with client() as http:  # the default trust: this authority is unknown
            with pytest.raises(httpx.ConnectError) as caught:
                await http.post(url, content=b"x")
    assert isinstance(caught.value.__cause__, trio.BrokenResourceError)
    assert isinstance(caught.value.__cause__.__cause__, ssl.SSLCertVerificationError)
    assert server.connections == 2


def test_the_default_client_uses_it_unless_a_proxy_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert isinstance(open_http_client("http://127.0.0.1:1/mcp")._transport, PooledTransport)
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    assert not isinstance(open_http_client("http://example.com/mcp")._transport, PooledTransport)
    assert isinstance(open_http_client("https://example.com/mcp")._transport, PooledTransport)
    monkeypatch.setenv("no_proxy", "example.com")
    assert isinstance(open_http_client("http://example.com/mcp")._transport, PooledTransport)


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="max_connections must be >= 1"):
        PooledTransport(tls=partial(tls_context, "https:"), max_connections=0)


async def test_the_direct_sender_keeps_the_clients_headers_cookies_and_timeouts() -> None:
    """What the default client's actors send through: the client's default headers under the
    request's own (one ``accept``), cookies stored from ``Set-Cookie`` and sent back (a load
    balancer's affinity cookie), and the client's timeouts."""

    async def affinity(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(answer(b"ok", "Set-Cookie: affinity=a1; Path=/"))
        return True

    transport = PooledTransport(tls=partial(tls_context, "https:"))
    timeout = httpx.Timeout(5.0, read=0.5)
    async with serving(affinity) as (server, url), httpx.AsyncClient(transport=transport, timeout=timeout) as http:
        sender = DirectSender(http, transport)
        for _ in range(2):
            response = await sender.send("POST", url, {"Accept": "application/json"}, b"{}")
            assert (response.status_code, await response.aread()) == (200, b"ok")
            await response.aclose()
        assert response.request.extensions["timeout"]["read"] == 0.5
    first, second = (request.lower().split(b"\r\n\r\n")[0].split(b"\r\n") for request in server.requests)
    assert [line for line in first if line.startswith(b"accept:")] == [b"accept: application/json"]
    assert b"user-agent: python-httpx/" + httpx.__version__.encode() in first
    assert not any(line.startswith(b"cookie:") for line in first)
    assert b"cookie: affinity=a1" in second
    assert server.connections == 1


async def test_idle_connections_are_checked_past_descriptor_1023() -> None:
    """A host with many servers holds many descriptors: the idle check still works there (and
    so the connection is reused), where ``select.select`` could not watch it."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit ({hard}) is too low")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    read_end, write_end = os.pipe()
    spare = [read_end, write_end, *(os.dup(read_end) for _ in range(1100))]
    try:
        async with serving(echo) as (server, url), client() as http:
            await http.get(url)
            await http.get(url)
        assert server.connections == 1
    finally:
        for descriptor in spare:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_the_direct_senders_errors_name_their_request() -> None:
    with trio.socket.socket() as probe:
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = PooledTransport(tls=partial(tls_context, "https:"))
    async with httpx.AsyncClient(transport=transport) as http:
        with pytest.raises(httpx.ConnectError) as caught:
            await DirectSender(http, transport).send("POST", f"http://127.0.0.1:{port}/mcp", {}, b"{}")
    assert (caught.value.request.method, caught.value.request.url.port) == ("POST", port)
