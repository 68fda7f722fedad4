"""What a check works with: the target, the revision under test, and fresh wires.

Theory of operation: each check gets its own :class:`Context`. :meth:`Context.session` spawns a
fresh server process and, in the legacy era, performs the ``initialize`` handshake for the revision
under test; in the modern era it only spawns, and :meth:`Context.params` adds the per-request
``_meta`` (2026-07-28 basic/index §_meta). Every wire opened is kept, so the report can show the
exchange that proves a failure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

from conformance.harness import Wire, open_wire

__all__ = [
    "CLIENT_INFO",
    "META_CAPS",
    "META_INFO",
    "META_VERSION",
    "CheckEnded",
    "Context",
    "Target",
]

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPS: Final = "io.modelcontextprotocol/clientCapabilities"
META_INFO: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_INFO: Final = {"name": "mcpwire-check", "version": "0.1.0"}


class CheckEnded(Exception):
    """Ends a check with an outcome other than pass."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Target:
    """A stdio server command."""

    argv: tuple[str, ...]
    env: dict[str, str] | None = None
    name: str = ""
    #: seconds the server gets to exit after stdin EOF (SV-08 and every shutdown)
    eof_grace: float = 2.0

    @property
    def label(self) -> str:
        return self.name or " ".join(self.argv)


@dataclass(slots=True)
class Context:
    """The state of one check run against one revision."""

    target: Target
    revision: str
    era: str
    capabilities: dict[str, Any]
    supported: tuple[str, ...]
    timeout: float = 5.0
    wires: list[Wire] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    # -- outcomes ---------------------------------------------------------------------------

    def fail(self, message: str) -> NoReturn:
        raise CheckEnded("fail", message)

    def warn(self, message: str) -> NoReturn:
        """A deviation reported as a warning whatever the check's level."""
        raise CheckEnded("warning", message)

    def skip(self, why: str) -> NoReturn:
        raise CheckEnded("skipped", why)

    def not_observed(self, why: str) -> NoReturn:
        raise CheckEnded("not_observed", why)

    def note(self, text: str) -> None:
        self.notes.append(text)

    # -- wires ------------------------------------------------------------------------------

    @asynccontextmanager
    async def raw(self) -> AsyncIterator[Wire]:
        """A fresh server process, nothing sent yet."""
        async with open_wire(self.target.argv, env=self.target.env, eof_grace=self.target.eof_grace) as wire:
            self.wires.append(wire)
            yield wire

    @asynccontextmanager
    async def session(
        self, *, capabilities: dict[str, Any] | None = None, initialized: bool = True
    ) -> AsyncIterator[Wire]:
        """A fresh server, initialized for the revision under test in the legacy era."""
        async with self.raw() as wire:
            if self.era == "legacy":
                answer = await wire.request(
                    "initialize",
                    {
                        "protocolVersion": self.revision,
                        "capabilities": capabilities or {},
                        "clientInfo": CLIENT_INFO,
                    },
                    timeout=self.timeout * 2,
                )
                if "result" not in answer:
                    self.fail(f"initialize for {self.revision} failed: {answer.get('error')!r}")
                if initialized:
                    await wire.notify("notifications/initialized")
            yield wire

    def params(
        self, params: dict[str, Any] | None = None, *, capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """``params`` for the revision under test: with the per-request ``_meta`` when modern."""
        out = dict(params or {})
        if self.era == "modern":
            meta = dict(out.get("_meta") or {})
            meta.setdefault(META_VERSION, self.revision)
            meta.setdefault(META_CAPS, capabilities or {})
            meta.setdefault(META_INFO, CLIENT_INFO)
            out["_meta"] = meta
        return out

    async def call(self, wire: Wire, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A request with the era's params; returns the whole response."""
        return await wire.request(method, self.params(params), timeout=self.timeout)

    async def result(self, wire: Wire, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``result`` of a request; an error answer fails the check."""
        answer = await self.call(wire, method, params)
        result = answer.get("result")
        if not isinstance(result, dict):
            self.fail(f"{method} answered without an object result: {answer!r:.300}")
        return result

    async def list_all(self, wire: Wire, method: str, key: str, *, max_pages: int = 50) -> list[dict[str, Any]]:
        """Follow ``nextCursor``; a cycle or a page without ``key`` fails the check."""
        items: list[dict[str, Any]] = []
        seen: set[str] = set()
        cursor: str | None = None
        for _ in range(max_pages):
            result = await self.result(wire, method, {"cursor": cursor} if cursor is not None else None)
            page = result.get(key)
            if not isinstance(page, list):
                self.fail(f"{method} result has no '{key}' array")
            items.extend(x for x in page if isinstance(x, dict))
            nxt = result.get("nextCursor")
            if nxt is None:
                return items
            if not isinstance(nxt, str) or nxt in seen:
                self.fail(f"{method}: nextCursor {nxt!r} repeats or is not a string (pagination does not terminate)")
            seen.add(nxt)
            cursor = nxt
        self.fail(f"{method}: still paginating after {max_pages} pages")

    def has(self, capability: str) -> bool:
        return capability in self.capabilities
