"""The gateway as an OAuth 2.1 protected resource of the organisation's identity provider.

Theory of operation: with ``--oauth-issuer``, ``mcpwire serve`` accepts bearer JWTs that the
provider issued for this gateway, beside its own tokens (2025-11-25 basic/authorization, and the
2026-07-28 pages the same rules moved to):

- It publishes Protected Resource Metadata (RFC 9728) at ``/.well-known/oauth-protected-resource``
  and at the path-inserted URL of its resource (``.../oauth-protected-resource/mcp``), naming the
  provider in ``authorization_servers`` and its own resource URL; every 401 carries
  ``WWW-Authenticate: Bearer ... resource_metadata="..."`` (:meth:`IdentityProvider.challenge`).
- :meth:`IdentityProvider.verify_access_token` is the :class:`~.identity.Authenticator`'s ``jwt``
  hook: the signature is checked with the provider's keys (:mod:`.jws`), then ``iss`` (exactly
  the issuer), ``aud`` (this gateway's resource URL: 2025-11-25 "MCP servers MUST validate that
  access tokens were issued specifically for them as the intended audience"), ``exp``/``nbf``
  with a small leeway. The configured claim (``groups`` by default) maps to a role
  (:class:`RoleMap`); the identity is ``user:<email or sub>``.
- The provider's metadata is read from its well-known URLs in the order the MCP specification
  gives (RFC 8414, then OpenID Connect Discovery) and must name the configured issuer exactly;
  its keys come from the ``jwks_uri`` it names. Both are cached (an hour, a quarter of an hour);
  a token naming a key the cache lacks fetches the keys again, at most every ``MIN_REFRESH_S``, so
  made-up key ids cannot make the service hammer the provider. Every fetch is bounded in time and
  size; after a failed one the provider is left alone for ``RETRY_AFTER_FAILURE_S`` and tokens
  are refused meanwhile (a 401: the client may try again).

The console's sign-in through the same provider is :mod:`.oidc`.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from ..redaction import clean_terminal, shorten
from .identity import Identity, Role
from .jws import JwtError, PublicKey, UnknownKey, check_claims, decode, parse_jwks, verify
from .settings import OAuthSettings, Settings, SettingsError, is_loopback

if TYPE_CHECKING:
    import httpx

__all__ = [
    "PRM_PATH",
    "IdentityProvider",
    "ProviderError",
    "ProviderMetadata",
    "RoleMap",
    "check_settings",
    "parse_roles",
    "resource_url",
]

log = logging.getLogger("mcpwire.service.oauth")

#: RFC 9728 §3: the well-known path of Protected Resource Metadata
PRM_PATH: Final = "/.well-known/oauth-protected-resource"
#: the gateway's path on the service
MCP_PATH: Final = "/mcp"
#: one fetch from the provider (metadata, keys, a token, user info), whole
FETCH_TIMEOUT_S: Final = 10.0
CONNECT_TIMEOUT_S: Final = 5.0
#: the largest document read from the provider
MAX_DOCUMENT_BYTES: Final = 256 * 1024
#: how long the provider's metadata and keys are believed
METADATA_TTL_S: Final = 3600.0
KEYS_TTL_S: Final = 900.0
#: keys are fetched again for an unknown ``kid`` at most this often
MIN_REFRESH_S: Final = 30.0
#: after a failed fetch, the provider is not asked again for this long
RETRY_AFTER_FAILURE_S: Final = 5.0
#: the provider being down is logged at most this often
WARN_EVERY_S: Final = 60.0
#: the longest user name kept (from the token's ``email`` or ``sub``)
MAX_NAME: Final = 200
_SCOPE_CHARS: Final = frozenset(chr(c) for c in range(0x21, 0x7F)) - {'"', "\\"}


class ProviderError(Exception):
    """The identity provider cannot be reached, or what it serves is unusable."""


class ProviderMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """The provider's metadata (RFC 8414 / OpenID Connect Discovery), the fields used here."""

    issuer: str
    jwks_uri: str
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    userinfo_endpoint: str | None = None
    code_challenge_methods_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    authorization_response_iss_parameter_supported: bool = False


