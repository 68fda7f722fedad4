"""The gateway's side of OAuth (mcpwire.service.oauth) against a real oidc-provider process: its
metadata and keys found and cached, real access tokens accepted for the right audience, key
rotation followed, made-up key ids not followed more than once in a while; and what a real
provider will not do on demand (hang, answer too much), with a listener of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _idp import Idp, SigningKey, access_token, free_port, running_idp

from mcpwire.service import oauth
from mcpwire.service.identity import Identity, Role
from mcpwire.service.jws import JwtError
from mcpwire.service.oauth import IdentityProvider, ProviderError, RoleMap
from mcpwire.service.oidc import redirect_uri_for
from mcpwire.service.settings import OAuthSettings

pytestmark = [pytest.mark.real]

RESOURCE = "http://127.0.0.1:7/mcp"
ROLES = (("mcp-admins", "admin"), ("mcp-users", "caller"), ("mcp-viewers", "viewer"), ("mcp-approvers", "approver"))


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Idp]:
    with running_idp(tmp_path_factory.mktemp("idp")) as running:
        yield running


class Counting(httpx.AsyncBaseTransport):
    """The real transport, counting the requests by path."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await self.inner.handle_async_request(request)


def provider(issuer: str, transport: httpx.AsyncBaseTransport | None = None, **settings: Any) -> IdentityProvider:
    return IdentityProvider(OAuthSettings(issuer=issuer, roles=ROLES, **settings), RESOURCE, transport=transport)


async def test_a_real_access_token_proves_its_user_and_role(idp: Idp) -> None:
    token = await trio.to_thread.run_sync(access_token, idp, RESOURCE, "dave")
    counting = Counting()
    gateway = provider(idp.issuer, counting)
    assert await gateway.verify_access_token(token) == Identity("user", "dave@example.com", Role.APPROVER)
    assert await gateway.verify_access_token(token) == Identity("user", "dave@example.com", Role.APPROVER)
    # the RFC 8414 URL first (oidc-provider serves it too), then the keys, once
    assert counting.paths == ["/.well-known/oauth-authorization-server", "/jwks"]


async def test_a_real_token_for_another_resource_is_refused(idp: Idp, caplog: pytest.LogCaptureFixture) -> None:
    token = await trio.to_thread.run_sync(access_token, idp, "http://127.0.0.1:8/mcp", "alice")
    caplog.set_level("INFO", logger="mcpwire.service.oauth")
    assert await provider(idp.issuer).verify_access_token(token) is None
    assert (
        "a bearer JWT was refused: the token is for the audience 'http://127.0.0.1:8/mcp', not "
        "'http://127.0.0.1:7/mcp'" in caplog.messages
    )


async def test_the_issuer_must_be_exactly_the_one_configured(idp: Idp) -> None:
    with pytest.raises(ProviderError, match=r"names the issuer 'http://127.0.0.1:\d+', not 'http://127.0.0.1:\d+/'"):
        await provider(idp.issuer + "/").metadata()


async def test_unknown_key_ids_fetch_the_keys_again_at_most_every_30_s(idp: Idp) -> None:
    counting = Counting()
    gateway = provider(idp.issuer, counting)
    assert await gateway.verify_access_token(idp.forge(RESOURCE)) is not None
    stranger = SigningKey.ec("not-published")
    with pytest.raises(JwtError, match=r"^the token is signed with key 'not-published'"):
        await gateway.claims_of(idp.forge(RESOURCE, key=stranger), audience=RESOURCE)
    for n in range(5):
        assert await gateway.verify_access_token(idp.forge(RESOURCE, key=SigningKey.ec(f"k{n}"))) is None
    assert counting.paths.count("/jwks") == 1  # fetched less than 30 s ago: not again
    gateway._keys = (gateway._keys[0] - oauth.MIN_REFRESH_S, gateway._keys[1])  # type: ignore[index]
    assert await gateway.verify_access_token(idp.forge(RESOURCE, key=stranger)) is None
    assert counting.paths.count("/jwks") == 2


async def test_a_rotated_key_is_fetched_when_a_token_names_it(tmp_path: Path) -> None:
    port = free_port()
    gateway = provider(f"http://127.0.0.1:{port}")
    with running_idp(tmp_path / "before", port=port) as before:
        assert await gateway.verify_access_token(before.forge(RESOURCE)) is not None
    rotated = [SigningKey.rsa("rs2"), SigningKey.ec("es2")]
    with running_idp(tmp_path / "after", port=port, keys=rotated) as after:
        gateway._keys = (gateway._keys[0] - oauth.MIN_REFRESH_S, gateway._keys[1])  # type: ignore[index]
        token = await trio.to_thread.run_sync(access_token, after, RESOURCE, "bob")
        assert await gateway.verify_access_token(token) == Identity("user", "bob@example.com", Role.CALLER)
        # the old key is gone from the provider, and so from the gateway
        assert await gateway.verify_access_token(after.forge(RESOURCE, key=before.keys[1])) is None


