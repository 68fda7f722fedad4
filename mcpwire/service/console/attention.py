"""What needs the operator's attention, for the navigation of every page: approvals waiting for a
decision, tools quarantined because their definition changed, servers in error, and how many of
the enabled servers are connected ("5 of 6 connected, 1 pending approval").

The navigation is a live part of the page (``fragments/nav.html``): it reloads itself on the
service's status, approval, pin and server events, as the pages' other live parts do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Attention", "attention_of"]


@dataclass(frozen=True, slots=True)
class Attention:
    servers: int = 0
    enabled: int = 0
    connected: int = 0
    #: enabled servers whose last attempt failed or whose connection was lost
    in_error: tuple[str, ...] = field(default_factory=tuple)
    pending: int = 0
    quarantined: int = 0

    @property
    def calm(self) -> bool:
        """Nothing waits for a person and every enabled server is connected."""
        return not (self.in_error or self.pending or self.quarantined) and self.connected == self.enabled


async def attention_of(service: Any) -> Attention:
    """The figures now, from the host and its approval queue."""
    host = service.host
    infos = host.list()
    stats = [host.server_statistics(i.name) for i in infos]
    statuses = {i.name: s.status for i, s in zip(infos, stats, strict=True) if s.enabled}
    queue = host.approvals
    pending = len(await queue.pending()) if queue is not None else 0
    return Attention(
        servers=len(infos),
        enabled=len(statuses),
        connected=sum(1 for s in statuses.values() if s == "connected"),
        in_error=tuple(name for name, s in statuses.items() if s == "error"),
        pending=pending,
        quarantined=sum(1 for t in host.tools(include_quarantined=True) if t.quarantined),
    )
