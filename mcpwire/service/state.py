"""The running service: the host, the store and everything the handlers share.

Theory of operation: :class:`Service` is built once by :func:`~mcpwire.service.app.build_app` and
reached by every handler. :meth:`Service.run` is started (by the app's lifespan) in the same trio
run as the host's actors: it commits audit records, turns host events into ``/events`` events and
keeps the figures the API shows (when each server connected, whether it has been tried yet).
Calls waiting for an approval run in its nursery, so an HTTP caller that got a 202 can leave.
"""

from __future__ import annotations

import logging
import time
import typing
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
import trio

from .._version import __version__
from ..host import Approval, ApprovalQueue, Host, ServerStatus
from ..host.events import EventKind
from .audit import AuditWriter
from .changes import ChangeFeed
from .events import EventHub
from .identity import Authenticator
from .metrics import CallMetrics, HttpMetrics, collector_lines
from .middleware import RateLimiter
from .problems import ProblemError
from .servers import ServerManager
from .settings import Settings
from .store import Store, StoreError

__all__ = ["ApprovalWatch", "CallOutcome", "Service"]

log = logging.getLogger("mcpwire.service")

#: outcomes of approved calls kept for pollers
KEPT_OUTCOMES: Final = 1000
#: seconds a call waits for its server to finish (re)connecting
CONNECTING_WAIT: Final = 10.0


@dataclass(slots=True)
class CallOutcome:
    """What became of a call (kept for a poller when it waited for an approval)."""

    done: trio.Event = field(default_factory=trio.Event)
    result: Any = None  #: a ToolCallOut once it succeeded
    error: str | None = None
    problem: ProblemError | None = None
    #: set when the call ends or asks for a decision, whichever comes first
    first: trio.Event = field(default_factory=trio.Event)


