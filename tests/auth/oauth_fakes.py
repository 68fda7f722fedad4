"""An in-process OAuth world for ``httpx.MockTransport``: an MCP resource that demands bearer
tokens, its Protected Resource Metadata, and an authorization server with metadata, Dynamic
Client Registration, an authorization endpoint that approves at once, and a token endpoint.

Every knob a discovery or refusal path depends on is a field, and every request is recorded, so
tests assert on exactly what the client sent, in order.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import httpx

from mcpwire.auth import HeadlessRedirect, OAuthProvider

MCP_URL = "http://mcp.test/mcp"
AS_ORIGIN = "http://as.test"
REDIRECT_URI = "http://127.0.0.1:33418/callback"


def b64url_sha256(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


@dataclass
class Sent:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.url).path

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.url).query))

    @property
    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body.decode()))

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class OAuthWorld:
    # -- the MCP server and its PRM ----------------------------------------------------------
    #: Where the PRM is served: a path, or None for no PRM at all (a 2025-03-26 server).
    prm_path: str | None = "/.well-known/oauth-protected-resource/mcp"
    prm_in_header: bool = True
    prm_resource: str | None = None  # default: the MCP URL
    prm_scopes: list[str] | None = None
    challenge_scope: str | None = None
    #: Scopes a token needs for tools/call (403 insufficient_scope otherwise).
    call_scope: str | None = None
    #: Answer every authenticated request with 403 insufficient_scope.
    always_403: bool = False
    # -- the authorization server -------------------------------------------------------------
    issuer: str = AS_ORIGIN
    #: Which well-known document the AS serves: RFC 8414 or OIDC insert/append, or none.
    metadata_at: Literal["oauth", "oidc", "oidc-append", "none"] = "oauth"
    metadata_issuer: str | None = None  # default: ``issuer``
    pkce_methods: list[str] | None = field(default_factory=lambda: ["S256"])
    iss_supported: bool | None = True
    iss_mode: Literal["correct", "omit", "wrong", "normalized"] = "correct"
    state_mode: Literal["echo", "wrong"] = "echo"
    auth_methods: list[str] = field(default_factory=lambda: ["none"])
    #: Whether the metadata lists ``authorization_endpoint``.
    authorization_endpoint: bool = True
    #: "redirect": approve at once with a 302; "page": a 200 login page (it needs a user).
    authorize_mode: Literal["redirect", "page"] = "redirect"
    #: An OAuth ``error`` (and description) to redirect back with instead of a code.
    authorize_error: str | None = None
    authorize_error_description: str = ""
    #: Whether the redirect back carries ``code`` (when there is no ``authorize_error``).
    issue_code: bool = True
    registration: bool = True
    #: The registration endpoint's status, and a raw body replacing its client information.
    registration_status: int = 201
    registration_body: bytes | None = None
    registered_method: str | None = None
    registered_secret: str | None = "reg-secret-1"
    cimd: bool = False
    as_scopes: list[str] | None = None
    #: The token endpoint's status, and a raw body replacing its token response.
    token_status: int = 200
    token_body: bytes | None = None
    token_type: str = "Bearer"
    expires_in: int | None = 3600
    issue_refresh: bool = True
    refresh_works: bool = True
    # -- state ---------------------------------------------------------------------------------
    sent: list[Sent] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)  # access token -> granted scope
    refresh_tokens: set[str] = field(default_factory=set)
    challenges: dict[str, str] = field(default_factory=dict)  # code -> code_challenge
    codes: list[str] = field(default_factory=list)  # every authorization code issued
    counter: int = 0

    @property
    def as_path(self) -> str:
        return urlsplit(self.issuer).path.rstrip("/")

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def provider(self, **kwargs: Any) -> OAuthProvider:
        http = httpx.AsyncClient(transport=self.transport())
        kwargs.setdefault("redirect", HeadlessRedirect(redirect_uri=REDIRECT_URI, http=http))
        return OAuthProvider(MCP_URL, **kwargs)

    def paths(self) -> list[str]:
        return [f"{s.method} {urlsplit(s.url).netloc}{s.path}" for s in self.sent]

    def only(self, path_suffix: str) -> list[Sent]:
        return [s for s in self.sent if s.path.endswith(path_suffix)]

    def secrets(self) -> list[str]:
        """Every secret this world handed out or was sent: none may appear in an error."""
        found = [*self.tokens, *self.refresh_tokens, *self.codes]
        if self.registered_secret:
            found.append(self.registered_secret)
        for sent in self.sent:
            if sent.path.endswith("/token") and sent.body:
                found.extend(v for k, v in sent.form.items() if k in ("code_verifier", "client_secret", "code"))
        return found

    # -- dispatch --------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        self.sent.append(Sent(request.method, str(request.url), dict(request.headers), body))
        url = request.url
        if url.host == "mcp.test":
            return self._mcp_host(request, body)
        if url.host == "as.test":
            return self._as_host(request, body)
        return httpx.Response(404)

    def _mcp_host(self, request: httpx.Request, body: bytes) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and self.prm_path is not None and path == self.prm_path:
            return httpx.Response(
                200,
                json={
                    "resource": self.prm_resource or MCP_URL,
                    "authorization_servers": [self.issuer],
                    **({"scopes_supported": self.prm_scopes} if self.prm_scopes is not None else {}),
                },
            )
        if path == "/mcp" and request.method == "POST":
            return self._mcp(request, body)
        if path == "/mcp":
            return httpx.Response(405)  # no standalone GET stream, no DELETE
        if self.prm_path is None and self.metadata_at == "none":
            # The 2025-03-26 default endpoints on the MCP server's origin.
            if path == "/register" and request.method == "POST":
                return self._register(body)
            if path == "/authorize":
                return self._authorize(request)
            if path == "/token":
                return self._token(request, body)
        if self.prm_path is None and self.issuer == "http://mcp.test":
            return self._as_paths(request, body)
        return httpx.Response(404)

    def _challenge(self, status: int, error: str | None = None, scope: str | None = None) -> httpx.Response:
        params = []
        scope = scope or self.challenge_scope
        if scope:
            params.append(f'scope="{scope}"')
        if self.prm_in_header and self.prm_path is not None:
            params.append(f'resource_metadata="http://mcp.test{self.prm_path}"')
        if error:
            params.append(f'error="{error}"')
        header = "Bearer " + ", ".join(params) if params else "Bearer"
        return httpx.Response(status, headers={"WWW-Authenticate": header}, json={"error": error or "invalid_token"})

    def _mcp(self, request: httpx.Request, body: bytes) -> httpx.Response:
        auth = request.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        if token is None or token not in self.tokens:
            return self._challenge(401)
        granted = self.tokens[token].split()
        method = json.loads(body).get("method") if body else None
        if self.always_403 or (self.call_scope and method == "tools/call" and self.call_scope not in granted):
            return self._challenge(403, "insufficient_scope", self.call_scope or self.challenge_scope)
        return self._answer(json.loads(body) if body else {})

    def _answer(self, message: dict[str, Any]) -> httpx.Response:
        """Just enough of a 2025-11-25 MCP server for ``open_client`` (JSON answers)."""
        method = message.get("method", "")
        if "id" not in message and method.startswith("notifications/"):
            return httpx.Response(202)
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "oauth-fake", "version": "1.0"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "you"}]}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message.get("id", 1), "result": result})

    def _as_host(self, request: httpx.Request, body: bytes) -> httpx.Response:
        return self._as_paths(request, body)

    def _metadata_path(self) -> str | None:
        p = self.as_path
        return {
            "oauth": f"/.well-known/oauth-authorization-server{p}",
            "oidc": f"/.well-known/openid-configuration{p}",
            "oidc-append": f"{p}/.well-known/openid-configuration",
            "none": None,
        }[self.metadata_at]

    def _as_paths(self, request: httpx.Request, body: bytes) -> httpx.Response:
        path = request.url.path
        p = self.as_path
        if request.method == "GET" and path == self._metadata_path():
            meta: dict[str, Any] = {
                "issuer": self.metadata_issuer or self.issuer,
                "token_endpoint": f"{self.issuer}/token",
                "response_types_supported": ["code"],
                "token_endpoint_auth_methods_supported": self.auth_methods,
            }
            if self.authorization_endpoint:
                meta["authorization_endpoint"] = f"{self.issuer}/authorize"
            if self.registration:
                meta["registration_endpoint"] = f"{self.issuer}/register"
            if self.pkce_methods is not None:
                meta["code_challenge_methods_supported"] = self.pkce_methods
            if self.iss_supported is not None:
                meta["authorization_response_iss_parameter_supported"] = self.iss_supported
            if self.cimd:
                meta["client_id_metadata_document_supported"] = True
            if self.as_scopes is not None:
                meta["scopes_supported"] = self.as_scopes
            return httpx.Response(200, json=meta)
        if path == f"{p}/register" and request.method == "POST":
            return self._register(body)
        if path == f"{p}/authorize":
            return self._authorize(request)
        if path == f"{p}/token" and request.method == "POST":
            return self._token(request, body)
        return httpx.Response(404)

    def _register(self, body: bytes) -> httpx.Response:
        if self.registration_body is not None:
            return httpx.Response(
                self.registration_status, content=self.registration_body, headers={"Content-Type": "application/json"}
            )
        self.counter += 1
        doc = json.loads(body)
        answer: dict[str, Any] = {"client_id": f"client-{self.counter}", "redirect_uris": doc.get("redirect_uris", [])}
        if self.registered_secret:
            answer["client_secret"] = self.registered_secret
        if self.registered_method:
            answer["token_endpoint_auth_method"] = self.registered_method
        return httpx.Response(self.registration_status, json=answer)

    def _authorize(self, request: httpx.Request) -> httpx.Response:
        q = dict(parse_qsl(request.url.query.decode()))
        if self.authorize_mode == "page":
            return httpx.Response(200, html="<form>Sign in</form>")
        self.counter += 1
        code = f"code-{self.counter}"
        params: dict[str, str] = {}
        if self.authorize_error is not None:
            params["error"] = self.authorize_error
            if self.authorize_error_description:
                params["error_description"] = self.authorize_error_description
        elif self.issue_code:
            self.challenges[code] = q.get("code_challenge", "")
            self.codes.append(code)
            params["code"] = code
        if self.state_mode == "echo" and "state" in q:
            params["state"] = q["state"]
        elif self.state_mode == "wrong":
            params["state"] = "forged"
        if self.iss_mode == "correct":
            params["iss"] = self.metadata_issuer or self.issuer
        elif self.iss_mode == "wrong":
            params["iss"] = "https://evil.example"
        elif self.iss_mode == "normalized":
            params["iss"] = (self.metadata_issuer or self.issuer) + "/"
        self._last_scope = q.get("scope", "")
        return httpx.Response(302, headers={"Location": f"{q['redirect_uri']}?{urlencode(params)}"})

    _last_scope: str = ""

    def _token(self, request: httpx.Request, body: bytes) -> httpx.Response:
        if self.token_body is not None:
            return httpx.Response(
                self.token_status, content=self.token_body, headers={"Content-Type": "application/json"}
            )
        form = dict(parse_qsl(body.decode()))
        grant = form.get("grant_type")
        scope = form.get("scope", self._last_scope)
        if grant == "authorization_code":
            expected = self.challenges.pop(form.get("code", ""), None)
            if expected is None or b64url_sha256(form.get("code_verifier", "")) != expected:
                return httpx.Response(400, json={"error": "invalid_grant"})
        elif grant == "refresh_token":
            if not self.refresh_works or form.get("refresh_token") not in self.refresh_tokens:
                return httpx.Response(400, json={"error": "invalid_grant"})
            self.refresh_tokens.discard(form["refresh_token"])
        self.counter += 1
        token = f"access-{self.counter}"
        self.tokens[token] = scope
        answer: dict[str, Any] = {"access_token": token, "token_type": self.token_type}
        if self.expires_in is not None:
            answer["expires_in"] = self.expires_in
        if self.issue_refresh:
            refresh = f"refresh-{self.counter}"
            self.refresh_tokens.add(refresh)
            answer["refresh_token"] = refresh
        if scope:
            answer["scope"] = scope
        return httpx.Response(self.token_status, json=answer)


ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"


@dataclass
class IdP:
    """An identity provider's token-exchange endpoint on idp.test in front of a world's AS."""

    world: OAuthWorld
    status: int = 200
    #: The ``issued_token_type`` of the answer (an ID-JAG unless a test says otherwise).
    issued_token_type: str = ID_JAG
    #: A raw body replacing the answer (an OAuth error, an invalid document).
    body: bytes | None = None
    sent: list[Sent] = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.host != "idp.test":
            return self.world.handle(request)
        body = request.read()
        self.sent.append(Sent(request.method, str(request.url), dict(request.headers), body))
        if self.body is not None:
            return httpx.Response(self.status, content=self.body, headers={"Content-Type": "application/json"})
        return httpx.Response(
            self.status, json={"access_token": "id-jag-1", "issued_token_type": self.issued_token_type}
        )


def basic_credentials(sent: Sent) -> tuple[str, str] | None:
    header = sent.headers.get("authorization", "")
    if not header.startswith("Basic "):
        return None
    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    return unquote(user), unquote(password)


async def call(provider: OAuthProvider, world: OAuthWorld, method: str = "tools/list") -> httpx.Response:
    """One MCP POST through the provider, like the streamable HTTP actor sends it."""
    async with httpx.AsyncClient(transport=world.transport(), auth=provider) as http:
        return await http.post(
            MCP_URL,
            json={"jsonrpc": "2.0", "id": 1, "method": method},
            headers={"MCP-Protocol-Version": "2025-11-25"},
        )
