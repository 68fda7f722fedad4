"""The sans-I/O rules: ``WWW-Authenticate`` parsing, discovery URL orders, resource and issuer
validation, scope selection and PKCE. Synchronous, no network."""

from __future__ import annotations

import pytest

from mcpwire.auth import BearerChallenge, ProtectedResourceMetadata, bearer_challenge, parse_www_authenticate
from mcpwire.auth.discovery import (
    DiscoveryError,
    ResourceMismatch,
    as_metadata_urls,
    canonical_resource,
    decode_as_metadata,
    decode_prm,
    fallback_as_metadata,
    prm_urls,
    resource_matches,
)
from mcpwire.auth.pkce import PKCE, s256
from mcpwire.auth.provider import select_scope


def test_bearer_challenge_params() -> None:
    """AU-03: resource_metadata, scope and error come out of a Bearer challenge."""
    got = bearer_challenge(
        [
            'Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp", '
            'scope="files:read files:write", error="insufficient_scope"'
        ]
    )
    assert got == BearerChallenge(
        resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp",
        scope="files:read files:write",
        error="insufficient_scope",
    )
    assert got is not None and got.scopes == ["files:read", "files:write"]


def test_several_challenges_escapes_token68_and_case() -> None:
    """AU-03 (RFC 9110 §11.6.1): several challenges in one header, a token68, quoted-string
    escapes, unquoted tokens, and a case-insensitive scheme and parameter names."""
    value = r'Basic YWxhZGRpbjpvcGVuc2VzYW1l==, DPoP algs="ES256", BEARER Realm="a \"q\", b", ERROR=invalid_token'
    challenges = parse_www_authenticate(value)
    assert [c.scheme for c in challenges] == ["basic", "dpop", "bearer"]
    assert challenges[0].token68 == "YWxhZGRpbjpvcGVuc2VzYW1l=="
    assert challenges[1].params == {"algs": "ES256"}
    assert challenges[2].params == {"realm": 'a "q", b', "error": "invalid_token"}
    # The first Bearer or DPoP challenge drives the flow (both carry OAuth parameters).
    assert bearer_challenge([value]) == BearerChallenge(scheme="dpop")
    assert bearer_challenge([value.replace("DPoP", "Other")]) == BearerChallenge(error="invalid_token")


def test_no_bearer_challenge() -> None:
    assert bearer_challenge(['Basic realm="x"', ""]) is None
    assert parse_www_authenticate(",,, =junk") == []


def test_prm_urls_order() -> None:
    """AU-04: the header URL, then path-inserted, then root."""
    assert prm_urls("https://Mcp.Example/api/mcp/", "https://meta.example/prm") == [
        "https://meta.example/prm",
        "https://mcp.example/.well-known/oauth-protected-resource/api/mcp",
        "https://mcp.example/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://mcp.example", None) == ["https://mcp.example/.well-known/oauth-protected-resource"]


def test_as_metadata_urls_order() -> None:
    """AU-07: path insertion (RFC 8414, OIDC), then OIDC path appending; root: RFC 8414, OIDC."""
    assert as_metadata_urls("https://as.example/tenant1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration",
    ]
    assert as_metadata_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("resource", "server", "ok"),
    [
        ("https://mcp.example/mcp", "https://mcp.example/mcp", True),
        ("https://MCP.example:443", "https://mcp.example/mcp", True),
        ("https://mcp.example/", "https://mcp.example/mcp", True),
        ("https://mcp.example/mc", "https://mcp.example/mcp", False),
        ("https://mcp.example/mcp/deeper", "https://mcp.example/mcp", False),
        ("https://evil.example/mcp", "https://mcp.example/mcp", False),
        ("http://mcp.example/mcp", "https://mcp.example/mcp", False),
        ("https://mcp.example:8443/mcp", "https://mcp.example/mcp", False),
    ],
)
def test_resource_matches(resource: str, server: str, ok: bool) -> None:
    """AU-05: the PRM resource is the server URL or a parent on the same origin."""
    assert resource_matches(resource, server) is ok


def test_canonical_resource() -> None:
    """AU-16: lower-case scheme and host, no fragment, no bare trailing slash."""
    assert canonical_resource("HTTPS://MCP.Example/Path#frag") == "https://mcp.example/Path"
    assert canonical_resource("https://mcp.example/") == "https://mcp.example"


def test_decode_prm_refuses_another_resource() -> None:
    body = b'{"resource": "https://evil.example/mcp", "authorization_servers": ["https://as"]}'
    with pytest.raises(ResourceMismatch, match=r"^protected resource metadata names resource 'https://evil"):
        decode_prm(body, "https://mcp.example/mcp")
    with pytest.raises(DiscoveryError):
        decode_prm(b"{}", "https://mcp.example/mcp")
    assert decode_prm(body.replace(b"evil", b"mcp"), "https://mcp.example/mcp").authorization_servers == ["https://as"]


@pytest.mark.parametrize("issuer", ["https://as.example/", "HTTPS://as.example", "https://attacker.example"])
def test_decode_as_metadata_needs_the_identical_issuer(issuer: str) -> None:
    """AU-08: simple string comparison; no normalisation."""
    body = f'{{"issuer": "{issuer}", "token_endpoint": "https://as.example/token"}}'.encode()
    with pytest.raises(DiscoveryError, match=r"^authorization server metadata has issuer"):
        decode_as_metadata(body, "https://as.example")


def test_fallback_endpoints_are_on_the_server_origin() -> None:
    """AU-41: 2025-03-26 defaults drop the MCP path."""
    meta = fallback_as_metadata("https://mcp.example/some/mcp")
    assert (meta.issuer, meta.authorization_endpoint, meta.token_endpoint, meta.registration_endpoint) == (
        "https://mcp.example",
        "https://mcp.example/authorize",
        "https://mcp.example/token",
        "https://mcp.example/register",
    )


def test_scope_selection() -> None:
    """AU-17: challenge > PRM scopes_supported > omit; AU-18: union on step-up; AU-25:
    offline_access only when the AS lists it."""
    prm = ProtectedResourceMetadata(resource="r", scopes_supported=["a", "b"])
    challenge = BearerChallenge(scope="c")
    assert select_scope(challenge, prm) == "c"
    assert select_scope(None, prm) == "a b"
    assert select_scope(BearerChallenge(), None) is None
    assert select_scope(BearerChallenge(scope="w"), prm, previous="c x", step_up=True) == "c x w"
    assert select_scope(challenge, prm, previous="x", step_up=False) == "c"
    assert select_scope(challenge, prm, as_scopes=["c", "offline_access"]) == "c offline_access"
    assert select_scope(challenge, prm, as_scopes=["c"]) == "c"
    assert select_scope(None, None, as_scopes=["offline_access"]) is None


def test_pkce_s256() -> None:
    """AU-09, RFC 7636 Appendix B."""
    assert s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    pkce = PKCE()
    assert 43 <= len(pkce.verifier) <= 128 and pkce.challenge == s256(pkce.verifier)
    assert pkce.verifier not in repr(pkce)
