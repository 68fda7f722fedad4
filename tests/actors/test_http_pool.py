"""The default client's HTTP/1.1 pool: connections are reused only when that is safe, every
failure is one of mcpwire's exceptions, an early answer reaches the caller, every wait is bounded,
and TLS verifies."""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from functools import partial

import pytest
import trio
import trustme

from mcpwire.actors.http_common import tls_context
from mcpwire.actors.http_pool import PoolSender
from mcpwire.actors.http_sender import Response, Timeouts
from mcpwire.errors import ConnectError, ConnectionBroken, IncompleteBody, InvalidHTTPResponse, LocalProtocolError

Reply = Callable[[trio.abc.Stream, bytes, int], Awaitable[bool]]
"""What the test server does with one request (its head and body, and the connection's number);
returns whether to keep the connection open for another."""


class Server:
    """A loopback HTTP/1.1 server whose answers a test scripts, counting connections."""

    def __init__(self, reply: Reply, *, read_body: bool = True) -> None:
        self.reply = reply
        self.read_body = read_body
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
                if self.read_body:
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


def answer(body: bytes, *extra: str, status: str = "200 OK") -> bytes:
    head = "".join(f"{line}\r\n" for line in (f"Content-Length: {len(body)}", *extra))
    return f"HTTP/1.1 {status}\r\n".encode() + head.encode() + b"\r\n" + body


async def echo(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
    await stream.send_all(answer(b"%d:" % number + body))
    return True


@asynccontextmanager
async def serving(
    reply: Reply, tls: ssl.SSLContext | None = None, *, read_body: bool = True, host: str = "127.0.0.1"
) -> AsyncIterator[tuple[Server, str]]:
    server = Server(reply, read_body=read_body)
    async with trio.open_nursery() as nursery:
        if tls is None:
            (listener,) = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host=host))
            scheme = "http"
        else:
            listeners = await nursery.start(
                partial(trio.serve_ssl_over_tcp, server.handle, 0, tls, host="127.0.0.1", https_compatible=True)
            )
            listener = listeners[0].transport_listener
            scheme = "https"
        port = listener.socket.getsockname()[1]
        yield server, f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}/mcp"
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def pool(**options: object) -> AsyncIterator[PoolSender]:
    options.setdefault("timeouts", Timeouts(connect=5.0, read=5.0, write=5.0, pool=5.0))
    sender = PoolSender(tls=partial(tls_context, "https:"), **options)  # type: ignore[arg-type]
    try:
        yield sender
    finally:
        await sender.aclose()


async def fetch(
    sender: PoolSender, url: str, body: bytes | None = None, *, method: str = "POST", **kwargs: object
) -> tuple[int, bytes]:
    """One exchange, its body read whole."""
    response = await sender.send(method, url, {}, body, **kwargs)  # type: ignore[arg-type]
    return response.status, await read(response)


async def read(response: Response) -> bytes:
    try:
        async with aclosing(response.chunks()) as pieces:
            return b"".join([piece async for piece in pieces])
    finally:
        await response.aclose()


# -- reuse -------------------------------------------------------------------------------------------


async def test_sequential_requests_reuse_one_connection() -> None:
    async with serving(echo) as (server, url), pool() as sender:
        answers = [(await fetch(sender, url, b"x%d" % n))[1] for n in range(5)]
    assert answers == [b"1:x0", b"1:x1", b"1:x2", b"1:x3", b"1:x4"]
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:") and b"\r\nContent-Length: 2\r\n" in first