async def test_a_provider_that_never_answers_costs_a_bounded_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oauth, "FETCH_TIMEOUT_S", 0.5)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    accepted: list[trio.SocketStream] = []

    async def hold() -> None:
        while True:
            accepted.append(await listeners[0].accept())  # and never answer

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold)
        gateway = provider(f"http://127.0.0.1:{port}")
        with trio.fail_after(5):
            with pytest.raises(ProviderError, match=r"did not answer within 0.5 s$"):
                await gateway.metadata()
            # then the provider is left alone for a few seconds: tokens are refused at once
            with pytest.raises(ProviderError, match=r"^the identity provider failed 0 s ago; asking again in 5 s$"):
                await gateway.metadata()
        assert len(accepted) == 1
        nursery.cancel_scope.cancel()
    for listener in listeners:
        await listener.aclose()


async def test_a_document_too_large_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oauth, "MAX_DOCUMENT_BYTES", 1000)
    huge = httpx.MockTransport(lambda request: httpx.Response(200, content=b" " * 5000))
    with pytest.raises(ProviderError, match=r"answered with more than 1000 bytes$"):
        await provider("https://idp.example", huge).metadata()


def test_roles_the_highest_matched_wins_else_the_default() -> None:
    roles = RoleMap("realm.roles", {"a": Role.VIEWER, "b": Role.APPROVER}, Role.CALLER)
    assert roles.role_of({"realm": {"roles": ["a", "b", 3]}}) is Role.APPROVER
    assert roles.role_of({"realm": {"roles": "a"}}) is Role.VIEWER
    assert roles.role_of({"realm": {"roles": ["z"]}}) is Role.CALLER
    assert roles.role_of({"realm": "a"}) is Role.CALLER
    assert RoleMap("groups", {"a": Role.ADMIN}).role_of({"groups": ["b"]}) is None


def test_the_user_is_named_by_a_verified_email_else_sub() -> None:
    gateway = provider("https://idp.example", default_role="viewer")
    assert gateway.identity_of({"sub": "u1", "email": "a@example.com"}) == Identity(
        "user", "a@example.com", Role.VIEWER
    )
    assert gateway.identity_of({"sub": "u1", "email": "a@example.com", "email_verified": False}) == Identity(
        "user", "u1", Role.VIEWER
    )
    assert gateway.identity_of({"sub": "u1\x1b[2J"}) == Identity("user", "u1\\x1b[2J", Role.VIEWER)
    assert gateway.identity_of({"email": "a@example.com", "email_verified": False}) is None


async def test_what_the_provider_published_serves_while_it_is_down(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    gateway = provider(f"http://127.0.0.1:{port}")
    with running_idp(tmp_path, port=port) as idp:
        token = idp.forge(RESOURCE, "carol")
        assert await gateway.verify_access_token(token) is not None
    # the provider is gone and both caches are old: the keys it had still verify its tokens
    gateway._metadata = (gateway._metadata[0] - oauth.METADATA_TTL_S, gateway._metadata[1])  # type: ignore[index]
    gateway._keys = (gateway._keys[0] - oauth.KEYS_TTL_S, gateway._keys[1])  # type: ignore[index]
    caplog.set_level("WARNING", logger="mcpwire.service.oauth")
    assert await gateway.verify_access_token(token) == Identity("user", "carol@example.com", Role.VIEWER)
    assert caplog.messages == [
        f"cannot read the identity provider's metadata: http://127.0.0.1:{port}/.well-known/oauth-authorization-server"
        f": ConnectError: all attempts to connect to 127.0.0.1:{port} failed; using what it published before"
    ]
    # a key it never published cannot be fetched now: refused
    assert await gateway.verify_access_token(idp.forge(RESOURCE, key=SigningKey.ec("new"))) is None


def test_behind_a_proxy_the_metadata_names_the_public_urls() -> None:
    gateway = IdentityProvider(
        OAuthSettings(issuer="https://login.example.com/tenant", default_role="viewer", scopes=("mcp", "tools:call")),
        "https://example.com/team/mcp",
    )
    assert gateway.metadata_url == "https://example.com/.well-known/oauth-protected-resource/team/mcp"
    assert gateway.metadata_paths() == (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource/team/mcp",
    )
    assert gateway.metadata_document()["authorization_servers"] == ["https://login.example.com/tenant"]
    assert gateway.challenge() == (
        'Bearer realm="mcpwire", resource_metadata="https://example.com/.well-known/oauth-protected-resource/team/mcp"'
        ', scope="mcp tools:call"'
    )
    assert redirect_uri_for(gateway.resource) == "https://example.com/team/login/oidc/callback"
    assert redirect_uri_for("https://mcp.example.com/gateway") == "https://mcp.example.com/login/oidc/callback"
