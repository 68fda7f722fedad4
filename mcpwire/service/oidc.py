"""Signing in to the console through the identity provider: OpenID Connect, authorization code
flow with PKCE.

Theory of operation: :meth:`ConsoleSignIn.begin` makes a fresh ``state``, ``nonce`` and PKCE
verifier (S256) and returns the provider's authorization URL with the value of a short-lived
cookie that carries them back; nothing is kept on the service, so any replica can finish what
another began, and only the browser that began a sign-in can finish it. :meth:`ConsoleSignIn.finish`
takes the provider's redirect and that cookie and, in this order: checks ``iss`` (RFC 9207 §2.4,
a plain string comparison) and ``state`` before acting on anything else in the answer (an
``error`` from a mismatched answer is not shown), redeems the code at the token endpoint with the
verifier (client_secret_basic, or client_secret_post when that is all the provider takes, or a
public client's ``client_id``), and verifies the ID token (OpenID Connect Core §3.1.3.7: the
signature with the provider's keys, ``iss``, ``aud`` = the client id, ``azp``, ``exp``, ``iat``
and the ``nonce`` it sent). When the ID token lacks the role claim, the provider's user info
(same ``sub``) supplies it. The identity is then the same a JWT of that user would prove at the
gateway (:meth:`~.oauth.IdentityProvider.identity_of`). The client secret is never logged nor
put in a page, and a failed sign-in says what went wrong in one sentence.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ..auth.pkce import PKCE, new_state, s256
from ..redaction import shorten
from .identity import Identity
from .jws import JwtError
from .oauth import MCP_PATH, IdentityProvider, ProviderError, ProviderMetadata
from .settings import Secret

__all__ = ["CALLBACK_PATH", "COOKIE", "START_PATH", "ConsoleSignIn", "SignInError", "redirect_uri_for"]

log = logging.getLogger("mcpwire.service.oidc")

START_PATH: Final = "/login/oidc"
CALLBACK_PATH: Final = "/login/oidc/callback"
#: the cookie carrying a sign-in in progress (state, nonce, verifier, where to go next)
COOKIE: Final = "mcpwire_oidc"
#: a sign-in must come back within this long
SIGN_IN_S: Final = 600
#: scopes the console asks for: who the user is, and the claims roles come from
SCOPES: Final = "openid email profile"
_MAX_COOKIE: Final = 2048


class SignInError(Exception):
    """A sign-in through the provider failed; the message is shown on the login page."""


class _Pending(msgspec.Struct, frozen=True, array_like=True):
    state: str
    nonce: str
    verifier: str
    next: str
    started: float


class _TokenAnswer(msgspec.Struct, frozen=True):
    id_token: str | None = None
    access_token: str | None = None


class _ErrorAnswer(msgspec.Struct, frozen=True):
    error: str = ""
    error_description: str = ""


def redirect_uri_for(resource: str) -> str:
    """The console's callback URL: beside the gateway, at the public URL the resource names
    (``https://host/prefix/mcp`` gives ``https://host/prefix/login/oidc/callback``)."""
    parts = urllib.parse.urlsplit(resource)
    base = parts.path.rstrip("/")
    base = base[: -len(MCP_PATH)] if base.endswith(MCP_PATH) else ""
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, base + CALLBACK_PATH, "", ""))


def _encode(pending: _Pending) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode(pending)).rstrip(b"=").decode("ascii")