class ApprovalWatch:
    """Notices the approval the host opens for one call (matched by the call's ``run_id``)."""

    def __init__(self, queue: ApprovalQueue | None, run_id: str, seen: trio.Event) -> None:
        self.run_id = run_id
        self.approval: Approval | None = None
        self._event = seen
        self._stop = queue.on_change(self._seen, local_only=True) if queue is not None else None

    def _seen(self, approval: Approval) -> None:
        if self.approval is None and approval.context.get("run_id") == self.run_id:
            self.approval = approval
            self._event.set()

    def close(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None


@dataclass(slots=True)
class Service:
    host: Host
    store: Store
    settings: Settings
    servers: ServerManager
    hub: EventHub
    audit: AuditWriter
    limiter: RateLimiter
    http: HttpMetrics
    calls: CallMetrics = field(default_factory=CallMetrics)
    version: str = __version__
    started_at: float = field(default_factory=time.time)
    #: when each connected server connected (epoch seconds)
    connected_since: dict[str, float] = field(default_factory=dict)
    #: servers that have been tried at least once (connected or failed)
    tried: set[str] = field(default_factory=set)
    store_ok: bool = True
    running: bool = False
    outcomes: OrderedDict[str, CallOutcome] = field(default_factory=OrderedDict)
    gateway: Any = None
    #: the agent's runs (an :class:`~mcpwire.service.agent_runs.AgentRuns`), when the service has the agent
    agent: Any = None
    #: bearer credentials to identities (tokens, the identity provider's JWTs)
    authenticator: Authenticator | None = None
    #: what other processes on the store change, followed here (set while running)
    changes: ChangeFeed | None = None
    _nursery: trio.Nursery | None = None

    def watch_approvals(self, run_id: str, seen: trio.Event) -> ApprovalWatch:
        """Sets ``seen`` when the host opens an approval for the call ``run_id``."""
        return ApprovalWatch(self.host.approvals, run_id, seen)

    def log_unexpected(self, exc: BaseException, what: str) -> None:
        log.error("%s failed unexpectedly", what, exc_info=exc)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The service's own tasks (and the gateway's), until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.audit.run)
            nursery.start_soon(self.audit.adopt_orphans)
            await nursery.start(self._pump)
            self.changes = ChangeFeed(self.store, {"servers": self.servers.reconcile, "pins": self.host.follow_pins})
            await nursery.start(self.changes.run)
            if self.gateway is not None and hasattr(self.gateway, "run"):
                nursery.start_soon(self.gateway.run)  # the gateway's sessions and background work
            self._observe_all()
            self.running = True
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self.running = False
                self.hub.close()

    def start_soon(self, fn: Any, *args: Any) -> None:
        """Runs a background task in the service's nursery (calls waiting for approval)."""
        if self._nursery is None:
            raise RuntimeError("the service is not running")
        self._nursery.start_soon(fn, *args)

    def outcome(self, key: str) -> CallOutcome:
        """The outcome kept under ``key`` (a call's run id, then its approval's id), bounded."""
        found = self.outcomes.get(key)
        if found is None:
            found = self.outcomes[key] = CallOutcome()
            while len(self.outcomes) > KEPT_OUTCOMES:
                self.outcomes.popitem(last=False)
        return found

    # -- host events ------------------------------------------------------------------------------

    def _observe_all(self) -> None:
        for info in self.host.list():
            self._observe(info.name, info.status, info.restart_count)

    def _observe(self, name: str, status: ServerStatus, restarts: int) -> None:
        if status is ServerStatus.CONNECTED:
            self.connected_since.setdefault(name, time.time())
            self.tried.add(name)
        else:
            self.connected_since.pop(name, None)
            if status is ServerStatus.ERROR or restarts > 0:
                self.tried.add(name)

    async def _pump(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # every kind but audit records, which the audit writer publishes once stored, with their ids
        kinds = [kind for kind in typing.get_args(EventKind) if kind != "audit"]
        async with self.host.events(buffer=1000, kinds=kinds) as events:
            task_status.started()
            async for event in events:
                if event.kind == "status":
                    self._observe(event.server, ServerStatus(event.status), event.restart_count)
                data = msgspec.to_builtins(event)
                if event.approval is not None:
                    data["approval"] = event.approval.to_dict()
                if event.pin is not None:
                    data["pin"] = event.pin.to_dict()
                self.hub.publish(event.kind, data)

    async def ready_server(self, name: str) -> None:
        """Lets a call wait (briefly) for a server that is starting or restarting, instead of
        failing at once; a disabled server is the caller's to enable (409).

        Cancellation: only the wait ends.
        """
        info = next((i for i in self.host.list() if i.name == name), None)
        if info is None:
            return
        if not info.enabled:
            raise ProblemError(409, f"server {name!r} is disabled; enable it (PATCH enabled: true) first")
        if info.status in (ServerStatus.CONNECTING, ServerStatus.DISCONNECTED):
            with trio.move_on_after(CONNECTING_WAIT):
                await self.host.wait_status(name, ServerStatus.CONNECTED, timeout=CONNECTING_WAIT)

    # -- documents ---------------------------------------------------------------------------------

    def prometheus(self) -> str:
        """The host's metrics, then the service's own."""
        hub, audit = self.hub, self.audit
        pending = self.host.approvals
        lines = [
            *self.calls.prometheus(),
            *self.http.prometheus(),
            "# HELP mcpwire_events_subscribers Clients reading /events.",
            "# TYPE mcpwire_events_subscribers gauge",
            f"mcpwire_events_subscribers {hub.subscribers}",
            "# HELP mcpwire_events_published_total Events published on /events.",
            "# TYPE mcpwire_events_published_total counter",
            f"mcpwire_events_published_total {hub.published}",
            "# HELP mcpwire_events_dropped_clients_total /events clients dropped for falling behind.",
            "# TYPE mcpwire_events_dropped_clients_total counter",
            f"mcpwire_events_dropped_clients_total {hub.dropped_clients}",
            "# HELP mcpwire_audit_pending Audit records queued, not yet durable (committed or journaled).",
            "# TYPE mcpwire_audit_pending gauge",
            f"mcpwire_audit_pending {audit.pending}",
            "# HELP mcpwire_audit_journaled Audit records durable in this process's journal, not yet in the database.",
            "# TYPE mcpwire_audit_journaled gauge",
            f"mcpwire_audit_journaled {audit.journaled}",
            "# HELP mcpwire_audit_dropped_total Audit records dropped because the store could not keep up.",
            "# TYPE mcpwire_audit_dropped_total counter",
            f"mcpwire_audit_dropped_total {audit.dropped}",
            "# HELP mcpwire_audit_commits_total Transactions that committed audit records (a group each).",
            "# TYPE mcpwire_audit_commits_total counter",
            f"mcpwire_audit_commits_total {audit.batches}",
            "# HELP mcpwire_audit_committed_total Audit records made durable (committed or journaled).",
            "# TYPE mcpwire_audit_committed_total counter",
            f"mcpwire_audit_committed_total {audit.committed}",
            "# HELP mcpwire_rate_limited_total Calls refused by the rate limit.",
            "# TYPE mcpwire_rate_limited_total counter",
            f"mcpwire_rate_limited_total {self.limiter.limited}",
            "# HELP mcpwire_store_up 1 while the database answers.",
            "# TYPE mcpwire_store_up gauge",
            f"mcpwire_store_up {int(self.store_ok)}",
            *collector_lines(),
        ]
        if pending is not None:
            lines += [
                "# HELP mcpwire_approvals_waiting Calls of this process waiting for a decision.",
                "# TYPE mcpwire_approvals_waiting gauge",
                f"mcpwire_approvals_waiting {sum(1 for o in self.outcomes.values() if not o.done.is_set())}",
            ]
        return self.host.prometheus().rstrip("\n") + "\n" + "\n".join(lines) + "\n"

    def begin_shutdown(self) -> None:
        """Ends the event streams, so draining does not wait for them."""
        self.hub.close()

    # -- readiness ------------------------------------------------------------------------------------

    def waiting_for(self) -> list[str]:
        """Enabled servers not yet tried once (readiness waits for them)."""
        self._observe_all()
        return [i.name for i in self.host.list() if i.config.enabled and i.name not in self.tried]

    async def check_store(self) -> bool:
        try:
            with trio.fail_after(5):
                await self.store.ping()
        except (StoreError, trio.TooSlowError) as exc:
            if self.store_ok:
                log.error("the store is failing: %s", exc)
            self.store_ok = False
        else:
            self.store_ok = True
        return self.store_ok
