"""Conversations of ``POST /api/v1/agent/runs`` in the service's store, for real: the service's HTTP server on a
loopback port, a store on SQLite and on PostgreSQL, server-memory as the tools and a scripted provider. A run keeps its
conversation (messages, preset, run ids, outcome); a later run continues it by id, the provider
being sent the stored messages then the new prompt; ``GET /api/v1/agent/conversations`` lists and
shows them; a closed stream leaves a ``cancelled`` conversation."""

from __future__ import annotations

import dataclasses
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
from _agent_wire import openai_stream

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from _harness import running_service

from mcpwire.protocol.sse import SSEDecoder
from mcpwire.service.agent_conversations import CONVERSATIONS_PATH
from mcpwire.service.agent_runs import AGENT_RUNS_PATH, agent_routes
from mcpwire.service.store import Store

pytestmark = [pytest.mark.real, pytest.mark.slow]


@asynccontextmanager
async def _service(
    folder: Path, llm: FakeLLM, db_url: str | None = None
) -> AsyncIterator[tuple[httpx.AsyncClient, Store]]:
    preset = {"provider": "openai", "model": "fake-model", "base_url": llm.base_url + "/v1", "servers": ["memory"]}
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"memory": memory_server(folder)}, "presets": {"mem": preset}}))
    url = db_url or f"sqlite:///{folder / 'service.db'}"
    async with running_service(url, config, routes=lambda host, store: agent_routes(host, config, store)) as running:
        yield running.client, running.store


async def _run(client: httpx.AsyncClient, body: dict[str, Any]) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    async with client.stream("POST", AGENT_RUNS_PATH, json=body) as response:
        assert response.status_code == 200, await response.aread()
        decoder = SSEDecoder(1 << 20)
        async for chunk in response.aiter_bytes():
            events.extend((sse.event, json.loads(sse.data)) for sse in decoder.feed(chunk))
    return events


def _texts(request_json: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m["role"], m.get("content")) for m in request_json["messages"] if m["role"] in ("user", "assistant")]


