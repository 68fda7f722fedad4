"""The provider behind ``mcpwire.open_client``: the streamable HTTP actor sees only the final
answers, and a refused flow surfaces as the :class:`~mcpwire.auth.OAuthError` it is."""

from __future__ import annotations

import httpx
import pytest
import trio
from oauth_fakes import MCP_URL, OAuthWorld

import mcpwire
from mcpwire.auth import OAuthError

BOUND = 10.0


async def test_open_client_through_the_provider() -> None:
    world = OAuthWorld(challenge_scope="mcp:tools")
    provider = world.provider()
    with trio.fail_after(BOUND):
        async with (
            httpx.AsyncClient(transport=world.transport(), auth=provider) as http,
            mcpwire.open_client(MCP_URL, http_client=http, protocol_version="2025-11-25") as client,
        ):
            assert [t.name for t in await client.list_tools()] == ["whoami"]
            assert (await client.call_tool("whoami", {})).text() == "you"
    assert provider.counters["token:authorization_code"] == 1
    authorized = [s for s in world.sent if s.path == "/mcp" and "authorization" in s.headers]
    # Every MCP request after the first 401 carries the token (AU-22).
    assert [s.headers["authorization"].split()[0] for s in authorized] == ["Bearer"] * len(authorized)
    assert len(authorized) >= 4  # initialize (retried), initialized, tools/list, tools/call


async def test_a_refused_flow_fails_the_connection_with_oauth_error() -> None:
    world = OAuthWorld(prm_resource="https://evil.example/mcp")
    with trio.fail_after(BOUND), pytest.raises(OAuthError, match=r"refusing to authorize for another resource$"):
        async with (
            httpx.AsyncClient(transport=world.transport(), auth=world.provider()) as http,
            mcpwire.open_client(MCP_URL, http_client=http, protocol_version="2025-11-25"),
        ):
            pass
    assert not world.only("/token")
