"""Clients that try to hurt the service: ambiguous framing, odd targets, slow bodies, forged
forwarding headers. Both HTTP servers, where both are concerned."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from _raw_http import RawClient, Scope, connect, request, serving

from mcpwire.server.http import HTTP_SERVERS, HttpServerName, ServerOptions, serve_http
from mcpwire.server.listen import TrustedProxies
from mcpwire.server.proxy import client_of

SMUGGLED = (
    b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"3\r\nabc\r\n0\r\n\r\n"
    b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"
)


async def echo(scope: Scope, receive: Any, send: Any) -> None:
    """Answers with what it saw: method, path, body, client and scheme."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    client = scope.get("client")
    data = json.dumps(
        {
            "path": scope["path"],
            "body": body.decode(),
            "client": list(client) if client else None,
            "scheme": scope["scheme"],
        }
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


@asynccontextmanager
async def server_on(kind: HttpServerName, options: ServerOptions | None = None) -> AsyncIterator[int]:
    async with trio.open_nursery() as nursery:
        [url] = await nursery.start(partial(serve_http, echo, port=0, server=kind, options=options))
        try:
            yield int(url.rsplit(":", 1)[1])
        finally:
            nursery.cancel_scope.cancel()


async def open_from(source: str, port: int) -> RawClient:
    """A connection to the server on 127.0.0.1 from the local address ``source``."""
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    await sock.bind((source, 0))
    await sock.connect(("127.0.0.1", port))
    return RawClient(trio.SocketStream(sock))


@pytest.mark.parametrize("kind", HTTP_SERVERS)
async def test_a_request_with_both_length_and_chunks_is_answered_and_the_connection_closed(
    kind: HttpServerName,
) -> None:
    # RFC 9112 §6.1: the server MUST close the connection after responding: what follows on it
    # (here a second request a proxy framing by Content-Length would not have seen) is never served
    async with server_on(kind) as port:
        client = await open_from("127.0.0.1", port)
        try:
            await client.send(SMUGGLED)
            reply = await client.read_response()
            assert (reply.status, json.loads(reply.body)["body"]) == (200, "abc")
            assert reply.headers["connection"] == "close"
            assert await client.closed()
            assert b"smuggled" not in client.buffer
        finally:
            await client.stream.aclose()


@pytest.mark.parametrize("kind", HTTP_SERVERS)
async def test_forwarding_headers_are_believed_only_from_a_trusted_proxy(kind: HttpServerName) -> None:
    options = ServerOptions(forwarded_allow_ips=("127.0.0.1",))
    forged = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}
    async with server_on(kind, options) as port:
        for source, believed in (("127.0.0.1", True), ("127.0.0.2", False)):
            client = await open_from(source, port)
            try:
                await client.send(request("GET", "/who", **forged))
                seen = json.loads((await client.read_response()).body)
            finally:
                await client.stream.aclose()
            if believed:
                assert (seen["client"][0], seen["scheme"]) == ("203.0.113.9", "https")
            else:
                assert (seen["client"][0], seen["scheme"]) == ("127.0.0.2", "http")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        # the nearest untrusted hop is the client; trusted proxies in the chain are skipped
        ([(b"x-forwarded-for", b"198.51.100.1, 203.0.113.9, 10.0.0.5")], (("203.0.113.9", 0), "http")),
        ([(b"x-forwarded-for", b"10.0.0.7, 10.0.0.5")], (("10.0.0.7", 0), "http")),
        ([(b"x-forwarded-for", b"203.0.113.9"), (b"x-forwarded-proto", b"https")], (("203.0.113.9", 0), "https")),
        # RFC 7239 wins over the X- headers; quoted IPv6 with a port
        (
            [(b"forwarded", b'for="[2001:db8::17]:4711";proto=https'), (b"x-forwarded-for", b"198.51.100.1")],
            (("2001:db8::17", 4711), "https"),
        ),
        ([(b"forwarded", b"for=192.0.2.60;proto=http, for=10.0.0.5")], (("192.0.2.60", 0), "http")),
        # what cannot be believed is not: a name, garbage, an odd scheme
        ([(b"x-forwarded-for", b"evil.example")], (("10.0.0.1", 5000), "http")),
        ([(b"forwarded", b"for=_hidden")], (("10.0.0.1", 5000), "http")),
        ([(b"x-forwarded-for", b"203.0.113.9"), (b"x-forwarded-proto", b"javascript")], (("203.0.113.9", 0), "http")),
        ([], (("10.0.0.1", 5000), "http")),
    ],
)
def test_the_client_is_the_nearest_hop_that_is_not_a_trusted_proxy(
    headers: list[tuple[bytes, bytes]], expected: tuple[tuple[str, int], str]
) -> None:
    trusted = TrustedProxies(["10.0.0.0/8"])
    assert client_of(("10.0.0.1", 5000), "http", headers, trusted) == expected


def test_an_untrusted_peer_keeps_its_own_address_whatever_it_says() -> None:
    headers = [(b"x-forwarded-for", b"203.0.113.9"), (b"forwarded", b"for=198.51.100.1;proto=https")]
    assert client_of(("192.0.2.1", 1), "http", headers, TrustedProxies(["10.0.0.0/8"])) == (("192.0.2.1", 1), "http")
    assert client_of(("192.0.2.1", 1), "http", headers, TrustedProxies([])) == (("192.0.2.1", 1), "http")


def test_a_bad_trusted_proxy_entry_is_named() -> None:
    with pytest.raises(ValueError, match=r"^forwarded-allow-ips: 'ten.0.0.1' is not an IP address or network"):
        ServerOptions(forwarded_allow_ips=("ten.0.0.1",))


async def test_a_body_trickled_byte_by_byte_is_cut_off_when_its_whole_time_is_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # each byte comes well within any per-read wait, but the whole body is due 20 s after its head
    cancelled_at: list[float] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            try:
                while (await receive()).get("more_body"):
                    pass
            except trio.Cancelled:
                cancelled_at.append(trio.current_time())
                raise

    options = ServerOptions(body_timeout_s=20.0, keep_alive_s=1000.0)
    async with serving(app, options) as [url], connect(url) as client:
        client.timeout = 100.0
        await client.send(b"POST /login HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n")
        start = trio.current_time()
        with trio.move_on_after(60):
            while True:
                await trio.sleep(2)
                try:
                    await client.send(b"x")
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break
    [when] = cancelled_at
    assert 20.0 <= when - start < 21.0


async def test_a_head_trickled_byte_by_byte_gets_408_when_its_time_is_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    options = ServerOptions(header_timeout_s=10.0, keep_alive_s=1000.0)
    async with serving(echo, options) as [url], connect(url) as client:
        client.timeout = 100.0
        start = trio.current_time()
        try:
            for byte in b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ":
                await client.send(bytes([byte]))
                await trio.sleep(0.5)
        except trio.BrokenResourceError:
            pass
        reply = await client.read_response()
        assert 10.0 <= trio.current_time() - start < 12.0  # (the 408 is read after a send fails)
        assert reply.status == 408
        assert await client.closed()
