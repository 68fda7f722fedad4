"""Token and client-credential storage: the :class:`TokenStorage` protocol, in memory and on disk.

Theory of operation: tokens are kept per MCP resource (the canonical server URI) and record the
issuer that minted them, so a token is never sent to a server whose authorization server has
changed (AU-23). Client registrations are kept per authorization server ``issuer`` (AU-06,
AU-15): credentials from one AS are never offered to another. Secrets are excluded from every
``repr`` and never logged (AU-24); the file store writes with mode 0600 and replaces the file
atomically.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import trio

__all__ = ["ClientInfo", "FileTokenStorage", "MemoryTokenStorage", "TokenSet", "TokenStorage"]

#: Tokens this close to expiry are refreshed before use.
EXPIRY_SKEW_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class TokenSet:
    """An access token (and maybe a refresh token) from one authorization server."""

    access_token: str = field(repr=False)
    token_type: str = "Bearer"
    issuer: str = ""
    refresh_token: str | None = field(default=None, repr=False)
    #: The scopes requested for this token (space-separated), used for step-up unions (AU-18).
    scope: str | None = None
    #: Unix time after which the token is expired, when the server said.
    expires_at: float | None = None
    #: The RFC 8707 ``resource`` the token was requested for.
    resource: str = ""

    def expired(self, now: float | None = None) -> bool:
        if self.expires_at is None:
            return False
        return (time.time() if now is None else now) >= self.expires_at - EXPIRY_SKEW_SECONDS

    def to_json(self) -> dict[str, object]:
        return {
            "access_token": self.access_token,
            "token_type": self.token_type,
            "issuer": self.issuer,
            "refresh_token": self.refresh_token,
            "scope": self.scope,
            "expires_at": self.expires_at,
            "resource": self.resource,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> TokenSet:
        expires = data.get("expires_at")
        refresh = data.get("refresh_token")
        scope = data.get("scope")
        return cls(
            access_token=str(data["access_token"]),
            token_type=str(data.get("token_type") or "Bearer"),
            issuer=str(data.get("issuer") or ""),
            refresh_token=refresh if isinstance(refresh, str) else None,
            scope=scope if isinstance(scope, str) else None,
            expires_at=float(expires) if isinstance(expires, int | float) else None,
            resource=str(data.get("resource") or ""),
        )


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """A client identity at one authorization server (registered, pre-registered or CIMD)."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    #: ``none``, ``client_secret_basic``, ``client_secret_post`` or ``private_key_jwt``; empty
    #: means "choose from the AS metadata".
    token_endpoint_auth_method: str = ""
    #: The ``issuer`` these credentials belong to (AU-15); empty for portable CIMD ids.
    issuer: str = ""

    def bound_to(self, issuer: str) -> ClientInfo:
        return replace(self, issuer=issuer)

    def to_json(self) -> dict[str, object]:
        return {
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "token_endpoint_auth_method": self.token_endpoint_auth_method,
            "issuer": self.issuer,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ClientInfo:
        secret = data.get("client_secret")
        return cls(
            client_id=str(data["client_id"]),
            client_secret=secret if isinstance(secret, str) else None,
            token_endpoint_auth_method=str(data.get("token_endpoint_auth_method") or ""),
            issuer=str(data.get("issuer") or ""),
        )


class TokenStorage(Protocol):
    """Where a provider keeps tokens (per resource) and client credentials (per issuer)."""

    async def get_tokens(self, resource: str) -> TokenSet | None: ...

    async def set_tokens(self, resource: str, tokens: TokenSet | None) -> None: ...

    async def get_client(self, issuer: str) -> ClientInfo | None: ...

    async def set_client(self, issuer: str, client: ClientInfo) -> None: ...


@dataclass(slots=True)
class MemoryTokenStorage:
    """Keeps everything in the process; the default."""

    tokens: dict[str, TokenSet] = field(default_factory=dict, repr=False)
    clients: dict[str, ClientInfo] = field(default_factory=dict, repr=False)

    async def get_tokens(self, resource: str) -> TokenSet | None:
        return self.tokens.get(resource)

    async def set_tokens(self, resource: str, tokens: TokenSet | None) -> None:
        if tokens is None:
            self.tokens.pop(resource, None)
        else:
            self.tokens[resource] = tokens

    async def get_client(self, issuer: str) -> ClientInfo | None:
        return self.clients.get(issuer)

    async def set_client(self, issuer: str, client: ClientInfo) -> None:
        self.clients[issuer] = client


def _read(path: Path) -> dict[str, dict[str, dict[str, object]]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"tokens": {}, "clients": {}}
    except (OSError, ValueError):
        return {"tokens": {}, "clients": {}}
    if not isinstance(data, dict):
        return {"tokens": {}, "clients": {}}
    tokens = data.get("tokens")
    clients = data.get("clients")
    return {
        "tokens": tokens if isinstance(tokens, dict) else {},
        "clients": clients if isinstance(clients, dict) else {},
    }


def _write(path: Path, data: dict[str, dict[str, dict[str, object]]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@dataclass(slots=True)
class FileTokenStorage:
    """A JSON file readable by its owner only (mode 0600), replaced atomically on each write.

    Suits a CLI (``mcpwire login``); every call reads or rewrites the whole file in a worker
    thread, so it is not meant for many concurrent writers.
    """

    path: Path
    _lock: trio.Lock = field(default_factory=trio.Lock, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path).expanduser()

    async def _load(self) -> dict[str, dict[str, dict[str, object]]]:
        return await trio.to_thread.run_sync(_read, self.path)

    async def get_tokens(self, resource: str) -> TokenSet | None:
        raw = (await self._load())["tokens"].get(resource)
        return TokenSet.from_json(raw) if isinstance(raw, dict) and "access_token" in raw else None

    async def set_tokens(self, resource: str, tokens: TokenSet | None) -> None:
        async with self._lock:
            data = await self._load()
            if tokens is None:
                data["tokens"].pop(resource, None)
            else:
                data["tokens"][resource] = tokens.to_json()
            await trio.to_thread.run_sync(_write, self.path, data)

    async def get_client(self, issuer: str) -> ClientInfo | None:
        raw = (await self._load())["clients"].get(issuer)
        return ClientInfo.from_json(raw) if isinstance(raw, dict) and "client_id" in raw else None

    async def set_client(self, issuer: str, client: ClientInfo) -> None:
        async with self._lock:
            data = await self._load()
            data["clients"][issuer] = client.to_json()
            await trio.to_thread.run_sync(_write, self.path, data)
