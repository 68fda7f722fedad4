"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) for the bundled servers.

Theory of operation: a :class:`TaskStore` holds the tasks of one engine (one per stdio process,
one for all 2026-07-28 requests over HTTP: tasks outlive the request that created them). A
``tools/call`` that the server decides to run as a task calls :meth:`TaskStore.start` with the
tool's body; the task is registered (so an immediate ``tasks/get`` resolves: SEP-2663 §Task
Creation, "A server MUST NOT return CreateTaskResult until the task is durably created") and
then the body runs in a thread of its own with a :class:`Job`: ``sleep`` (cancellable) and
``ask`` (park the task in ``input_required`` until ``tasks/update`` delivers every answer). The
body's return value is the task's ``result`` (status ``completed``, even for an ``isError``
result); a JSON-RPC error it raises is its ``error`` (status ``failed``); ``tasks/cancel``
moves the task to ``cancelled`` at once and stops the body at its next ``sleep`` or ``ask``.

Every status change is handed, as a ``DetailedTask`` snapshot, to the ``on_change`` callback,
outside the store's lock but in the order the changes happened (the next change waits for the
callback): the server turns it into ``notifications/tasks`` for the
``subscriptions/listen`` streams that asked for that task. Tasks expire ``ttl_ms`` after their
creation and at most ``max_tasks`` are kept (the oldest go first), so a client that never
polls cannot grow the server without bound.

This module is standard library only, like :mod:`mcpwire.testing.demo_server`.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Generic, Protocol, Self, TypeVar

from mcpwire.testing.demo_server import INTERNAL_ERROR, INVALID_PARAMS, ErrorAnswer

__all__ = [
    "MAX_TASKS",
    "POLL_INTERVAL_MS",
    "TASKS_EXTENSION",
    "TASK_TTL_MS",
    "TERMINAL",
    "Job",
    "JobCancelled",
    "BadTaskRequest",
    "TaskBook",
    "TaskState",
    "TaskStore",
    "accepted_inputs",
    "declares_tasks",
    "live_task",
    "now_iso",
    "task_snapshot",
]

_log = logging.getLogger(__name__)
_Obj = dict[str, Any]
TaskT = TypeVar("TaskT", bound="TaskState")

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
#: Time-to-live of a task from its creation (SEP-2663 Task.ttlMs, integer milliseconds).
TASK_TTL_MS: Final = 300_000
#: Suggested polling interval (Task.pollIntervalMs).
POLL_INTERVAL_MS: Final = 200
#: Tasks kept at once; the oldest is dropped (and cancelled) to make room.
MAX_TASKS: Final = 1000
#: SEP-2663 §Task Status: the states a task never leaves.
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
#: How long a parked body waits between looks at its cancel flag (it is also woken at once).
_WAKE_S: Final = 1.0


