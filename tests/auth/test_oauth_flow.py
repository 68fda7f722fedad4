"""The authorization code flow end to end through ``httpx.MockTransport``: every discovery
fallback, every refusal path, client identity, token endpoint authentication, refresh, step-up,
authorization-server binding, single-flight, and secrets kept out of logs and reprs."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from oauth_fakes import AS_ORIGIN, MCP_URL, REDIRECT_URI, OAuthWorld, basic_credentials, call

from mcpwire.auth import ClientInfo, HeadlessRedirect, MemoryTokenStorage, OAuthError, OAuthProvider, TokenSet
from mcpwire.errors import AuthError

BOUND = 10.0


async def test_full_flow_with_header_prm_dcr_pkce_and_resource() -> None:
    """AU-03..AU-16: 401 → PRM from the header → RFC 8414 metadata → DCR → authorization with
    PKCE S256, state and resource → token with the verifier and resource → retry with Bearer."""
    world = OAuthWorld(challenge_scope="mcp:read")
    provider = world.provider()
    with trio.fail_after(BOUND):
        response = await call(provider, world)
    assert response.status_code == 200
    assert world.paths() == [
        "POST mcp.test/mcp",
        "GET mcp.test/.well-known/oauth-protected-resource/mcp",
        "GET as.test/.well-known/oauth-authorization-server",
        "POST as.test/register",
        "GET as.test/authorize",
        "POST as.test/token",
        "POST mcp.test/mcp",
    ]
    # MCP-Protocol-Version travels with the discovery requests (AU-41 SHOULD).
    assert world.sent[1].headers["mcp-protocol-version"] == "2025-11-25"
    registration = world.only("/register")[0].json
    assert registration["application_type"] == "native"  # AU-14, loopback redirect
    assert registration["redirect_uris"] == [REDIRECT_URI]
    assert "refresh_token" in registration["grant_types"]  # AU-25
    authorize = world.only("/authorize")[0].query
    assert authorize["code_challenge_method"] == "S256"
    assert authorize["resource"] == MCP_URL and authorize["scope"] == "mcp:read"
    assert authorize["client_id"] == "client-1" and authorize["state"]
    token = world.only("/token")[0].form
    assert token["grant_type"] == "authorization_code" and token["resource"] == MCP_URL
    assert token["client_id"] == "client-1" and "client_secret" not in token  # AS supports only "none"
    assert world.sent[-1].headers["authorization"].startswith("Bearer access-")
    assert provider.counters["token:authorization_code"] == 1


async def test_prm_well_known_fallbacks_in_order() -> None:
    """AU-04: no header → path-based well-known → root well-known."""
    world = OAuthWorld(prm_in_header=False, prm_path="/.well-known/oauth-protected-resource")
    with trio.fail_after(BOUND):
        assert (await call(world.provider(), world)).status_code == 200
    assert world.paths()[1:4] == [
        "GET mcp.test/.well-known/oauth-protected-resource/mcp",
        "GET mcp.test/.well-known/oauth-protected-resource",
        "GET as.test/.well-known/oauth-authorization-server",
    ]
    # The root PRM names the origin; that identifier is sent exactly as published.
    assert world.only("/authorize")[0].query["resource"] == MCP_URL


async def test_root_prm_resource_is_sent_as_published() -> None:
    world = OAuthWorld(prm_resource="http://mcp.test")
    with trio.fail_after(BOUND):
        assert (await call(world.provider(), world)).status_code == 200
    assert world.only("/authorize")[0].query["resource"] == "http://mcp.test"
    assert world.only("/token")[0].form["resource"] == "http://mcp.test"


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("oauth", ["/.well-known/oauth-authorization-server/tenant1"]),
        ("oidc", ["/.well-known/oauth-authorization-server/tenant1", "/.well-known/openid-configuration/tenant1"]),
        (
            "oidc-append",
            [
                "/.well-known/oauth-authorization-server/tenant1",
                "/.well-known/openid-configuration/tenant1",
                "/tenant1/.well-known/openid-configuration",
            ],
        ),
    ],
)
async def test_as_metadata_fallbacks_for_an_issuer_with_a_path(where: Any, expected: list[str]) -> None:
    """AU-07: RFC 8414 path insertion, then OIDC insertion, then OIDC appending."""
    world = OAuthWorld(issuer=f"{AS_ORIGIN}/tenant1", metadata_at=where)
    with trio.fail_after(BOUND):
        assert (await call(world.provider(), world)).status_code == 200
    tried = [s.path for s in world.sent if s.url.startswith(AS_ORIGIN) and "well-known" in s.path]
    assert tried == expected
    assert world.only("/tenant1/token")


async def test_oidc_at_the_root_after_rfc8414() -> None:
    world = OAuthWorld(metadata_at="oidc")
    with trio.fail_after(BOUND):
        assert (await call(world.provider(), world)).status_code == 200
    tried = [s.path for s in world.sent if "well-known" in s.path and s.url.startswith(AS_ORIGIN)]
    assert tried == ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]


async def test_legacy_server_metadata_on_the_origin() -> None:
    """AU-42: no PRM anywhere → the 2025-03-26 procedure: AS metadata on the MCP origin."""
    world = OAuthWorld(prm_path=None, issuer="http://mcp.test")
    with trio.fail_after(BOUND):
        assert (await call(world.provider(), world)).status_code == 200
    assert world.paths()[1:4] == [
        "GET mcp.test/.well-known/oauth-protected-resource/mcp",
        "GET mcp.test/.well-known/oauth-protected-resource",
        "GET mcp.test/.well-known/oauth-authorization-server",
    ]


async def test_legacy_server_default_endpoints() -> None:
    """AU-41: no PRM and no AS metadata → /register, /authorize, /token on the origin."""
    world = OAuthWorld(prm_path=None, metadata_at="none", iss_mode="omit")
    with trio.fail_after(BOUND):
        assert (await call(world.provider(), world)).status_code == 200
    assert [p for p in world.paths() if "well-known" not in p] == [
        "POST mcp.test/mcp",
        "POST mcp.test/register",
        "GET mcp.test/authorize",
        "POST mcp.test/token",
        "POST mcp.test/mcp",
    ]


async def _refused(world: OAuthWorld, pattern: str, **kwargs: Any) -> OAuthError:
    with trio.fail_after(BOUND), pytest.raises(OAuthError, match=pattern) as info:
        await call(world.provider(**kwargs), world)
    assert isinstance(info.value, AuthError) and info.value.status in (401, 403)
    assert not world.only("/token"), "no token may be requested after a refusal"
    return info.value


async def test_refuses_a_prm_for_another_resource() -> None:
    """AU-05: nothing is requested from the authorization server."""
    world = OAuthWorld(prm_resource="https://evil.example/mcp")
    await _refused(
        world,
        r"^cannot authorize to 'http://mcp\.test/mcp': protected resource metadata names resource "
        r"'https://evil\.example/mcp', not 'http://mcp\.test/mcp'; refusing to authorize for another resource$",
    )
    assert not [s for s in world.sent if s.url.startswith(AS_ORIGIN)]


async def test_refuses_as_metadata_with_another_issuer() -> None:
    """AU-08: every candidate URL is tried, none is used, nothing is registered."""
    world = OAuthWorld(metadata_issuer="https://attacker.example")
    await _refused(world, r"^cannot authorize to .*: authorization server metadata has issuer 'https://attacker")
    assert not world.only("/register") and not world.only("/authorize")


async def test_refuses_without_pkce_support() -> None:
    """AU-09: absent code_challenge_methods_supported, or no S256 in it."""
    await _refused(OAuthWorld(pkce_methods=None), r"does not advertise PKCE S256 support$")
    world = OAuthWorld(pkce_methods=["plain"])
    await _refused(world, r"does not advertise PKCE S256 support$")
    assert not world.only("/authorize")


async def test_refuses_when_no_client_identity_can_be_had() -> None:
    """AU-10: no pre-registration, no CIMD, no DCR → an error that says what to configure."""
    await _refused(OAuthWorld(registration=False), r"configure pre-registered credentials$")


@pytest.mark.parametrize(
    ("iss_supported", "iss_mode", "pattern"),
    [
        (True, "omit", r"lacks the 'iss' parameter"),
        (True, "wrong", r"came from issuer 'https://evil\.example', not 'http://as\.test'$"),
        (None, "wrong", r"came from issuer 'https://evil\.example'"),
        (True, "normalized", r"came from issuer 'http://as\.test/', not 'http://as\.test'$"),
    ],
)
async def test_rfc9207_iss_refusals(iss_supported: bool | None, iss_mode: Any, pattern: str) -> None:
    """AU-19: the RFC 9207 §2.4 table, exact string comparison, checked before the code is used."""
    world = OAuthWorld(iss_supported=iss_supported, iss_mode=iss_mode)
    await _refused(world, pattern)
    assert world.only("/authorize")


@pytest.mark.parametrize(("iss_supported", "iss_mode"), [(None, "omit"), (False, "omit"), (False, "correct")])
async def test_rfc9207_iss_accepted(iss_supported: bool | None, iss_mode: Any) -> None:
    world = OAuthWorld(iss_supported=iss_supported, iss_mode=iss_mode)
    with trio.fail_after(BOUND):
        assert (await call(world.provider(), world)).status_code == 200


async def test_state_mismatch_is_discarded() -> None:
    """AU-20."""
    await _refused(OAuthWorld(state_mode="wrong"), r"state does not match the request; discarded$")


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
async def test_token_endpoint_auth_methods(method: str) -> None:
    """The registered method is used: Basic header, form secret, or the client id alone."""
    world = OAuthWorld(auth_methods=[method], registered_method=method)
    if method == "none":
        world.registered_secret = None
    with trio.fail_after(BOUND):
        assert (await call(world.provider(), world)).status_code == 200
    assert world.only("/register")[0].json["token_endpoint_auth_method"] == method
    sent = world.only("/token")[0]
    form = sent.form
    if method == "client_secret_basic":
        assert basic_credentials(sent) == ("client-1", "reg-secret-1") and "client_secret" not in form
    elif method == "client_secret_post":
        assert (form["client_id"], form["client_secret"]) == ("client-1", "reg-secret-1")
        assert basic_credentials(sent) is None
    else:
        assert form["client_id"] == "client-1" and "client_secret" not in form and basic_credentials(sent) is None


async def test_pre_registered_credentials_skip_registration() -> None:
    """AU-12: pre-registered credentials; RFC 6749 §2.3.1 form-encoding inside Basic."""
    world = OAuthWorld(registration=False, auth_methods=["client_secret_basic"])
    client = ClientInfo("pre:client", "s3cr&t", issuer=AS_ORIGIN)
    with trio.fail_after(BOUND):
        assert (await call(world.provider(client=client), world)).status_code == 200
    assert basic_credentials(world.only("/token")[0]) == ("pre:client", "s3cr&t")
    assert world.only("/authorize")[0].query["client_id"] == "pre:client"


async def test_pre_registered_credentials_for_another_issuer_are_refused() -> None:
    """AU-15: never offered to another AS."""
    world = OAuthWorld()
    client = ClientInfo("pre", "secret", issuer="https://other-as.example")
    pattern = r"belong to 'https://other-as\.example', but the server's authorization server is"
    await _refused(world, pattern, client=client)
    assert not world.only("/authorize")


async def test_client_id_metadata_document_when_advertised() -> None:
    """AU-11: the CIMD URL is the client id; no registration."""
    world = OAuthWorld(cimd=True)
    url = "https://app.example/client.json"
    with trio.fail_after(BOUND):
        assert (await call(world.provider(client_metadata_url=url), world)).status_code == 200
    assert not world.only("/register")
    assert world.only("/authorize")[0].query["client_id"] == url
    assert world.only("/token")[0].form["client_id"] == url


async def test_cimd_not_used_when_not_advertised() -> None:
    world = OAuthWorld(cimd=False)
    with trio.fail_after(BOUND):
        assert (await call(world.provider(client_metadata_url="https://app.example/c.json"), world)).status_code == 200
    assert world.only("/register")


async def test_scope_from_prm_and_offline_access() -> None:
    """AU-17: PRM scopes_supported without a challenged scope; AU-25: offline_access only
    when the AS lists it."""
    world = OAuthWorld(prm_scopes=["a", "b"], as_scopes=["a", "b", "offline_access"])
    with trio.fail_after(BOUND):
        await call(world.provider(), world)
    assert world.only("/authorize")[0].query["scope"] == "a b offline_access"
    world = OAuthWorld()
    with trio.fail_after(BOUND):
        await call(world.provider(), world)
    assert "scope" not in world.only("/authorize")[0].query


async def test_refresh_on_401_instead_of_a_new_authorization() -> None:
    """AU-26: a 401 to a token with a refresh token from the same AS → refresh_token grant."""
    world = OAuthWorld()
    provider = world.provider()
    with trio.fail_after(BOUND):
        await call(provider, world)
        world.tokens.clear()  # the server forgets the token: the next request gets 401
        response = await call(provider, world)
    assert response.status_code == 200
    grants = [s.form["grant_type"] for s in world.only("/token")]
    assert grants == ["authorization_code", "refresh_token"]
    refresh = world.only("/token")[1].form
    assert refresh["refresh_token"].startswith("refresh-") and refresh["resource"] == MCP_URL
    assert len(world.only("/authorize")) == 1


async def test_refused_refresh_falls_back_to_authorization() -> None:
    world = OAuthWorld(refresh_works=False)
    provider = world.provider()
    with trio.fail_after(BOUND):
        await call(provider, world)
        world.tokens.clear()
        assert (await call(provider, world)).status_code == 200
    assert [s.form["grant_type"] for s in world.only("/token")] == [
        "authorization_code",
        "refresh_token",
        "authorization_code",
    ]


async def test_expired_token_is_refreshed_before_use() -> None:
    world = OAuthWorld(expires_in=1)
    provider = world.provider()
    with trio.fail_after(BOUND):
        await call(provider, world)
        posts_before = world.paths().count("POST mcp.test/mcp")
        assert (await call(provider, world)).status_code == 200
    # Expired (within the skew): refreshed first, so the MCP request goes out once, with the new token.
    assert [s.form["grant_type"] for s in world.only("/token")] == ["authorization_code", "refresh_token"]
    assert world.paths().count("POST mcp.test/mcp") == posts_before + 1


async def test_step_up_requests_the_union_of_scopes() -> None:
    """AU-18: 403 insufficient_scope → re-authorize with the union of previous and challenged scopes."""
    world = OAuthWorld(challenge_scope="mcp:read", call_scope="mcp:write")
    provider = world.provider()
    with trio.fail_after(BOUND):
        assert (await call(provider, world)).status_code == 200
        assert (await call(provider, world, "tools/call")).status_code == 200
    scopes = [s.query["scope"] for s in world.only("/authorize")]
    assert scopes == ["mcp:read", "mcp:read mcp:write"]


async def test_step_up_is_bounded() -> None:
    """AU-18: at most three authorizations for one request; then the 403 is returned."""
    world = OAuthWorld(challenge_scope="mcp:admin", always_403=True)
    with trio.fail_after(BOUND):
        response = await call(world.provider(), world)
    assert response.status_code == 403
    assert len(world.only("/authorize")) == 3


async def test_a_403_without_insufficient_scope_is_returned() -> None:
    world = OAuthWorld()
    provider = world.provider()
    with trio.fail_after(BOUND):
        await call(provider, world)

    def forbid(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})

    async with httpx.AsyncClient(transport=httpx.MockTransport(forbid), auth=provider) as http:
        assert (await http.post(MCP_URL, content=b"{}")).status_code == 403
    assert len(world.only("/authorize")) == 1


async def test_authorization_server_change_re_registers() -> None:
    """AU-06, AU-15, AU-23: a new AS in the PRM → the old token is dropped, a new client is
    registered there, and the old client id is never presented to it."""
    world = OAuthWorld(issue_refresh=True)
    storage = MemoryTokenStorage()
    provider = world.provider(storage=storage)
    with trio.fail_after(BOUND):
        await call(provider, world)
        world.issuer = f"{AS_ORIGIN}/second"
        world.tokens.clear()
        assert (await call(provider, world)).status_code == 200
    registrations = world.only("/register")
    assert [s.path for s in registrations] == ["/register", "/second/register"]
    second = world.only("/second/authorize")[0].query
    assert second["client_id"] != world.only("/authorize")[0].query["client_id"]
    assert [s.form["grant_type"] for s in world.only("/token")] == ["authorization_code", "authorization_code"]
    assert set(storage.clients) == {AS_ORIGIN, f"{AS_ORIGIN}/second"}
    tokens = storage.tokens[MCP_URL]
    assert tokens.issuer == f"{AS_ORIGIN}/second"


async def test_concurrent_401s_run_one_flow() -> None:
    """AU-28: single-flight; the waiting request reuses the token the other one obtained."""
    world = OAuthWorld()
    provider = world.provider()
    results: list[int] = []

    async def one() -> None:
        results.append((await call(provider, world)).status_code)

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one)
            nursery.start_soon(one)
    assert results == [200, 200]
    assert len(world.only("/authorize")) == 1


async def test_secrets_stay_out_of_logs_errors_and_reprs(caplog: pytest.LogCaptureFixture) -> None:
    """AU-24: tokens, refresh tokens, client secrets and verifiers never appear, not even in
    httpx's own DEBUG records."""
    caplog.set_level(logging.DEBUG)
    world = OAuthWorld(auth_methods=["client_secret_post"], registered_method="client_secret_post")
    storage = MemoryTokenStorage()
    provider = world.provider(storage=storage)
    with trio.fail_after(BOUND):
        await call(provider, world)
    tokens = storage.tokens[MCP_URL]
    client = storage.clients[AS_ORIGIN]
    verifier = world.only("/token")[0].form["code_verifier"]
    secrets = [tokens.access_token, tokens.refresh_token or "", client.client_secret or "", verifier]
    text = " ".join(
        [repr(provider), repr(storage), repr(tokens), repr(client)]
        + [f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records]
    )
    assert all(secret and secret not in text for secret in secrets)
    world.iss_mode = "wrong"
    world.tokens.clear()
    world.refresh_works = False
    with pytest.raises(OAuthError) as info:
        await call(provider, world)
    assert not any(secret in str(info.value) for secret in secrets)


