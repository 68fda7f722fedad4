"""A request made for another client, against the reference server (``mcpwire.testing.everything``
over stdio, 2026-07-28): the relay's round gives the request the asker's capabilities, so a tool
call the server runs as a task comes back as :class:`TaskCreated` for the asker to follow, and a
listen stream naming tasks delivers their ``notifications/tasks``, for the tasks the server
acknowledged only. Task notifications are a 2026-07-28 extension: asked of a legacy server, they
are refused before anything is sent."""

from __future__ import annotations

import sys
from contextlib import aclosing

import pytest
import trio

import mcpwire
from mcpwire import LocalProtocolError, StdioServer
from mcpwire.client.relay import Relay, RelayedRound, TaskCreated

TASKS = "io.modelcontextprotocol/tasks"
CAPS = "io.modelcontextprotocol/clientCapabilities"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def reference() -> StdioServer:
    return StdioServer(command=sys.executable, args=("-u", "-m", "mcpwire.testing.everything"), name="ref")


async def test_a_relayed_listen_follows_the_tasks_the_server_acknowledged() -> None:
    relay = Relay(round=RelayedRound(meta={CAPS: {"extensions": {TASKS: {}}}}))
    with trio.fail_after(30):
        async with mcpwire.open_client(reference(), era="modern", era_cache=False) as client:
            with pytest.raises(TaskCreated) as created:
                await client.call_tool("slow_compute", {"seconds": 30}, relay=relay)
            task_id = created.value.result["taskId"]
            assert isinstance(task_id, str)
            async with client.subscribe(task_ids=[task_id, "no-such-task"], relay=relay) as sub:
                assert sub.acknowledged == {"taskIds": [task_id]}
                async with aclosing(sub.__aiter__()) as notes:
                    await client.request("tasks/cancel", {"taskId": task_id}, relay=relay)
                    note = await notes.__anext__()
    assert note.method == "notifications/tasks"
    assert (note.params["taskId"], note.params["status"]) == (task_id, "cancelled")
    assert note.params["_meta"] == {SUBSCRIPTION_ID: sub.id}


async def test_task_notifications_are_refused_for_a_legacy_server() -> None:
    with trio.fail_after(30):
        async with mcpwire.open_client(reference(), era="legacy", era_cache=False) as client:
            sent = client.statistics().requests_sent
            with pytest.raises(LocalProtocolError) as info:
                async with client.subscribe(task_ids=["t"]):
                    pass
            assert client.statistics().requests_sent == sent
    assert str(info.value) == (
        "cannot follow tasks on server 'ref': task notifications are a 2026-07-28 extension and the "
        "server speaks an earlier revision"
    )
