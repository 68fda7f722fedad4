"""What a process remembers about servers between connections: their era and HTTP transport.

Theory of operation: detecting the era costs a probe (and over HTTP possibly a fallback ladder),
so a verdict is remembered (LC-44: "Clients SHOULD cache the result for the lifetime of the
server process (stdio) or origin (HTTP) ... re-probing if the cached assumption later fails").
An :class:`EraCache` holds three facts per server, and a connection is given one (the
process-wide :data:`DEFAULT_ERA_CACHE` unless the options name another, or none):

- the era, per server command and working directory (stdio) or per URL (HTTP);
- which HTTP transport answered a URL (``"streamable-http"`` or ``"sse"``);
- that a server's empty 2026-07-28 lists were cross-checked against the legacy era (era parity),
  so the check is not repeated.

Verdicts are kept per URL, not per origin as LC-44 words it: two MCP endpoints on one origin can
differ - ``/mcp`` (Streamable HTTP, 2026-07-28) and ``/sse`` (HTTP+SSE, 2024-11-05) of one server,
or a gateway routing ``/github`` and ``/slack`` to different servers - and an origin-wide verdict
would send one endpoint's era and transport to the other. A URL is the finest key that never
mixes two servers. A verdict that later fails is dropped and detection runs again, once.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

from ..protocol.versions import Era
from ..transports import HttpServer, StdioServer

__all__ = ["DEFAULT_ERA_CACHE", "EraCache", "HttpKind", "server_key"]

HttpKind: TypeAlias = Literal["streamable-http", "sse"]
ServerKey: TypeAlias = tuple[object, ...]


def server_key(spec: StdioServer | HttpServer) -> ServerKey:
    """What identifies a server for the cache: its URL, or its argv and working directory."""
    if isinstance(spec, HttpServer):
        return ("http", spec.url)
    return (tuple(spec.argv), spec.cwd)


class EraCache:
    """Era verdicts, HTTP transports and era-parity checks, per server. Not thread-safe: use
    it from one trio run (the default one is per process, and trio runs one at a time)."""

    __slots__ = ("_eras", "_http_kinds", "_parity_checked")

    def __init__(self) -> None:
        self._eras: dict[ServerKey, Era] = {}
        self._http_kinds: dict[str, HttpKind] = {}
        self._parity_checked: set[ServerKey] = set()

    def era(self, key: ServerKey) -> Era | None:
        return self._eras.get(key)

    def remember_era(self, key: ServerKey, era: Era) -> None:
        self._eras[key] = era

    def http_kind(self, url: str) -> HttpKind | None:
        return self._http_kinds.get(url)

    def remember_http_kind(self, url: str, kind: HttpKind) -> None:
        self._http_kinds[url] = kind

    def forget(self, key: ServerKey) -> None:
        """Drops every verdict about a server (one of them turned out wrong)."""
        self._eras.pop(key, None)
        self._parity_checked.discard(key)
        if key[0] == "http" and isinstance(key[1], str):
            self._http_kinds.pop(key[1], None)

    def parity_checked(self, key: ServerKey) -> bool:
        return key in self._parity_checked

    def mark_parity_checked(self, key: ServerKey) -> None:
        self._parity_checked.add(key)

    def clear(self) -> None:
        self._eras.clear()
        self._http_kinds.clear()
        self._parity_checked.clear()

    def __repr__(self) -> str:
        return f"<EraCache: {len(self._eras)} eras, {len(self._http_kinds)} HTTP transports>"


#: The process-wide memory, used by every connection whose options leave ``era_cache=True``.
DEFAULT_ERA_CACHE: Final = EraCache()