async def test_token_set_json_round_trip() -> None:
    tokens = TokenSet("a", issuer="i", refresh_token="r", scope="s", expires_at=time.time(), resource="x")
    assert TokenSet.from_json(json.loads(json.dumps(tokens.to_json()))) == tokens


async def test_a_broken_header_prm_falls_back_to_the_well_known_uris() -> None:
    """AU-04: a header URL that does not answer with a usable document is not the end."""
    world = OAuthWorld(prm_in_header=False)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/mcp" and "authorization" not in request.headers:
            return httpx.Response(
                401, headers={"WWW-Authenticate": 'Bearer resource_metadata="http://mcp.test/broken"'}
            )
        if request.url.path == "/broken":
            return httpx.Response(200, content=b"not json")
        return world.handle(request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handle), auth=world.provider()) as http:
        with trio.fail_after(BOUND):
            assert (await http.post(MCP_URL, content=b"{}")).status_code == 200
    assert world.paths()[0] == "GET mcp.test/.well-known/oauth-protected-resource/mcp"


async def test_an_authorization_server_with_stored_credentials_is_preferred() -> None:
    """AU-06 (RFC 9728 §7.6): among several authorization servers, one we are registered with."""
    world = OAuthWorld()
    storage = MemoryTokenStorage()
    await storage.set_client(AS_ORIGIN, ClientInfo("known-client", issuer=AS_ORIGIN))

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/.well-known/oauth-protected-resource/mcp":
            return httpx.Response(
                200, json={"resource": MCP_URL, "authorization_servers": ["https://other.example", AS_ORIGIN]}
            )
        return world.handle(request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handle), auth=world.provider(storage=storage)) as http:
        with trio.fail_after(BOUND):
            assert (await http.post(MCP_URL, content=b"{}")).status_code == 200
    assert not world.only("/register")
    assert world.only("/authorize")[0].query["client_id"] == "known-client"


