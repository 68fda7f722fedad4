"""The reference server's Tasks extension (SEP-2663) where the official runner does not look.

The runner grades the extension over HTTP (test_official_server.py); these tests cover the rest:
the same engine over stdio, task status notifications on ``subscriptions/listen`` (the runner's
``tasks-status-notifications`` is a placeholder), the HTTP routing of those notifications, the
legacy era (where the extension does not exist), the 2026-07-28 path of clients that do not
declare it, and the task store's own rules (expiry, eviction, key uniqueness, atomic updates).

Every wait is event-driven and bounded: the stdio reader feeds a queue read with a timeout, and
a test that needs a task to move waits for its ``notifications/tasks``, never on a clock.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing
from typing import Any

import httpx
import pytest
import trio
from _targets import http_server, reference_argv

from mcpwire.testing.demo_server import ErrorAnswer
from mcpwire.testing.tasks import TASKS_EXTENSION, Job, JobCancelled, TaskStore

MODERN = "2026-07-28"
READ_TIMEOUT_S = 10.0
TASKS = {"extensions": {TASKS_EXTENSION: {}}}
TASKS_AND_ELICITATION = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
NEEDS_TASKS = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
ACCEPT = {"action": "accept", "content": {"confirm": True}}


def _meta(caps: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "reference-tasks-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    }


class Wire:
    """The reference server on stdio: one JSON text per line each way, every read bounded."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "mcpwire.testing.everything"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.unclaimed: list[dict[str, Any]] = []
        #: (taskId, status) of every notifications/tasks, in the order they arrived
        self.task_statuses: list[tuple[str, str]] = []
        self._next = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(json.loads(line))
        self._lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def _read(self) -> dict[str, Any]:
        try:
            message = self._lines.get(timeout=READ_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"nothing from the server in {READ_TIMEOUT_S} s") from None
        assert message is not None, "the server closed its stdout"
        if message.get("method") == "notifications/tasks":
            self.task_statuses.append((message["params"]["taskId"], message["params"]["status"]))
        return message

    def wait_for(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first message (kept or new) that ``wanted`` accepts; the others are kept."""
        for message in self.unclaimed:
            if wanted(message):
                self.unclaimed.remove(message)
                return message
        while True:
            message = self._read()
            if wanted(message):
                return message
            self.unclaimed.append(message)

    def call(self, method: str, params: dict[str, Any] | None = None, *, caps: dict[str, Any] | None = None) -> Any:
        """The whole response to a 2026-07-28 request (``caps``: its client capabilities)."""
        self._next += 1
        rid = f"t-{self._next}"
        full = {**(params or {}), "_meta": _meta(TASKS_AND_ELICITATION if caps is None else caps)}
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": full})
        return self.wait_for(lambda m: m.get("id") == rid and "method" not in m)

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        answer = self.call(method, params, **kw)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def status_note(self, task_id: str, status: str) -> dict[str, Any]:
        """The ``notifications/tasks`` that reports ``status`` for the task."""

        def wanted(m: dict[str, Any]) -> bool:
            params = m.get("params") or {}
            return m.get("method") == "notifications/tasks" and (params.get("taskId"), params.get("status")) == (
                task_id,
                status,
            )

        return self.wait_for(wanted)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def wire() -> Iterator[Wire]:
    w = Wire()
    try:
        yield w
    finally:
        w.close()


def _listen(wire: Wire, rid: str, task_ids: list[str], caps: dict[str, Any] | None = None) -> dict[str, Any]:
    """Open a subscription for ``task_ids``; its first message (acknowledgement or error)."""
    params = {"notifications": {"taskIds": task_ids}, "_meta": _meta(TASKS if caps is None else caps)}
    wire.send({"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params})

    def first(m: dict[str, Any]) -> bool:
        if m.get("id") == rid and "method" not in m:
            return True
        meta = (m.get("params") or {}).get("_meta") or {}
        return m.get("method") == "notifications/subscriptions/acknowledged" and meta.get(SUBSCRIPTION) == rid

    return wire.wait_for(first)


def test_a_task_parks_for_input_resumes_on_update_and_notifies_each_status(wire: Wire) -> None:
    created = wire.result("tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}})
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert not {"result", "error", "inputRequests", "requestState"} & created.keys()
    task_id = created["taskId"]
    ack = _listen(wire, "listen-1", [task_id, "no-such-task"])
    # SEP-2663: the acknowledgement names the task IDs the server agreed to report on
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    task = wire.result("tasks/get", {"taskId": task_id})
    if task["status"] != "input_required":  # still on its way to the question
        task = wire.status_note(task_id, "input_required")["params"]
    assert task["status"] == "input_required"
    [(key, request)] = task["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert key.startswith("confirm-")
    ack_update = wire.result("tasks/update", {"taskId": task_id, "inputResponses": {key: ACCEPT}})
    assert set(ack_update) == {"resultType", "_meta"}
    assert ack_update["resultType"] == "complete"
    working = wire.status_note(task_id, "working")
    assert working["params"]["_meta"] == {SUBSCRIPTION: "listen-1"}
    done = wire.status_note(task_id, "completed")["params"]
    assert done["result"]["content"] == [
        {"type": "text", "text": "a.txt: deletion confirmed (nothing was deleted: this is a fixture)"}
    ]
    assert done["result"]["resultType"] == "complete"
    # published in the order they happened (input_required only if it came after the subscription)
    assert [st for t, st in wire.task_statuses if t == task_id] in (
        ["working", "completed"],
        ["input_required", "working", "completed"],
    )
    polled = wire.result("tasks/get", {"taskId": task_id})
    # "identical to what tasks/get would have returned at that moment"
    assert {k: v for k, v in polled.items() if k not in ("resultType", "_meta")} == {
        k: v for k, v in done.items() if k != "_meta"
    }


def test_status_notifications_need_the_extension_declared(wire: Wire) -> None:
    answer = _listen(wire, "listen-2", ["whatever"], caps={})
    assert answer["error"]["code"] == -32021
    assert answer["error"]["data"] == NEEDS_TASKS


def test_cancel_settles_the_task_as_cancelled_and_repeats_as_the_same_ack(wire: Wire) -> None:
    created = wire.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
    task_id = created["taskId"]
    _listen(wire, "listen-3", [task_id])
    first = wire.result("tasks/cancel", {"taskId": task_id})
    assert wire.status_note(task_id, "cancelled")["params"]["statusMessage"] == "cancelled by tasks/cancel"
    again = wire.result("tasks/cancel", {"taskId": task_id})
    assert first == again == {"resultType": "complete", "_meta": first["_meta"]}
    # answers to a task that asks nothing are ignored, not an error
    assert wire.result("tasks/update", {"taskId": task_id, "inputResponses": {"x-1": ACCEPT}})["resultType"] == (
        "complete"
    )
    task = wire.result("tasks/get", {"taskId": task_id})
    assert (task["status"], "result" in task, "error" in task) == ("cancelled", False, False)


def test_a_protocol_error_fails_the_task_with_the_error_inlined(wire: Wire) -> None:
    task_id = wire.result("tools/call", {"name": "protocol_error_job", "arguments": {}})["taskId"]
    _listen(wire, "listen-4", [task_id])
    task = wire.result("tasks/get", {"taskId": task_id})
    if task["status"] != "failed":
        task = wire.status_note(task_id, "failed")["params"]
    assert task["error"] == {"code": -32603, "message": "Internal error: the job crashed (this fixture always does)"}
    assert task["statusMessage"].startswith("failed: ")
    assert "result" not in task


def test_task_methods_reject_bad_params_and_undeclared_clients(wire: Wire) -> None:
    assert wire.call("tasks/get", {"taskId": 7})["error"]["code"] == -32602
    assert wire.call("tasks/get", {"taskId": "nope"})["error"]["code"] == -32602
    assert wire.call("tasks/cancel", {"taskId": "nope"})["error"]["code"] == -32602
    task_id = wire.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})["taskId"]
    assert wire.call("tasks/update", {"taskId": task_id, "inputResponses": []})["error"]["code"] == -32602
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        error = wire.call(method, {"taskId": task_id, "inputResponses": {}}, caps={"elicitation": {}})["error"]
        assert (error["code"], error["data"]) == (-32021, NEEDS_TASKS)
    for removed in ("tasks/result", "tasks/list"):
        assert wire.call(removed, {"taskId": task_id})["error"]["code"] == -32601
    wire.result("tasks/cancel", {"taskId": task_id})


def test_without_the_extension_tools_run_inside_their_call(wire: Wire) -> None:
    plain = wire.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0, "label": "x"}}, caps={})
    assert (plain["resultType"], plain["content"]) == ("complete", [{"type": "text", "text": "x: done after 0 s"}])
    assert "taskId" not in plain
    # a task-supporting tool that asks: 2026-07-28 input_required, then the retry completes
    asked = wire.result(
        "tools/call", {"name": "confirm_delete", "arguments": {"filename": "b"}}, caps={"elicitation": {}}
    )
    assert asked["resultType"] == "input_required"
    assert list(asked["inputRequests"]) == ["confirm"]
    retry = {"name": "confirm_delete", "arguments": {"filename": "b"}, "inputResponses": {"confirm": ACCEPT}}
    done = wire.result("tools/call", retry, caps={"elicitation": {}})
    assert done["content"][0]["text"] == "b: deletion confirmed (nothing was deleted: this is a fixture)"
    # tools that only run as tasks: -32021 naming the extension
    for name in ("failing_job", "protocol_error_job", "test_tool_with_task"):
        error = wire.call("tools/call", {"name": name, "arguments": {}}, caps={"elicitation": {}})["error"]
        assert (error["code"], error["data"]) == (-32021, NEEDS_TASKS)
    # a task that would need to ask, for a client that cannot answer: -32021 before any task
    error = wire.call("tools/call", {"name": "multi_input", "arguments": {}}, caps=TASKS)["error"]
    assert (error["code"], error["data"]) == (-32021, {"requiredCapabilities": {"elicitation": {}}})


def test_the_legacy_era_has_no_tasks(wire: Wire) -> None:
    init = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t"}}
    wire.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    assert "extensions" not in wire.wait_for(lambda m: m.get("id") == 1)["result"]["capabilities"]
    wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    # even a request that declares the extension: it does not exist before 2026-07-28
    wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "failing_job", "arguments": {}}})
    failed = wire.wait_for(lambda m: m.get("id") == 2)["result"]
    assert failed["isError"] is True
    assert "only runs as a task" in failed["content"][0]["text"]
    wire.send({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "x"}})
    assert wire.wait_for(lambda m: m.get("id") == 3)["error"]["code"] == -32601
    params = {"name": "confirm_delete", "arguments": {"filename": "c"}}
    wire.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params})
    ask = wire.wait_for(lambda m: m.get("method") == "elicitation/create")
    assert ask["params"]["mode"] == "form"  # 2025-11-25 elicitation
    wire.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}})
    assert wire.wait_for(lambda m: m.get("id") == 4)["result"]["content"][0]["text"] == "c: deletion not confirmed"


async def _events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    async for line in lines:
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


async def test_task_notifications_reach_the_listen_stream_over_http() -> None:
    async with http_server(reference_argv()) as url, httpx.AsyncClient(timeout=READ_TIMEOUT_S) as client:

        async def post(method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
            headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method, "Mcp-Name": name}
            headers["Accept"] = "application/json, text/event-stream"
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": method,
                "params": {**params, "_meta": _meta(TASKS_AND_ELICITATION)},
            }
            reply = await client.post(url, json=body, headers=headers)
            assert reply.status_code == 200, reply.text
            result: dict[str, Any] = reply.json()["result"]
            return result

        created = await post("tools/call", {"name": "confirm_delete", "arguments": {"filename": "h"}}, "confirm_delete")
        task_id = created["taskId"]
        listen = {
            "jsonrpc": "2.0",
            "id": "listen-http",
            "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [task_id]}, "_meta": _meta(TASKS)},
        }
        headers = {
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "subscriptions/listen",
            "Accept": "application/json, text/event-stream",
        }
        notes: list[dict[str, Any]] = []
        with trio.fail_after(READ_TIMEOUT_S):
            async with (
                client.stream("POST", url, json=listen, headers=headers) as stream,
                aclosing(_events(stream.aiter_lines())) as events,
            ):
                ack = await anext(events)  # after it the subscription is registered
                task = await post("tasks/get", {"taskId": task_id}, task_id)
                while task["status"] != "input_required":
                    notes.append(await anext(events))
                    task = notes[-1]["params"]
                [key] = task["inputRequests"]
                await post("tasks/update", {"taskId": task_id, "inputResponses": {key: ACCEPT}}, task_id)
                while not notes or notes[-1]["params"]["status"] != "completed":
                    notes.append(await anext(events))
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    assert {n["method"] for n in notes} == {"notifications/tasks"}
    # the client's own subscription id, not the server's internal one
    assert {n["params"]["_meta"][SUBSCRIPTION] for n in notes} == {"listen-http"}
    assert notes[-1]["params"]["result"]["content"][0]["text"].startswith("h: deletion confirmed")


# -- the task store on its own ------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Changes:
    """The store's on_change feed, read with a bound."""

    def __init__(self) -> None:
        self.feed: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[str] = []

    def __call__(self, task: dict[str, Any]) -> None:
        self.feed.put(task)

    def next(self, status: str) -> dict[str, Any]:
        """The next change, which must report ``status``."""
        try:
            task = self.feed.get(timeout=READ_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"no task change in {READ_TIMEOUT_S} s (wanted {status})") from None
        self.seen.append(task["status"])
        assert task["status"] == status, task
        return task


def _store(**kw: Any) -> tuple[TaskStore, Changes]:
    changes = Changes()

    def fits(method: str, answer: object) -> bool:
        return isinstance(answer, dict) and answer.get("action") in ("accept", "decline")

    return TaskStore(on_change=changes, fits=fits, **kw), changes


ELICIT = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {"type": "object"}}}