async def test_a_run_keeps_its_conversation_and_a_later_run_continues_it(
    llm: FakeLLM, tmp_path: Path, db_url: str
) -> None:
    llm.add(
        openai_stream("", [("c1", "memory__read_graph", "{}")]),
        openai_stream("The graph is empty."),
        openai_stream("Still empty, Ada."),
    )
    async with _service(tmp_path, llm, db_url) as (client, store):
        first = await _run(client, {"preset": "mem", "prompt": "What do you remember?"})
        head = first[0][1]
        assert first[0][0] == "run" and head["conversation_id"].startswith("conv_")
        conversation_id = head["conversation_id"]
        listed = (await client.get(CONVERSATIONS_PATH)).json()["items"]
        assert [(c["id"], c["title"], c["preset"], c["outcome"], c["run_id"], c["runs"]) for c in listed] == [
            (conversation_id, "What do you remember?", "mem", "final", head["run_id"], 1)
        ]
        shown = (await client.get(f"{CONVERSATIONS_PATH}/{conversation_id}")).json()
        assert [m["role"] for m in shown["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert shown["messages"] == first[-1][1]  # what the run's ``messages`` event gave
        assert [r["outcome"] for r in shown["runs"]] == ["final"]

        second = await _run(client, {"preset": "mem", "prompt": "I am Ada.", "conversation": conversation_id})
        assert second[0][1]["conversation_id"] == conversation_id and second[0][1]["run_id"] != head["run_id"]
        assert second[-2][0] == "final" and second[-2][1]["text"] == "Still empty, Ada."
        # the provider was sent the stored conversation, then the new prompt
        assert _texts(llm.requests[2].json) == [
            ("user", "What do you remember?"),
            ("assistant", None),  # the read_graph call
            ("assistant", "The graph is empty."),
            ("user", "I am Ada."),
        ]
        shown = (await client.get(f"{CONVERSATIONS_PATH}/{conversation_id}")).json()
        assert [m["role"] for m in shown["messages"]] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
        assert [r["run_id"] for r in shown["runs"]] == [head["run_id"], second[0][1]["run_id"]]
        assert (shown["outcome"], shown["runs"][-1]["outcome"], shown["title"]) == (
            "final",
            "final",
            "What do you remember?",
        )
        rows = await store.messages(conversation_id)
        assert [r.seq for r in rows] == [1, 2, 3, 4, 5, 6]


async def test_a_failed_run_is_kept_failed(llm: FakeLLM, tmp_path: Path) -> None:
    # no scripted reply: the provider answers an error and the run fails
    async with _service(tmp_path, llm) as (client, _):
        events = await _run(client, {"preset": "mem", "prompt": "hello"})
        assert events[-1][0] == "failed"
        listed = (await client.get(CONVERSATIONS_PATH)).json()["items"]
        shown = (await client.get(f"{CONVERSATIONS_PATH}/{listed[0]['id']}")).json()
    assert (shown["outcome"], shown["runs"][0]["outcome"]) == ("failed", "failed")
    assert shown["runs"][0]["reason"] == events[-1][1]["reason"]
    assert [m["role"] for m in shown["messages"]] == ["user"]


async def test_bad_conversation_requests_are_problems(llm: FakeLLM, tmp_path: Path) -> None:
    async with _service(tmp_path, llm) as (client, _):
        unknown = await client.post(AGENT_RUNS_PATH, json={"preset": "mem", "prompt": "hi", "conversation": "conv_x"})
        with_messages = await client.post(AGENT_RUNS_PATH, json={"preset": "mem", "messages": [], "conversation": "c"})
        missing = await client.get(f"{CONVERSATIONS_PATH}/conv_nope")
        limit = await client.get(CONVERSATIONS_PATH, params={"limit": "0"})
        empty = await client.get(CONVERSATIONS_PATH)
    assert (unknown.status_code, unknown.json()["detail"]) == (404, "no conversation 'conv_x'")
    assert (with_messages.status_code, with_messages.json()["detail"]) == (
        422,
        "continue a conversation with a prompt, not messages",
    )
    assert (missing.status_code, missing.json()["detail"]) == (404, "no conversation 'conv_nope'")
    assert missing.headers["content-type"] == "application/problem+json"
    assert (limit.status_code, limit.json()["errors"]) == (
        422,
        [{"in": "query", "path": "limit", "message": "Expected `int` >= 1"}],
    )
    assert empty.json() == {"items": []}


async def test_one_conversation_is_continued_by_one_run_at_a_time(llm: FakeLLM, tmp_path: Path) -> None:
    """A second run continuing a conversation while a run holds it (a new one's id included) is
    refused with a problem naming it, instead of both appending to it; once the run is over, the
    conversation can be continued."""
    slow = dataclasses.replace(openai_stream("Thinking slowly."), pause=0.5)  # the run lasts seconds
    llm.add(slow, openai_stream("Next."))
    async with _service(tmp_path, llm) as (client, store):
        async with client.stream("POST", AGENT_RUNS_PATH, json={"preset": "mem", "prompt": "first"}) as first:
            decoder = SSEDecoder(1 << 20)
            head: dict[str, Any] = {}
            chunks = first.aiter_bytes()
            async for chunk in chunks:
                events = decoder.feed(chunk)
                if events:
                    head = json.loads(events[0].data)
                    break
            conversation_id = head["conversation_id"]
            busy = await client.post(
                AGENT_RUNS_PATH, json={"preset": "mem", "prompt": "second", "conversation": conversation_id}
            )
            assert busy.status_code == 409 and busy.headers["content-type"] == "application/problem+json"
            assert busy.json()["detail"] == (
                f"a run is continuing conversation {conversation_id!r}; send the next message when it ends"
            )
            async for _ in chunks:  # the first run to its end
                pass
        later = await _run(client, {"preset": "mem", "prompt": "third", "conversation": conversation_id})
        assert later[-2] == ("final", later[-2][1]) and later[-2][1]["text"] == "Next."
        rows = await store.messages(conversation_id)
    assert [r.role for r in rows] == ["user", "assistant", "user", "assistant"]
