"""``POST /api/v1/agent/runs`` in the service, for real: the service's HTTP server on a loopback port, a SQLite
store behind the host's approvals and audit, server-memory as the tools and a scripted provider.
The run's events come back as server-sent events; its approval of a destructive call is in the
service's queue (with the run's id) and a decision through ``POST /api/v1/approvals/{id}`` resumes
it. Bad requests are problems naming what was wrong."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from _agent_fake_llm import FakeLLM
from _agent_servers import memory_server
from _agent_wire import openai_request, openai_stream

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from _harness import running_service

from mcpwire.protocol.sse import SSEDecoder
from mcpwire.service.agent_runs import AGENT_RUNS_PATH, agent_routes

pytestmark = [pytest.mark.real, pytest.mark.slow]


@asynccontextmanager
async def _service(folder: Path, config: Path) -> AsyncIterator[httpx.AsyncClient]:
    url = f"sqlite:///{folder / 'service.db'}"
    async with running_service(url, config, routes=lambda host, store: agent_routes(host, config)) as running:
        yield running.client


def _config(folder: Path, llm: FakeLLM) -> Path:
    preset = {
        "provider": "openai",
        "model": "fake-model",
        "base_url": llm.base_url + "/v1",
        "servers": ["memory"],
    }
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"memory": memory_server(folder)}, "presets": {"mem": preset}}))
    return path


def _entities(folder: Path) -> set[str]:
    path = folder / "memory.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {r["name"] for r in map(json.loads, lines) if r.get("type") == "entity"}


async def test_a_run_streams_its_events_and_waits_for_a_decision_through_the_api(llm: FakeLLM, tmp_path: Path) -> None:
    ada = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["x"]}]}
    llm.add(
        openai_stream("", [("c1", "memory__create_entities", json.dumps(ada))]),
        openai_stream("", [("c2", "memory__delete_entities", '{"entityNames": ["Ada"]}')]),
        openai_stream("Ada came and went."),
    )
    events: list[tuple[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    async with _service(tmp_path, _config(tmp_path, llm)) as client:
        body = {"preset": "mem", "prompt": "Remember Ada, then forget her"}
        async with client.stream("POST", AGENT_RUNS_PATH, json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            decoder = SSEDecoder(1 << 20)
            async for chunk in response.aiter_bytes():
                for sse in decoder.feed(chunk):
                    data = json.loads(sse.data)
                    events.append((sse.event, data))
                    if sse.event != "approval_required":
                        continue
                    if data["tool"] == "delete_entities":
                        assert len(llm.requests) == 2 and _entities(tmp_path) == {"Ada"}  # paused
                        listed = (await client.get("/api/v1/approvals", params={"state": "pending"})).json()
                        assert [a["id"] for a in listed["items"]] == [data["approval_id"]]
                    # a CRITICAL call stays pending until its second confirmation
                    for _ in range(data["confirmations_needed"]):
                        decided = await client.post(
                            f"/api/v1/approvals/{data['approval_id']}", json={"decision": "approve"}
                        )
                        assert decided.status_code == 200, decided.text
                        decisions.append(decided.json())
        assert _entities(tmp_path) == set()
    names = [name for name, _ in events]
    assert names[0] == "run" and names[-2:] == ["final", "messages"]
    run_id = events[0][1]["run_id"]
    assert events[-2][1]["text"] == "Ada came and went." and events[-2][1]["run_id"] == run_id
    # creating (HIGH) was approved once and the CRITICAL delete twice, and the approvals name the run
    assert [(d["tool"], d["confirmations"], d["state"]) for d in decisions] == [
        ("create_entities", 1, "approved"),
        ("delete_entities", 1, "pending"),
        ("delete_entities", 2, "approved"),
    ]
    assert decisions[-1]["state"] == "approved" and decisions[-1]["context"]["run_id"] == run_id
    assert decisions[-1]["context"]["caller"] == "127.0.0.1"
    results = [data for name, data in events if name == "tool_result"]
    assert [(r["tool"], r["outcome"], r["approval"]) for r in results] == [
        ("create_entities", "ok", "approved"),
        ("delete_entities", "ok", "approved"),
    ]
    # the conversation to continue with, as the provider was sent it
    conversation = events[-1][1]
    assert [m["role"] for m in conversation] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    openai_request(llm.requests[2].json)


async def test_bad_requests_are_problems(llm: FakeLLM, tmp_path: Path) -> None:
    async with _service(tmp_path, _config(tmp_path, llm)) as client:
        unknown = await client.post(AGENT_RUNS_PATH, json={"preset": "nope", "prompt": "hi"})
        both = await client.post(AGENT_RUNS_PATH, json={"preset": "mem", "prompt": "hi", "messages": []})
        wrong = await client.post(AGENT_RUNS_PATH, json={"preset": "mem", "prompt": 3})
    assert (unknown.status_code, unknown.json()["detail"]) == (404, "no preset 'nope'; the presets are: mem")
    assert (both.status_code, both.json()["detail"]) == (422, "give either prompt or messages")
    assert wrong.status_code == 422
    assert wrong.json()["errors"] == [{"in": "body", "path": "$.prompt", "message": "Expected `str | null`, got `int`"}]
    assert wrong.headers["content-type"] == "application/problem+json"
    assert not llm.requests


async def test_a_run_chooses_its_servers_and_tools(llm: FakeLLM, tmp_path: Path) -> None:
    config = _config(tmp_path, llm)
    data = json.loads(config.read_text())
    data["mcpServers"]["other"] = memory_server(tmp_path / "other")
    data["presets"]["mem"]["servers"] = ["memory"]
    config.write_text(json.dumps(data))
    llm.add(openai_stream("One tool."), openai_stream("Two servers."))

    def offered(index: int) -> list[str]:
        return sorted(t["function"]["name"] for t in llm.requests[index].json.get("tools", []))

    async with _service(tmp_path, config) as client:
        body = {"preset": "mem", "prompt": "hi", "tools": ["memory__read_graph"]}
        async with client.stream("POST", AGENT_RUNS_PATH, json=body) as response:
            assert response.status_code == 200
            await response.aread()
        body = {"preset": "mem", "prompt": "hi", "servers": ["memory", "other"], "tools": ["*__read_graph"]}
        async with client.stream("POST", AGENT_RUNS_PATH, json=body) as response:
            assert response.status_code == 200
            await response.aread()
        unknown = await client.post(AGENT_RUNS_PATH, json={"preset": "mem", "prompt": "hi", "servers": ["nope"]})
    assert offered(0) == ["memory__read_graph"]
    assert offered(1) == ["memory__read_graph", "other__read_graph"]
    assert (unknown.status_code, unknown.json()["detail"]) == (404, "no server 'nope'; the servers are: memory, other")
    assert len(llm.requests) == 2