def declares_tasks(capabilities: Mapping[str, Any]) -> bool:
    """True when the request's client capabilities declare the tasks extension.

    SEP-2663 §Capability Negotiation: "A server MUST NOT return CreateTaskResult to a client
    that did not include the extension capability on its request, regardless of prior
    declarations."
    """
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def now_iso() -> str:
    """Now, as SEP-2663 Task.createdAt / lastUpdatedAt: an ISO 8601 timestamp (UTC, milliseconds)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True, eq=False)
class TaskState:
    """One task as both stores keep it (each adds its own means to wait and to cancel)."""

    task_id: str
    tool: str
    created_at: str
    created: float
    last_updated_at: str
    status: str = "working"
    status_message: str = "working"
    result: _Obj | None = None
    error: _Obj | None = None
    #: input key -> the request it stands for, while unanswered
    outstanding: dict[str, _Obj] = field(default_factory=dict)
    #: input key -> the client's answer, until the body takes it
    answers: dict[str, object] = field(default_factory=dict)
    issued: int = 0

    @classmethod
    def new(cls, tool: str, created: float) -> Self:
        """A new ``working`` task of ``tool``, created at ``created`` (the store's clock)."""
        now = now_iso()
        # SEP-2663 §Security: unguessable task IDs
        return cls(task_id=secrets.token_urlsafe(18), tool=tool, created_at=now, created=created, last_updated_at=now)


class BadTaskRequest(Exception):
    """A ``tasks/*`` request naming no live task, or with unusable ``inputResponses``: each store
    answers it with -32602 and this message."""


def live_task(tasks: Mapping[str, TaskT], task_id: object, method: str) -> TaskT:
    """The live task ``task_id`` names (expired ones already dropped).

    Raises:
        BadTaskRequest: the id is not a string, or names no live task.
    """
    if not isinstance(task_id, str):
        raise BadTaskRequest(f"Invalid params: {method} needs 'taskId', a string")
    task = tasks.get(task_id)
    if task is None:
        # SEP-2663 §Protocol Errors: "Invalid or nonexistent taskId: -32602 (Invalid params)"
        raise BadTaskRequest(f"Invalid params: no task {task_id!r} (unknown or expired)")
    return task


def accepted_inputs(task: TaskState, responses: object, fits: Callable[[str, object], bool]) -> dict[str, object]:
    """The answers of ``inputResponses`` to keys outstanding for the task (SEP-2663 §Task Update
    Requests: "A server SHOULD ignore any inputResponses responses mapped to a key that is not
    currently outstanding"); nothing is applied here.

    Raises:
        BadTaskRequest: ``inputResponses`` is not an object, or an answer does not fit its request.
    """
    if not isinstance(responses, dict):
        raise BadTaskRequest("Invalid params: 'inputResponses' must be an object")
    accepted = {k: v for k, v in responses.items() if k in task.outstanding}
    for key, answer in accepted.items():
        method = str(task.outstanding[key].get("method"))
        if not fits(method, answer):
            raise BadTaskRequest(f"Invalid params: inputResponses[{key!r}] is not a valid {method} result")
    return accepted


def task_snapshot(task: TaskState, ttl_ms: int, poll_interval_ms: int, *, detailed: bool = True) -> _Obj:
    """The task as a ``Task`` (``detailed=False``: a ``CreateTaskResult``) or a ``DetailedTask``."""
    out: _Obj = {
        "taskId": task.task_id,
        "status": task.status,
        "statusMessage": task.status_message,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.last_updated_at,
        "ttlMs": ttl_ms,
        "pollIntervalMs": poll_interval_ms,
    }
    if not detailed:
        return out
    if task.status == "input_required":
        # "The inputRequests field MUST contain all outstanding requests"
        out["inputRequests"] = {k: dict(v) for k, v in task.outstanding.items()}
    elif task.status == "completed" and task.result is not None:
        out["result"] = task.result
    elif task.status == "failed" and task.error is not None:
        out["error"] = task.error
    return out


class TaskBook(Generic[TaskT]):
    """What both task stores keep alike: their limits, the tasks by id (oldest first), expiry and
    the two snapshots of a task; each store adds its own way to run, wait, cancel and publish.

    Raises:
        ValueError: a limit that is not positive.
    """

    def __init__(
        self,
        *,
        fits: Callable[[str, object], bool],
        ttl_ms: int,
        poll_interval_ms: int,
        max_tasks: int,
        clock: Callable[[], float],
    ) -> None:
        if ttl_ms <= 0 or poll_interval_ms <= 0 or max_tasks <= 0:
            raise ValueError("ttl_ms, poll_interval_ms and max_tasks must be positive")
        self._fits = fits
        self._ttl_ms = ttl_ms
        self._poll_ms = poll_interval_ms
        self._max = max_tasks
        self._clock = clock
        self._tasks: dict[str, TaskT] = {}
        self._closed = False

    def _take_expired(self) -> list[TaskT]:
        """Drops the tasks past their time-to-live; returns them (the caller cancels them)."""
        limit = self._clock() - self._ttl_ms / 1000
        gone = [t for t in self._tasks.values() if t.created < limit]
        for task in gone:
            del self._tasks[task.task_id]
        return gone

    def _base(self, task: TaskState) -> _Obj:
        return task_snapshot(task, self._ttl_ms, self._poll_ms, detailed=False)

    def _detailed(self, task: TaskState) -> _Obj:
        return task_snapshot(task, self._ttl_ms, self._poll_ms)


class JobCancelled(Exception):
    """The task was cancelled (or the server is closing): the body stops, nobody is answered."""


class Job(Protocol):
    """What a tool body may do, as a task or inside its own ``tools/call``."""

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; raises when the work is cancelled."""

    def ask(self, asks: Mapping[str, _Obj]) -> dict[str, object]:
        """The client's answers to ``asks`` (name -> server-to-client request), by name."""


@dataclass(slots=True, eq=False)
class _Task(TaskState):
    cancel: threading.Event = field(default_factory=threading.Event)


class TaskStore(TaskBook[_Task]):
    """The tasks of one engine.

    Args:
        on_change: called with a ``DetailedTask`` snapshot after every status change (from any
            thread, never under the store's lock).
        fits: ``fits(method, answer)`` tells whether an answer is a well-formed response to a
            request of ``method`` (``tasks/update`` rejects one that is not with -32602).
        ttl_ms, poll_interval_ms, max_tasks: see the module constants.
        clock: a monotonic clock in seconds (tests may pass their own).
    """

    def __init__(
        self,
        *,
        on_change: Callable[[_Obj], None],
        fits: Callable[[str, object], bool],
        ttl_ms: int = TASK_TTL_MS,
        poll_interval_ms: int = POLL_INTERVAL_MS,
        max_tasks: int = MAX_TASKS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(fits=fits, ttl_ms=ttl_ms, poll_interval_ms=poll_interval_ms, max_tasks=max_tasks, clock=clock)
        self._on_change = on_change
        self._cond = threading.Condition()
        self._publishing = threading.Lock()  # taken under _cond, released after on_change

    # -- the four operations ----------------------------------------------------------------

    def start(self, tool: str, body: Callable[[Job], _Obj]) -> _Obj:
        """Register a task for ``body`` and start it; the ``CreateTaskResult`` (without
        ``resultType``: the caller adds it).

        Raises:
            ErrorAnswer: the server is closing (-32603).
        """
        task = _Task.new(tool, self._clock())
        dropped: list[_Task] = []
        with self._cond:
            if self._closed:
                raise ErrorAnswer(INTERNAL_ERROR, "Internal error: the server is closing")
            dropped = self._take_expired()
            while len(self._tasks) >= self._max:
                dropped.append(self._tasks.pop(next(iter(self._tasks))))
            self._tasks[task.task_id] = task
            created = self._base(task)
            self._cond.notify_all()
        for old in dropped:
            old.cancel.set()
        threading.Thread(target=self._run, args=(task, body), name=f"task-{task.task_id[:8]}", daemon=True).start()
        return created

    def get(self, task_id: object) -> _Obj:
        """The task as a ``DetailedTask`` (SEP-2663 §Task Polling).

        Raises:
            ErrorAnswer: -32602 for a taskId that is not a string or names no (live) task.
        """
        with self._cond:
            return self._detailed(self._find(task_id, "tasks/get"))

    def update(self, task_id: object, responses: object) -> None:
        """Deliver ``inputResponses``; answers to keys that are not outstanding are ignored.

        SEP-2663 §Task Update Requests: "A server SHOULD ignore any inputResponses responses
        mapped to a key that is not currently outstanding for the task" and "MAY accept a
        partial set of responses".

        Raises:
            ErrorAnswer: -32602 for an unknown task, ``inputResponses`` that is not an object, or
                an answer that does not fit the request of its key (nothing is applied then).
        """
        changed = None
        with self._cond:
            task = self._find(task_id, "tasks/update")
            try:
                accepted = accepted_inputs(task, responses, self._fits)
            except BadTaskRequest as exc:
                raise ErrorAnswer(INVALID_PARAMS, str(exc)) from None
            for key, answer in accepted.items():
                del task.outstanding[key]
                task.answers[key] = answer
            if accepted and not task.outstanding and task.status == "input_required":
                changed = self._set(task, "working", "working: input received")
            self._cond.notify_all()
        if changed is not None:
            self._publish(changed)

    def cancel(self, task_id: object) -> None:
        """Cancel the task; a terminal task is left as it is (the ack is the same).

        Raises:
            ErrorAnswer: -32602 for an unknown task.
        """
        changed = None
        with self._cond:
            task = self._find(task_id, "tasks/cancel")
            if task.status not in TERMINAL:
                task.outstanding.clear()
                task.cancel.set()
                changed = self._set(task, "cancelled", "cancelled by tasks/cancel")
                self._cond.notify_all()
        if changed is not None:
            self._publish(changed)

    def known(self, task_ids: Iterable[str]) -> list[str]:
        """The ids among ``task_ids`` that name live tasks, in the given order."""
        with self._cond:
            self._cancel_all(self._take_expired())
            return [t for t in task_ids if t in self._tasks]

    def close(self) -> None:
        """Cancel every task that is still running. Idempotent."""
        with self._cond:
            self._closed = True
            for task in self._tasks.values():
                task.cancel.set()
            self._cond.notify_all()  # a body parked in ask() wakes and stops

    # -- running a body ----------------------------------------------------------------------

    def _run(self, task: _Task, body: Callable[[Job], _Obj]) -> None:
        try:
            result = body(_TaskJob(self, task))
        except JobCancelled:
            return
        except ErrorAnswer as exc:
            # SEP-2663 §Task Execution Errors: a JSON-RPC error during execution is `failed`,
            # with the error inlined and a statusMessage with diagnostic information.
            error: _Obj = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            self._finish(task, "failed", f"failed: {exc.message}", error=error)
        except Exception:
            _log.exception("task %s (%s) crashed", task.task_id, task.tool)
            internal = {"code": INTERNAL_ERROR, "message": "Internal error"}
            self._finish(task, "failed", "failed: internal error", error=internal)
        else:
            # "Errors within the context of a protocol method result MUST use the completed
            # status with the error details in the result field" (an isError tool result).
            self._finish(task, "completed", "completed", result=result)

    def _finish(
        self, task: _Task, status: str, message: str, *, result: _Obj | None = None, error: _Obj | None = None
    ) -> None:
        with self._cond:
            if task.status in TERMINAL:  # cancelled first: cancellation wins
                return
            task.result, task.error = result, error
            task.outstanding.clear()
            changed = self._set(task, status, message)
            self._cond.notify_all()
        self._publish(changed)

    def _ask(self, task: _Task, asks: Mapping[str, _Obj]) -> dict[str, object]:
        with self._cond:
            if task.cancel.is_set() or task.status in TERMINAL:
                raise JobCancelled
            keys: dict[str, str] = {}
            for name, request in asks.items():
                # SEP-2663: "Each request key in inputRequests MUST be unique over the lifetime
                # of a single task": a counter makes every key new.
                task.issued += 1
                keys[name] = f"{name}-{task.issued}"
                task.outstanding[keys[name]] = dict(request)
            changed = self._set(task, "input_required", "input required: " + ", ".join(keys.values()))
        self._publish(changed)
        with self._cond:
            while not all(key in task.answers for key in keys.values()):
                if task.cancel.is_set() or task.status in TERMINAL:
                    raise JobCancelled
                self._cond.wait(_WAKE_S)
            return {name: task.answers.pop(key) for name, key in keys.items()}

    # -- helpers (under the lock) -----------------------------------------------------------------

    def _find(self, task_id: object, method: str) -> _Task:
        self._cancel_all(self._take_expired())
        try:
            return live_task(self._tasks, task_id, method)
        except BadTaskRequest as exc:
            raise ErrorAnswer(INVALID_PARAMS, str(exc)) from None

    @staticmethod
    def _cancel_all(tasks: list[_Task]) -> None:
        for task in tasks:
            task.cancel.set()

    def _set(self, task: _Task, status: str, message: str) -> _Obj:
        """Change the status (under the lock); the caller must :meth:`_publish` the snapshot."""
        task.status, task.status_message, task.last_updated_at = status, message, now_iso()
        # taken before the lock is released: changes are published in the order they happened
        self._publishing.acquire()
        return self._detailed(task)

    def _publish(self, changed: _Obj) -> None:
        """Hand a snapshot made by :meth:`_set` to ``on_change``, outside the state lock."""
        try:
            self._on_change(changed)
        except Exception:
            _log.exception("publishing a change of task %s failed", changed.get("taskId"))
        finally:
            self._publishing.release()


class _TaskJob:
    """The :class:`Job` of a task: cancellation is ``tasks/cancel``; input goes through ``tasks/update``."""

    __slots__ = ("_store", "_task")

    def __init__(self, store: TaskStore, task: _Task) -> None:
        self._store = store
        self._task = task

    def sleep(self, seconds: float) -> None:
        if self._task.cancel.wait(seconds):
            raise JobCancelled

    def ask(self, asks: Mapping[str, _Obj]) -> dict[str, object]:
        return self._store._ask(self._task, asks)
