"""OAuth 2.1 for MCP over HTTP, as an ``httpx.Auth``.

Theory of operation: :meth:`OAuthProvider.async_auth_flow` is an async generator that httpx
drives for every request of the injected ``httpx.AsyncClient``. It yields the MCP request with
the stored bearer token; when the server answers 401 (or 403 ``insufficient_scope``), it yields
the discovery, registration and token requests itself, one at a time, then yields the MCP
request again with the new token. httpx sends what is yielded without running the flow again,
so the AS requests carry no bearer token. No other client, thread or event loop is involved,
which keeps the flow on trio and lets tests drive it through ``httpx.MockTransport``.

The decisions are sans-I/O (``discovery.py``, ``challenge.py``, ``pkce.py``); this module holds
the order of the steps (2025-11-25 basic/authorization, summarised in spec-checklist §10.1):

1. 401 → parse ``WWW-Authenticate`` (AU-03).
2. Protected Resource Metadata: header URL, path-based, root (AU-04); refuse a ``resource``
   for another server (AU-05). No PRM at all → the 2025-03-26 procedure on the server's origin
   (AU-41, AU-42).
3. AS metadata: RFC 8414 and OIDC URLs in order (AU-07), ``issuer`` identical (AU-08).
4. Refresh when the old token came from this AS and has a refresh token (AU-26), else a grant:
   authorization code + PKCE (:class:`OAuthProvider`), client credentials
   (:class:`ClientCredentialsProvider`), enterprise-managed token exchange + jwt-bearer
   (:class:`EnterpriseManagedProvider`) or a workload's jwt-bearer assertion
   (:class:`JWTBearerProvider`), in :mod:`mcpwire.auth.grants`. The subclasses replace only
   ``_grant``.

Steps are async generators that yield requests (and get the responses back) or a :class:`Call`
of another step; :func:`run_steps` drives them all, so no step forwards another's requests, and
one helper pair reads every token, registration and exchange answer (``_refusal``, ``_decoded``).

With ``dpop=True`` and an AS that advertises ES256 DPoP, token requests carry a DPoP proof and
the resulting DPoP-bound token is presented with the ``DPoP`` scheme and a fresh proof on every
request; a ``use_dpop_nonce`` answer (AS or MCP server) is retried once with the nonce.

Only one flow runs at a time per provider (AU-28, single-flight); a request that waited for it
retries with the token the other one obtained. Every flow is bounded: at most
``max_attempts`` authorizations per request (AU-18), and each HTTP step has the client's timeout.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import httpx
import msgspec
import trio

from mcpwire.auth.challenge import BearerChallenge, bearer_challenge
from mcpwire.auth.discovery import (
    AuthorizationServerMetadata,
    DiscoveryError,
    ProtectedResourceMetadata,
    ResourceMismatch,
    as_metadata_urls,
    canonical_resource,
    decode_as_metadata,
    decode_prm,
    fallback_as_metadata,
    origin,
    prm_urls,
)
from mcpwire.auth.dpop import DPoPKey
from mcpwire.auth.errors import OAuthError
from mcpwire.auth.pkce import PKCE, new_state
from mcpwire.auth.steps import Call, Step, run_steps
from mcpwire.auth.storage import ClientInfo, MemoryTokenStorage, TokenSet, TokenStorage

if TYPE_CHECKING:
    from mcpwire.auth.redirect import RedirectHandler

__all__ = ["AssertionSigner", "Call", "Flow", "OAuthProvider", "Step", "run_steps", "select_scope"]

log = logging.getLogger(__name__)

#: Signs a ``private_key_jwt`` client assertion for (client_id, audience).
AssertionSigner = Callable[[str, str], str]

JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

T = TypeVar("T")

#: Authorizations one request may trigger before its 401/403 is returned as is (AU-18).
MAX_AUTH_ATTEMPTS = 3
#: Retries of one request or token request for a new DPoP nonce (RFC 9449 §8, §9).
MAX_NONCE_RETRIES = 2


class _TokenResponse(msgspec.Struct, kw_only=True):
    access_token: str
    token_type: str = "Bearer"
    expires_in: float | None = None
    refresh_token: str | None = None
    scope: str | None = None


class _RegistrationResponse(msgspec.Struct, kw_only=True):
    client_id: str
    client_secret: str | None = None
    token_endpoint_auth_method: str | None = None


class _ErrorBody(msgspec.Struct, kw_only=True):
    error: str = ""
    error_description: str = ""


_TOKEN_DECODER = msgspec.json.Decoder(_TokenResponse)
_REGISTRATION_DECODER = msgspec.json.Decoder(_RegistrationResponse)
_ERROR_DECODER = msgspec.json.Decoder(_ErrorBody)


def _oauth_error(body: bytes) -> tuple[str, str]:
    try:
        err = _ERROR_DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "", ""
    return err.error[:100], err.error_description[:200]


def _refused(what: str, status: int, error: str, description: str) -> str:
    """``<what> answered HTTP <status> <error>: <description>`` (the AS's own words, bounded)."""
    return (
        f"{what} answered HTTP {status}" + (f" {error}" if error else "") + (f": {description}" if description else "")
    )


def select_scope(
    challenge: BearerChallenge | None,
    prm: ProtectedResourceMetadata | None,
    *,
    previous: str | None = None,
    step_up: bool = False,
    as_scopes: list[str] | None = None,
    offline_access: bool = True,
) -> str | None:
    """The ``scope`` parameter to request, or ``None`` to omit it (AU-17, AU-18, AU-25).

    2025-11-25 basic/authorization §Scope Selection Strategy: the ``scope`` of the initial
    ``WWW-Authenticate`` challenge, else all of PRM ``scopes_supported``, else omit. On step-up
    (403 ``insufficient_scope``) the union of the previously requested scopes and the challenged
    ones. ``offline_access`` is added only when the AS lists it in ``scopes_supported``
    (2026-07-28: "MAY add offline_access ... when the Authorization Server metadata contains it").
    """
    scopes: list[str] = []
    if challenge is not None and challenge.scopes:
        scopes = list(challenge.scopes)
    elif prm is not None and prm.scopes_supported:
        scopes = list(prm.scopes_supported)
    if step_up and previous:
        scopes = list(dict.fromkeys([*previous.split(), *scopes]))
    if not scopes:
        return None
    if offline_access and as_scopes and "offline_access" in as_scopes and "offline_access" not in scopes:
        scopes.append("offline_access")
    return " ".join(scopes)


_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def _acceptable_redirect(uri: str) -> bool:
    parts = urlsplit(uri)
    host = (parts.hostname or "").lower()
    return parts.scheme == "https" or (parts.scheme == "http" and host in _LOOPBACK_HOSTS)


def _choose_auth_method(client: ClientInfo, meta: AuthorizationServerMetadata) -> str:
    """The token endpoint authentication method: the registered one, else the best supported."""
    if client.token_endpoint_auth_method:
        return client.token_endpoint_auth_method
    # RFC 8414 §2: absent means client_secret_basic.
    supported = meta.token_endpoint_auth_methods_supported or ["client_secret_basic"]
    if client.client_secret:
        for method in ("client_secret_basic", "client_secret_post"):
            if method in supported:
                return method
    return "none"


@dataclass(slots=True)
class Flow:  # what a step is given; subclasses' _grant steps read it
    """What one authorization run knows so far."""

    status: int
    challenge: BearerChallenge | None
    header: str
    previous: TokenSet | None
    protocol_version: str | None
    prm: ProtectedResourceMetadata | None = None
    meta: AuthorizationServerMetadata | None = None
    legacy: bool = False
    tokens: TokenSet | None = field(default=None, repr=False)

    @property
    def resource(self) -> str:
        """RFC 8707 ``resource``: the PRM's identifier exactly as published (it was checked to
        identify this server, AU-05), else the canonical server URI (AU-16)."""
        return self.prm.resource if self.prm is not None else self.server_resource

    server_resource: str = ""


class OAuthProvider(httpx.Auth):
    """OAuth 2.1 authorization code + PKCE for one MCP server, as an ``httpx.Auth``.

    Pass it to the client that talks to the server::

        provider = OAuthProvider(url, redirect=HeadlessRedirect())
        async with mcpwire.open_client(url, http_client=httpx.AsyncClient(auth=provider)) as c:
            ...

    Args:
        server_url: the MCP endpoint; its canonical form is the RFC 8707 ``resource`` (AU-16).
        redirect: visits the authorization URL and returns the callback URL.
        storage: tokens and client registrations (default: in memory).
        client: pre-registered credentials (AU-12); set ``client.issuer`` to bind them to one
            AS, which makes any other AS an error (AU-15).
        client_metadata_url: an ``https`` Client ID Metadata Document URL, used as the client id
            when the AS advertises ``client_id_metadata_document_supported`` (AU-11).
        client_name: sent in Dynamic Client Registration.
        application_type: DCR ``application_type`` (AU-14); default from the redirect URI.
        max_attempts: authorizations one request may trigger (AU-18).
        dpop: request DPoP-bound tokens (RFC 9449, ES256; needs ``cryptography``) from
            authorization servers that advertise ``dpop_signing_alg_values_supported``.
    """

    requires_request_body = True
    requires_response_body = False

    def __init__(
        self,
        server_url: str,
        *,
        redirect: RedirectHandler | None = None,
        storage: TokenStorage | None = None,
        client: ClientInfo | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "mcpwire",
        application_type: str | None = None,
        max_attempts: int = MAX_AUTH_ATTEMPTS,
        dpop: bool = False,
    ) -> None:
        if client_metadata_url is not None:
            parts = urlsplit(client_metadata_url)
            if parts.scheme != "https" or parts.path in ("", "/"):
                # AU-11: "Clients MUST host their metadata document at an HTTPS URL" with a path.
                raise ValueError(f"client_metadata_url must be an https URL with a path, not {client_metadata_url!r}")
        self.server_url = server_url
        self.resource = canonical_resource(server_url)
        self.redirect = redirect
        self.storage: TokenStorage = storage if storage is not None else MemoryTokenStorage()
        self.client = client
        self.client_metadata_url = client_metadata_url
        self.client_name = client_name
        self.application_type = application_type
        self.max_attempts = max_attempts
        self._lock = trio.Lock()
        #: The AS metadata of the last successful flow (for proactive refresh).
        self._meta: AuthorizationServerMetadata | None = None
        #: Counts of completed steps, for tests and diagnostics (no secrets).
        self.counters: dict[str, int] = {}
        #: The DPoP key (RFC 9449), used with authorization servers that advertise ES256.
        self._dpop: DPoPKey | None = DPoPKey() if dpop else None
        self._as_nonce: str | None = None
        self._rs_nonce: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(server_url={self.server_url!r})"

    # -- the httpx hook ---------------------------------------------------------------------

    def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """Sends ``request`` with a bearer token, authorizing on 401/403 as needed.

        Cancellation: httpx closes this generator; a token obtained so far is kept, a flow cut
        short leaves no state behind.
        """
        return run_steps(self._send_authorized(request))

    async def _send_authorized(self, request: httpx.Request) -> Step:
        """The flow of one request (see :meth:`async_auth_flow`)."""
        protocol_version = request.headers.get("mcp-protocol-version")
        tokens = await self.storage.get_tokens(self.resource)
        if tokens is not None and tokens.expired() and tokens.refresh_token and self._meta is not None:
            async with self._lock:
                tokens = await self.storage.get_tokens(self.resource)
                if tokens is not None and tokens.expired() and tokens.refresh_token and self._meta is not None:
                    flow = Flow(401, None, "", tokens, protocol_version, meta=self._meta)
                    flow.server_resource = tokens.resource or self.resource
                    yield Call(self._refresh(flow))
                    tokens = await self.storage.get_tokens(self.resource)
        self._apply(request, tokens)
        response = yield request
        attempts = 0
        nonce_retries = 0
        while response.status_code in (401, 403):
            values = response.headers.get_list("www-authenticate")
            challenge = bearer_challenge(values)
            nonce = response.headers.get("dpop-nonce")
            if nonce and self._dpop is not None:
                self._rs_nonce = nonce
            if (
                response.status_code == 401
                and challenge is not None
                and challenge.error == "use_dpop_nonce"
                and nonce
                and self._dpop is not None
                and nonce_retries < MAX_NONCE_RETRIES
            ):
                # RFC 9449 §9: retry with a proof carrying the server's nonce; not an authorization.
                nonce_retries += 1
                self._bump("dpop_nonce:resource")
                self._apply(request, await self.storage.get_tokens(self.resource))
                response = yield request
                continue
            if attempts >= self.max_attempts:
                break
            if response.status_code == 403 and (challenge is None or challenge.error != "insufficient_scope"):
                break  # AU-26: a 403 that is not about scopes is not ours to fix
            attempts += 1
            sent = request.headers.get("authorization", "")
            async with self._lock:
                current = await self.storage.get_tokens(self.resource)
                fresh = current is not None and sent.partition(" ")[2] != current.access_token
                if not (fresh and response.status_code == 401):
                    flow = Flow(response.status_code, challenge, ", ".join(values), current, protocol_version)
                    flow.server_resource = self.resource
                    yield Call(self._authorize(flow))
            self._apply(request, await self.storage.get_tokens(self.resource))
            response = yield request
        if self._dpop is not None and response.headers.get("dpop-nonce"):
            self._rs_nonce = response.headers["dpop-nonce"]

    def _apply(self, request: httpx.Request, tokens: TokenSet | None) -> None:
        # AU-22: the token travels in the Authorization header only, never in the URL.
        if tokens is None:
            return
        if tokens.token_type == "DPoP" and self._dpop is not None:
            # RFC 9449 §7.1: the DPoP scheme and a fresh proof bound to this token, per request.
            request.headers["Authorization"] = f"DPoP {tokens.access_token}"
            request.headers["DPoP"] = self._dpop.proof(
                request.method, str(request.url), access_token=tokens.access_token, nonce=self._rs_nonce
            )
        else:
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"
            request.headers.pop("DPoP", None)

    def _bump(self, name: str) -> None:
        self.counters[name] = self.counters.get(name, 0) + 1

    def _fail(self, flow: Flow, message: str, *, error: str = "") -> OAuthError:
        return OAuthError(
            f"cannot authorize to '{self.resource}': {message}",
            status=flow.status,
            error=error,
            challenge=flow.header,
        )

    def _refusal(self, flow: Flow, what: str, response: httpx.Response, body: bytes) -> OAuthError:
        """``<what> answered HTTP <status> <error>: <description>``, in the server's own words
        (bounded), as the flow's error."""
        error, description = _oauth_error(body)
        return self._fail(flow, _refused(what, response.status_code, error, description), error=error)

    def _decoded(self, flow: Flow, decoder: msgspec.json.Decoder[T], body: bytes, what: str) -> T:
        """``body`` decoded, or the flow's error naming ``what`` was invalid (msgspec names the
        field and the expected type, never the value: no secret leaks)."""
        try:
            return decoder.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise self._fail(flow, f"{what}: {exc}") from None

    def _scope(self, flow: Flow, explicit: str | None) -> str | None:
        """A machine grant's scope: the one configured, else chosen like the code flow's (AU-17),
        without ``offline_access`` (a machine client has no user session to keep)."""
        return explicit or select_scope(
            flow.challenge,
            flow.prm,
            previous=flow.previous.scope if flow.previous else None,
            step_up=flow.status == 403,
            offline_access=False,
        )

    def _get(self, url: str, flow: Flow) -> httpx.Request:
        headers = {"Accept": "application/json"}
        if flow.protocol_version:
            # 2025-03-26 basic/authorization: "MCP clients SHOULD include the header
            # MCP-Protocol-Version: <protocol-version> during Server Metadata Discovery".
            headers["MCP-Protocol-Version"] = flow.protocol_version
        return httpx.Request("GET", url, headers=headers)

    # -- discovery ----------------------------------------------------------------------------

    async def _authorize(self, flow: Flow) -> Step:
        """Discovery, then refresh or a new grant; stores the tokens or raises OAuthError."""
        header_url = flow.challenge.resource_metadata if flow.challenge else None
        for url in prm_urls(self.server_url, header_url):
            response = yield self._get(url, flow)
            body = await response.aread()
            if response.status_code != 200:
                continue
            try:
                flow.prm = decode_prm(body, self.server_url)
            except ResourceMismatch as exc:
                # AU-05: a PRM for another resource ends the flow; nothing is requested from
                # its authorization servers.
                raise self._fail(flow, str(exc)) from None
            except DiscoveryError:
                continue
            self._bump("prm")
            break
        if flow.prm is not None and flow.prm.authorization_servers:
            issuer = await self._pick_issuer(flow.prm.authorization_servers)
        else:
            # AU-42: no PRM at all is a 2025-03-26 server; its AS lives on its origin (AU-41).
            flow.legacy = True
            issuer = origin(self.server_url)
        refusal = ""
        candidates = as_metadata_urls(issuer)
        for url in candidates:
            response = yield self._get(url, flow)
            body = await response.aread()
            if response.status_code != 200:
                continue
            try:
                flow.meta = decode_as_metadata(body, issuer)
            except DiscoveryError as exc:
                refusal = refusal or str(exc)
                continue
            self._bump("as_metadata")
            break
        if flow.meta is None:
            if flow.legacy and not refusal:
                flow.meta = fallback_as_metadata(self.server_url)
            else:
                tried = ", ".join(repr(url) for url in candidates)
                raise self._fail(
                    flow, refusal or f"authorization server {issuer!r} publishes no metadata (tried {tried})"
                )
        meta = flow.meta
        if urlsplit(self.server_url).scheme == "https":
            # AU-21: "All authorization server endpoints MUST be served over HTTPS." Enforced for
            # https MCP servers, so a secure server cannot be downgraded to plain-http OAuth;
            # a plain-http MCP server (development, tests) is insecure already.
            endpoints = (meta.issuer, meta.authorization_endpoint, meta.token_endpoint, meta.registration_endpoint)
            insecure = [url for url in endpoints if url and urlsplit(url).scheme != "https"]
            if insecure:
                raise self._fail(flow, f"authorization server endpoint {insecure[0]!r} is not https")
        self._meta = meta
        log.info("auth %s: authorization server %s", self.resource, meta.issuer)

        previous = flow.previous
        if flow.status == 401 and previous is not None and previous.refresh_token and previous.issuer == meta.issuer:
            yield Call(self._refresh(flow))
            if flow.tokens is not None:
                return
        if previous is not None and previous.issuer != meta.issuer:
            # AU-23: a token from another AS is never sent again.
            await self.storage.set_tokens(self.resource, None)
        yield Call(self._grant(flow))

    async def _pick_issuer(self, servers: list[str]) -> str:
        """RFC 9728 §7.6 leaves the choice to the client: one we hold credentials for, else the
        first (AU-06)."""
        for issuer in servers:
            if self.client is not None and self.client.issuer == issuer:
                return issuer
            if await self.storage.get_client(issuer) is not None:
                return issuer
        return servers[0]

    # -- token endpoint -----------------------------------------------------------------------

    def _token_request(self, flow: Flow, client: ClientInfo, form: dict[str, str]) -> httpx.Request:
        assert flow.meta is not None
        meta = flow.meta
        headers = {"Accept": "application/json"}
        method = _choose_auth_method(client, meta)
        if method == "client_secret_basic" and client.client_secret is not None:
            # RFC 6749 §2.3.1: both parts form-encoded before Base64.
            raw = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(raw.encode()).decode("ascii")
        elif method == "client_secret_post" and client.client_secret is not None:
            form["client_id"] = client.client_id
            form["client_secret"] = client.client_secret
        elif method == "private_key_jwt":
            assertion = self._assertion(client.client_id, meta)
            if assertion is None:
                raise self._fail(
                    flow,
                    f"client {client.client_id!r} authenticates with private_key_jwt, but no assertion signer is "
                    "configured; use ClientCredentialsProvider(signer=mcpwire.auth.jwt.es256_signer(pem))",
                )
            form["client_id"] = client.client_id
            form["client_assertion_type"] = JWT_BEARER_ASSERTION
            form["client_assertion"] = assertion
        else:
            form["client_id"] = client.client_id
        if self._uses_dpop(meta):
            assert self._dpop is not None
            # RFC 9449 §5: a proof for the token request asks for a DPoP-bound token.
            headers["DPoP"] = self._dpop.proof("POST", meta.token_endpoint, nonce=self._as_nonce)
        return httpx.Request("POST", meta.token_endpoint, data=form, headers=headers)

    def _uses_dpop(self, meta: AuthorizationServerMetadata) -> bool:
        return self._dpop is not None and "ES256" in (meta.dpop_signing_alg_values_supported or [])

    def _assertion(self, client_id: str, meta: AuthorizationServerMetadata) -> str | None:
        """A signed ``private_key_jwt`` client assertion, or ``None`` without a signer."""
        return None

    async def _token_exchange(self, flow: Flow, client: ClientInfo, form: dict[str, str], scope: str | None) -> Step:
        """POSTs to the token endpoint and stores the result in ``flow.tokens`` and storage."""
        assert flow.meta is not None
        grant = form.get("grant_type", "")
        response = yield self._token_request(flow, client, dict(form))
        body = await response.aread()
        for _ in range(MAX_NONCE_RETRIES):
            nonce = response.headers.get("dpop-nonce")
            if nonce and self._uses_dpop(flow.meta):
                self._as_nonce = nonce
            if response.status_code != 400 or not nonce or not self._uses_dpop(flow.meta):
                break
            if _oauth_error(body)[0] != "use_dpop_nonce":
                break
            # RFC 9449 §8: the AS wants its nonce in the proof; the same request again.
            self._bump("dpop_nonce:token")
            response = yield self._token_request(flow, client, dict(form))
            body = await response.aread()
        if response.status_code != 200:
            if grant == "refresh_token":
                log.info(
                    "auth %s: refresh refused (HTTP %s %s)", self.resource, response.status_code, _oauth_error(body)[0]
                )
                if flow.previous is not None:
                    # A refused refresh token is dead: forget it so no later flow tries it again.
                    flow.previous = replace(flow.previous, refresh_token=None)
                    await self.storage.set_tokens(self.resource, flow.previous)
                return
            raise self._refusal(flow, f"the token endpoint {flow.meta.token_endpoint!r}", response, body)
        endpoint = flow.meta.token_endpoint
        answer = self._decoded(
            flow, _TOKEN_DECODER, body, f"the token endpoint {endpoint!r} answered with an invalid token response"
        )
        token_type = answer.token_type.lower()
        if token_type == "dpop" and self._uses_dpop(flow.meta):
            token_type = "DPoP"
        elif token_type == "bearer":
            token_type = "Bearer"
        else:
            supported = "'Bearer' or 'DPoP'" if self._uses_dpop(flow.meta) else "'Bearer'"
            raise self._fail(
                flow,
                f"the token endpoint issued a token of type {answer.token_type[:50]!r}; mcpwire can use only "
                f"{supported} tokens",
            )
        refresh = answer.refresh_token
        if refresh is None and grant == "refresh_token" and flow.previous is not None:
            refresh = flow.previous.refresh_token  # RFC 6749 §6: the old one stays valid
        tokens = TokenSet(
            access_token=answer.access_token,
            token_type=token_type,
            issuer=flow.meta.issuer,
            refresh_token=refresh,
            scope=scope if scope is not None else answer.scope,
            expires_at=time.time() + answer.expires_in if answer.expires_in else None,
            resource=flow.resource,
        )
        flow.tokens = tokens
        await self.storage.set_tokens(self.resource, tokens)
        self._bump(f"token:{grant.rsplit(':', 1)[-1]}")
        self._bump(f"token_type:{token_type}")
        log.info("auth %s: obtained a token (%s)", self.resource, grant)

    async def _refresh(self, flow: Flow) -> Step:
        """The refresh_token grant (AU-25); leaves ``flow.tokens`` unset when refused."""
        assert flow.meta is not None and flow.previous is not None and flow.previous.refresh_token
        client = await self._known_client(flow.meta)
        if client is None:
            return
        form = {"grant_type": "refresh_token", "refresh_token": flow.previous.refresh_token, "resource": flow.resource}
        yield Call(self._token_exchange(flow, client, form, flow.previous.scope))

    async def _known_client(self, meta: AuthorizationServerMetadata) -> ClientInfo | None:
        """Pre-registered credentials (checked against ``meta.issuer``) or stored ones for it."""
        if self.client is not None:
            if self.client.issuer and self.client.issuer != meta.issuer:
                # AU-15: "MUST NOT reuse client credentials from a different authorization server".
                raise OAuthError(
                    f"cannot authorize to '{self.resource}': the configured client credentials belong to "
                    f"{self.client.issuer!r}, but the server's authorization server is {meta.issuer!r}; "
                    "configure credentials for that authorization server"
                )
            return self.client.bound_to(meta.issuer)
        return await self.storage.get_client(meta.issuer)

    # -- the grant ----------------------------------------------------------------------------

    async def _grant(self, flow: Flow) -> Step:
        """Authorization code + PKCE (spec-checklist §10.1 steps 5-8)."""
        assert flow.meta is not None
        meta = flow.meta
        # AU-09: "MUST verify PKCE support before proceeding ... If code_challenge_methods_supported
        # is absent ... MCP clients MUST refuse to proceed."
        if not meta.code_challenge_methods_supported or "S256" not in meta.code_challenge_methods_supported:
            raise self._fail(flow, f"authorization server {meta.issuer!r} does not advertise PKCE S256 support")
        if not meta.authorization_endpoint:
            raise self._fail(
                flow,
                f"authorization server {meta.issuer!r} lists no authorization_endpoint in its metadata, which the "
                "authorization code flow needs",
            )
        redirect_uri = self._redirect_uri(flow)
        client = await self._known_client(meta)
        if client is None and self.client_metadata_url and meta.client_id_metadata_document_supported:
            # AU-10/AU-11: a CIMD URL is a portable client id; no registration needed.
            client = ClientInfo(client_id=self.client_metadata_url, token_endpoint_auth_method="none")
        if client is None:
            if not meta.registration_endpoint:
                raise self._fail(
                    flow,
                    f"authorization server {meta.issuer!r} offers no way to obtain a client id (no registration "
                    "endpoint, no Client ID Metadata Document support); configure pre-registered credentials",
                )
            yield Call(self._register(flow, redirect_uri))
            client = await self.storage.get_client(meta.issuer)
            assert client is not None

        step_up = flow.status == 403
        previous_scope = flow.previous.scope if flow.previous is not None else None
        scope = select_scope(
            flow.challenge, flow.prm, previous=previous_scope, step_up=step_up, as_scopes=meta.scopes_supported
        )
        pkce = PKCE()
        code = await self._authorization_code(flow, client, redirect_uri, scope, pkce)
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": pkce.verifier,
            "resource": flow.resource,
        }
        yield Call(self._token_exchange(flow, client, form, scope))

    def _redirect_uri(self, flow: Flow) -> str:
        """The redirect handler's URI, checked (AU-21)."""
        if self.redirect is None:
            raise self._fail(
                flow,
                "no redirect handler is configured for the authorization code flow; pass redirect= "
                "(HeadlessRedirect or open_loopback_redirect)",
            )
        redirect_uri = self.redirect.redirect_uri
        if not _acceptable_redirect(redirect_uri):
            # AU-21: "All redirect URIs MUST be either localhost or use HTTPS."
            raise self._fail(flow, f"redirect URI {redirect_uri!r} is neither https nor a loopback address")
        return redirect_uri

    async def _authorization_code(
        self, flow: Flow, client: ClientInfo, redirect_uri: str, scope: str | None, pkce: PKCE
    ) -> str:
        """Sends the user agent to the authorization endpoint and returns the code it came back
        with, checked (AU-19, AU-20)."""
        assert flow.meta is not None and self.redirect is not None
        meta = flow.meta
        state = new_state()
        # AU-19: the expected issuer is recorded with the verifier and state, before redirecting.
        expected_issuer = meta.issuer
        params = {
            "response_type": "code",
            "client_id": client.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": pkce.challenge,
            "code_challenge_method": PKCE.method,
            "resource": flow.resource,  # AU-16, sent whether or not the AS advertises support
        }
        if scope:
            params["scope"] = scope
        parts = urlsplit(meta.authorization_endpoint or "")
        query = urlencode([*parse_qsl(parts.query, keep_blank_values=True), *params.items()])
        url = urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
        self._bump("authorization_request")
        try:
            callback = await self.redirect.authorize(url)
        except trio.Cancelled:
            raise
        except trio.TooSlowError as exc:
            # The handlers bound their wait with trio.fail_after; its error has no message.
            raise self._fail(
                flow, "the authorization step timed out: no redirect came back from the user agent"
            ) from exc
        except Exception as exc:
            raise self._fail(flow, f"the authorization step failed: {exc or type(exc).__name__}") from exc
        answer = dict(parse_qsl(urlsplit(callback).query, keep_blank_values=True))
        return self._check_callback(flow, answer, state, expected_issuer)

    def _check_callback(self, flow: Flow, answer: dict[str, str], state: str, expected_issuer: str) -> str:
        """RFC 9207 §2.4 (AU-19), then ``state`` (AU-20), then ``error``; returns the code."""
        assert flow.meta is not None
        iss = answer.get("iss")
        if flow.meta.authorization_response_iss_parameter_supported and iss is None:
            raise self._fail(
                flow, "the authorization response lacks the 'iss' parameter its authorization server advertises"
            )
        # 2026-07-28: "clients MUST NOT apply scheme or host case folding, default-port elision,
        # trailing-slash, or percent-encoding normalization": a plain string comparison. On a
        # mismatch, error/error_description/error_uri are neither acted on nor shown.
        if iss is not None and iss != expected_issuer:
            raise self._fail(
                flow, f"the authorization response came from issuer {iss[:200]!r}, not {expected_issuer!r}"
            )
        if answer.get("state") != state:
            raise self._fail(flow, "the authorization response's state does not match the request; discarded")
        if "error" in answer:
            error = answer["error"][:100]
            description = answer.get("error_description", "")[:200]
            raise self._fail(
                flow,
                f"the authorization server refused the authorization request: {error}"
                + (f": {description}" if description else ""),
                error=error,
            )
        code = answer.get("code")
        if not code:
            raise self._fail(flow, "the authorization response carries neither a 'code' nor an 'error' parameter")
        return code

    async def _register(self, flow: Flow, redirect_uri: str) -> Step:
        """Dynamic Client Registration (RFC 7591; AU-13, AU-14); stores the client per issuer."""
        assert flow.meta is not None
        meta = flow.meta
        endpoint = meta.registration_endpoint or ""
        supported = meta.token_endpoint_auth_methods_supported or ["client_secret_basic"]
        method = next((m for m in ("none", "client_secret_basic", "client_secret_post") if m in supported), "none")
        host = (urlsplit(redirect_uri).hostname or "").lower()
        # AU-14: "native" for loopback redirects (desktop, CLI), "web" for remote https ones.
        application_type = self.application_type or ("native" if host in _LOOPBACK_HOSTS else "web")
        document: dict[str, object] = {
            "client_name": self.client_name,
            "redirect_uris": [redirect_uri],
            # AU-25: "SHOULD include refresh_token in their grant_types client metadata".
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": application_type,
        }
        request = httpx.Request(
            "POST",
            endpoint,
            content=json.dumps(document).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        response = yield request
        body = await response.aread()
        if response.status_code not in (200, 201):
            # AU-14: redirect-URI constraint rejections surface with the AS's own words.
            raise self._refusal(flow, f"dynamic client registration at {endpoint!r}", response, body)
        registered = self._decoded(
            flow,
            _REGISTRATION_DECODER,
            body,
            f"dynamic client registration at {endpoint!r} answered with an invalid client information response",
        )
        client = ClientInfo(
            client_id=registered.client_id,
            client_secret=registered.client_secret,
            token_endpoint_auth_method=registered.token_endpoint_auth_method or method,
            issuer=meta.issuer,
        )
        # AU-15: "associate those credentials with the specific authorization server that
        # issued them, keyed by the authorization server's issuer identifier".
        await self.storage.set_client(meta.issuer, client)
        self._bump("registration")
        log.info("auth %s: registered a client with %s", self.resource, meta.issuer)

