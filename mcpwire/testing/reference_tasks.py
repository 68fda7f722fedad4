"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) of the reference server, on trio.

Theory of operation: a :class:`TaskStore` holds the tasks of one server (over HTTP tasks
outlive the request that created them). A ``tools/call`` that runs as a task calls
:meth:`TaskStore.start` with the tool's body; the task is registered first (so an immediate
``tasks/get`` resolves: SEP-2663 §Task Creation, "A server MUST NOT return CreateTaskResult
until the task is durably created"), then the body runs in the server's background nursery with
a :class:`TaskJob`: ``sleep`` (cancellable) and ``ask`` (park the task in ``input_required``
until ``tasks/update`` delivers every answer). The body's return value is the task's ``result``
(status ``completed``, even for an ``isError`` result); a JSON-RPC error it raises is its
``error`` (status ``failed``); ``tasks/cancel`` moves the task to ``cancelled`` at once and
cancels the body.

Every status change is handed, as a ``DetailedTask`` snapshot, to the ``on_change`` coroutine
in the order the changes happened: the server sends it as ``notifications/tasks`` on the
``subscriptions/listen`` streams that asked for that task. Tasks expire ``ttl_ms`` after their
creation and at most ``max_tasks`` are kept (the oldest go first and are cancelled), so a
client that never polls cannot grow the server without bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

import trio

from ..protocol.serving import INTERNAL_ERROR, INVALID_PARAMS
from ..server import JSONObject, RequestError
from .tasks import (
    MAX_TASKS,
    POLL_INTERVAL_MS,
    TASK_TTL_MS,
    TASKS_EXTENSION,
    TERMINAL,
    BadTaskRequest,
    TaskBook,
    TaskState,
    accepted_inputs,
    declares_tasks,
    live_task,
    now_iso,
)

__all__ = ["TASKS_EXTENSION", "Job", "TaskJob", "TaskStore", "declares_tasks"]

log = logging.getLogger("mcpwire.testing.reference")

#: Body of a tool: runs as a task or inside its ``tools/call``.
Body = Callable[["Job"], Awaitable[JSONObject]]
_SEP: Final = "-"


class Job(Protocol):
    """What a tool body may do, as a task or inside its own ``tools/call``."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (cancellable)."""

    async def ask(self, asks: Mapping[str, JSONObject]) -> dict[str, object]:
        """The client's answers to ``asks`` (name -> server-to-client request), by name."""


@dataclass(slots=True, eq=False)
class _Task(TaskState):
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    answered: trio.Event = field(default_factory=trio.Event)


