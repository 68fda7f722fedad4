"""An approval lives only as long as its caller: clients nobody here wrote (the official MCP
Python SDK, in both eras and on both stores; the TypeScript SDK, which sends no cancellation the
gateway hears) give up on a call that waits for a decision; the approval ends abandoned, cannot be
approved, and the backend (server-memory) never receives the call. A client that vanishes without
a word is given the grace, one that resumes its stream within it keeps its approval, and a client
that declares elicitation is never asked to approve its own call."""

from __future__ import annotations

import functools
import json
import shutil
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _gateway import FIXTURES, NPM_BIN, PY_BIN, require
from _harness import Running, running_service, write_config

from mcpwire.service.settings import Settings

pytestmark = [pytest.mark.real, pytest.mark.slow]

LEGACY = "2025-11-25"
ENTITY = "Tarragon"
CREATE = {"entities": [{"name": ENTITY, "entityType": "herb", "observations": ["grows in the garden"]}]}


def _config(tmp_path: Path) -> Path:
    memory = {
        "command": require(NPM_BIN / "mcp-server-memory"),
        "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        "policy": {"tools": {"create_entities": {"approval": "ask"}}},
    }
    return write_config(tmp_path / "mcp.json", {"memory": memory})


async def _approvals(svc: Running, state: str) -> list[dict[str, Any]]:
    reply = await svc.client.get("/api/v1/approvals", params={"state": state})
    assert reply.status_code == 200, reply.text
    items: list[dict[str, Any]] = reply.json()["items"]
    return items


async def _one(svc: Running, state: str) -> dict[str, Any]:
    """The one approval in ``state``, once there is one."""
    with trio.fail_after(30):
        while not (items := await _approvals(svc, state)):  # noqa: ASYNC110 - the API under test, polled as a client would
            await trio.sleep(0.05)
    [approval] = items
    return approval


async def _never_received(svc: Running) -> None:
    """The backend's own graph: the entity the abandoned call would have created is not there."""
    reply = await svc.client.post("/api/v1/tools/memory__read_graph/call", json={"arguments": {}})
    assert reply.status_code == 200, reply.text
    assert reply.json()["approval"] == "allow"
    assert ENTITY not in reply.json()["text"]
    assert "entities" in reply.json()["text"]  # an answer from the server, only without the entity


async def _refused(svc: Running, approval: dict[str, Any]) -> str:
    reply = await svc.client.post(f"/api/v1/approvals/{approval['id']}", json={"decision": "approve"})
    assert reply.status_code == 409, reply.text
    detail: str = reply.json()["detail"]
    return detail


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_official_client_that_gives_up_leaves_an_abandoned_approval(
    db_url: str, tmp_path: Path, mode: str
) -> None:
    python = require(PY_BIN / "python")
    async with running_service(db_url, _config(tmp_path)) as svc:
        argv = [python, str(FIXTURES / "sdk_patient.py"), f"{svc.url}/mcp", mode, "memory__create_entities"]
        argv += [json.dumps(CREATE), "3", "elicit"]
        with trio.fail_after(120):
            done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        out = json.loads(done.stdout.decode().strip().splitlines()[-1])
        # the client gave up after its own 3 s, and was never asked to approve its own call
        assert (out["outcome"], out["elicited"]) == ("timeout", 0), out
        approval = await _one(svc, "abandoned")
        assert (approval["name"], approval["decidedBy"], approval["decidedVia"]) == (
            "memory__create_entities",
            None,
            None,
        )
        expected = {
            "legacy": "the client cancelled the request (notifications/cancelled)",
            "2026-07-28": "the client closed the request's stream (in 2026-07-28 that cancels the request)",
        }
        assert approval["reason"] == expected[mode]
        assert await _approvals(svc, "pending") == []
        detail = await _refused(svc, approval)
        assert detail.startswith(f"approval {approval['id']} was abandoned at ")
        assert detail.endswith(f"its caller went away ({expected[mode]}); nobody waits for the result, so the call "
                               "cannot run")  # fmt: skip
        await _never_received(svc)
        # the store keeps it so: a fresh read of the row, not the queue's memory
        row = await svc.store.approval(approval["id"])
        assert row is not None and (row.state, row.data["state"]) == ("abandoned", "abandoned")


async def test_the_official_typescript_client_that_gives_up_leaves_an_abandoned_approval(tmp_path: Path) -> None:
    """The client of the first report: the TypeScript SDK (1.x, a 2025-11-25 session) times out
    after its own 3 s, closes its transport and exits, without a cancellation the gateway hears:
    its approval is abandoned once the grace (2 s here) is over."""
    sdk = require(NPM_BIN.parent / "@modelcontextprotocol" / "sdk")
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    db = f"sqlite:///{tmp_path / 'service.db'}"
    settings = Settings(port=0, rate_limit=0, caller_grace=2.0)
    async with running_service(db, _config(tmp_path), settings=settings) as svc:
        argv = [node, str(FIXTURES / "ts_patient.mjs"), sdk, f"{svc.url}/mcp", "memory__create_entities"]
        argv += [json.dumps(CREATE), "3000"]
        with trio.fail_after(120):
            done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        out = json.loads(done.stdout.decode().strip().splitlines()[-1])
        assert (out["outcome"], out["elicited"]) == ("timeout", 0), out
        approval = await _one(svc, "abandoned")
        assert approval["name"] == "memory__create_entities", approval
        # it sent no cancellation: its connection closed, and it did not come back within the grace
        assert approval["reason"] == "the client's connection closed and it did not resume the call's stream within 2 s"
        assert approval["decidedAt"] - approval["callerAwaySince"] >= 2.0
        assert "was abandoned" in await _refused(svc, approval)
        await _never_received(svc)