async def test_legacy_metadata_with_a_wrong_issuer_is_not_replaced_by_defaults() -> None:
    """AU-08 over AU-41: metadata that exists but names another issuer is refused, not skipped."""
    world = OAuthWorld(prm_path=None, issuer="http://mcp.test", metadata_issuer="http://mcp.test/oauth")
    await _refused(world, r"authorization server metadata has issuer 'http://mcp\.test/oauth', not 'http://mcp\.test'")
    assert not world.only("/register")


async def test_a_server_that_never_accepts_gets_three_authorizations() -> None:
    """Every wait is bounded: a 401 to every token ends after ``max_attempts`` flows."""
    world = OAuthWorld(issue_refresh=False)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/mcp":
            world.tokens.clear()  # every token is forgotten before it is checked
        return world.handle(request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handle), auth=world.provider()) as http:
        with trio.fail_after(BOUND):
            assert (await http.post(MCP_URL, content=b"{}")).status_code == 401
    assert len(world.only("/authorize")) == 3
    assert world.paths().count("POST mcp.test/mcp") == 4


class _StuckBrowser:
    """A user who never comes back from the authorization page."""

    redirect_uri = REDIRECT_URI

    async def authorize(self, authorization_url: str) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_cancelling_a_flow_releases_the_provider(autojump_clock: trio.testing.MockClock) -> None:
    """Cancellation mid-flow (waiting for the user) leaves no lock held and no state behind:
    the next request starts a clean flow."""
    world = OAuthWorld()
    provider = world.provider(redirect=_StuckBrowser())
    with trio.move_on_after(60) as scope:
        await call(provider, world)
    assert scope.cancelled_caught
    assert not provider._lock.locked()
    assert await provider.storage.get_tokens(MCP_URL) is None
    provider.redirect = world.provider().redirect
    with trio.fail_after(BOUND):
        assert (await call(provider, world)).status_code == 200


