"""Every refusal path of the OAuth client against the in-process fakes: the exact exception type,
a message that names what was wrong (pinned whole), nothing stored, and no secret in the error.
Plus the DCR ``application_type`` choice (AU-14)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
import trio
from oauth_fakes import AS_ORIGIN, MCP_URL, REDIRECT_URI, IdP, OAuthWorld

from mcpwire.auth import (
    ClientCredentialsProvider,
    ClientInfo,
    EnterpriseManagedProvider,
    HeadlessRedirect,
    OAuthError,
    OAuthProvider,
    open_loopback_redirect,
)

BOUND = 10.0
PREFIX = f"cannot authorize to '{MCP_URL}': "


async def _refusal(
    world: OAuthWorld,
    provider: OAuthProvider,
    message: str,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    secrets: tuple[str, ...] = (),
) -> OAuthError:
    """One MCP request that must end in exactly ``OAuthError(PREFIX + message)``."""
    with trio.fail_after(BOUND), pytest.raises(OAuthError, match=f"^{re.escape(PREFIX + message)}$") as info:
        async with httpx.AsyncClient(transport=transport or world.transport(), auth=provider) as http:
            await http.post(MCP_URL, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    error = info.value
    assert type(error) is OAuthError
    # The MCP server's 401 started the flow; its challenge travels with the error.
    assert error.status == 401 and error.challenge.startswith("Bearer ")
    assert await provider.storage.get_tokens(MCP_URL) is None
    shown = f"{error} {error!r} {error.challenge}"
    leaked = [secret for secret in (*world.secrets(), *secrets) if secret and secret in shown]
    assert not leaked, f"secrets in the error: {leaked}"
    return error


async def test_as_metadata_not_found_names_the_urls_tried() -> None:
    """AU-07: a server with a PRM is not a 2025-03-26 server: no default endpoints are guessed."""
    world = OAuthWorld(metadata_at="none")
    await _refusal(
        world,
        world.provider(),
        "authorization server 'http://as.test' publishes no metadata (tried "
        "'http://as.test/.well-known/oauth-authorization-server', 'http://as.test/.well-known/openid-configuration')",
    )
    assert not world.only("/register") and not world.only("/authorize")


async def test_as_metadata_without_an_authorization_endpoint() -> None:
    world = OAuthWorld(authorization_endpoint=False)
    await _refusal(
        world,
        world.provider(),
        "authorization server 'http://as.test' lists no authorization_endpoint in its metadata, which the "
        "authorization code flow needs",
    )
    assert not world.only("/register")


async def test_no_redirect_handler_configured() -> None:
    world = OAuthWorld()
    await _refusal(
        world,
        world.provider(redirect=None),
        "no redirect handler is configured for the authorization code flow; pass redirect= "
        "(HeadlessRedirect or open_loopback_redirect)",
    )
    assert not world.only("/register")


async def test_headless_redirect_without_a_3xx_fails_the_authorization_step() -> None:
    """The AS shows a login page: a headless handler cannot go on, and says what to use instead."""
    world = OAuthWorld(authorize_mode="page")
    error = await _refusal(
        world,
        world.provider(),
        "the authorization step failed: the authorization endpoint answered HTTP 200 without a redirect; it "
        "needs a user (use a browser-based redirect handler)",
    )
    assert type(error.__cause__).__name__ == "RedirectError"
    assert world.only("/authorize")


async def test_loopback_redirect_timeout_says_it_timed_out() -> None:
    """The loopback listener's bound (``trio.fail_after``) ends the flow with a message, not ''."""
    world = OAuthWorld()
    async with open_loopback_redirect(show=lambda url: None, open_browser=False) as redirect:
        redirect.timeout = 0.1
        error = await _refusal(
            world,
            world.provider(redirect=redirect),
            "the authorization step timed out: no redirect came back from the user agent",
        )
    assert isinstance(error.__cause__, trio.TooSlowError)


