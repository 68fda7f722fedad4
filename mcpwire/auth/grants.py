"""The machine grants: clients that authorize without a browser.

Theory of operation: each provider here is an :class:`~mcpwire.auth.provider.OAuthProvider`
whose ``_grant`` step differs; discovery, refresh, the token request (client authentication,
DPoP) and its decoding are the base class's. :class:`ClientCredentialsProvider` uses the
``client_credentials`` grant (the MCP client-credentials extension),
:class:`EnterpriseManagedProvider` exchanges the user's ID token at their identity provider for
an ID-JAG and redeems it (the MCP enterprise-managed authorization extension), and
:class:`JWTBearerProvider` redeems an assertion the workload already holds (RFC 7523).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import msgspec

from mcpwire.auth.discovery import AuthorizationServerMetadata
from mcpwire.auth.provider import (
    MAX_AUTH_ATTEMPTS,
    AssertionSigner,
    Call,
    Flow,
    OAuthProvider,
    Step,
)
from mcpwire.auth.storage import ClientInfo, TokenStorage

__all__ = ["ClientCredentialsProvider", "EnterpriseManagedProvider", "JWTBearerProvider"]


class ClientCredentialsProvider(OAuthProvider):
    """The ``client_credentials`` grant for machine clients (the MCP client-credentials extension).

    Args:
        server_url: the MCP endpoint.
        client: the credentials; ``token_endpoint_auth_method`` ``client_secret_basic`` (default
            with a secret), ``client_secret_post`` or ``private_key_jwt`` (with ``signer``).
        signer: signs the ``private_key_jwt`` assertion for ``(client_id, audience)``; see
            :func:`mcpwire.auth.jwt.es256_signer`.
        scope: an explicit scope; by default chosen like the code flow (AU-17).
    """

    def __init__(
        self,
        server_url: str,
        *,
        client: ClientInfo,
        signer: AssertionSigner | None = None,
        storage: TokenStorage | None = None,
        scope: str | None = None,
        max_attempts: int = MAX_AUTH_ATTEMPTS,
    ) -> None:
        super().__init__(server_url, storage=storage, client=client, max_attempts=max_attempts)
        self.signer = signer
        self.scope = scope

    def _assertion(self, client_id: str, meta: AuthorizationServerMetadata) -> str | None:
        if self.signer is None:
            return None
        # RFC 7523 §3: the audience is the authorization server (its issuer identifier).
        return self.signer(client_id, meta.issuer)

    async def _grant(self, flow: Flow) -> Step:
        assert flow.meta is not None
        client = await self._known_client(flow.meta)
        assert client is not None
        scope = self._scope(flow, self.scope)
        form = {"grant_type": "client_credentials", "resource": flow.resource}
        if scope:
            form["scope"] = scope
        yield Call(self._token_exchange(flow, client, form, scope))


TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"


class _ExchangeResponse(msgspec.Struct, kw_only=True):
    access_token: str
    issued_token_type: str = ""


_EXCHANGE_DECODER = msgspec.json.Decoder(_ExchangeResponse)


class EnterpriseManagedProvider(OAuthProvider):
    """Enterprise-managed authorization (the MCP extension): the user's identity provider issues
    an Identity Assertion JWT Authorization Grant (ID-JAG) for the MCP server's AS, which the
    client redeems for an access token. No browser is involved.

    1. RFC 8693 token exchange at the IdP: the user's ID token for an ID-JAG whose audience is
       the AS ``issuer`` and whose resource is the MCP server.
    2. RFC 7523 ``jwt-bearer`` grant at the AS with the ID-JAG, authenticated as ``client``.

    Args:
        server_url: the MCP endpoint.
        client: the client's credentials at the MCP server's AS.
        idp_token_endpoint: the IdP's token endpoint.
        id_token: the user's ID token from the IdP (single sign-on).
        idp_client_id: the client id at the IdP, sent with the exchange.
        idp_client_secret: its secret, if the IdP wants one (``client_secret_post``).
    """

    def __init__(
        self,
        server_url: str,
        *,
        client: ClientInfo,
        idp_token_endpoint: str,
        id_token: str,
        idp_client_id: str | None = None,
        idp_client_secret: str | None = None,
        storage: TokenStorage | None = None,
        scope: str | None = None,
        max_attempts: int = MAX_AUTH_ATTEMPTS,
    ) -> None:
        super().__init__(server_url, storage=storage, client=client, max_attempts=max_attempts)
        self.idp_token_endpoint = idp_token_endpoint
        self._id_token = id_token
        self.idp_client_id = idp_client_id
        self._idp_client_secret = idp_client_secret
        self.scope = scope

    async def _grant(self, flow: Flow) -> Step:
        assert flow.meta is not None
        client = await self._known_client(flow.meta)
        assert client is not None
        scope = self._scope(flow, self.scope)
        exchange = {
            "grant_type": TOKEN_EXCHANGE_GRANT,
            "requested_token_type": ID_JAG_TOKEN_TYPE,
            "subject_token": self._id_token,
            "subject_token_type": ID_TOKEN_TOKEN_TYPE,
            "audience": flow.meta.issuer,
            "resource": flow.resource,
        }
        if scope:
            exchange["scope"] = scope
        if self.idp_client_id:
            exchange["client_id"] = self.idp_client_id
            if self._idp_client_secret:
                exchange["client_secret"] = self._idp_client_secret
        response = yield httpx.Request(
            "POST", self.idp_token_endpoint, data=exchange, headers={"Accept": "application/json"}
        )
        body = await response.aread()
        if response.status_code != 200:
            what = f"the identity provider's token exchange at {self.idp_token_endpoint!r}"
            raise self._refusal(flow, what, response, body)
        answer = self._decoded(
            flow, _EXCHANGE_DECODER, body, "the identity provider answered with an invalid token exchange response"
        )
        if answer.issued_token_type and answer.issued_token_type != ID_JAG_TOKEN_TYPE:
            raise self._fail(
                flow,
                f"the identity provider issued a token of type {answer.issued_token_type[:100]!r}, not an ID-JAG "
                f"({ID_JAG_TOKEN_TYPE!r})",
            )
        self._bump("token:token-exchange")
        form = {"grant_type": JWT_BEARER_GRANT, "assertion": answer.access_token}
        if scope:
            form["scope"] = scope
        yield Call(self._token_exchange(flow, client, form, scope))


class JWTBearerProvider(OAuthProvider):
    """The RFC 7523 ``jwt-bearer`` grant with an assertion the workload already holds (workload
    identity federation): a platform-issued JWT whose audience is the AS.

    Failures are surfaced, never retried with another grant: a rejected assertion will not get
    better by asking again.

    Args:
        server_url: the MCP endpoint.
        client: the client id at the AS (``token_endpoint_auth_method`` ``none`` unless a secret
            is configured).
        assertion: the JWT, or a function returning a fresh one for each token request.
    """

    def __init__(
        self,
        server_url: str,
        *,
        client: ClientInfo,
        assertion: str | Callable[[], str],
        storage: TokenStorage | None = None,
        scope: str | None = None,
        max_attempts: int = MAX_AUTH_ATTEMPTS,
    ) -> None:
        super().__init__(server_url, storage=storage, client=client, max_attempts=max_attempts)
        self._assertion_source = assertion
        self.scope = scope

    async def _grant(self, flow: Flow) -> Step:
        assert flow.meta is not None
        client = await self._known_client(flow.meta)
        assert client is not None
        source = self._assertion_source
        assertion = source() if callable(source) else source
        scope = self._scope(flow, self.scope)
        form = {"grant_type": JWT_BEARER_GRANT, "assertion": assertion, "resource": flow.resource}
        if scope:
            form["scope"] = scope
        yield Call(self._token_exchange(flow, client, form, scope))
