"""Credentials over every HTTP transport: 401 challenges, the Authorization header on every
request, and secrets kept out of logs, errors and reprs. Against the fake of ``http_fakes``.
"""

from __future__ import annotations

import logging
from typing import Literal

import pytest
import trio
from http_fakes import CHALLENGE, FakeMCPServer, connect, fresh_era_cache  # noqa: F401 (fixture)
from trio.testing import MockClock

from mcpwire.errors import AuthError
from mcpwire.transports import HttpServer

BOUND = 10.0
SECRET = "s3cr3t-t0ken-4f9a"


def _leaks(caplog: pytest.LogCaptureFixture, *secrets: str) -> list[str]:
    """Every captured log record (message, arguments, exception text) that contains a secret."""
    found = []
    for record in caplog.records:
        text = f"{record.getMessage()} {record.args!r} {record.exc_text or ''} {record.__dict__!r}"
        found += [f"{record.name}: {record.getMessage()}" for secret in secrets if secret in text]
    return found


async def test_401_names_the_server_and_carries_the_challenge(autojump_clock: MockClock) -> None:
    """LC-46, HT-M15, AU-03: a 401 to the first request is an auth challenge, not an
    era signal: connecting fails with :class:`AuthError` naming the server, the status and the
    ``WWW-Authenticate`` challenge (with its ``resource_metadata``), and nothing else is tried."""
    fake = FakeMCPServer(require_token=SECRET)
    with (
        trio.fail_after(BOUND),
        pytest.raises(
            AuthError,
            match=r"^server 'mcp\.test' answered HTTP 401 \(no credentials are configured\); challenge: "
            r'Bearer resource_metadata="http://mcp\.test/\.well-known/oauth-protected-resource/mcp"; '
            r"authorize with 'mcpwire login http://mcp\.test/mcp', or pass a token \(--bearer-env VAR on the "
            r"command line, HttpServer\(bearer_token=\.\.\.\) in Python\)$",
        ) as info,
    ):
        async with connect(fake):
            pass
    assert (info.value.status, info.value.challenge, info.value.server) == (401, CHALLENGE, "mcp.test")
    assert fake.trace() == [("POST", "/mcp", "server/discover", 401)]


@pytest.mark.parametrize("mode", ["legacy", "modern", "sse"])
async def test_bearer_token_is_sent_on_every_request_and_never_logged(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    """HT-07, AU-22, HT-L10, SEC-09: with ``bearer_token`` configured, every request -
    probe, POSTs, the GET stream, DELETE, the 2024-11-05 SSE GET and POSTs - carries
    ``Authorization: Bearer <token>``; at DEBUG, no log record (mcpwire's or httpx's) contains
    the token or the session id, and neither does ``repr(HttpServer)``."""
    fake = FakeMCPServer(mode=mode, require_token=SECRET, get_stream="sse")
    transport: Literal["sse", "auto"] = "sse" if mode == "sse" else "auto"
    spec = HttpServer(url=fake.url, transport=transport, bearer_token=SECRET)
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(BOUND):
        async with connect(fake, spec) as client:
            await client.list_tools()
            await client.call_tool("echo", {"text": "x"})
    methods = {r.method for r in fake.requests}
    assert methods == {"legacy": {"POST", "GET", "DELETE"}, "modern": {"POST"}, "sse": {"POST", "GET"}}[mode]
    assert all(r.header("authorization") == f"Bearer {SECRET}" for r in fake.requests), fake.requests
    assert all(r.status is not None and r.status < 400 for r in fake.requests if r.rpc_method != "server/discover")
    sessions = [r.response_headers["mcp-session-id"] for r in fake.requests if "mcp-session-id" in r.response_headers]
    assert caplog.records  # the check below is not vacuous
    assert _leaks(caplog, SECRET, *sessions) == []
    assert SECRET not in repr(spec) and SECRET not in str(spec)
    assert repr(spec) == f"HttpServer('http://mcp.test/mcp', transport={transport!r}, headers=[] bearer=***)"


@pytest.mark.parametrize(
    ("fields", "sent"),
    [
        ({"bearer_token": SECRET}, ("authorization", f"Bearer {SECRET}")),
        ({"api_key": SECRET, "api_key_header": "X-API-Key"}, ("x-api-key", SECRET)),
        ({"headers": {"Authorization": f"Bearer {SECRET}"}}, ("authorization", f"Bearer {SECRET}")),
    ],
    ids=["bearer_token", "api_key", "headers"],
)
async def test_refused_credentials_stay_out_of_errors_logs_and_reprs(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture, fields: dict[str, object], sent: tuple[str, str]
) -> None:
    """HT-07, AU-24, AU-26, STYLE (DEBUG logs never carry secrets): credentials the server
    refuses produce an :class:`AuthError` that says so and carries the challenge, but the secret
    appears in no error text, no log record and no ``repr`` of the spec."""
    fake = FakeMCPServer(require_token="the-right-one")
    spec = HttpServer(url=fake.url, **fields)  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG)
    with (
        trio.fail_after(BOUND),
        pytest.raises(
            AuthError,
            match=r"^server 'mcp\.test' answered HTTP 401 \(the configured credentials were refused\); "
            r"challenge: Bearer resource_metadata=",
        ) as info,
    ):
        async with connect(fake, spec):
            pass
    (probe,) = fake.requests
    assert probe.header(sent[0]) == sent[1]
    assert info.value.challenge == CHALLENGE
    for text in (str(info.value), repr(info.value), repr(spec), str(spec), repr(info.value.args)):
        assert SECRET not in text
    assert _leaks(caplog, SECRET) == []