def test_input_keys_are_never_reused_and_an_answered_key_is_ignored_later() -> None:
    store, changes = _store()
    got: list[Any] = []

    def body(job: Job) -> dict[str, Any]:
        got.append(job.ask({"q": ELICIT}))
        got.append(job.ask({"q": ELICIT}))
        return {"content": [{"type": "text", "text": "two answers"}]}

    task_id = store.start("t", body)["taskId"]
    [first] = changes.next("input_required")["inputRequests"]
    store.update(task_id, {first: {"action": "accept"}})
    changes.next("working")
    [second] = changes.next("input_required")["inputRequests"]
    assert second != first  # SEP-2663: unique over the lifetime of the task
    store.update(task_id, {first: {"action": "decline"}, second: {"action": "decline"}})  # `first` is not outstanding
    changes.next("working")
    assert changes.next("completed")["result"] == {"content": [{"type": "text", "text": "two answers"}]}
    assert got == [{"q": {"action": "accept"}}, {"q": {"action": "decline"}}]
    store.close()


def test_an_update_with_one_malformed_answer_applies_nothing() -> None:
    store, changes = _store()

    def body(job: Job) -> dict[str, Any]:
        job.ask({"a": ELICIT, "b": ELICIT})
        return {"content": []}

    task_id = store.start("t", body)["taskId"]
    keys = sorted(changes.next("input_required")["inputRequests"])
    assert keys == ["a-1", "b-2"]
    with pytest.raises(
        ErrorAnswer, match=r"^Invalid params: inputResponses\['b-2'\] is not a valid elicitation/create"
    ):
        store.update(task_id, {"a-1": {"action": "accept"}, "b-2": {"action": "maybe"}})
    assert sorted(store.get(task_id)["inputRequests"]) == keys
    store.update(task_id, {"a-1": {"action": "accept"}})
    partial = store.get(task_id)  # a partial answer: still input_required, with only what is missing
    assert (partial["status"], list(partial["inputRequests"])) == ("input_required", ["b-2"])
    store.cancel(task_id)
    changes.next("cancelled")
    store.close()


