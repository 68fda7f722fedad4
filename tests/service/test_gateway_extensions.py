"""The 2026-07-28 extensions through the gateway, in front of two reference backends (namespaced):
the gateway declares what its backends declare; a task a backend creates for a call comes back
under a wrapped id that routes tasks/get, tasks/update and tasks/cancel (and their Mcp-Name
headers) to that backend, with its states and input requests as the backend reports them; an id
the gateway did not issue, or a client that did not declare the extension, is refused as the
backend would; a listen stream naming tasks gets their notifications/tasks from their backends;
skills/list walks both backends page by page, skills/get and directory reads go to the backend
serving the URI."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
from _gateway import MODERN, gateway, reference

from mcpwire.service.gateway_extensions import SKILLS_EXTENSION, TASKS_EXTENSION, Extensions

pytestmark = pytest.mark.slow
CAPS = "io.modelcontextprotocol/clientCapabilities"
DECLARING = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
ALLOW = {"tools": {"*": {"approval": "allow"}}}
BACKENDS = {name: {**reference(), "era": "modern", "policy": ALLOW} for name in ("ref", "other")}


class Wire:
    """2026-07-28 requests to the gateway, as a client declaring ``caps`` sends them."""

    def __init__(self, http: httpx.AsyncClient, url: str, caps: dict[str, Any]) -> None:
        self.http, self.url, self.caps = http, url, caps

    async def send(self, method: str, params: dict[str, Any], *, name: str | None = None) -> dict[str, Any]:
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, CAPS: self.caps}
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        routed = name if name is not None else params.get("name") or params.get("taskId")
        if routed is not None:
            headers["Mcp-Name"] = routed
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        answer: dict[str, Any] = (await self.http.post(self.url, json=body, headers=headers)).json()
        return answer

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await self.send(method, params)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    async def until(self, task_id: str, status: str) -> dict[str, Any]:
        while True:
            task = await self.result("tasks/get", {"taskId": task_id})
            assert task["taskId"] == task_id
            if task["status"] == status:
                return task
            await trio.sleep(0.05)


def test_task_ids_name_their_backend_and_nothing_else_unwraps() -> None:
    extensions = Extensions(host=None)  # type: ignore[arg-type]
    wrapped = extensions.wrap_task("srv.one", "abc.def")
    assert wrapped.startswith("t.") and extensions.unwrap_task(wrapped) == ("srv.one", "abc.def")
    for foreign in ("abc", "t.", "t.c3J2", "t.!!.x", 7, None, "relayed.x.y"):
        assert extensions.unwrap_task(foreign) is None


async def test_discover_declares_the_backends_extensions() -> None:
    async with gateway(BACKENDS) as running, httpx.AsyncClient(timeout=30) as http:
        with trio.fail_after(60):
            found = await Wire(http, running.url, {}).result("server/discover", {})
            declared = found["capabilities"]["extensions"]
            assert declared == {TASKS_EXTENSION: {}, SKILLS_EXTENSION: {"directoryRead": True}}


async def test_a_task_is_polled_answered_and_cancelled_on_the_backend_that_made_it() -> None:
    async with gateway(BACKENDS) as running, httpx.AsyncClient(timeout=30) as http:
        wire = Wire(http, running.url, DECLARING)
        with trio.fail_after(60):
            created = await wire.result("tools/call", {"name": "other__slow_compute", "arguments": {"seconds": 0.2}})
            assert (created["resultType"], created["status"]) == ("task", "working")
            task_id = created["taskId"]
            assert Extensions(running.host).unwrap_task(task_id) is not None
            assert Extensions(running.host).unwrap_task(task_id)[0] == "other"  # type: ignore[index]
            done = await wire.until(task_id, "completed")
            assert done["result"]["content"] == [{"type": "text", "text": "slow_compute: done after 0.2 s"}]
            # a task that asks: its input requests as the backend reports them, answered by tasks/update
            asking = await wire.result("tools/call", {"name": "ref__confirm_delete", "arguments": {"filename": "f"}})
            parked = await wire.until(asking["taskId"], "input_required")
            [key] = parked["inputRequests"]
            assert parked["inputRequests"][key]["method"] == "elicitation/create"
            answer = {key: {"action": "accept", "content": {"confirm": True}}}
            await wire.result("tasks/update", {"taskId": asking["taskId"], "inputResponses": answer})
            confirmed = await wire.until(asking["taskId"], "completed")
            assert "deletion confirmed" in confirmed["result"]["content"][0]["text"]
            # cancelled: acknowledged, and the task says so
            slow = await wire.result("tools/call", {"name": "ref__slow_compute", "arguments": {"seconds": 30}})
            ack = await wire.result("tasks/cancel", {"taskId": slow["taskId"]})
            assert {k: v for k, v in ack.items() if k != "_meta"} == {"resultType": "complete"}  # an ack only
            assert (await wire.result("tasks/get", {"taskId": slow["taskId"]}))["status"] == "cancelled"


async def test_task_requests_the_gateway_did_not_issue_are_refused_as_the_backend_would() -> None:
    async with gateway(BACKENDS) as running, httpx.AsyncClient(timeout=30) as http:
        wire = Wire(http, running.url, DECLARING)
        with trio.fail_after(60):
            created = await wire.result("tools/call", {"name": "ref__slow_compute", "arguments": {"seconds": 0}})
            inner = Extensions(running.host).unwrap_task(created["taskId"])
            assert inner is not None
            for forged in (inner[1], Extensions.wrap_task("nobody", inner[1]), Extensions.wrap_task("other", inner[1])):
                refused = await wire.send("tasks/get", {"taskId": forged})
                assert refused["error"]["code"] == -32602, refused
            undeclared = await Wire(http, running.url, {}).send("tasks/get", {"taskId": created["taskId"]})
            assert undeclared["error"]["code"] == -32021
            assert undeclared["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
            # the Mcp-Name header must name the task the body names
            mismatched = await wire.send("tasks/get", {"taskId": created["taskId"]}, name="t.other")
            assert "error" in mismatched and "result" not in mismatched
            # a client that did not declare the extension gets no task, but the call's result
            plain = await Wire(http, running.url, {}).result(
                "tools/call", {"name": "ref__slow_compute", "arguments": {"seconds": 0}}
            )
            assert plain["content"] == [{"type": "text", "text": "slow_compute: done after 0 s"}]


async def test_skills_are_listed_page_by_page_across_backends_and_read_where_they_live() -> None:
    async with gateway({"ref": BACKENDS["ref"]}) as single, httpx.AsyncClient(timeout=30) as http:
        with trio.fail_after(60):
            alone = await _all_skills(Wire(http, single.url, {}))
    async with gateway(BACKENDS) as running, httpx.AsyncClient(timeout=30) as http:
        wire = Wire(http, running.url, {})
        with trio.fail_after(60):
            both = await _all_skills(wire)
            assert len(alone) > 1 and both == alone + alone  # one backend's pages, then the other's
            bad = await wire.send("skills/list", {"cursor": "not-a-cursor"})
            assert bad["error"]["code"] == -32602
            # the same skills on both backends: which one serves a URI is ambiguous, and said so
            uri = alone[0]["uri"]
            ambiguous = await wire.send("skills/get", {"uri": uri})
            assert ambiguous["error"]["code"] == -32602
            assert "several" in ambiguous["error"]["message"]
    async with gateway({"ref": BACKENDS["ref"]}) as single, httpx.AsyncClient(timeout=30) as http:
        wire = Wire(http, single.url, {})
        with trio.fail_after(60):
            entry = await wire.result("skills/get", {"uri": uri})
            assert entry["skill"]["uri"] == uri
            directory = uri.rsplit("/", 1)[0]
            listing = await wire.result("resources/directory/read", {"uri": directory})
            assert any(r["uri"] == uri for r in listing["resources"])


async def _all_skills(wire: Wire) -> list[dict[str, Any]]:
    skills: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    for _ in range(100):
        page = await wire.result("skills/list", params)
        skills += page["skills"]
        if "nextCursor" not in page:
            return skills
        params = {"cursor": page["nextCursor"]}
    raise AssertionError("skills/list never ended")


async def test_a_listen_stream_follows_its_tasks_on_their_backends() -> None:
    async with gateway(BACKENDS) as running, httpx.AsyncClient(timeout=30) as http:
        wire = Wire(http, running.url, DECLARING)
        with trio.fail_after(60):
            # refused as the backend would refuse it
            params = {"notifications": {"taskIds": ["t.x.y"], "toolsListChanged": True}}
            refused = await Wire(http, running.url, {}).send("subscriptions/listen", params)
            assert refused["error"]["code"] == -32021
            malformed = await wire.send("subscriptions/listen", {"notifications": {"taskIds": "t.x.y"}})
            assert malformed["error"]["code"] == -32602
            created = await wire.result("tools/call", {"name": "ref__confirm_delete", "arguments": {"filename": "g"}})
            task_id = created["taskId"]
            unknown = Extensions.wrap_task("other", "no-such-task")
            wanted = {"taskIds": [task_id, unknown, "t.x.y"], "toolsListChanged": True}
            meta = {"io.modelcontextprotocol/protocolVersion": MODERN, CAPS: DECLARING}
            body = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen"}
            body["params"] = {"notifications": wanted, "_meta": meta}
            headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}
            seen: list[dict[str, Any]] = []
            acknowledged, completed = trio.Event(), trio.Event()

            async def listen() -> None:
                async with http.stream("POST", running.url, json=body, headers=headers) as streamed:
                    async for line in streamed.aiter_lines():
                        if line.startswith("data:") and line.removeprefix("data:").strip():
                            seen.append(json.loads(line.removeprefix("data:")))
                            acknowledged.set()
                            if seen[-1].get("params", {}).get("status") == "completed":
                                completed.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(listen)
                await acknowledged.wait()
                ack = seen[0]
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                # the tasks the backends acknowledged, under the ids the client knows
                assert ack["params"]["notifications"] == {"toolsListChanged": True, "taskIds": [task_id]}
                parked = await wire.until(task_id, "input_required")
                [key] = parked["inputRequests"]
                answer = {key: {"action": "accept", "content": {"confirm": True}}}
                await wire.result("tasks/update", {"taskId": task_id, "inputResponses": answer})
                await completed.wait()
                nursery.cancel_scope.cancel()
            notes = [m["params"] for m in seen[1:] if m.get("method") == "notifications/tasks"]
            assert [n["status"] for n in notes][-2:] == ["working", "completed"]
            assert all(n["taskId"] == task_id for n in notes)
            assert all(n["_meta"] == {"io.modelcontextprotocol/subscriptionId": "listen-1"} for n in notes)
            # each a DetailedTask as tasks/get gives it
            polled = await wire.result("tasks/get", {"taskId": task_id})
            assert {k: v for k, v in polled.items() if k not in ("resultType", "_meta")} == {
                k: v for k, v in notes[-1].items() if k != "_meta"
            }
            assert "deletion confirmed" in notes[-1]["result"]["content"][0]["text"]