async def test_error_on_the_redirect_is_reported_with_its_code() -> None:
    """RFC 6749 §4.1.2.1: ``error`` (after ``iss`` and ``state`` checked out, AU-19/AU-20)."""
    world = OAuthWorld(authorize_error="access_denied", authorize_error_description="the user declined")
    error = await _refusal(
        world,
        world.provider(),
        "the authorization server refused the authorization request: access_denied: the user declined",
    )
    assert error.error == "access_denied"
    assert not world.only("/token")


async def test_redirect_without_a_code() -> None:
    world = OAuthWorld(issue_code=False)
    await _refusal(
        world, world.provider(), "the authorization response carries neither a 'code' nor an 'error' parameter"
    )
    assert not world.only("/token")


async def test_dcr_rejected_surfaces_the_servers_words() -> None:
    """AU-14: "MUST be prepared to handle registration failures due to redirect URI constraints"."""
    world = OAuthWorld(
        registration_status=400,
        registration_body=b'{"error": "invalid_redirect_uri", "error_description": "redirect URIs must be https"}',
    )
    error = await _refusal(
        world,
        world.provider(),
        "dynamic client registration at 'http://as.test/register' answered HTTP 400 invalid_redirect_uri: "
        "redirect URIs must be https",
    )
    assert error.error == "invalid_redirect_uri"
    assert not world.only("/authorize")


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"client_name": "x", "client_secret": "dcr-secret"}', "Object missing required field `client_id`"),
        (b'{"client_id": 7, "client_secret": "dcr-secret"}', "Expected `str`, got `int` - at `$.client_id`"),
        (b"<html>dcr-secret</html>", "JSON is malformed: invalid character (byte 0)"),
    ],
    ids=["no-client-id", "client-id-not-a-string", "not-json"],
)
async def test_dcr_invalid_client_information(body: bytes, detail: str) -> None:
    """RFC 7591 §3.2.1: the answer must carry a string ``client_id``; the reason is named, the
    document's values (a secret among them) are not."""
    world = OAuthWorld(registration_body=body)
    await _refusal(
        world,
        world.provider(),
        f"dynamic client registration at 'http://as.test/register' answered with an invalid client information "
        f"response: {detail}",
        secrets=("dcr-secret",),
    )
    assert not world.only("/authorize")


async def test_token_endpoint_refusal_in_the_code_flow() -> None:
    world = OAuthWorld(
        token_status=401,
        token_body=b'{"error": "invalid_client", "error_description": "client authentication failed"}',
    )
    error = await _refusal(
        world,
        world.provider(),
        "the token endpoint 'http://as.test/token' answered HTTP 401 invalid_client: client authentication failed",
    )
    assert error.error == "invalid_client"
    assert len(world.only("/token")) == 1  # not retried
    assert world.only("/token")[0].form["code_verifier"] in world.secrets()


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"<html>tok-secret</html>", "JSON is malformed: invalid character (byte 0)"),
        (b'{"token_type": "Bearer", "refresh_token": "tok-secret"}', "Object missing required field `access_token`"),
        (b'{"access_token": ["tok-secret"]}', "Expected `str`, got `array` - at `$.access_token`"),
    ],
    ids=["not-json", "no-access-token", "access-token-not-a-string"],
)
async def test_invalid_token_response(body: bytes, detail: str) -> None:
    world = OAuthWorld(token_body=body)
    await _refusal(
        world,
        world.provider(),
        f"the token endpoint 'http://as.test/token' answered with an invalid token response: {detail}",
        secrets=("tok-secret",),
    )


async def test_unsupported_token_type_is_refused_and_not_stored() -> None:
    """Only Bearer (and DPoP when asked for) can be presented; the token itself is not shown."""
    world = OAuthWorld(token_type="mac")
    await _refusal(
        world, world.provider(), "the token endpoint issued a token of type 'mac'; mcpwire can use only 'Bearer' tokens"
    )
    assert world.tokens  # one was issued ...
    assert world.paths().count("POST mcp.test/mcp") == 1  # ... and never sent


