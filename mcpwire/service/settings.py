"""The service's settings: where it listens, who may call it, and its limits.

The token is held by :class:`Secret`, whose ``repr`` never shows it, so settings can be logged.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

if TYPE_CHECKING:
    from ..server.listen import ServerOptions

__all__ = [
    "DEFAULT_PORT",
    "LOOPBACK_NAMES",
    "TOKEN_ENV_VAR",
    "OAuthSettings",
    "Secret",
    "Settings",
    "SettingsError",
    "is_loopback",
    "read_token",
]

DEFAULT_PORT: Final = 8750
#: the HTTP server's options that are flags of ``mcpwire serve``
_FLAG_FIELDS: Final = frozenset(
    {"certfile", "keyfile", "forwarded_allow_ips", "max_connections", "max_connections_per_client"}
)
#: an idle keep-alive connection is closed after this long
KEEP_ALIVE_S: Final = 30.0
TOKEN_ENV_VAR: Final = "MCPWIRE_TOKEN"
#: Host header names that mean "this machine" (a browser on another site cannot send them for us)
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
#: shortest token accepted: a guessable token guards nothing
MIN_TOKEN_LENGTH: Final = 16


class SettingsError(ValueError):
    """A setting is invalid; the message is the one line ``mcpwire serve`` prints."""


class Secret:
    """A credential: compared in constant time, never shown by ``repr`` or ``str``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value.encode()

    def matches(self, candidate: str | bytes) -> bool:
        given = candidate.encode() if isinstance(candidate, str) else candidate
        return hmac.compare_digest(self._value, given)

    def reveal(self) -> str:
        """The value itself (for clients the service starts, e.g. in tests)."""
        return self._value.decode()

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the service on this machine."""
    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def read_token(token_file: str | None, environ: dict[str, str] | None = None) -> Secret | None:
    """The token from ``--token-file`` (first line) or ``$MCPWIRE_TOKEN``; ``None`` without one.

    Raises:
        SettingsError: the file cannot be read, or the token is empty or too short.
    """
    env = os.environ if environ is None else environ
    if token_file is not None:
        try:
            text = Path(token_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"--token-file {token_file}: cannot read it ({exc.__class__.__name__})") from None
        lines = text.splitlines()
        value = lines[0].strip() if lines else ""
        where = f"--token-file {token_file}"
    elif env.get(TOKEN_ENV_VAR):
        value = env[TOKEN_ENV_VAR].strip()
        where = f"${TOKEN_ENV_VAR}"
    else:
        return None
    if len(value) < MIN_TOKEN_LENGTH:
        raise SettingsError(f"{where}: the token must be at least {MIN_TOKEN_LENGTH} characters")
    return Secret(value)


class OAuthSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Signing in through an identity provider: the gateway as an OAuth 2.1 protected resource,
    the console as an OpenID Connect client (:mod:`mcpwire.service.oauth`).

    Attributes:
        issuer: the provider's issuer URL (its metadata is found at its well-known URLs).
        resource: this gateway's resource URL, which tokens must name as their audience;
            ``None``: the service's own ``/mcp`` URL (behind a proxy, give the public one).
        scopes: scopes clients are told to ask for (in the resource metadata and the 401
            challenge); none by default.
        role_claim: the claim whose values give the role (a dotted path reaches into objects).
        roles: ``(claim value, role)`` pairs; the highest role matched wins.
        default_role: the role of a valid token that matches none (``None``: it is refused).
        client_id, client_secret: the console's OpenID Connect client at the provider (no
            ``client_id``: the console offers no sign-in through the provider).
        console_scopes: scopes the console asks for besides ``openid email profile`` (one that
            brings the role claim, e.g. ``groups``, if the provider needs it).
        leeway: seconds of clock difference allowed on ``exp``, ``nbf`` and ``iat``.
    """

    issuer: str
    resource: str | None = None
    scopes: tuple[str, ...] = ()
    role_claim: str = "groups"
    roles: tuple[tuple[str, str], ...] = ()
    default_role: str | None = None
    client_id: str | None = None
    client_secret: Secret | None = None
    console_scopes: tuple[str, ...] = ()
    leeway: float = 30.0


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """How the service runs.

    Attributes:
        host, port: where it listens (``port`` 0: any free port).
        token: the bearer token guarding every endpoint but ``/healthz`` and ``/readyz``;
            required unless ``host`` is a loopback address.
        allowed_hosts: ``Host`` header values accepted besides the loopback names and the bound
            address (DNS-rebinding protection); ``*`` accepts any.
        cors_origins: origins allowed to call from a browser (none by default: no CORS headers).
        max_body_bytes: largest request body.
        sse_buffer: events buffered for one ``/events`` client before it is dropped.
        events_kept: events kept for ``Last-Event-ID`` resumption.
        rate_limit, rate_burst: calls per second per client, and the bucket size (0: no limit).
        drain_timeout: seconds in-flight requests get at shutdown.
        namespacing: the gateway prefixes tool names with their server's name.
        approval_poll: seconds between polls of shared approvals (several replicas).
        approval_timeout: seconds a call waits for a decision before it is denied.
        caller_grace: seconds a gateway client may stay disconnected from a call waiting for a
            decision (resuming within them keeps it); then its approval is abandoned.
        certfile, keyfile: a PEM certificate (and its key): the service speaks HTTPS only.
        forwarded_allow_ips: proxies whose forwarding headers give the client's address and
            scheme (addresses or networks; ``*``: any).
        max_connections: connections at once; max_connections_per_client: from one address.
        oauth: bearer JWTs of an identity provider, and the console's sign-in through it.
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: Secret | None = None
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = 4 * 1024 * 1024
    sse_buffer: int = 1000
    events_kept: int = 1000
    rate_limit: float = 50.0
    rate_burst: int = 100
    drain_timeout: float = 10.0
    namespacing: bool = True
    approval_poll: float = 0.5
    approval_timeout: float = 300.0
    caller_grace: float = 30.0
    certfile: str | None = None
    keyfile: str | None = None
    forwarded_allow_ips: tuple[str, ...] = ()
    max_connections: int = 1000
    max_connections_per_client: int = 256
    oauth: OAuthSettings | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.certfile else "http"

    def check(self) -> None:
        """Raises SettingsError for a setting the service must not start with."""
        if not is_loopback(self.host) and self.token is None:
            raise SettingsError(
                f"refusing to listen on {self.host}: a non-loopback address needs a token "
                f"(set ${TOKEN_ENV_VAR} or pass --token-file FILE), or listen on 127.0.0.1"
            )
        if not 0 <= self.port <= 65535:
            raise SettingsError(f"--port {self.port}: expected 0..65535")
        if self.rate_limit < 0 or self.rate_burst < 1:
            raise SettingsError("the rate limit must be >= 0 calls/s with a burst of at least 1")
        self.server_options()

    def server_options(self) -> ServerOptions:
        """The HTTP server's options (limits, certificate, trusted proxies) from these settings.

        Raises:
            SettingsError: a limit, the certificate or a proxy address is invalid.
        """
        from ..server.listen import ServerOptions, tls_context

        try:
            options = ServerOptions(
                keep_alive_s=KEEP_ALIVE_S,
                drain_timeout_s=self.drain_timeout,
                max_connections=self.max_connections,
                max_connections_per_client=self.max_connections_per_client,
                certfile=self.certfile,
                keyfile=self.keyfile,
                forwarded_allow_ips=self.forwarded_allow_ips,
            )
            tls_context(options)
        except ValueError as exc:
            # the server names its options as fields; the command line as flags
            head, sep, rest = str(exc).partition(" ")
            if head.rstrip(":").replace("-", "_") in _FLAG_FIELDS:
                head = "--" + head.replace("_", "-")
            rest = rest.replace("needs a certfile", "needs a --certfile").replace("with keyfile", "with --keyfile")
            raise SettingsError(head + sep + rest) from None
        return options