def test_tasks_expire_after_their_ttl_and_the_oldest_make_room() -> None:
    clock = Clock()
    store, _ = _store(ttl_ms=1000, max_tasks=2, clock=clock)
    stopped = threading.Semaphore(0)

    def forever(job: Job) -> dict[str, Any]:
        try:
            job.sleep(3600)
        except JobCancelled:
            stopped.release()
            raise
        return {}

    first = store.start("t", forever)["taskId"]
    clock.now += 0.5
    second = store.start("t", forever)["taskId"]
    clock.now += 0.3
    third = store.start("t", forever)["taskId"]  # max_tasks=2: the oldest goes, and stops
    assert stopped.acquire(timeout=READ_TIMEOUT_S)
    with pytest.raises(ErrorAnswer, match=r"^Invalid params: no task '.+' \(unknown or expired\)$"):
        store.get(first)
    assert store.known([first, second, third]) == [second, third]
    clock.now += 0.8  # 1.1 s after the second was created, 0.8 s after the third
    with pytest.raises(ErrorAnswer, match=r"unknown or expired"):
        store.get(second)
    assert stopped.acquire(timeout=READ_TIMEOUT_S)
    assert store.get(third)["ttlMs"] == 1000
    store.close()
    assert stopped.acquire(timeout=READ_TIMEOUT_S)  # close() stops what still runs


def test_a_body_that_fails_after_cancellation_stays_cancelled() -> None:
    store, changes = _store()
    release = threading.Event()
    done = threading.Event()

    def body(job: Job) -> dict[str, Any]:
        release.wait(READ_TIMEOUT_S)
        done.set()
        raise ErrorAnswer(-32603, "too late")

    task_id = store.start("t", body)["taskId"]
    store.cancel(task_id)
    release.set()
    assert done.wait(READ_TIMEOUT_S)
    store.close()
    assert store.get(task_id)["status"] == "cancelled"
    changes.next("cancelled")
    assert changes.feed.empty()  # the late failure changed nothing
