"""Sans-I/O discovery: which URLs to try, in which order, and what to accept from them.

Theory of operation: the OAuth client learns everything from two documents. Protected Resource
Metadata (RFC 9728) names the MCP server's authorization servers; Authorization Server Metadata
(RFC 8414 / OpenID Connect Discovery) names the AS endpoints and capabilities. This module builds
the candidate URLs in the order each revision mandates and validates what comes back; it never
sends anything. The provider (``provider.py``) yields the requests and feeds the answers in, so
the same rules are unit-testable without a network.

OAuth documents use snake_case on the wire, so these Structs carry no ``rename``.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import msgspec

__all__ = [
    "AuthorizationServerMetadata",
    "DiscoveryError",
    "ProtectedResourceMetadata",
    "ResourceMismatch",
    "as_metadata_urls",
    "canonical_resource",
    "decode_as_metadata",
    "decode_prm",
    "fallback_as_metadata",
    "origin",
    "prm_urls",
    "resource_matches",
]

PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"
OAUTH_WELL_KNOWN = "/.well-known/oauth-authorization-server"
OIDC_WELL_KNOWN = "/.well-known/openid-configuration"


class DiscoveryError(ValueError):
    """A metadata document was unusable (bad JSON, missing fields, wrong ``resource``/``issuer``)."""


class ResourceMismatch(DiscoveryError):
    """The PRM describes another resource than the MCP server asked about (AU-05)."""


class ProtectedResourceMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """RFC 9728 §2 (the fields the client uses)."""

    resource: str
    authorization_servers: list[str] = msgspec.field(default_factory=list)
    scopes_supported: list[str] | None = None
    bearer_methods_supported: list[str] | None = None


class AuthorizationServerMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """RFC 8414 §2 plus the MCP-relevant extensions (the fields the client uses)."""

    issuer: str
    authorization_endpoint: str | None = None
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    response_types_supported: list[str] | None = None
    grant_types_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    token_endpoint_auth_signing_alg_values_supported: list[str] | None = None
    client_id_metadata_document_supported: bool = False
    authorization_response_iss_parameter_supported: bool = False
    dpop_signing_alg_values_supported: list[str] | None = None


_PRM_DECODER = msgspec.json.Decoder(ProtectedResourceMetadata)
_AS_DECODER = msgspec.json.Decoder(AuthorizationServerMetadata)

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL, scheme and host lower-cased."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), "", "", ""))


def canonical_resource(url: str) -> str:
    """The canonical MCP server URI for RFC 8707 ``resource`` (AU-16).

    2025-11-25 basic/authorization: lowercase scheme and host, no fragment, and "implementations
    SHOULD consistently use the form without the trailing slash" (only a bare ``/`` path is
    dropped: a path's own trailing slash may be significant).
    """
    parts = urlsplit(url)
    path = "" if parts.path == "/" else parts.path
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def _comparable(url: str) -> tuple[str, str, int | None, list[str]]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or _DEFAULT_PORTS.get(scheme)
    segments = [s for s in parts.path.split("/") if s]
    return scheme, (parts.hostname or "").lower(), port, segments


def resource_matches(prm_resource: str, server_url: str) -> bool:
    """Whether a PRM ``resource`` identifies the MCP server at ``server_url`` (AU-05).

    RFC 9728 §3.3: the client MUST reject metadata whose ``resource`` is not the resource it
    asked about. The resource may be named by the server URL itself or by a parent of it on the
    same origin (a root PRM describes ``https://host`` for ``https://host/mcp``).
    """
    want = _comparable(server_url)
    have = _comparable(prm_resource)
    return have[:3] == want[:3] and want[3][: len(have[3])] == have[3]


def prm_urls(server_url: str, header_url: str | None) -> list[str]:
    """PRM URLs in the order to try them (AU-04).

    2025-11-25 basic/authorization: clients "MUST ... use the resource metadata URL from the
    parsed WWW-Authenticate headers when present; otherwise, they MUST fall back to constructing
    and requesting the well-known URIs": path-inserted first, then the root. The well-known URIs
    are also tried after a header URL that fails, so a stale header does not end the flow.
    """
    parts = urlsplit(server_url)
    base = origin(server_url)
    urls: list[str] = []
    if header_url:
        urls.append(header_url)
    path = parts.path.rstrip("/")
    if path:
        urls.append(f"{base}{PRM_WELL_KNOWN}{path}")
    urls.append(f"{base}{PRM_WELL_KNOWN}")
    return list(dict.fromkeys(urls))


def as_metadata_urls(issuer: str) -> list[str]:
    """AS metadata URLs in the order to try them (AU-07).

    2025-11-25 basic/authorization "clients MUST try endpoints in the following priority order":
    with a path component, RFC 8414 path insertion, OIDC path insertion, OIDC path appending;
    without one, RFC 8414 then OIDC at the root.
    """
    base = origin(issuer)
    path = urlsplit(issuer).path.rstrip("/")
    if path:
        return [f"{base}{OAUTH_WELL_KNOWN}{path}", f"{base}{OIDC_WELL_KNOWN}{path}", f"{base}{path}{OIDC_WELL_KNOWN}"]
    return [f"{base}{OAUTH_WELL_KNOWN}", f"{base}{OIDC_WELL_KNOWN}"]


def decode_prm(body: bytes, server_url: str) -> ProtectedResourceMetadata:
    """Decodes and validates a PRM document for ``server_url`` (AU-05)."""
    try:
        prm = _PRM_DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DiscoveryError(f"protected resource metadata is not valid: {exc}") from exc
    if not resource_matches(prm.resource, server_url):
        raise ResourceMismatch(
            f"protected resource metadata names resource {prm.resource!r}, not {canonical_resource(server_url)!r}; "
            "refusing to authorize for another resource"
        )
    return prm


def decode_as_metadata(body: bytes, issuer: str) -> AuthorizationServerMetadata:
    """Decodes AS metadata fetched for ``issuer`` and checks its ``issuer`` (AU-08).

    2025-11-25 basic/authorization: "the issuer value in the document MUST be identical to the
    issuer identifier used to construct the well-known URL. If they differ, the client MUST NOT
    use the metadata." Identical means simple string comparison (RFC 8414 §3.3).
    """
    try:
        meta = _AS_DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DiscoveryError(f"authorization server metadata is not valid: {exc}") from exc
    if meta.issuer != issuer:
        raise DiscoveryError(
            f"authorization server metadata has issuer {meta.issuer!r}, not {issuer!r} (the URL it was fetched "
            "for); refusing to use it"
        )
    return meta


def fallback_as_metadata(server_url: str) -> AuthorizationServerMetadata:
    """The 2025-03-26 default endpoints on the server's origin (AU-41, AU-42).

    2025-03-26 basic/authorization: "The authorization base URL MUST be determined from the MCP
    server URL by discarding any existing path component", and without metadata "clients MUST
    use the following default endpoint paths": ``/authorize``, ``/token``, ``/register``.
    """
    base = origin(server_url)
    return AuthorizationServerMetadata(
        issuer=base,
        authorization_endpoint=f"{base}/authorize",
        token_endpoint=f"{base}/token",
        registration_endpoint=f"{base}/register",
        code_challenge_methods_supported=["S256"],
        token_endpoint_auth_methods_supported=["client_secret_basic", "client_secret_post", "none"],
    )