async def test_401_on_a_call_after_connecting(autojump_clock: MockClock) -> None:
    """AU-26, AU-28: a token that expires mid-session makes that call fail with :class:`AuthError`
    carrying the new challenge; it is not retried and not mistaken for an expired session."""
    fake = FakeMCPServer(require_token=SECRET)
    spec = HttpServer(url=fake.url, bearer_token=SECRET)
    expired = 'Bearer error="invalid_token", resource_metadata="http://mcp.test/prm"'
    with trio.fail_after(BOUND):
        async with connect(fake, spec) as client:
            fake.inject(401, rpc_method="tools/call", headers={"WWW-Authenticate": expired})
            with pytest.raises(
                AuthError,
                match=r"^server 'mcp\.test' answered HTTP 401 \(the configured credentials were refused\); "
                r'challenge: Bearer error="invalid_token", resource_metadata="http://mcp\.test/prm"; '
                r"the token may be wrong or expired: run 'mcpwire login http://mcp\.test/mcp' again, or check "
                r"the token$",
            ):
                await client.call_tool("echo", {"text": "x"})
            assert (await client.call_tool("echo", {"text": "y"})).is_error is False
    assert [r.status for r in fake.sent("tools/call")] == [401, 200]
    assert len(fake.sent("initialize")) == 1


INSUFFICIENT = 'Bearer error="insufficient_scope", scope="files:write", resource_metadata="http://mcp.test/prm"'


@pytest.mark.parametrize("mode", ["legacy", "modern", "sse"])
async def test_403_is_an_auth_error_with_the_challenge(autojump_clock: MockClock, mode: str) -> None:
    """HT-M15, AU-28 (``insufficient_scope``): a 403 on a call, over every HTTP transport, fails
    that call with :class:`AuthError` carrying status 403 and the ``WWW-Authenticate`` challenge
    (in the message too); it is not retried, not taken for a lost session, and later calls work."""
    fake = FakeMCPServer(mode=mode, require_token=SECRET)
    transport: Literal["sse", "auto"] = "sse" if mode == "sse" else "auto"
    spec = HttpServer(url=fake.url, transport=transport, bearer_token=SECRET)
    how = r" \(the configured credentials were refused\)"
    with trio.fail_after(BOUND):
        async with connect(fake, spec) as client:
            fake.inject(403, rpc_method="tools/call", headers={"WWW-Authenticate": INSUFFICIENT})
            with pytest.raises(
                AuthError,
                match=rf"^server 'mcp\.test' answered HTTP 403{how}; challenge: Bearer "
                r'error="insufficient_scope", scope="files:write", resource_metadata="http://mcp\.test/prm"$',
            ) as info:
                await client.call_tool("echo", {"text": "x"})
            assert (await client.call_tool("echo", {"text": "y"})).is_error is False
    assert (info.value.status, info.value.challenge, info.value.server) == (403, INSUFFICIENT, "mcp.test")
    assert [r.status for r in fake.sent("tools/call")] == [403, 200 if mode != "sse" else 202]
    assert len(fake.sent("initialize")) == (0 if mode == "modern" else 1)


async def test_403_while_connecting_is_an_auth_error(autojump_clock: MockClock) -> None:
    """LC-46: a 403 to the first request is an auth answer, not an era signal: connecting fails
    with :class:`AuthError` carrying the challenge, and no other step of the ladder is tried."""
    fake = FakeMCPServer()
    fake.inject(403, rpc_method="server/discover", headers={"WWW-Authenticate": INSUFFICIENT})
    with trio.fail_after(BOUND), pytest.raises(AuthError) as info:
        async with connect(fake):
            pass
    assert (info.value.status, info.value.challenge) == (403, INSUFFICIENT)
    assert fake.trace() == [("POST", "/mcp", "server/discover", 403)]