_METADATA = msgspec.json.Decoder(ProviderMetadata)


# -- settings ------------------------------------------------------------------------------------


def _check_url(flag: str, value: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{flag} {value!r}: expected an http(s) URL")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise SettingsError(f"{flag} {value!r}: must be https (plain http only on a loopback address)")
    if parts.fragment or parts.username or parts.password:
        raise SettingsError(f"{flag} {value!r}: must have no fragment and no user name or password")
    return parts


def resource_url(settings: Settings) -> str:
    """The gateway's resource URL: ``--oauth-resource``, else the service's own ``/mcp`` URL.

    Raises:
        SettingsError: there is no OAuth configuration, or the URL cannot be known before the
            service listens (any address, or any free port).
    """
    if settings.oauth is None:
        raise SettingsError("no --oauth-issuer is configured")
    if settings.oauth.resource is not None:
        return settings.oauth.resource
    host = settings.host
    if host in ("", "0.0.0.0", "::", "[::]") or settings.port == 0:
        raise SettingsError(
            f"--oauth-resource is needed when listening on {host or '*'}:{settings.port}: the gateway's URL as "
            "clients reach it (e.g. https://mcp.example.com/mcp) is the audience its tokens must name"
        )
    name = f"[{host.strip('[]')}]" if ":" in host else host
    return f"{settings.scheme}://{name}:{settings.port}{MCP_PATH}"


def check_settings(settings: Settings) -> None:
    """Raises SettingsError (one line, naming the flag) for an OAuth setting the service must not
    start with."""
    oauth = settings.oauth
    assert oauth is not None
    issuer = _check_url("--oauth-issuer", oauth.issuer)
    if issuer.query:
        raise SettingsError(f"--oauth-issuer {oauth.issuer!r}: an issuer has no query")
    resource = resource_url(settings)
    _check_url("--oauth-resource", resource)
    for flag, scopes in (("--oauth-scope", oauth.scopes), ("--oidc-scope", oauth.console_scopes)):
        for scope in scopes:
            if not scope or not set(scope) <= _SCOPE_CHARS:
                raise SettingsError(f"{flag} {scope!r}: a scope is printable ASCII without spaces or quotes")
    if "offline_access" in oauth.scopes:
        # 2026-07-28 basic/authorization: "MCP Servers (Protected Resources) SHOULD NOT include
        # offline_access in WWW-Authenticate scope or Protected Resource Metadata scopes_supported"
        raise SettingsError(
            "--oauth-scope offline_access: refresh tokens are the client's choice, not a scope of the gateway"
        )
    if not oauth.role_claim or not oauth.role_claim.isprintable() or " " in oauth.role_claim:
        raise SettingsError(f"--oauth-role-claim {oauth.role_claim!r}: expected a claim name")
    for flag, roles in (("--oauth-roles", [r for _, r in oauth.roles]), ("--oauth-default-role", [oauth.default_role])):
        for role in roles:
            try:
                if role is not None:
                    Role.parse(role)
            except ValueError as exc:
                raise SettingsError(f"{flag}: {exc}") from None
    if not oauth.roles and oauth.default_role is None:
        raise SettingsError(
            "--oauth-issuer needs --oauth-roles (claim values to roles) or --oauth-default-role: "
            "otherwise no token of the provider can do anything"
        )
    if oauth.client_secret is not None and not oauth.client_id:
        raise SettingsError("--oidc-client-secret-file needs --oidc-client-id")
    if not 0 <= oauth.leeway <= 300:
        raise SettingsError("the clock leeway must be 0..300 seconds")
    try:
        import cryptography  # noqa: F401
    except ImportError:  # pragma: no cover - depends on the environment
        raise SettingsError("--oauth-issuer needs the 'cryptography' package: pip install 'mcpwire[auth]'") from None


def parse_roles(text: str) -> tuple[tuple[str, str], ...]:
    """``'mcp-admins=admin,mcp-users=caller'`` as pairs (for ``--oauth-roles``).

    Raises:
        SettingsError: an entry is not ``VALUE=ROLE`` or names no role.
    """
    pairs: list[tuple[str, str]] = []
    for entry in text.split(","):
        if not entry.strip():
            continue
        value, sep, role = entry.rpartition("=")
        if not sep or not value.strip():
            raise SettingsError(f"--oauth-roles: {entry.strip()!r} is not VALUE=ROLE")
        try:
            pairs.append((value.strip(), Role.parse(role).label))
        except ValueError as exc:
            raise SettingsError(f"--oauth-roles: {exc}") from None
    return tuple(pairs)


# -- roles -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RoleMap:
    """A claim's values to roles: the highest role matched, else the default (or None)."""

    claim: str
    values: Mapping[str, Role]
    default: Role | None = None

    @classmethod
    def from_settings(cls, oauth: OAuthSettings) -> RoleMap:
        values: dict[str, Role] = {}
        for value, role in oauth.roles:
            parsed = Role.parse(role)
            values[value] = max(parsed, values.get(value, parsed))
        default = Role.parse(oauth.default_role) if oauth.default_role is not None else None
        return cls(oauth.role_claim, values, default)

    def found(self, claims: Mapping[str, Any]) -> object:
        """The claim's value (a dotted name reaches into objects), or None."""
        value: object = claims
        for part in self.claim.split("."):
            if not isinstance(value, dict):
                return None
            value = value.get(part)
        return value

    def role_of(self, claims: Mapping[str, Any]) -> Role | None:
        value = self.found(claims)
        given = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        matched = [self.values[v] for v in given if isinstance(v, str) and v in self.values]
        return max(matched) if matched else self.default


def user_name(claims: Mapping[str, Any]) -> str | None:
    """What the audit log and the console call the user: a verified ``email``, else ``sub``."""
    email = claims.get("email")
    if isinstance(email, str) and email and claims.get("email_verified") is not False:
        name = email
    else:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            return None
        name = sub
    return shorten(clean_terminal(name, newlines=False), MAX_NAME)


# -- the provider ---------------------------------------------------------------------------------


class IdentityProvider:
    """The configured identity provider, as this gateway's authorization server.

    Args:
        oauth: the OAuth settings.
        resource: the gateway's resource URL (:func:`resource_url`).
        transport: the httpx transport to the provider (tests); the default opens connections.
        clock: wall-clock seconds (tests).
    """

    def __init__(
        self,
        oauth: OAuthSettings,
        resource: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = oauth
        self.issuer = oauth.issuer
        self.resource = resource
        self.roles = RoleMap.from_settings(oauth)
        self.transport = transport
        self.clock = clock
        self._lock = trio.Lock()
        self._metadata: tuple[float, ProviderMetadata] | None = None
        self._keys: tuple[float, list[PublicKey]] | None = None
        self._failed_at = -RETRY_AFTER_FAILURE_S
        self._warned_at = -WARN_EVERY_S

    def __repr__(self) -> str:
        return f"IdentityProvider(issuer={self.issuer!r}, resource={self.resource!r})"

    # -- what the gateway publishes

    @property
    def metadata_url(self) -> str:
        """The URL of this resource's metadata (RFC 9728 §3.1: the well-known path inserted
        before the resource's path)."""
        parts = urllib.parse.urlsplit(self.resource)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, PRM_PATH + parts.path.rstrip("/"), "", ""))

    def metadata_paths(self) -> tuple[str, ...]:
        """The paths the metadata is served at: the root one, the gateway's, and the resource's
        own (which differs behind a proxy that adds a prefix)."""
        own = urllib.parse.urlsplit(self.resource).path.rstrip("/")
        return tuple(dict.fromkeys([PRM_PATH, PRM_PATH + MCP_PATH, PRM_PATH + own]))

    def metadata_document(self) -> dict[str, object]:
        """Protected Resource Metadata (RFC 9728 §2) for the gateway."""
        document: dict[str, object] = {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "mcpwire gateway",
        }
        if self.settings.scopes:
            document["scopes_supported"] = list(self.settings.scopes)
        return document

    def challenge(self, *, error: str | None = None) -> str:
        """The ``WWW-Authenticate`` value of a 401 (RFC 6750 §3, RFC 9728 §5.1); ``error`` only
        when a token was presented (``invalid_token``)."""
        value = f'Bearer realm="mcpwire", resource_metadata="{self.metadata_url}"'
        if self.settings.scopes:
            value += f', scope="{" ".join(self.settings.scopes)}"'
        if error:
            value += f', error="{error}"'
        return value

    # -- tokens

    async def verify_access_token(self, token: str) -> Identity | None:
        """The identity a bearer JWT proves, or None (the ``jwt`` hook of the Authenticator).

        Cancellation: a fetch from the provider in progress is abandoned.
        """
        try:
            claims = await self.claims_of(token, audience=self.resource)
        except JwtError as exc:
            log.info("a bearer JWT was refused: %s", exc)
            return None
        except ProviderError as exc:
            # one warning a minute: while the provider is down every request would say it
            now = time.monotonic()
            if now - self._warned_at >= WARN_EVERY_S:
                self._warned_at = now
                log.warning("bearer JWTs are refused: %s", exc)
            return None
        return self.identity_of(claims)

    def identity_of(self, claims: Mapping[str, Any]) -> Identity | None:
        """The identity of verified claims, or None when they map to no role or name no one."""
        name = user_name(claims)
        if name is None:
            log.info("a token of %s names no user ('sub'); refused", self.issuer)
            return None
        role = self.roles.role_of(claims)
        if role is None:
            log.info("user:%s has no role here (claim %r matches none of --oauth-roles)", name, self.roles.claim)
            return None
        return Identity("user", name, role)

    async def claims_of(self, token: str, *, audience: str, nonce: str | None = None) -> dict[str, Any]:
        """The claims of ``token`` once its signature, issuer, audience and times are checked.

        Raises:
            JwtError: the token is refused (the message says why).
            ProviderError: the provider's keys cannot be had.
        """
        parsed = decode(token)
        keys = await self._current_keys()
        try:
            verify(parsed, keys)
        except UnknownKey:
            fetched_at = self._keys[0] if self._keys is not None else 0.0
            if time.monotonic() - fetched_at < MIN_REFRESH_S:
                raise
            verify(parsed, await self._current_keys(refresh=True))
        check_claims(
            parsed.claims,
            issuer=self.issuer,
            audience=audience,
            now=self.clock(),
            leeway=self.settings.leeway,
            nonce=nonce,
        )
        return parsed.claims

    # -- what the provider publishes

    async def metadata(self) -> ProviderMetadata:
        """The provider's metadata, cached for ``METADATA_TTL_S`` (and kept while the provider
        cannot be reached, once it was read).

        Raises:
            ProviderError: no well-known URL of the issuer serves usable metadata for it.

        Cancellation: a fetch in progress is abandoned.
        """
        cached = self._metadata
        if cached is not None and time.monotonic() - cached[0] < METADATA_TTL_S:
            return cached[1]
        async with self._lock:
            cached = self._metadata
            if cached is not None and time.monotonic() - cached[0] < METADATA_TTL_S:
                return cached[1]
            try:
                self._check_backoff()
                found = await self._fetch_metadata()
            except ProviderError as exc:
                if cached is None:
                    raise
                self._stale(exc)
                return cached[1]
            self._metadata = (time.monotonic(), found)
            return found

    async def _fetch_metadata(self) -> ProviderMetadata:
        from ..auth.discovery import as_metadata_urls

        problems: list[str] = []
        for url in as_metadata_urls(self.issuer):
            try:
                status, body = await self.fetch("GET", url)
            except ProviderError as exc:
                self._failed_at = time.monotonic()
                raise ProviderError(f"cannot read the identity provider's metadata: {exc}") from None
            if status != 200:
                problems.append(f"{url} answered HTTP {status}")
                continue
            try:
                found = _METADATA.decode(body)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                problems.append(f"{url} is not usable metadata ({shorten(str(exc), 120)})")
                continue
            if found.issuer != self.issuer:
                # RFC 8414 §3.3: the issuer must be identical, or the metadata is not used
                problems.append(f"{url} names the issuer {shorten(found.issuer, 200)!r}, not {self.issuer!r}")
                continue
            log.info("identity provider %s: metadata read from %s", self.issuer, url)
            return found
        self._failed_at = time.monotonic()
        raise ProviderError("no metadata for the issuer " + repr(self.issuer) + ": " + "; ".join(problems))

    async def _current_keys(self, *, refresh: bool = False) -> list[PublicKey]:
        cached = self._keys
        if not refresh and cached is not None and time.monotonic() - cached[0] < KEYS_TTL_S:
            return cached[1]
        meta = await self.metadata()
        async with self._lock:
            cached = self._keys
            now = time.monotonic()
            if cached is not None and now - cached[0] < (MIN_REFRESH_S if refresh else KEYS_TTL_S):
                return cached[1]  # another request fetched them meanwhile
            try:
                self._check_backoff()
                try:
                    status, body = await self.fetch("GET", meta.jwks_uri)
                    if status != 200:
                        raise ProviderError(f"its key set {meta.jwks_uri} answered HTTP {status}")
                    keys = parse_jwks(body)
                except (ProviderError, JwtError) as exc:
                    self._failed_at = time.monotonic()
                    raise ProviderError(f"cannot read the identity provider's keys: {exc}") from None
            except ProviderError as failure:
                if cached is None or refresh:
                    raise
                # the keys it had are still its keys until it says otherwise
                self._stale(failure)
                return cached[1]
            self._keys = (time.monotonic(), keys)
            log.info("identity provider %s: %d signing keys read", self.issuer, len(keys))
            return keys

    def _stale(self, exc: ProviderError) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_S:
            self._warned_at = now
            log.warning("%s; using what it published before", exc)

    def _check_backoff(self) -> None:
        since = time.monotonic() - self._failed_at
        if since < RETRY_AFTER_FAILURE_S:
            raise ProviderError(
                f"the identity provider failed {since:.0f} s ago; asking again in {RETRY_AFTER_FAILURE_S - since:.0f} s"
            )

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[httpx.AsyncClient]:
        import httpx

        timeout = httpx.Timeout(FETCH_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        async with httpx.AsyncClient(timeout=timeout, transport=self.transport, follow_redirects=False) as client:
            yield client

    async def fetch(
        self,
        method: str,
        url: str,
        *,
        data: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """One request to the provider: its status and body (at most ``MAX_DOCUMENT_BYTES``).

        Raises:
            ProviderError: it could not be sent, took longer than ``FETCH_TIMEOUT_S``, or the body
                is too large.

        Cancellation: the request is abandoned.
        """
        import httpx

        shown = shorten(url, 200)
        try:
            with trio.fail_after(FETCH_TIMEOUT_S):
                async with (
                    self._client() as client,
                    client.stream(
                        method, url, data=data, headers={"Accept": "application/json", **(headers or {})}
                    ) as response,
                ):
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_DOCUMENT_BYTES:
                            raise ProviderError(f"{shown} answered with more than {MAX_DOCUMENT_BYTES} bytes")
                    return response.status_code, bytes(body)
        except trio.TooSlowError:
            raise ProviderError(f"{shown} did not answer within {FETCH_TIMEOUT_S:g} s") from None
        except httpx.HTTPError as exc:
            raise ProviderError(f"{shown}: {type(exc).__name__}: {shorten(str(exc), 160)}") from None