def _decode(value: str | None) -> _Pending | None:
    if not value or len(value) > _MAX_COOKIE:
        return None
    try:
        return msgspec.json.decode(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)), type=_Pending)
    except (binascii.Error, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None


@dataclass(frozen=True, slots=True)
class Began:
    """Where to send the browser, and the cookie to set for the way back."""

    url: str
    cookie: str


class ConsoleSignIn:
    """The console as an OpenID Connect client of ``provider`` (see the module's theory).

    Args:
        provider: the identity provider (its metadata, keys and role mapping).
        client_id, client_secret: the console's client at the provider (no secret: a public
            client, protected by PKCE alone).
        redirect_uri: the callback URL registered with the provider.
    """

    def __init__(
        self, provider: IdentityProvider, client_id: str, client_secret: Secret | None, redirect_uri: str
    ) -> None:
        self.provider = provider
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_uri = redirect_uri

    def __repr__(self) -> str:
        return f"ConsoleSignIn(issuer={self.provider.issuer!r}, client_id={self.client_id!r})"

    @property
    def label(self) -> str:
        """The provider's name on the login page: its issuer's host (and path)."""
        parts = urllib.parse.urlsplit(self.provider.issuer)
        return (parts.netloc + parts.path).rstrip("/")

    async def begin(self, next_path: str) -> Began:
        """The authorization request (code flow, PKCE S256, state, nonce).

        Raises:
            SignInError: the provider's metadata cannot be had, or it offers no code flow with PKCE.

        Cancellation: a fetch of the metadata in progress is abandoned.
        """
        meta = await self._metadata()
        methods = meta.code_challenge_methods_supported
        if methods is not None and "S256" not in methods:
            raise SignInError("The identity provider does not support PKCE with S256; sign in with a token.")
        if not meta.authorization_endpoint or not meta.token_endpoint:
            raise SignInError("The identity provider publishes no authorization or token endpoint.")
        pkce = PKCE()
        pending = _Pending(new_state(), new_state(), pkce.verifier, next_path, time.time())
        params = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": " ".join(dict.fromkeys([*SCOPES.split(), *self.provider.settings.console_scopes])),
            "state": pending.state,
            "nonce": pending.nonce,
            "code_challenge": s256(pkce.verifier),
            "code_challenge_method": "S256",
        }
        endpoint = urllib.parse.urlsplit(meta.authorization_endpoint)
        query = urllib.parse.urlencode(
            [*urllib.parse.parse_qsl(endpoint.query, keep_blank_values=True), *params.items()]
        )
        url = urllib.parse.urlunsplit((endpoint.scheme, endpoint.netloc, endpoint.path, query, ""))
        return Began(url, _encode(pending))

    async def finish(self, answer: Mapping[str, str], cookie: str | None) -> tuple[Identity, str]:
        """The identity the provider's redirect proves, and the path to go to next.

        Raises:
            SignInError: the answer, the code or the ID token is refused (the message says why).

        Cancellation: a request to the provider in progress is abandoned.
        """
        pending = _decode(cookie)
        if pending is None or time.time() - pending.started > SIGN_IN_S:
            raise SignInError("This sign-in expired or was begun in another browser; sign in again.")
        meta = await self._metadata()
        iss = answer.get("iss")
        if iss is None and meta.authorization_response_iss_parameter_supported:
            raise SignInError("The identity provider's answer lacks the issuer it promises to name; sign in again.")
        if iss is not None and iss != self.provider.issuer:
            raise SignInError("The answer came from another identity provider than this service's; sign in again.")
        if not hmac.compare_digest(answer.get("state", "").encode(), pending.state.encode()):
            raise SignInError("The identity provider's answer does not match this sign-in (state); sign in again.")
        if "error" in answer:
            error = shorten(answer["error"], 80)
            description = shorten(answer.get("error_description", ""), 200)
            raise SignInError(
                f"The identity provider refused the sign-in: {error}"
                + (f" ({description})" if description else "")
                + "."
            )
        code = answer.get("code")
        if not code:
            raise SignInError("The identity provider's answer carries no code; sign in again.")
        tokens = await self._redeem(meta, code, pending.verifier)
        if not tokens.id_token:
            raise SignInError(
                "The identity provider answered without an ID token (is 'openid' allowed for this client?)."
            )
        try:
            claims = await self.provider.claims_of(tokens.id_token, audience=self.client_id, nonce=pending.nonce)
        except JwtError as exc:
            raise SignInError(f"The identity provider's ID token was refused: {exc}.") from None
        except ProviderError as exc:
            log.warning("console sign-in: %s", exc)
            raise SignInError("The identity provider cannot be reached; try again later.") from None
        if self.provider.roles.found(claims) is None and meta.userinfo_endpoint and tokens.access_token:
            claims = {**await self._user_info(meta.userinfo_endpoint, tokens.access_token, claims), **claims}
        identity = self.provider.identity_of(claims)
        if identity is None:
            raise SignInError(
                f"You are signed in at the identity provider, but no role of this service is given to you "
                f"(claim {self.provider.roles.claim!r}); ask an administrator."
            )
        log.info("console sign-in: %s as %s", identity.describe(), identity.role.label)
        return identity, pending.next

    async def _metadata(self) -> ProviderMetadata:
        try:
            return await self.provider.metadata()
        except ProviderError as exc:
            log.warning("console sign-in: %s", exc)
            raise SignInError("The identity provider cannot be reached; try again later.") from None

    async def _redeem(self, meta: ProviderMetadata, code: str, verifier: str) -> _TokenAnswer:
        """The authorization code for tokens (RFC 6749 §4.1.3, RFC 7636 §4.5)."""
        assert meta.token_endpoint is not None
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
        }
        headers: dict[str, str] = {}
        methods = meta.token_endpoint_auth_methods_supported or ["client_secret_basic"]
        if self.client_secret is None:
            form["client_id"] = self.client_id
        elif "client_secret_basic" in methods or "client_secret_post" not in methods:
            # RFC 6749 §2.3.1: both are form-encoded before they are joined
            quote = urllib.parse.quote_plus
            pair = f"{quote(self.client_id)}:{quote(self.client_secret.reveal())}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        else:
            form["client_id"] = self.client_id
            form["client_secret"] = self.client_secret.reveal()
        try:
            status, body = await self.provider.fetch("POST", meta.token_endpoint, data=form, headers=headers)
        except ProviderError as exc:
            log.warning("console sign-in: %s", exc)
            raise SignInError("The identity provider's token endpoint cannot be reached; try again later.") from None
        if status != 200:
            try:
                refused = msgspec.json.decode(body, type=_ErrorAnswer)
            except (msgspec.DecodeError, msgspec.ValidationError):
                refused = _ErrorAnswer()
            reason = shorten(refused.error, 80) or f"HTTP {status}"
            log.warning(
                "console sign-in: the token endpoint refused the code: %s %s",
                reason,
                shorten(refused.error_description, 200),
            )
            raise SignInError(f"The identity provider refused to redeem the sign-in ({reason}); sign in again.")
        try:
            return msgspec.json.decode(body, type=_TokenAnswer)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise SignInError(
                "The identity provider's token endpoint answered with something that is not tokens."
            ) from None

    async def _user_info(self, url: str, access_token: str, claims: Mapping[str, Any]) -> dict[str, Any]:
        """The provider's user info (OpenID Connect Core §5.3), if it is about the same ``sub``."""
        try:
            status, body = await self.provider.fetch("GET", url, headers={"Authorization": f"Bearer {access_token}"})
            info = msgspec.json.decode(body) if status == 200 else None
        except (ProviderError, msgspec.DecodeError) as exc:
            log.info("console sign-in: no user info (%s)", exc)
            return {}
        # §5.3.2: "The sub Claim in the UserInfo Response MUST be verified to exactly match"
        if not isinstance(info, dict) or info.get("sub") != claims.get("sub"):
            return {}
        return info
