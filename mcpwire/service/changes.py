"""Every process on one store sees every other's changes: the change feed.

Theory of operation: a write the other processes must follow (a server added, edited or removed
through the API; a tool pinned, quarantined or approved) bumps a counter of its kind in the same
transaction (:meth:`~mcpwire.service.store.Store.changes`). :class:`ChangeFeed` reads those
counters every ``poll`` seconds (a one-row read) and, when a kind's counter moved, calls that
kind's handler, which reloads the store's truth and brings this process's view into line with it:
each process's in-memory state is a cache of the store, never a second truth. On PostgreSQL a
write also notifies ``LISTEN`` ers at commit (:data:`~mcpwire.service.store.base.CHANGES_CHANNEL`),
which wakes the feed at once; the poll stays as the safety net (a listener that lost its
connection misses notifications). A process's own writes come back through the feed too; its
handlers find nothing to do then.

A handler that fails is logged and tried again at the next change or poll; it never stops the
feed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import trio

from .store import Store, StoreError

__all__ = ["POLL_S", "ChangeFeed"]

log = logging.getLogger("mcpwire.service.changes")

#: seconds between two reads of the store's change counters
POLL_S: Final = 0.25

Handler = Callable[[], Awaitable[None]]


class ChangeFeed:
    """Calls ``handlers[kind]`` whenever the store's counter of changes of ``kind`` moves."""

    def __init__(self, store: Store, handlers: Mapping[str, Handler], *, poll: float = POLL_S) -> None:
        self.store = store
        self.handlers = dict(handlers)
        self.poll = poll
        self._seen: dict[str, int] = {}
        self._wake = trio.Event()
        #: how many times each kind's handler ran (for tests and metrics)
        self.applied: dict[str, int] = dict.fromkeys(self.handlers, 0)
        #: set while notifications are listened for (PostgreSQL)
        self.listening = trio.Event()

    def wake(self) -> None:
        """Look now (a notification arrived)."""
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follows the store until cancelled (the counters as they are now count as seen)."""
        try:
            self._seen = await self.store.changes()
        except StoreError as exc:
            log.warning("cannot read the store's changes (will retry): %s", exc)
        task_status.started()
        async with trio.open_nursery() as nursery:
            if self.store.dialect == "postgresql":
                nursery.start_soon(self._listen)
            while True:
                with trio.move_on_after(self.poll):
                    await self._wake.wait()
                self._wake = trio.Event()
                await self.check()

    async def check(self) -> None:
        """Reads the counters once and runs the handlers of the kinds that moved."""
        try:
            now = await self.store.changes()
        except StoreError as exc:
            log.debug("cannot read the store's changes: %s", exc)
            return
        for kind, value in now.items():
            if value == self._seen.get(kind) or kind not in self.handlers:
                continue
            try:
                await self.handlers[kind]()
            except Exception:
                log.exception("applying the store's %s changes failed; trying again at the next change", kind)
                continue
            self._seen[kind] = value
            self.applied[kind] = self.applied.get(kind, 0) + 1

    async def _listen(self) -> None:
        """PostgreSQL: wake the feed on each notification (reconnecting, bounded backoff)."""
        delay = 0.5
        while True:
            try:
                await self.store.listen_changes(self.wake, self.listening.set)
            except StoreError as exc:
                log.debug("listening for the store's changes failed (the poll goes on): %s", exc)
            self.listening = trio.Event()
            self.wake()  # what was missed meanwhile is read at once
            await trio.sleep(delay)
            delay = min(delay * 2, 10.0)
