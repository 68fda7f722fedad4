"""The result cache: TTL + LRU, for read-only and idempotent tools and resource reads.

Theory of operation: an entry is keyed by (server, kind, tool or URI, canonical JSON of the
arguments), so a cached answer is never served for another method or other parameters
(2026-07-28 server/utilities/caching, UT-X02: "Clients MUST NOT serve a cached response for a
request whose method or parameters differ from the request that produced it."). Each entry has
its own expiry: the configured TTL, shortened by the server's ``ttlMs`` hint when a 2026-07-28
server sends one (UT-X04: absent or negative means 0, i.e. not cached). The host keeps one cache
per server, so ``cacheScope: "private"`` entries never cross authorization contexts (UT-X06).
Notifications invalidate entries (UT-X07): ``tools/list_changed`` drops a server's tool results,
``resources/list_changed`` its reads, ``resources/updated`` the reads of that URI. So do writes:
a call of a tool that is not read-only drops its server's entries (see
:meth:`~mcpwire.host.policies.PolicyStack.invalidate`). Each drop moves the cache's ``generation``
on, and a result whose call began before it is not stored (a read that overlapped a write could
hold what the write changed). Time is ``trio.current_time()``.
"""

from __future__ import annotations

import fnmatch
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import msgspec
import trio

from .context import CallContext

__all__ = ["CacheKey", "ResultCache", "hinted_ttl"]

T = TypeVar("T")
CacheKey = tuple[str, str, str, bytes]

_encode = msgspec.json.Encoder(order="sorted").encode


def hinted_ttl(result: object, ctx: CallContext) -> float | None:
    """The server's freshness hint in seconds, or ``None`` when it gives none.

    UT-X04: "If ttlMs is absent, clients SHOULD assume a default of 0" and "If ttlMs is
    negative, clients SHOULD ignore it and treat it as 0" (for 2026-07-28 servers; legacy
    servers send no hints and the configured TTL applies, UT-X08).
    """
    ttl_ms = getattr(result, "ttl_ms", None)
    if isinstance(ttl_ms, int | float) and not isinstance(ttl_ms, bool):
        return max(0.0, ttl_ms / 1000)
    if ctx.era == "modern" and ctx.kind == "resource":
        return 0.0
    return None


@dataclass(slots=True)
class _Entry(Generic[T]):
    expires: float
    value: T
    scope: str | None


@dataclass(slots=True)
class ResultCache(Generic[T]):
    """TTL + LRU cache with hit/miss counters.

    Args:
        ttl: default seconds an entry stays fresh (0 disables the cache).
        size: most entries kept; the least recently used go first (0 disables the cache).
    """

    ttl: float = 60.0
    size: int = 256
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    #: moves on with every drop: a result whose call began in an older generation is not stored
    generation: int = 0
    _entries: OrderedDict[CacheKey, _Entry[T]] = field(default_factory=OrderedDict)

    @staticmethod
    def key(ctx: CallContext) -> CacheKey:
        try:
            args = _encode(ctx.arguments)
        except (TypeError, msgspec.EncodeError):
            args = repr(sorted(ctx.arguments.items(), key=lambda kv: kv[0])).encode()
        return (ctx.server, ctx.kind, ctx.tool, args)

    @property
    def enabled(self) -> bool:
        return self.size > 0 and self.ttl > 0

    def get(self, key: CacheKey) -> tuple[bool, T | None]:
        """``(True, value)`` for a fresh entry (counted as a hit), else ``(False, None)``."""
        entry = self._entries.get(key)
        if entry is not None:
            if entry.expires > trio.current_time():
                self._entries.move_to_end(key)
                self.hits += 1
                return True, entry.value
            del self._entries[key]
        self.misses += 1
        return False, None

    def put(
        self,
        key: CacheKey,
        value: T,
        *,
        ttl: float | None = None,
        scope: str | None = None,
        generation: int | None = None,
    ) -> bool:
        """Stores ``value`` for ``ttl`` seconds (default: the cache's); False if not stored (also
        when ``generation``, the cache's generation when the call began, is not the current one:
        something was dropped meanwhile, and this result may predate it)."""
        ttl = self.ttl if ttl is None else min(ttl, self.ttl)
        if self.size <= 0 or ttl <= 0 or (generation is not None and generation != self.generation):
            return False
        self._entries[key] = _Entry(trio.current_time() + ttl, value, scope)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
            self.evictions += 1
        return True

    def invalidate(
        self,
        server: str | None = None,
        *,
        kind: str | None = None,
        name: str | None = None,
        names: tuple[str, ...] | None = None,
    ) -> int:
        """Drops entries of a server (all servers when ``None``), optionally of one kind and one
        tool or URI (a URI also drops the URIs below it), or those whose tool or URI matches one
        of the globs ``names``; returns how many."""
        self.generation += 1

        def doomed(k: CacheKey) -> bool:
            if server is not None and k[0] != server:
                return False
            if kind is not None and k[1] != kind:
                return False
            if names is not None and not any(fnmatch.fnmatchcase(k[2], glob) for glob in names):
                return False
            return name is None or k[2] == name or k[2].startswith(name.rstrip("/") + "/")

        keys = [k for k in self._entries if doomed(k)]
        for k in keys:
            del self._entries[k]
        return len(keys)

    def clear(self) -> None:
        self.generation += 1
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        """True when an entry (fresh or not yet dropped) is stored under ``key``."""
        return key in self._entries

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def uris(self, server: str) -> list[str]:
        """The resource URIs cached for ``server``."""
        return sorted({k[2] for k in self._entries if k[0] == server and k[1] == "resource"})

    def counters(self) -> Mapping[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._entries), "evictions": self.evictions}