class TaskStore(TaskBook[_Task]):
    """The tasks of one server.

    Args:
        nursery: where task bodies run (it outlives the requests that create them).
        on_change: awaited with a ``DetailedTask`` snapshot after every status change.
        fits: ``fits(method, answer)`` tells whether an answer is a well-formed response to a
            request of ``method`` (``tasks/update`` rejects one that is not with -32602).
        ttl_ms, poll_interval_ms, max_tasks: as :mod:`mcpwire.testing.tasks`.
        clock: a monotonic clock in seconds.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        on_change: Callable[[JSONObject], Awaitable[None]],
        fits: Callable[[str, object], bool],
        ttl_ms: int = TASK_TTL_MS,
        poll_interval_ms: int = POLL_INTERVAL_MS,
        max_tasks: int = MAX_TASKS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(fits=fits, ttl_ms=ttl_ms, poll_interval_ms=poll_interval_ms, max_tasks=max_tasks, clock=clock)
        self._nursery = nursery
        self._on_change = on_change
        self._publishing = trio.Lock()  # changes go out in the order they happened

    # -- the four operations -------------------------------------------------------------------

    def start(self, tool: str, body: Body) -> JSONObject:
        """Register a task for ``body`` and start it; the ``CreateTaskResult`` (without
        ``resultType``: the caller adds it).

        Raises:
            RequestError: the server is closing (-32603).
        """
        if self._closed:
            raise RequestError(INTERNAL_ERROR, "Internal error: the server is closing")
        task = _Task.new(tool, self._clock())
        self._expire()
        while len(self._tasks) >= self._max:
            self._tasks.pop(next(iter(self._tasks))).scope.cancel()
        self._tasks[task.task_id] = task
        self._nursery.start_soon(self._run, task, body)
        return self._base(task)

    def get(self, task_id: object) -> JSONObject:
        """The task as a ``DetailedTask`` (SEP-2663 §Task Polling).

        Raises:
            RequestError: -32602 for a taskId that is not a string or names no (live) task.
        """
        return self._detailed(self._find(task_id, "tasks/get"))

    async def update(self, task_id: object, responses: object) -> None:
        """Deliver ``inputResponses``; answers to keys that are not outstanding are ignored.

        SEP-2663 §Task Update Requests: "A server SHOULD ignore any inputResponses responses
        mapped to a key that is not currently outstanding for the task" and "MAY accept a
        partial set of responses".

        Raises:
            RequestError: -32602 for an unknown task, ``inputResponses`` that is not an object,
                or an answer that does not fit the request of its key (nothing is applied then).
        """
        task = self._find(task_id, "tasks/update")
        try:
            accepted = accepted_inputs(task, responses, self._fits)
        except BadTaskRequest as exc:
            raise RequestError(INVALID_PARAMS, str(exc)) from None
        for key, answer in accepted.items():
            del task.outstanding[key]
            task.answers[key] = answer
        if accepted:
            task.answered.set()
            task.answered = trio.Event()
            if not task.outstanding and task.status == "input_required":
                await self._set(task, "working", "working: input received")

    async def cancel(self, task_id: object) -> None:
        """Cancel the task; a terminal task is left as it is (the ack is the same).

        Raises:
            RequestError: -32602 for an unknown task.
        """
        task = self._find(task_id, "tasks/cancel")
        if task.status not in TERMINAL:
            task.outstanding.clear()
            task.scope.cancel()
            await self._set(task, "cancelled", "cancelled by tasks/cancel")

    def known(self, task_ids: Iterable[str]) -> list[str]:
        """The ids among ``task_ids`` that name live tasks, in the given order."""
        self._expire()
        return [t for t in task_ids if t in self._tasks]

    def close(self) -> None:
        """Cancel every task that is still running. Idempotent."""
        self._closed = True
        for task in self._tasks.values():
            task.scope.cancel()

    # -- running a body ------------------------------------------------------------------------

    async def _run(self, task: _Task, body: Body) -> None:
        with task.scope:
            try:
                result = await body(TaskJob(self, task))
            except RequestError as exc:
                # SEP-2663 §Task Execution Errors: a JSON-RPC error during execution is `failed`,
                # with the error inlined and a statusMessage with diagnostic information.
                error: JSONObject = {"code": exc.code, "message": exc.message}
                if exc.data is not None:
                    error["data"] = exc.data
                await self._finish(task, "failed", f"failed: {exc.message}", error=error)
            except Exception:
                log.exception("task %s (%s) crashed", task.task_id, task.tool)
                internal: JSONObject = {"code": INTERNAL_ERROR, "message": "Internal error"}
                await self._finish(task, "failed", "failed: internal error", error=internal)
            else:
                # "Errors within the context of a protocol method result MUST use the completed
                # status with the error details in the result field" (an isError tool result).
                await self._finish(task, "completed", "completed", result=result)

    async def _finish(
        self,
        task: _Task,
        status: str,
        message: str,
        *,
        result: JSONObject | None = None,
        error: JSONObject | None = None,
    ) -> None:
        if task.status in TERMINAL:  # cancelled first: cancellation wins
            return
        task.result, task.error = result, error
        task.outstanding.clear()
        with trio.CancelScope(shield=True):  # the outcome is published even if cancelled meanwhile
            await self._set(task, status, message)

    async def ask(self, task: _Task, asks: Mapping[str, JSONObject]) -> dict[str, object]:
        keys: dict[str, str] = {}
        for name, request in asks.items():
            # SEP-2663: "Each request key in inputRequests MUST be unique over the lifetime of a
            # single task": a counter makes every key new.
            task.issued += 1
            keys[name] = f"{name}{_SEP}{task.issued}"
            task.outstanding[keys[name]] = dict(request)
        await self._set(task, "input_required", "input required: " + ", ".join(keys.values()))
        while not all(key in task.answers for key in keys.values()):
            await task.answered.wait()
        return {name: task.answers.pop(key) for name, key in keys.items()}

    # -- helpers -------------------------------------------------------------------------------

    def _find(self, task_id: object, method: str) -> _Task:
        self._expire()
        try:
            return live_task(self._tasks, task_id, method)
        except BadTaskRequest as exc:
            raise RequestError(INVALID_PARAMS, str(exc)) from None

    def _expire(self) -> None:
        for task in self._take_expired():
            task.scope.cancel()

    async def _set(self, task: _Task, status: str, message: str) -> None:
        task.status, task.status_message, task.last_updated_at = status, message, now_iso()
        snapshot = self._detailed(task)  # taken now: published in the order the changes happened
        async with self._publishing:
            try:
                await self._on_change(snapshot)
            except Exception:
                log.exception("publishing a change of task %s failed", task.task_id)


class TaskJob:
    """The :class:`Job` of a task: cancellation is ``tasks/cancel``; input goes through ``tasks/update``."""

    __slots__ = ("_store", "_task")

    def __init__(self, store: TaskStore, task: _Task) -> None:
        self._store = store
        self._task = task

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def ask(self, asks: Mapping[str, JSONObject]) -> dict[str, object]:
        return await self._store.ask(self._task, asks)