def _enterprise(idp: IdP) -> EnterpriseManagedProvider:
    return EnterpriseManagedProvider(
        MCP_URL,
        client=ClientInfo("xaa", "xaa-secret", token_endpoint_auth_method="client_secret_basic"),
        idp_token_endpoint="http://idp.test/token",
        id_token="user-id-token",
        idp_client_id="idp-client",
        idp_client_secret="idp-secret",
    )


async def test_idp_token_exchange_refused() -> None:
    world = OAuthWorld(auth_methods=["client_secret_basic"])
    idp = IdP(world, status=400, body=b'{"error": "invalid_grant", "error_description": "the ID token expired"}')
    error = await _refusal(
        world,
        _enterprise(idp),
        "the identity provider's token exchange at 'http://idp.test/token' answered HTTP 400 invalid_grant: "
        "the ID token expired",
        transport=idp.transport(),
        secrets=("user-id-token", "idp-secret", "xaa-secret"),
    )
    assert error.error == "invalid_grant"
    assert len(idp.sent) == 1 and not world.only("/token")


async def test_idp_issues_another_token_type() -> None:
    """The exchange must yield an ID-JAG; anything else is not redeemed at the AS."""
    world = OAuthWorld(auth_methods=["client_secret_basic"])
    idp = IdP(world, issued_token_type="urn:ietf:params:oauth:token-type:access_token")
    await _refusal(
        world,
        _enterprise(idp),
        "the identity provider issued a token of type 'urn:ietf:params:oauth:token-type:access_token', not an "
        "ID-JAG ('urn:ietf:params:oauth:token-type:id-jag')",
        transport=idp.transport(),
        secrets=("user-id-token", "idp-secret", "xaa-secret", "id-jag-1"),
    )
    assert not world.only("/token")


async def test_idp_invalid_exchange_response() -> None:
    world = OAuthWorld(auth_methods=["client_secret_basic"])
    idp = IdP(world, body=b'{"issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"}')
    await _refusal(
        world,
        _enterprise(idp),
        "the identity provider answered with an invalid token exchange response: "
        "Object missing required field `access_token`",
        transport=idp.transport(),
        secrets=("user-id-token", "idp-secret", "xaa-secret"),
    )
    assert not world.only("/token")


@pytest.mark.parametrize("flow", ["client_credentials", "authorization_code"])
async def test_private_key_jwt_without_a_signer(flow: str) -> None:
    """Refused before the token request goes out (no unauthenticated request)."""
    world = OAuthWorld(auth_methods=["private_key_jwt"], registration=False)
    client = ClientInfo("jwt-client", token_endpoint_auth_method="private_key_jwt", issuer=AS_ORIGIN)
    provider: OAuthProvider
    if flow == "client_credentials":
        provider = ClientCredentialsProvider(MCP_URL, client=client)
    else:
        provider = world.provider(client=client)
    await _refusal(
        world,
        provider,
        "client 'jwt-client' authenticates with private_key_jwt, but no assertion signer is configured; use "
        "ClientCredentialsProvider(signer=mcpwire.auth.jwt.es256_signer(pem))",
    )
    assert not world.only("/token")


@pytest.mark.parametrize(
    ("redirect_uri", "configured", "expected"),
    [
        ("https://app.example/callback", None, "web"),
        (REDIRECT_URI, None, "native"),
        (REDIRECT_URI, "web", "web"),
    ],
)
async def test_dcr_application_type(redirect_uri: str, configured: Any, expected: str) -> None:
    """AU-14: "native" for a loopback redirect, "web" for a remote https one, or as configured;
    the redirect URI registered is the one used."""
    world = OAuthWorld()
    http = httpx.AsyncClient(transport=world.transport())
    provider = world.provider(
        redirect=HeadlessRedirect(redirect_uri=redirect_uri, http=http), application_type=configured
    )
    with trio.fail_after(BOUND):
        async with httpx.AsyncClient(transport=world.transport(), auth=provider) as client:
            assert (await client.post(MCP_URL, content=b"{}")).status_code == 200
    registration = world.only("/register")[0].json
    assert (registration["application_type"], registration["redirect_uris"]) == (expected, [redirect_uri])
    assert world.only("/token")[0].form["redirect_uri"] == redirect_uri
