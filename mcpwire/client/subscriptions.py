"""Subscriptions to resource updates and list changes, in either era.

Theory of operation: 2026-07-28 has one ``subscriptions/listen`` request per subscription: its
filter goes out, the server acknowledges what it will honour (UT-S02, UT-S03), and every
notification of that subscription carries its id; cancelling the request ends it (UT-S06). The
legacy era subscribes per resource (``resources/subscribe``, needs ``resources.subscribe``) and
sends list changes to everyone, so each legacy :class:`Subscription` filters the session's
notifications itself; the URIs subscribed are part of the session's state, restored on a renewed
HTTP session (HT-L13). The dispatcher delivers to each open subscription; its buffer is bounded
and what does not fit is counted in ``dropped``. A 2026-07-28 filter may also name tasks
(``taskIds``, the Tasks extension, SEP-2663): their ``notifications/tasks`` come on the same
stream, for the tasks the server acknowledged; the listen request then carries the ``_meta`` of a
relay's round (a proxy's client's capabilities, which declare the extension).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

import trio

from ..errors import ClientClosed, LocalProtocolError, MCPWireError, RequestTimeout, RPCError
from ..protocol.jsonrpc import ErrorResponse, RequestId
from ..protocol.types import JSONObject
from ..protocol.versions import Era
from .dispatch import Dispatcher
from .engine import CANCEL_NOTIFY_TIMEOUT, Engine
from .relay import Relay
from .state import Link
from .values import NotificationSink, ServerNotification
from .waiters import Waiter
from .wire import headers_for, send

__all__ = ["Subscription", "Subscriptions"]

_LIST_FLAGS = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}


class Subscription:
    """An open subscription; iterate it for its notifications.

    Attributes:
        requested: the filter sent (2026-07-28 ``SubscriptionFilter`` shape).
        acknowledged: the filter the server agreed to honour (UT-S02, UT-S03).
        id: the ``subscriptions/listen`` request id (2026-07-28).
        dropped: notifications that did not fit in the buffer.
    """

    def __init__(
        self,
        client: object,
        *,
        resources: tuple[str, ...],
        tools: bool,
        prompts: bool,
        resources_list: bool,
        buffer: int,
        task_ids: tuple[str, ...] = (),
    ) -> None:
        del client  # the subscription needs nothing of it (kept for callers that pass one)
        requested: JSONObject = {}
        if tools:
            requested["toolsListChanged"] = True
        if prompts:
            requested["promptsListChanged"] = True
        if resources_list:
            requested["resourcesListChanged"] = True
        if resources:
            requested["resourceSubscriptions"] = list(resources)
        if task_ids:
            requested["taskIds"] = list(task_ids)
        self.requested = requested
        self.acknowledged: JSONObject | None = None
        self.id: RequestId | None = None
        #: the URIs, in the order subscribed
        self.resources = resources
        self._uris = set(resources)
        self._send, self._recv = trio.open_memory_channel[ServerNotification](buffer)
        self._changed = trio.Event()
        #: why it ended, when the connection ended it
        self.error: BaseException | None = None
        self.dropped = 0

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self) -> None:
        """Waits until it is acknowledged, a notification of it arrives, or it ends."""
        await self._changed.wait()

    def wants(self, note: ServerNotification) -> bool:
        method = note.method
        if method == "notifications/resources/updated":
            uri = note.params.get("uri")
            return isinstance(uri, str) and any(uri == u or uri.startswith(u.rstrip("/") + "/") for u in self._uris)
        if method == "notifications/tasks":  # SEP-2663: only for the tasks acknowledged
            granted = (self.acknowledged or {}).get("taskIds")
            return isinstance(granted, list) and note.params.get("taskId") in granted
        flag = _LIST_FLAGS.get(method)
        return flag is not None and self.requested.get(flag) is True

    def deliver(self, note: ServerNotification) -> None:
        """Called by the dispatcher for every notification that may be this subscription's."""
        if note.method == "notifications/subscriptions/acknowledged":
            honoured = note.params.get("notifications")
            self.acknowledged = honoured if isinstance(honoured, dict) else {}
            self._wake()
            return
        if note.subscription_id is None and self.id is not None:
            return
        if not self.wants(note):
            return
        try:
            self._send.send_nowait(note)
        except trio.WouldBlock:
            self.dropped += 1
        except trio.ClosedResourceError:
            pass

    def end(self, error: BaseException | None) -> None:
        if error is not None and self.error is None:
            self.error = error
        self._send.close()
        self._wake()

    def __aiter__(self) -> AsyncIterator[ServerNotification]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ServerNotification]:
        async for note in self._recv:
            yield note