async def test_concurrent_requests_get_their_own_answers() -> None:
    async def slow_echo(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await trio.sleep(0.01 * (int(body) % 3))
        await stream.send_all(answer(body))
        return True

    results: dict[int, bytes] = {}
    async with serving(slow_echo) as (server, url), pool(max_connections=8) as sender:

        async def one(n: int) -> None:
            results[n] = (await fetch(sender, url, b"%d" % n))[1]

        async with trio.open_nursery() as nursery:
            for n in range(40):
                nursery.start_soon(one, n)
    assert results == {n: b"%d" % n for n in range(40)}
    assert server.connections <= 8


async def test_connection_close_is_honoured() -> None:
    async def closing(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(answer(b"%d" % number, "Connection: close"))
        return False

    async with serving(closing) as (server, url), pool() as sender:
        assert [(await fetch(sender, url, method="GET"))[1] for _ in range(3)] == [b"1", b"2", b"3"]
    assert server.connections == 3


async def once(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
    """Answers one request, then closes the connection without saying so."""
    await stream.send_all(answer(b"%d" % number))
    return False


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    async with serving(once) as (server, url), pool() as sender:
        assert (await fetch(sender, url, method="GET"))[1] == b"1"
        await trio.sleep(0.05)  # the close reaches us
        assert (await fetch(sender, url, method="GET"))[1] == b"2"
    assert server.connections == 2


async def test_idle_connections_expire() -> None:
    async with serving(echo) as (server, url), pool(idle_expiry=0.0) as sender:
        await fetch(sender, url, method="GET")
        await trio.sleep(0.01)
        await fetch(sender, url, method="GET")
    assert server.connections == 2


async def test_a_body_left_early_closes_its_connection_and_frees_its_slot() -> None:
    async def streaming(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await trio.sleep(0.05)
        await stream.send_all(b"6\r\nsecond\r\n0\r\n\r\n")
        return True

    async with serving(streaming) as (server, url), pool(max_connections=1) as sender:
        response = await sender.send("GET", url, {})
        async with aclosing(response.chunks()) as pieces:
            async for chunk in pieces:
                assert chunk == b"first"
                break
        await response.aclose()
        response = await sender.send("GET", url, {})
        assert await read(response) == b"firstsecond"  # read to the end: this one is reused
        assert response.closed
        assert (await fetch(sender, url, method="GET"))[1] == b"firstsecond"
    assert server.connections == 2


async def test_a_cancelled_request_closes_its_connection_and_frees_its_slot() -> None:
    async def late(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        if number == 1:
            await trio.sleep_forever()
        await stream.send_all(answer(b"%d" % number))
        return True

    async with serving(late) as (server, url), pool(max_connections=1) as sender:
        with trio.move_on_after(0.1) as scope:
            await fetch(sender, url, method="GET")
        assert scope.cancelled_caught
        with trio.fail_after(5):
            assert (await fetch(sender, url, method="GET"))[1] == b"2"
    assert server.connections == 2  # the cancelled one was closed, not reused


async def test_informational_answers_are_passed_over() -> None:
    async def early_hints(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + answer(b"done"))
        return True

    async with serving(early_hints) as (_, url), pool() as sender:
        assert await fetch(sender, url, method="GET") == (200, b"done")


# -- what is sent ------------------------------------------------------------------------------------


async def test_headers_cookies_userinfo_and_unsafe_bytes_of_the_path() -> None:
    """What a client adds around the bytes: ``Host``, ``User-Agent`` (the request's own wins),
    ``Content-Length``, Basic credentials from the URL's userinfo (a request's own
    ``Authorization`` wins), a path's unsafe bytes percent-encoded, and the cookies the server
    set (a load balancer's affinity cookie), sent back only where their path and ``Secure`` allow."""

    async def affinity(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        cookies = ["Set-Cookie: affinity=a1; Path=/", "Set-Cookie: other=o; Path=/else", "Set-Cookie: tls=t; Secure"]
        await stream.send_all(answer(b"ok", *cookies))
        return True

    async with serving(affinity) as (server, url), pool() as sender:
        with_userinfo = url.replace("http://", "http://us%40er:p%3Ass@") + "/a b/é?q=1 2"
        assert await fetch(sender, with_userinfo, b"{}") == (200, b"ok")
        assert await fetch(sender, url, b"{}") == (200, b"ok")
        response = await sender.send("GET", url, {"Authorization": "Bearer x", "User-Agent": "mine"})
        await read(response)
    first, second, third = (request.split(b"\r\n\r\n")[0].split(b"\r\n") for request in server.requests)
    assert first[0] == b"POST /mcp/a%20b/%C3%A9?q=1%202 HTTP/1.1"
    assert b"Authorization: Basic dXNAZXI6cDpzcw==" in first  # us@er:p:ss
    assert first[2].startswith(b"User-Agent: mcpwire/") and b"Content-Length: 2" in first
    assert not any(line.startswith(b"Cookie:") for line in first)
    assert b"Cookie: affinity=a1" in second and not any(line.startswith(b"Authorization") for line in second)
    assert [line for line in third if line.split(b":")[0] in (b"Authorization", b"User-Agent", b"Cookie")] == [
        b"Cookie: affinity=a1",
        b"Authorization: Bearer x",
        b"User-Agent: mine",
    ]
    assert server.connections == 1


async def test_a_head_sent_again_follows_its_headers_and_the_cookies_set_since() -> None:
    """A request sent again with the same headers is the same head with its own
    ``Content-Length``; a changed header value is sent as changed, and a cookie the server set
    after a head was first sent goes in every later one."""

    async def cookie_on_second(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        extra = ["Set-Cookie: affinity=b2; Path=/"] if body == b"[2]" else []
        await stream.send_all(answer(b"ok", *extra))
        return True

    async with serving(cookie_on_second) as (server, url), pool() as sender:
        for body, session in ((b"[1]", "s-1"), (b"[2]", "s-1"), (b"[33]", "s-1"), (b"[4]", "s-2")):
            response = await sender.send("POST", url, {"Mcp-Session-Id": session, "Accept": "application/json"}, body)
            assert await read(response) == b"ok"
    heads = [request.split(b"\r\n\r\n")[0].split(b"\r\n") for request in server.requests]
    bodies = [request.split(b"\r\n\r\n", 1)[1] for request in server.requests]
    assert bodies == [b"[1]", b"[2]", b"[33]", b"[4]"]
    assert heads[0] == heads[1]  # the same head, made once
    assert heads[0][-1] == b"Content-Length: 3" and heads[2][-1] == b"Content-Length: 4"
    assert not any(line.startswith(b"Cookie:") for line in heads[0] + heads[1])
    assert b"Cookie: affinity=b2" in heads[2] and b"Cookie: affinity=b2" in heads[3]
    assert b"Mcp-Session-Id: s-1" in heads[2] and b"Mcp-Session-Id: s-2" in heads[3]
    assert [line for line in heads[3] if line.startswith(b"Mcp-Session-Id")] == [b"Mcp-Session-Id: s-2"]


async def test_a_header_that_could_smuggle_another_is_refused_unsent() -> None:
    async with serving(echo) as (server, url), pool() as sender:
        with pytest.raises(LocalProtocolError, match=r"^illegal value of header 'X-A' \(NUL, CR or LF\)$"):
            await sender.send("POST", url, {"X-A": "1\r\nInjected: secret"}, b"{}")
        with pytest.raises(LocalProtocolError, match="cannot be sent"):
            await sender.send("POST", url, {"X-A": "\u2603"}, b"{}")
    assert server.connections == 0


# -- answers that break, and early ones --------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "error", "message"),
    [
        (b"", ConnectionBroken, "^the server closed the connection without answering$"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf", IncompleteBody, "after 4 of the 10 bytes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", IncompleteBody, "inside a chunked body"),
        (b"NOT HTTP AT ALL\r\n\r\n", InvalidHTTPResponse, "illegal status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx", InvalidHTTPResponse, "coding"),
    ],
)
async def test_broken_answers_are_mcpwires_errors(sent: bytes, error: type[Exception], message: str) -> None:
    async def broken(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(sent)
        return False

    async with serving(broken) as (_, url), pool() as sender:
        with pytest.raises(error, match=message):
            await fetch(sender, url, method="GET")


async def test_a_head_over_the_bound_is_refused() -> None:
    async def huge(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 300_000)
        await trio.sleep(1)
        return False

    async with serving(huge) as (_, url), pool() as sender:
        with pytest.raises(InvalidHTTPResponse, match="head is over 65536 bytes"):
            await fetch(sender, url, method="GET")


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
@pytest.mark.parametrize("size", [100, 8 * 1024 * 1024], ids=["small", "8MiB"])
async def test_an_answer_sent_before_the_request_was_read_reaches_the_caller(tls: bool, size: int) -> None:
    """A server that answers on the head alone (413: too large; 401: no credentials) and closes
    without reading the body: the caller gets that status, not a write error, whether the body
    fitted in the socket's buffer or not, over plain TCP or TLS."""

    async def refuse(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await stream.send_all(answer(b"too large", "Connection: close", status="413 Content Too Large"))
        return False

    context = None
    trusting = None
    if tls:
        authority = trustme.CA()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        authority.issue_cert("127.0.0.1").configure_cert(context)
        trusting = ssl.create_default_context()
        authority.configure_trust(trusting)
    async with serving(refuse, context, read_body=False) as (server, url):
        sender = PoolSender(tls=lambda: trusting or tls_context("https:"))
        try:
            with trio.fail_after(20):
                assert await fetch(sender, url, b"x" * size) == (413, b"too large")
                assert await fetch(sender, url, b"{}") == (413, b"too large")
        finally:
            await sender.aclose()
    assert server.connections == 2  # the first connection was not reused


async def test_timeouts_bound_every_wait() -> None:
    async def silent(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        await trio.sleep_forever()
        return False

    async with serving(silent) as (_, url), pool(max_connections=1) as sender:
        with pytest.raises(ConnectionBroken, match=r"^no answer within 0\.05 s$"):
            await fetch(sender, url, method="GET", timeouts=Timeouts(read=0.05))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(fetch, sender, url, method="GET", timeouts=Timeouts(read=1.0)))
            await trio.sleep(0.05)
            with pytest.raises(ConnectError, match=r"^no free connection within 0\.05 s \(all 1 in use\)$"):
                await fetch(sender, url, method="GET", timeouts=Timeouts(pool=0.05))
            nursery.cancel_scope.cancel()


async def test_an_address_of_either_family_and_a_name_are_reached() -> None:
    """An IP address is connected to directly, a name through trio's resolution."""
    async with serving(echo) as (_, url), pool() as sender:
        assert await fetch(sender, url, b"by address") == (200, b"1:by address")
        assert await fetch(sender, url.replace("127.0.0.1", "localhost"), b"by name") == (200, b"2:by name")
    try:
        with trio.socket.socket(trio.socket.AF_INET6) as probe:
            await probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    async with serving(echo, host="::1") as (_, url), pool() as sender:
        assert url.startswith("http://[::1]:")
        assert await fetch(sender, url, b"by IPv6 address") == (200, b"1:by IPv6 address")


async def test_a_refused_connection_is_a_connect_error() -> None:
    with trio.socket.socket() as probe:
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with pool() as sender:
        with pytest.raises(ConnectError) as caught:
            await fetch(sender, f"http://127.0.0.1:{port}/", method="GET")
    assert isinstance(caught.value.__cause__, OSError)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://127.0.0.1/x", "unsupported URL scheme 'ftp'"),
        ("http://127.0.0.1:99999/x", r"^the URL cannot be used: invalid port: '99999'$"),
        ("http://1.2.3.400/x", "invalid IPv4 address"),
        ("http://\u0133/x", "invalid IDNA hostname"),
        ("http:///x", "no host"),
    ],
)
async def test_a_url_that_cannot_be_used_is_a_connect_error(url: str, message: str) -> None:
    async with pool() as sender:
        with pytest.raises(ConnectError, match=message):
            await fetch(sender, url, method="GET")


def _tls_contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A loopback server's TLS context, and a client's that trusts its (test) authority."""
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    return server_context, trusting


async def test_tls_verifies_the_server() -> None:
    server_context, trusting = _tls_contexts()
    async with serving(echo, tls=server_context) as (server, url):
        sender = PoolSender(tls=lambda: trusting)
        assert [(await fetch(sender, url, b"x"))[1] for _ in range(2)] == [b"1:x", b"1:x"]
        await sender.aclose()
        async with pool() as sender:  # the default trust: this authority is unknown
            with pytest.raises(ConnectError) as caught:
                await fetch(sender, url, b"x")
    assert isinstance(caught.value.__cause__, trio.BrokenResourceError)
    assert isinstance(caught.value.__cause__.__cause__, ssl.SSLCertVerificationError)
    assert server.connections == 2


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="max_connections must be >= 1"):
        PoolSender(tls=partial(tls_context, "https:"), max_connections=0)


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
        async with serving(echo) as (server, url), pool() as sender:
            await fetch(sender, url, method="GET")
            await fetch(sender, url, method="GET")
        assert server.connections == 1
    finally:
        for descriptor in spare:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- a request written at once, an answer read at once ------------------------------------------------


async def test_a_request_begun_leaves_in_the_callers_step_and_finishes_on_its_connection() -> None:
    arrived = trio.Event()

    async def noting(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        if body == b"now":
            arrived.set()
        return await echo(stream, body, number)

    async with serving(noting) as (server, url), pool() as sender:
        await fetch(sender, url, b"first")
        with trio.testing.assert_no_checkpoints():
            begun = sender.begin("POST", url, {"X-Kind": "at-once"}, b"now")
        assert begun is not None and begun.rest == b""
        with trio.fail_after(5):
            await arrived.wait()  # the server has it before anyone reads the answer
        assert server.requests[1].startswith(b"POST /mcp HTTP/1.1\r\n")
        assert b"\r\nX-Kind: at-once\r\n" in server.requests[1] and server.requests[1].endswith(b"\r\n\r\nnow")
        response = await sender.finish(begun)
        assert (response.status, await read(response)) == (200, b"1:now")
        assert (await fetch(sender, url, b"after"))[1] == b"1:after"  # the connection went back to the pool
    assert server.connections == 1


async def test_begin_declines_what_it_cannot_do_at_once_and_sends_nothing() -> None:
    async with serving(echo) as (server, url), pool() as sender:
        assert sender.begin("POST", url, {}, b"x") is None  # no idle connection yet
        await fetch(sender, url, b"x")
        assert sender.begin("POST", url, {}, b"x" * (64 * 1024 + 1)) is None  # too large to go alone
        assert sender.begin("POST", url, {"X-Bad": "a\r\nInjected: 1"}, b"x") is None
        with pytest.raises(LocalProtocolError):  # (send says why)
            await sender.send("POST", url, {"X-Bad": "a\r\nInjected: 1"}, b"x")
        assert sender.begin("POST", "ftp://127.0.0.1/mcp", {}, b"x") is None
        assert len(server.requests) == 1
    async with serving(once) as (server, url), pool() as sender:
        await fetch(sender, url, method="GET")
        await trio.sleep(0.05)  # the close reaches us
        assert sender.begin("GET", url, {}) is None  # the idle connection is stale: send drops it
        assert (await fetch(sender, url, method="GET"))[1] == b"2"
    async with serving(echo) as (server, url), pool(idle_expiry=0.0) as sender:
        await fetch(sender, url, method="GET")
        await trio.sleep(0.01)
        assert sender.begin("GET", url, {}) is None  # expired
    async with serving(echo) as (server, url):
        sender = PoolSender(tls=partial(tls_context, "https:"))
        await fetch(sender, url, method="GET")
        await sender.aclose()
        assert sender.begin("GET", url, {}) is None  # closed
    assert server.requests == [server.requests[0]]


async def test_a_begun_request_on_tls_is_sent_whole_by_send() -> None:
    server_context, trusting = _tls_contexts()
    async with serving(echo, tls=server_context) as (_, url):
        sender = PoolSender(tls=lambda: trusting)
        try:
            await fetch(sender, url, b"x")
            assert sender.begin("POST", url, {}, b"y") is None  # TLS records are written by the stream
            assert (await fetch(sender, url, b"y"))[1] == b"1:y"
        finally:
            await sender.aclose()


async def test_a_request_begun_in_part_is_written_to_its_end_by_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpwire.actors import http_pool

    class Trickle:
        """``os`` whose ``write`` takes ten bytes at a time (a full socket buffer, on demand)."""

        def __getattr__(self, name: str) -> object:
            return getattr(os, name)

        @staticmethod
        def write(descriptor: int, data: bytes) -> int:
            return os.write(descriptor, data[:10])

    async with serving(echo) as (server, url), pool() as sender:
        await fetch(sender, url, b"first")
        monkeypatch.setattr(http_pool, "os", Trickle())
        begun = sender.begin("POST", url, {}, b"a body longer than ten bytes")
        assert begun is not None and len(begun.rest) > 10
        monkeypatch.setattr(http_pool, "os", os)
        response = await sender.finish(begun)
        assert await read(response) == b"1:a body longer than ten bytes"
    assert server.connections == 1


async def test_a_begun_request_abandoned_or_cancelled_frees_its_slot() -> None:
    async def late(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        if body == b"never":
            await trio.sleep_forever()
        await stream.send_all(answer(b"%d:" % number + body))
        return True

    async with serving(late) as (server, url), pool(max_connections=1) as sender:
        await fetch(sender, url, b"a")
        begun = sender.begin("POST", url, {}, b"dropped")
        assert begun is not None
        sender.abandon(begun)
        with trio.fail_after(5):  # the one slot is free again: a new connection
            assert (await fetch(sender, url, b"b"))[1] == b"2:b"
        begun = sender.begin("POST", url, {}, b"never")
        assert begun is not None
        with trio.move_on_after(0.1) as scope:
            await sender.finish(begun)
        assert scope.cancelled_caught
        with trio.fail_after(5):
            assert (await fetch(sender, url, b"c"))[1] == b"3:c"
    assert server.connections == 3


async def test_a_body_that_came_with_its_head_is_taken_at_once() -> None:
    from mcpwire.actors.http_common import read_body

    async def mixed(stream: trio.abc.Stream, body: bytes, number: int) -> bool:
        if body == b"chunked":
            await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
        elif body == b"coded":
            await stream.send_all(answer(b"x", "Content-Encoding: br"))
        elif body == b"late":
            whole = answer(b"0123456789")
            await stream.send_all(whole[:-4])
            await trio.sleep(0.3)  # (long enough that a loaded machine still reads the head first)
            await stream.send_all(whole[-4:])
        else:
            await stream.send_all(answer(b"%d:" % number + body))
        return True

    async with serving(mixed) as (server, url), pool() as sender:
        response = await sender.send("POST", url, {}, b"plain")
        with trio.fail_after(5):
            while not response._connection.reader.buffered_to_end:  # (the body may follow its head)
                response._connection.reader.feed(await response._connection._receive(False))
        assert response.body_at_once() == b"1:plain" and response.body_at_once() is None  # taken once
        assert not response.closed
        await response.aclose()  # read to its end: the connection goes back
        response = await sender.send("POST", url, {}, b"chunked")
        assert response.body_at_once() is None
        assert await read_body(response, 100) == b"abc"
        response = await sender.send("POST", url, {}, b"late")
        assert response.body_at_once() is None  # part of it is still on its way
        assert await read_body(response, 100) == b"0123456789"
        response = await sender.send("POST", url, {}, b"coded")
        with pytest.raises(InvalidHTTPResponse, match="coding"):  # refused as before
            await read_body(response, 100)
        await response.aclose()
        assert await read_body(await sender.send("POST", url, {}, b"again"), 100) == b"2:again"
    assert server.connections == 2
