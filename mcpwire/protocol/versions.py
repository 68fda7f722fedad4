"""Protocol revisions and the two eras.

Theory of operation: MCP has five released revisions. The first four share a connection
lifecycle (the *legacy* era: an ``initialize`` handshake opens a session, either side may send
requests); 2026-07-28 (the *modern* era) has no handshake at all: every request carries the
protocol version and the client's capabilities in ``params._meta``. Everything that differs by
revision is a question asked of a :class:`Revision`, so the rest of the code never compares
version strings itself.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "ALL_REVISIONS",
    "LATEST",
    "LATEST_LEGACY",
    "LEGACY_REVISIONS",
    "MODERN_REVISIONS",
    "Era",
    "Revision",
    "era_of",
    "is_known",
]


class Era(enum.Enum):
    """The two lifecycles of MCP."""

    #: 2024-11-05 .. 2025-11-25: ``initialize`` handshake, sessions, server->client requests.
    LEGACY = "legacy"
    #: 2026-07-28: stateless, per-request ``_meta``, ``server/discover``, MRTR.
    MODERN = "modern"


V2024_11_05: Final = "2024-11-05"
V2025_03_26: Final = "2025-03-26"
V2025_06_18: Final = "2025-06-18"
V2025_11_25: Final = "2025-11-25"
V2026_07_28: Final = "2026-07-28"

#: Legacy revisions, newest first (the order used to negotiate).
LEGACY_REVISIONS: Final[tuple[str, ...]] = (V2025_11_25, V2025_06_18, V2025_03_26, V2024_11_05)
#: Modern revisions, newest first.
MODERN_REVISIONS: Final[tuple[str, ...]] = (V2026_07_28,)
ALL_REVISIONS: Final[tuple[str, ...]] = MODERN_REVISIONS + LEGACY_REVISIONS
LATEST: Final = V2026_07_28
LATEST_LEGACY: Final = V2025_11_25


def is_known(version: str) -> bool:
    """True when mcpwire speaks ``version``."""
    return version in ALL_REVISIONS


def era_of(version: str) -> Era:
    """The era a known revision belongs to."""
    if version in MODERN_REVISIONS:
        return Era.MODERN
    if version in LEGACY_REVISIONS:
        return Era.LEGACY
    raise ValueError(f"unknown protocol revision {version!r}; known: {', '.join(ALL_REVISIONS)}")


class Revision:
    """What one revision allows, asked by name instead of by comparing strings.

    Revision strings are dates, so ``>=`` on them is chronological; this class is the only
    place that relies on that.
    """

    __slots__ = ("era", "modern", "version")

    def __init__(self, version: str) -> None:
        self.version = version
        self.era = era_of(version)
        #: the 2026-07-28 era (a plain attribute: it is read on every call)
        self.modern = self.era is Era.MODERN

    def __repr__(self) -> str:
        return f"Revision({self.version!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Revision) and other.version == self.version

    def __hash__(self) -> int:
        return hash(self.version)

    def at_least(self, version: str) -> bool:
        return self.version >= version

    @property
    def receives_batches(self) -> bool:
        """2025-03-26 basic: "MUST support receiving JSON-RPC batches" (JR-21); removed after."""
        return self.version == V2025_03_26

    @property
    def has_ping(self) -> bool:
        """``ping`` was removed in 2026-07-28 (UT-P03)."""
        return not self.modern

    @property
    def has_completions_capability(self) -> bool:
        """2024-11-05 had no ``completions`` capability: completion is just attempted."""
        return self.at_least(V2025_03_26)

    @property
    def structured_content_is_object(self) -> bool:
        """25-06/25-11: ``structuredContent`` is an object; 26-07: any JSON value (TL-12)."""
        return not self.modern

    @property
    def resource_not_found_code(self) -> int:
        """-32002 up to 2025-11-25, -32602 in 2026-07-28 (RS-03)."""
        return -32602 if self.modern else -32002
