"""The seam under the HTTP actors: which sender an actor gets, the ``httpx`` adapter (everything
the injected client does applies, its errors become mcpwire's), the environment's proxies read as
``httpx`` reads them, and a default path that imports no HTTP library."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from functools import partial

import httpx
import pytest
import trio
from http_fakes import FakeMCPServer

import mcpwire
from mcpwire.actors.http_adapter import HttpxSender
from mcpwire.actors.http_common import environment_proxy, make_sender
from mcpwire.actors.http_pool import PoolSender
from mcpwire.errors import ConnectError, IncompleteBody, LocalProtocolError

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUEST_METHOD")


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


# -- which sender ------------------------------------------------------------------------------------


async def test_an_actor_sends_through_the_injected_client_else_a_proxy_client_else_the_pool(
    clean_environment: pytest.MonkeyPatch,
) -> None:
    injected = httpx.AsyncClient()
    sender = make_sender("http://127.0.0.1:1/mcp", injected)
    assert isinstance(sender, HttpxSender) and sender.client is injected
    await sender.aclose()
    assert not injected.is_closed  # not the sender's to close
    await injected.aclose()
    assert isinstance(make_sender("http://127.0.0.1:1/mcp", None), PoolSender)
    clean_environment.setenv("http_proxy", "http://proxy.invalid:3128")
    proxied = make_sender("http://example.com/mcp", None)
    assert isinstance(proxied, HttpxSender)
    await proxied.aclose()
    assert proxied.client.is_closed  # the actor's own
    assert isinstance(make_sender("https://example.com/mcp", None), PoolSender)


@pytest.mark.parametrize(
    ("variables", "url"),
    [
        ({}, "http://example.com/mcp"),
        ({"http_proxy": "http://p:1"}, "http://example.com/mcp"),
        ({"http_proxy": "http://p:1"}, "https://example.com/mcp"),
        ({"HTTPS_PROXY": "p:1"}, "https://example.com/mcp"),
        ({"ALL_PROXY": "p:1"}, "http://example.com:8080/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "*"}, "http://example.com/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "example.com"}, "http://example.com/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "example.com"}, "http://www.example.com/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "example.com"}, "http://wwwexample.com/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": ".example.com"}, "http://example.com/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": ".example.com"}, "http://a.example.com/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "127.0.0.1, ::1"}, "http://127.0.0.1:8000/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "127.0.0.1, ::1"}, "http://[::1]:8000/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "10.0.0.0/8"}, "http://10.1.2.3/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "localhost"}, "http://LOCALHOST:3000/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "http://internal:8080"}, "http://internal:8080/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "http://internal:8080"}, "http://internal:9090/mcp"),
        ({"all_proxy": "http://p:1", "no_proxy": "https://internal"}, "http://internal/mcp"),
        ({"http_proxy": "http://p:1", "HTTP_PROXY": ""}, "http://example.com/mcp"),
        ({"HTTP_PROXY": "http://p:1", "REQUEST_METHOD": "GET"}, "http://example.com/mcp"),
        ({"http_proxy": "http://p:1", "REQUEST_METHOD": "GET"}, "http://example.com/mcp"),
    ],
)
def test_the_environments_proxy_is_the_one_httpx_would_use(
    clean_environment: pytest.MonkeyPatch, variables: dict[str, str], url: str
) -> None:
    for name, value in variables.items():
        clean_environment.setenv(name, value)
    client = httpx.AsyncClient()
    httpx_proxies = client._transport_for_url(httpx.URL(url)) is not client._transport
    assert (environment_proxy(url) is not None) == httpx_proxies


# -- the httpx adapter ---------------------------------------------------------------------------------


async def test_every_request_goes_through_the_injected_client() -> None:
    """Its auth flow, its event hooks and its headers - even ones set after the connection
    opened - apply to every request the actor sends: nothing goes around the client."""
    fake = FakeMCPServer()
    hooked: list[str] = []

    class Token(httpx.Auth):
        def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
            request.headers["Authorization"] = "Bearer from-the-flow"
            yield request

    async def hook(request: httpx.Request) -> None:
        hooked.append(request.method)

    http = httpx.AsyncClient(
        transport=httpx.MockTransport(fake.handle), auth=Token(), event_hooks={"request": [hook]}, trust_env=False
    )
    async with http, mcpwire.open_client(fake.url, http_client=http, era_cache=False) as client:
        http.headers["X-Later"] = "set after connecting"
        assert (await client.call_tool("echo", {"text": "hi"})).is_error is False
    calls = fake.sent("tools/call")
    assert calls and calls[0].headers["authorization"] == "Bearer from-the-flow"
    assert calls[0].headers["x-later"] == "set after connecting"
    assert len(hooked) == len(fake.requests) and "POST" in hooked


async def _short_body(stream: trio.SocketStream) -> None:
    """Reads a request whose body is ``{}`` whole (a close with bytes unread would be a reset),
    and answers with 1 of the 100 bytes it announces."""
    try:
        request = b""
        while not request.endswith(b"{}"):
            request += await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    finally:
        await stream.aclose()


@pytest.mark.parametrize("through", ["pool", "httpx"])
async def test_a_body_cut_short_is_an_incomplete_body_either_way(through: str) -> None:
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(partial(trio.serve_tcp, _short_body, 0, host="127.0.0.1"))
        url = f"http://127.0.0.1:{listener.socket.getsockname()[1]}/mcp"
        sender = PoolSender(tls=ssl_unused) if through == "pool" else HttpxSender(httpx.AsyncClient(), owned=True)
        response = await sender.send("POST", url, {"Content-Type": "application/json"}, b"{}")
        assert response.status == 200
        with pytest.raises(IncompleteBody, match=r"^the server closed the connection after 1 of the 100 ") as caught:
            async for _ in response.chunks():
                pass
        assert (caught.value.received, caught.value.expected) == (1, 100)
        await response.aclose()
        await sender.aclose()
        nursery.cancel_scope.cancel()


def ssl_unused() -> object:
    raise AssertionError("no TLS here")


async def test_the_adapters_errors_are_mcpwires() -> None:
    with trio.socket.socket() as probe:
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sender = HttpxSender(httpx.AsyncClient(), owned=True)
    with pytest.raises(ConnectError) as caught:
        await sender.send("POST", f"http://127.0.0.1:{port}/mcp", {}, b"{}")
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    with pytest.raises(ConnectError, match="URL"):
        await sender.send("GET", "http://[::1/mcp", {})
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(partial(trio.serve_tcp, _short_body, 0, host="127.0.0.1"))
        url = f"http://127.0.0.1:{listener.socket.getsockname()[1]}/mcp"
        with pytest.raises(LocalProtocolError, match="header name or value") as refused:
            await sender.send("POST", url, {"X": "secret\r\nInjected: 1"}, b"{}")
        assert "secret" not in str(refused.value)
        nursery.cancel_scope.cancel()
    await sender.aclose()


# -- the default path imports no HTTP library ------------------------------------------------------------


HTTP_LIBRARIES = {"httpx", "httpx_sse", "httpcore", "h11", "h2", "anyio"}


def modules_after_a_call(url: str, environment: dict[str, str]) -> set[str]:
    """Top-level modules of a fresh interpreter that connected to ``url``, listed the tools and
    called one."""
    script = f"""