class Subscriptions:
    """Opens and ends the subscriptions of one connection."""

    def __init__(
        self,
        link: Link,
        engine: Engine,
        dispatcher: Dispatcher,
        open_server_stream: Callable[[], Awaitable[None]],
    ) -> None:
        self.link = link
        self._engine = engine
        self._dispatcher = dispatcher
        self._open_server_stream = open_server_stream

    @asynccontextmanager
    async def subscribe(
        self,
        resources: Sequence[str],
        *,
        tools_list_changed: bool,
        prompts_list_changed: bool,
        resources_list_changed: bool,
        buffer: int,
        timeout: float | None,
        task_ids: Sequence[str] = (),
        relay: Relay | None = None,
    ) -> AsyncIterator[Subscription]:
        sub = Subscription(
            None,
            resources=tuple(resources),
            tools=tools_list_changed,
            prompts=prompts_list_changed,
            resources_list=resources_list_changed,
            buffer=buffer,
            task_ids=tuple(task_ids),
        )
        if self.link.session.era is Era.MODERN:
            meta = relay.round.meta if relay is not None and relay.round is not None else None
            await self._listen(sub, timeout, meta)
            try:
                yield sub
            finally:
                await self.end_listen(sub)
            return
        if task_ids:
            raise LocalProtocolError(
                f"cannot follow tasks on server '{self.link.label}': task notifications are a 2026-07-28 "
                "extension and the server speaks an earlier revision"
            )
        legacy = self.link.legacy
        done: list[str] = []
        await self._open_server_stream()
        self._dispatcher.legacy_subscriptions.append(sub)
        try:
            for uri in resources:
                await self._engine.answer("resources/subscribe", {"uri": uri}, timeout=timeout)
                done.append(uri)
                if legacy is not None:
                    legacy.subscribed(uri)  # sent again on a renewed session (HT-L13)
            sub.acknowledged = sub.requested
            yield sub
        finally:
            self._dispatcher.legacy_subscriptions.remove(sub)
            for uri in done:
                if legacy is not None:
                    legacy.unsubscribed(uri)
            with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_NOTIFY_TIMEOUT * 5):
                for uri in done:
                    try:
                        await self._engine.answer("resources/unsubscribe", {"uri": uri}, timeout=CANCEL_NOTIFY_TIMEOUT)
                    except MCPWireError:
                        break

    async def _listen(self, sub: Subscription, timeout: float | None, meta: Mapping[str, object] | None) -> None:
        link = self.link
        waiter = Waiter()
        params = {"notifications": sub.requested}
        entry, payload = link.session.prepare_request("subscriptions/listen", params, waiter, meta=meta)
        sub.id = entry.id
        self._dispatcher.subscriptions[entry.id] = sub
        link.counters.requests_sent += 1
        try:
            await send(link, payload, request_id=entry.id, headers=headers_for(link, "subscriptions/listen", params))
            limit = link.options.timeout if timeout is None else timeout
            with trio.move_on_after(limit):
                while sub.acknowledged is None and not waiter.is_set() and sub.error is None:
                    await sub.wait_changed()
            if isinstance(waiter.outcome, ErrorResponse):
                out = waiter.outcome
                raise RPCError(
                    out.code,
                    out.message,
                    out.data_value(),
                    method="subscriptions/listen",
                    server=link.label,
                    request_id=entry.id,
                )
            if sub.error is not None:
                raise sub.error
            if sub.acknowledged is None:
                raise RequestTimeout(
                    f"server '{link.label}' did not acknowledge subscriptions/listen (id {entry.id}) within {limit:g}s",
                    method="subscriptions/listen",
                    request_id=entry.id,
                    server=link.label,
                    timeout=limit,
                )
        except BaseException:
            await self.end_listen(sub)
            raise

    async def end_listen(self, sub: NotificationSink) -> None:
        assert sub.id is not None
        self._dispatcher.subscriptions.pop(sub.id, None)
        entry = self.link.session.table.abandon(sub.id)
        sub.end(None)
        if entry is not None:
            # UT-S06: on stdio, end a subscription with notifications/cancelled.
            await self._engine.cancel_on_wire(entry, ClientClosed("subscription closed"))

    async def end_all(self) -> None:
        for sub in list(self._dispatcher.subscriptions.values()):
            await self.end_listen(sub)
