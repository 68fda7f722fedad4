"""The gateway in front of real servers (server-everything, server-memory, mcp-server-time, the Go
mcp-cron, mcpwire's reference server), with mcpwire's client over Streamable HTTP in both eras:
namespaced lists and calls, prompts and resources, progress, namespacing off, the host's
policies (audit context, cache), and list changes reaching connected clients."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from _gateway import MODERN, cron, everything, gateway, memory, reference, time_server

import mcpwire
from mcpwire.host.policies import AuditRecord
from mcpwire.protocol.versions import Era

pytestmark = [pytest.mark.real, pytest.mark.slow]
ERAS = [Era.LEGACY, Era.MODERN]


async def _client(url: str, era: Era, **options: Any) -> Any:
    return mcpwire.open_client(url, era=era.value, era_cache=False, **options)


@pytest.mark.parametrize("era", ERAS, ids=lambda e: e.value)
async def test_namespaced_tools_of_four_real_servers_are_listed_and_called(era: Era, tmp_path: Path) -> None:
    servers = {"everything": everything(), "memory": memory(), "time": time_server(), "cron": cron(tmp_path)}
    # the host's approval policy applies to gateway calls: without a rule, writing to memory needs
    # an approval that nobody here could give
    async with gateway(servers, approval_rules=[("memory", "*", "allow")]) as running:
        with trio.fail_after(60):
            async with await _client(running.url, era) as client:
                assert client.era is era
                names = {t.name for t in await client.list_tools()}
                expected = {t.name for t in running.host.tools()}
                assert names == expected
                assert {"everything__echo", "memory__create_entities", "time__get_current_time"} <= names
                assert any(n.startswith("cron__") for n in names)
                echo = await client.call_tool("everything__echo", {"message": "through the gateway"})
                assert echo.text() == "Echo: through the gateway"
                now = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
                assert json.loads(now.text())["timezone"] == "UTC"
                entities = [{"name": "gateway", "entityType": "service", "observations": ["it forwards"]}]
                created = await client.call_tool("memory__create_entities", {"entities": entities})
                assert not created.is_error, created.text()
                graph = await client.call_tool("memory__read_graph", {})
                assert "it forwards" in graph.text()
                with pytest.raises(mcpwire.RPCError) as refused:
                    await client.call_tool("nobody__nothing", {})
                assert refused.value.code == -32602


@pytest.mark.parametrize("era", ERAS, ids=lambda e: e.value)
async def test_prompts_resources_progress_and_the_call_context_of_the_audit(era: Era) -> None:
    records: list[AuditRecord] = []

    class Sink:
        def write(self, record: AuditRecord) -> None:
            records.append(record)

    async with gateway({"ref": reference(), "everything": everything()}, audit=Sink()) as running:
        with trio.fail_after(60):
            async with await _client(running.url, era) as client:
                prompts = {p.name for p in await client.list_prompts()}
                assert {"ref__test_simple_prompt", "ref__greet"} <= prompts
                got = await client.get_prompt("ref__greet", {"name": "Ada"})
                assert got.messages[0].content["text"] == "Hello, Ada!"
                resources = {r.uri for r in await client.list_resources()}
                assert "test://static-text" in resources
                read = await client.read_resource("test://static-text")
                assert read.contents[0].text == "This is the content of the static text resource."  # type: ignore[union-attr]
                # a templated URI reaches the server whose template matches it
                templated = await client.read_resource("test://template/42/data")
                assert json.loads(templated.contents[0].text)["id"] == "42"  # type: ignore[union-attr]
                seen: list[Any] = []
                slow = await client.call_tool(
                    "ref__slow", {"seconds": 0.2, "steps": 2, "x": era.value}, on_progress=seen.append
                )
                assert slow.text() == "done after 2 steps"
                assert [p.progress for p in seen] == [1, 2]
    called = [r for r in records if r.tool == "slow"]
    assert called, records
    assert called[0].caller == "mcp (mcpwire)"


async def test_namespacing_off_is_a_pure_proxy_of_one_backend() -> None:
    async with gateway({"ref": reference()}, namespacing=False) as running:
        with trio.fail_after(60):
            async with await _client(running.url, Era.MODERN) as client:
                names = {t.name for t in await client.list_tools()}
                assert {"echo", "test_simple_text", "test_header_param"} <= names
                # 2026-07-28: the client mirrors x-mcp-header arguments; the gateway checks them
                assert (await client.call_tool("test_header_param", {"region": "eu west"})).text() == "region: eu west"
                assert (await client.get_prompt("test_simple_prompt")).messages[0].content["text"] == (
                    "This is a simple prompt for testing."
                )
                done = await client.complete({"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "arg1", "pa")
                assert done.values == ["paris", "park", "party"]


async def test_a_backends_list_change_reaches_connected_clients_of_both_eras() -> None:
    async with gateway({"ref": reference()}) as running:
        with trio.fail_after(60):
            async with (
                await _client(running.url, Era.LEGACY) as legacy,
                await _client(running.url, Era.MODERN) as modern,
                modern.subscribe(tools_list_changed=True),
            ):
                await legacy.call_tool("ref__notify", {})  # the backend announces a tools list change

                async def first(client: Any) -> None:
                    async for note in client.notifications():
                        if note.method == "notifications/tools/list_changed":
                            return

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(first, legacy)
                    nursery.start_soon(first, modern)


async def test_the_gateway_speaks_2026_07_28_statelessly_on_the_wire() -> None:
    import httpx

    async with gateway({"ref": reference()}) as running, httpx.AsyncClient(timeout=30) as http:
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
        headers = {
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "server/discover",
            "Accept": "application/json, text/event-stream",
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
        reply = await http.post(running.url, json=body, headers=headers)
        result = reply.json()["result"]
        assert result["supportedVersions"] == [MODERN]
        assert set(result["capabilities"]) >= {"tools", "prompts", "resources"}
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcpwire-gateway"
