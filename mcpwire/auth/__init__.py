"""OAuth 2.1 for MCP servers over HTTP (2025-11-25 basic/authorization and its successors).

Use an :class:`OAuthProvider` (authorization code + PKCE) or a
:class:`ClientCredentialsProvider` as the ``auth`` of the ``httpx.AsyncClient`` given to
:func:`mcpwire.open_client`::

    provider = OAuthProvider(url, redirect=HeadlessRedirect())
    async with mcpwire.open_client(url, http_client=httpx.AsyncClient(auth=provider)) as client:
        ...

Requires the ``http`` extra (httpx).
"""

from __future__ import annotations

from mcpwire.auth.challenge import BearerChallenge, Challenge, bearer_challenge, parse_www_authenticate
from mcpwire.auth.discovery import AuthorizationServerMetadata, DiscoveryError, ProtectedResourceMetadata
from mcpwire.auth.errors import OAuthError
from mcpwire.auth.grants import ClientCredentialsProvider, EnterpriseManagedProvider, JWTBearerProvider
from mcpwire.auth.provider import OAuthProvider, select_scope
from mcpwire.auth.redirect import HeadlessRedirect, LoopbackRedirect, RedirectHandler, open_loopback_redirect
from mcpwire.auth.storage import ClientInfo, FileTokenStorage, MemoryTokenStorage, TokenSet, TokenStorage

__all__ = [
    "AuthorizationServerMetadata",
    "BearerChallenge",
    "Challenge",
    "ClientCredentialsProvider",
    "ClientInfo",
    "DiscoveryError",
    "EnterpriseManagedProvider",
    "FileTokenStorage",
    "HeadlessRedirect",
    "JWTBearerProvider",
    "LoopbackRedirect",
    "MemoryTokenStorage",
    "OAuthError",
    "OAuthProvider",
    "ProtectedResourceMetadata",
    "RedirectHandler",
    "TokenSet",
    "TokenStorage",
    "bearer_challenge",
    "open_loopback_redirect",
    "parse_www_authenticate",
    "select_scope",
]