import json, sys, trio, mcpwire
async def main():
    async with mcpwire.open_client({url!r}, era_cache=False) as client:
        await client.list_tools()
        result = await client.call_tool("echo", {{"text": "hi"}})
        assert result.content[0].text == "hi", result
trio.run(main)
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}})))
"""
    env = {k: v for k, v in __import__("os").environ.items() if k.upper() not in PROXY_VARIABLES} | environment
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_connecting_and_calling_a_tool_over_http_imports_no_http_library(reference_url: str) -> None:
    loaded = modules_after_a_call(reference_url, {})
    assert "trio" in loaded and "mcpwire" in loaded
    assert loaded.isdisjoint(HTTP_LIBRARIES), loaded & HTTP_LIBRARIES
    # nor a proxy configured for other hosts only
    loaded = modules_after_a_call(reference_url, {"HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"})
    assert loaded.isdisjoint(HTTP_LIBRARIES), loaded & HTTP_LIBRARIES


def test_a_proxy_from_the_environment_brings_httpx_in(reference_url: str) -> None:
    """A proxy that applies to the URL: the actor sends through an ``httpx`` client, which speaks
    to proxies (here one that does not exist, so the call fails, saying where it could not go)."""
    script = f"""
import sys, trio, mcpwire
async def main():
    try:
        async with mcpwire.open_client({reference_url!r}, era_cache=False, connect_timeout=10):
            pass
    except mcpwire.ConnectError as exc:
        print("httpx" in sys.modules, exc)
trio.run(main)
"""
    env = {k: v for k, v in __import__("os").environ.items() if k.upper() not in PROXY_VARIABLES}
    env["HTTP_PROXY"] = "http://127.0.0.1:9"
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True cannot reach server '127.0.0.1'"), done.stdout