async def test_redirect_uris_must_be_loopback_or_https() -> None:
    """AU-21: a plain-http redirect to another host is refused before anything is registered."""
    world = OAuthWorld()
    redirect = HeadlessRedirect(redirect_uri="http://app.example/callback")
    pattern = r"redirect URI 'http://app\.example/callback' is neither https nor a loopback address$"
    await _refused(world, pattern, redirect=redirect)
    assert not world.only("/register")


def test_client_metadata_url_must_be_https_with_a_path() -> None:
    """AU-11."""
    for bad in ("http://app.example/client.json", "https://app.example", "https://app.example/"):
        with pytest.raises(ValueError, match=r"^client_metadata_url must be an https URL with a path"):
            OAuthWorld().provider(client_metadata_url=bad)


async def test_an_https_server_refuses_plain_http_authorization_endpoints() -> None:
    """AU-21: an https MCP server's authorization server must be https too (no downgrade)."""
    world = OAuthWorld(prm_resource="https://mcp.test/mcp")
    http = httpx.AsyncClient(transport=world.transport())
    provider = OAuthProvider("https://mcp.test/mcp", redirect=HeadlessRedirect(redirect_uri=REDIRECT_URI, http=http))
    with trio.fail_after(BOUND), pytest.raises(OAuthError, match=r"endpoint 'http://as\.test' is not https$"):
        async with httpx.AsyncClient(transport=world.transport(), auth=provider) as client:
            await client.post("https://mcp.test/mcp", content=b"{}")
    assert not world.only("/register")