async def test_a_client_that_vanishes_is_given_the_grace_then_its_approval_is_abandoned(tmp_path: Path) -> None:
    python = require(PY_BIN / "python")
    settings = Settings(port=0, rate_limit=0, caller_grace=2.0)
    db = f"sqlite:///{tmp_path / 'service.db'}"
    async with running_service(db, _config(tmp_path), settings=settings) as svc:
        argv = [python, "-u", str(FIXTURES / "sdk_patient.py"), f"{svc.url}/mcp", "legacy", "memory__create_entities"]
        argv += [json.dumps(CREATE), "600"]
        async with trio.open_nursery() as nursery:
            process = await nursery.start(functools.partial(trio.run_process, argv, check=False))
            waiting = await _one(svc, "pending")
            assert (waiting["callerPresent"], waiting["callerAwaySince"]) == (True, None)
            process.send_signal(signal.SIGKILL)  # gone without a word: no cancellation, no DELETE
        with trio.fail_after(30):
            while (current := (await svc.client.get(f"/api/v1/approvals/{waiting['id']}")).json())["callerPresent"]:  # noqa: ASYNC110 - the API under test, polled as a client would
                await trio.sleep(0.05)
        assert current["state"] == "pending" and current["callerAwaySince"] is not None  # away, within its grace
        approval = await _one(svc, "abandoned")
        assert approval["id"] == waiting["id"]
        assert approval["reason"] == "the client's connection closed and it did not resume the call's stream within 2 s"
        assert approval["decidedAt"] - approval["callerAwaySince"] >= 2.0
        assert "was abandoned" in await _refused(svc, approval)
        await _never_received(svc)


async def _sse_events(response: httpx.Response, stop: Any) -> list[tuple[str | None, str]]:
    """The (id, data) of the SSE events of ``response`` until ``stop(events)`` says enough."""
    events: list[tuple[str | None, str]] = []
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and (event_id is not None or data):
            events.append((event_id, "\n".join(data)))
            event_id, data = None, []
            if stop(events):
                break
    return events


async def test_a_client_that_resumes_within_the_grace_keeps_its_approval(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'service.db'}"
    async with running_service(db, _config(tmp_path)) as svc, httpx.AsyncClient(timeout=30) as http:
        mcp = f"{svc.url}/mcp"
        accept = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": LEGACY}
        init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "resumer", "version": "1"}}
        opened = await http.post(mcp, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                                 headers=accept)  # fmt: skip
        session = {**accept, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        await http.post(mcp, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        call = {"name": "memory__create_entities", "arguments": CREATE}
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
        # the call waits for a decision; its stream starts (priming event), then the client drops it
        async with http.stream("POST", mcp, json=body, headers=session) as response:
            primed = await _sse_events(response, lambda events: bool(events))
        last_id = primed[-1][0]
        assert last_id is not None
        with trio.fail_after(30):
            while (away := await _one(svc, "pending"))["callerPresent"]:  # noqa: ASYNC110 - the API under test, polled as a client would
                await trio.sleep(0.05)
        assert away["callerAwaySince"] is not None
        # it comes back within the grace: its approval is waiting for it again, and is approved
        resumed: list[tuple[str | None, str]] = []
        async with trio.open_nursery() as nursery:

            async def resume() -> None:
                headers = {**session, "Accept": "text/event-stream", "Last-Event-ID": last_id}
                async with http.stream("GET", mcp, headers=headers) as response:
                    assert response.status_code == 200
                    resumed.extend(await _sse_events(response, lambda events: '"id":2' in events[-1][1]))

            nursery.start_soon(resume)
            with trio.fail_after(30):
                while not (back := await _one(svc, "pending"))["callerPresent"]:  # noqa: ASYNC110 - the API under test, polled as a client would
                    await trio.sleep(0.05)
            assert back["callerAwaySince"] is None
            decided = await svc.client.post(f"/api/v1/approvals/{back['id']}", json={"decision": "approve"})
            assert decided.status_code == 200 and decided.json()["state"] == "approved", decided.text
        answer = json.loads(resumed[-1][1])
        assert answer["id"] == 2 and not answer["result"].get("isError"), answer
        graph = await svc.client.post("/api/v1/tools/memory__read_graph/call", json={"arguments": {}})
        assert ENTITY in graph.json()["text"]  # this time the backend got it
