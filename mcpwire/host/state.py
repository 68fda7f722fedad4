"""What the parts of :class:`~mcpwire.host.Host` share: its servers and their runtimes, the tool
registry and the catalog, the host's phase, its listeners and its audit sink.

Theory of operation: the host makes one :class:`HostState` and hands it to each of its parts (the
supervisor, the roster, the calls, oversight and reporting), which read and change the servers
through it. A change others must hear of goes through it too: a server's status
(:meth:`HostState.update_status`, which wakes whoever waits for one), an event
(:meth:`HostState.emit`) and an audit record (:meth:`HostState.record`, to the sink and to the
listeners). It holds no task and awaits nothing.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

import trio

from ..errors import HostError
from .catalog import Catalog
from .events import EventHub, EventKind, HostEvent
from .policies import AuditRecord, AuditSink
from .registry import ToolRegistry
from .servers import Runtime, ServerInfo, ServerStatus

__all__ = ["HostState", "Phase", "describe"]

log = logging.getLogger("mcpwire.host")

#: a host is entered once: ``new`` until then, ``running`` inside its block, ``closed`` after
Phase = Literal["new", "running", "closed"]


def describe(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its words."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


class HostState:
    """The servers of one host and what its parts tell each other about them.

    Attributes:
        servers: every registered server, in registration order.
        runtime: each server's policy stack, cache and breaker, by name.
        phase: where the host is in its lifetime.
    """

    def __init__(self, registry: ToolRegistry, catalog: Catalog, audit: AuditSink | None) -> None:
        self.registry = registry
        self.catalog = catalog
        self.audit = audit
        self.servers: dict[str, ServerInfo] = {}
        self.runtime: dict[str, Runtime] = {}
        self.hub = EventHub()
        self.phase: Phase = "new"
        #: set (and replaced) at every status change
        self.changed = trio.Event()

    def get(self, name: str) -> ServerInfo:
        """Raises HostError naming the known servers when there is no such server."""
        try:
            return self.servers[name]
        except KeyError:
            raise HostError(f"no server named {name!r}; known: {', '.join(self.servers) or 'none'}") from None

    # -- status and events ------------------------------------------------------------------------

    def update_status(self, name: str, status: ServerStatus | str, error: str | None = None) -> None:
        """Sets a server's status and error, logs it and tells listeners (see
        :meth:`Host.update_status`)."""
        if not isinstance(status, ServerStatus):
            try:
                status = ServerStatus(status)
            except ValueError:
                known = ", ".join(repr(s.value) for s in ServerStatus)
                raise ValueError(f"server {name!r}: unknown status {status!r}; expected one of {known}") from None
        info = self.servers[name]
        if info.status is status and info.error == error:
            return
        previous = info.status
        info.status = status
        info.error = error
        info.status_changed_at = time.time()
        if status is ServerStatus.CONNECTED:
            info.connected_since = info.status_changed_at
            info._same_failures = 0
        elif previous is ServerStatus.CONNECTED:
            info.connected_since = None
        if error:
            repeated = error == info.last_error
            info._same_failures = info._same_failures + 1 if repeated else 1
            info.last_error = error
            if repeated:
                log.warning("%s: %s again (%d times in a row): %s", name, status.value, info._same_failures, error)
            else:
                log.error("%s: %s: %s", name, status.value, error)
        elif status is not ServerStatus.CONNECTED:  # connected is logged with its counts
            log.info("%s: %s", name, status.value)
        self.changed.set()
        self.changed = trio.Event()
        self.emit(info, "status", previous=previous)

    def emit(self, info: ServerInfo, kind: EventKind, *, previous: ServerStatus | None = None, **extra: Any) -> None:
        """Tells the listeners that want ``kind`` about ``info`` (the event is built only then)."""
        if not self.hub.wants(kind):
            return
        self.hub.emit(
            HostEvent(
                server=info.name,
                kind=kind,
                status=info.status.value,
                previous=None if previous is None else previous.value,
                error=info.error,
                restart_count=info.restart_count,
                tool_count=info.tool_count,
                prompt_count=info.prompt_count,
                resource_count=info.resource_count,
                **extra,
            )
        )

    def record(self, record: AuditRecord) -> None:
        """Writes one audit record to the host's sink and to event listeners."""
        if self.audit is not None:
            try:
                self.audit.write(record)
            except Exception as exc:  # a failing sink must not fail what it records
                log.warning("audit sink %r cannot write: %s", self.audit, describe(exc))
        info = self.servers.get(record.server)
        if info is not None:
            self.emit(info, "audit", record=record)

    def audit_wanted(self) -> bool:
        """Whether anyone reads audit records (else the policy stacks build none)."""
        return self.audit is not None or self.hub.wants("audit")
