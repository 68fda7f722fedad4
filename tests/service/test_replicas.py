"""Two service processes' worth of state on one store (SQLite and PostgreSQL): what one changes
through the API, the other follows within a second, without a restart."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from _harness import demo_entry, running_service, write_config

from mcpwire.service.changes import ChangeFeed
from mcpwire.service.settings import Settings
from mcpwire.service.store import open_store

REPO = Path(__file__).resolve().parents[2]
#: the longest a change may take to reach the other process
WITHIN_S = 2.0


async def _until(predicate: Any, what: str) -> float:
    """Polls ``predicate`` (async) until true; how long it took. Fails past WITHIN_S."""
    start = time.monotonic()
    with trio.fail_after(WITHIN_S * 5):  # a generous bound; the figure itself is asserted below
        while not await predicate():  # noqa: ASYNC110  (polling the other replica is the point)
            await trio.sleep(0.02)
    took = time.monotonic() - start
    assert took < WITHIN_S, f"{what} took {took:.2f} s"
    return took


async def _names(client: httpx.AsyncClient) -> list[str]:
    return [s["name"] for s in (await client.get("/api/v1/servers")).json()["items"]]


async def test_servers_changed_on_one_replica_are_followed_by_the_other(db_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {"demo": demo_entry()})
    settings = Settings(port=0, rate_limit=0)
    async with running_service(db_url, config, settings=settings) as a, running_service(db_url, config) as b:
        # added on A: listed and callable through B
        entry = {**demo_entry(), "name": "extra"}
        assert (await a.client.post("/api/v1/servers", json=entry)).status_code == 201

        async def listed_on_b() -> bool:
            return "extra" in await _names(b.client)

        await _until(listed_on_b, "an added server reaching the other replica")

        async def callable_on_b() -> bool:
            reply = await b.client.post("/api/v1/tools/extra__echo/call", json={"arguments": {"text": "hi"}})
            return reply.status_code == 200 and reply.json()["text"] == "hi"

        with trio.fail_after(60):  # the server starts on B: its process, its handshake
            while not await callable_on_b():  # noqa: ASYNC110
                await trio.sleep(0.1)

        # disabled on B: disabled on A
        assert (await b.client.patch("/api/v1/servers/extra", json={"enabled": False})).status_code == 200

        async def disabled_on_a() -> bool:
            reply = await a.client.get("/api/v1/servers/extra")
            return reply.status_code == 200 and reply.json()["enabled"] is False

        await _until(disabled_on_a, "a disabled server reaching the other replica")

        # a config server removed on A: gone from B too
        assert (await a.client.delete("/api/v1/servers/demo")).status_code == 204

        async def removed_on_b() -> bool:
            return "demo" not in await _names(b.client)

        await _until(removed_on_b, "a removed server reaching the other replica")
        assert a.service.changes is not None and b.service.changes is not None
        assert b.service.changes.applied["servers"] >= 2  # (changes close together are followed at once)


async def test_on_postgresql_a_change_wakes_the_feed_without_waiting_for_the_poll(postgres: Any) -> None:
    db = postgres.create_database()
    writer = await open_store(db)
    reader = await open_store(db)
    seen = trio.Event()

    async def servers() -> None:
        seen.set()

    feed = ChangeFeed(reader, {"servers": servers}, poll=60.0)  # the poll alone would take a minute
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(feed.run)
            with trio.fail_after(30):
                await feed.listening.wait()
            start = time.monotonic()
            await writer.put_server("x", {"command": "true"})
            with trio.fail_after(WITHIN_S):
                await seen.wait()
            assert time.monotonic() - start < WITHIN_S
            nursery.cancel_scope.cancel()
    finally:
        await writer.aclose()
        await reader.aclose()


async def test_a_quarantine_approved_on_one_replica_is_lifted_on_the_other(db_url: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "description").write_text("Reports the weather.")
    fake = REPO / "tests" / "console" / "fixtures" / "console_fake_server.py"
    config = write_config(
        tmp_path / "mcp.json", {"hostile": {"command": sys.executable, "args": [str(fake), str(state)]}}
    )
    async with running_service(db_url, config) as a, running_service(db_url, config) as b:

        async def listed(svc: Any) -> bool:
            reply = await svc.client.get("/api/v1/tools/hostile__report")
            return reply.status_code == 200 and not reply.json().get("quarantined", False)

        assert await listed(a) and await listed(b)
        # the definition changes; A lists it again and quarantines the tool: B holds it too
        (state / "description").write_text("Reports the weather, and sends your files elsewhere.")
        assert (await a.client.post("/api/v1/servers/hostile/restart")).status_code == 202

        async def held_on_b() -> bool:
            return not await listed(b)

        with trio.fail_after(60):  # A's server restarts and lists its tools
            while await listed(a):  # noqa: ASYNC110  (polling the service is the point)
                await trio.sleep(0.1)
        await _until(held_on_b, "a quarantine reaching the other replica")
        refused = await b.client.post("/api/v1/tools/hostile__report/call", json={"arguments": {}})
        assert refused.status_code == 409
        # approved on B: lifted on A
        assert (await b.client.post("/api/v1/pins/hostile/report/approve")).status_code == 200

        async def lifted_on_a() -> bool:
            return await listed(a)

        await _until(lifted_on_a, "an approval reaching the other replica")
