"""How HTTP failures are worded: a TLS failure is named with its reason (its own message is often
empty), never as an empty one."""

from __future__ import annotations

import itertools
import ssl
from functools import partial

import pytest
import trio

import mcpwire
from mcpwire.actors.http_common import describe_error, tls_context
from mcpwire.errors import ConnectError, ConnectionBroken


async def _plain_http(stream: trio.SocketStream) -> None:
    try:
        await stream.receive_some(4096)
        await stream.send_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except trio.BrokenResourceError:
        pass
    finally:
        await stream.aclose()


async def test_https_to_a_plain_http_server_names_the_tls_failure() -> None:
    """``https://`` to a port that speaks plain HTTP: the TLS handshake fails, and the error says
    so, with the reason and the likely fix, instead of an empty reason."""
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(partial(trio.serve_tcp, _plain_http, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        with (
            trio.fail_after(20),
            pytest.raises(
                ConnectError,
                match=rf"^cannot reach server '127\.0\.0\.1' at https://127\.0\.0\.1:{port}/mcp: TLS handshake "
                r"failed: wrong version number \(is it plain HTTP\? try http://\)$",
            ),
        ):
            async with mcpwire.open_client(f"https://127.0.0.1:{port}/mcp", era_cache=False):
                pytest.fail("connected")
        nursery.cancel_scope.cancel()


def _chained(*errors: BaseException) -> BaseException:
    for outer, inner in itertools.pairwise(errors):
        outer.__cause__ = inner
    return errors[0]


def test_a_certificate_failure_is_named() -> None:
    verify = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    verify.verify_message = "self-signed certificate"
    error = _chained(ConnectError(""), trio.BrokenResourceError(""), verify)
    assert describe_error(error) == "TLS certificate verification failed: self-signed certificate"


def test_an_empty_error_takes_the_first_cause_that_says_something() -> None:
    error = _chained(ConnectionBroken(""), OSError(104, "Connection reset by peer"))
    assert describe_error(error) == "[Errno 104] Connection reset by peer"
    assert describe_error(ConnectionBroken("")) == "ConnectionBroken"
    assert describe_error(ConnectError("all attempts failed")) == "all attempts failed"


def test_one_tls_context_per_process_and_none_loaded_for_plain_http() -> None:
    """The default client's TLS context is built once per process; a plain-HTTP URL gets one
    that trusts nothing (no CA bundle loaded), so it costs nothing and fails closed."""
    secure = tls_context("https://example.test/mcp")
    assert tls_context("https://other.test/") is secure
    assert secure.verify_mode is ssl.CERT_REQUIRED and secure.cert_store_stats()["x509_ca"] > 0
    plain = tls_context("http://127.0.0.1:8000/mcp")
    assert tls_context("http://localhost/") is plain
    assert plain.verify_mode is ssl.CERT_REQUIRED and plain.cert_store_stats()["x509_ca"] == 0
