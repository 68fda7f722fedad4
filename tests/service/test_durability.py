"""What the service acknowledged survives it: SIGKILL during a burst of audited calls and approval
decisions, then every acknowledged record is found after a restart (SQLite and PostgreSQL); and
two replicas on one PostgreSQL share approvals (a decision on one releases a call waiting on the
other)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _harness import demo_entry, running_service, write_config
from _process import READY_LINE, ServeProcess, clean_env, start_serve

#: the burst runs this long before the kill
BURST_SECONDS = 2.5


TOKEN = "durability-admin-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def asking_config(tmp_path: Path) -> Path:
    entry = {**demo_entry(), "policy": {"tools": {"add": {"approval": "ask"}}}}
    return write_config(tmp_path / "mcp.json", {"demo": entry})


def start(tmp_path: Path, config: Path, db: str) -> ServeProcess:
    serve = start_serve(
        ["--config", str(config), "--port", "0", "--db", db, "--rate-limit", "0"],
        cwd=tmp_path,
        env=clean_env(tmp_path, MCPWIRE_TOKEN=TOKEN),
    )
    serve.read_until(READY_LINE, timeout=120)
    return serve


async def _burst(url: str, acked_calls: set[str], acked_decisions: dict[str, str]) -> None:
    """Echo calls and add-calls with their approvals, from 16 clients, until cancelled."""
    limits = httpx.Limits(max_connections=32)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits, headers=AUTH) as client:

        async def echo_loop(worker: int) -> None:
            n = 0
            while True:
                trace = f"echo-{worker}-{n}"
                n += 1
                reply = await client.post(
                    "/api/v1/tools/demo__echo/call", json={"arguments": {"text": trace}}, headers={"X-Trace-ID": trace}
                )
                if reply.status_code == 200:
                    acked_calls.add(trace)

        async def approval_loop(worker: int) -> None:
            n = 0
            while True:
                n += 1
                reply = await client.post("/api/v1/tools/demo__add/call", json={"arguments": {"a": worker, "b": n}})
                if reply.status_code != 202:
                    continue
                approval_id = reply.json()["approvalId"]
                approve = n % 2 == 0
                decided = await client.post(
                    f"/api/v1/approvals/{approval_id}", json={"decision": "approve" if approve else "deny"}
                )
                if decided.status_code == 200:
                    acked_decisions[approval_id] = decided.json()["state"]

        async with trio.open_nursery() as nursery:
            for worker in range(12):
                nursery.start_soon(echo_loop, worker)
            for worker in range(4):
                nursery.start_soon(approval_loop, worker)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_sigkill_during_a_burst_loses_nothing_acknowledged(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        db = f"sqlite:///{tmp_path / 'service.db'}"
    else:
        db = request.getfixturevalue("postgres").create_database()
    config = asking_config(tmp_path)
    serve = start(tmp_path, config, db)
    acked_calls: set[str] = set()
    acked_decisions: dict[str, str] = {}
    try:
        with trio.move_on_after(BURST_SECONDS):
            await _burst(serve.url, acked_calls, acked_decisions)
        serve.proc.send_signal(signal.SIGKILL)  # while the burst's requests are still in flight
        assert serve.proc.wait(10) == -signal.SIGKILL
    finally:
        serve.kill()
    assert len(acked_calls) > 20 and len(acked_decisions) > 1, (len(acked_calls), len(acked_decisions))

    async with running_service(db, config) as svc:
        records = await _all_audit(svc.client)
        traces = {r["traceId"] for r in records if r["kind"] == "tool" and r["tool"] == "echo"}
        missing = acked_calls - traces
        assert not missing, f"{len(missing)} acknowledged calls have no audit record: {sorted(missing)[:5]}"
        decisions = {r["record"]["approval_id"]: r["outcome"] for r in records if r["kind"] == "approval"}
        for approval_id, state in acked_decisions.items():
            stored = (await svc.client.get(f"/api/v1/approvals/{approval_id}")).json()
            assert stored["state"] == state, (approval_id, stored)
            assert decisions.get(approval_id) == state, (
                f"no audit record of the decision on {approval_id}",
                [r for r in records if r.get("record", {}).get("approval_id") == approval_id],
            )


async def _all_audit(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    cursor: int | None = None
    while True:
        params: dict[str, Any] = {"limit": 500}
        if cursor is not None:
            params["cursor"] = cursor
        page = (await client.get("/api/v1/audit", params=params)).json()
        records += page["items"]
        cursor = page["nextCursor"]
        if cursor is None:
            return records


@pytest.mark.slow
async def test_two_replicas_share_approvals_through_postgresql(tmp_path: Path, postgres: Any) -> None:
    db = postgres.create_database()
    config = asking_config(tmp_path)
    first = start(tmp_path, config, db)
    second = start(tmp_path, config, db)
    try:
        async with (
            httpx.AsyncClient(base_url=first.url, timeout=30, headers=AUTH) as a,
            httpx.AsyncClient(base_url=second.url, timeout=30, headers=AUTH) as b,
        ):
            accepted = await a.post("/api/v1/tools/demo__add/call", json={"arguments": {"a": 20, "b": 22}})
            assert accepted.status_code == 202, accepted.text
            location = accepted.json()["location"]
            # the other replica sees the approval the first one opened
            pending = (await b.get("/api/v1/approvals", params={"state": "pending"})).json()["items"]
            assert [p["id"] for p in pending] == [accepted.json()["approvalId"]]
            released: dict[str, Any] = {}

            async def wait_on_first() -> None:
                reply = await a.get(location, params={"wait": 30})
                released["at"] = trio.current_time()
                released["body"] = reply.json()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait_on_first)
                await trio.sleep(0.5)
                decided_at = trio.current_time()
                decided = await b.post(location, json={"decision": "approve", "reason": "from the other replica"})
                assert decided.status_code == 200 and decided.json()["state"] == "approved"
            body = released["body"]
            assert body["state"] == "approved" and body["result"]["structuredContent"] == {"sum": 42}
            # released within the poll interval (0.5 s) plus the call itself, not at a timeout
            assert released["at"] - decided_at < 5.0
            # the replica that did not make the call knows the decision, not the result
            elsewhere = (await b.get(location)).json()
            assert elsewhere["state"] == "approved" and elsewhere["result"] is None
            # both replicas read one audit log
            records = (await b.get("/api/v1/audit", params={"server": "demo"})).json()["items"]
            assert {(r["kind"], r["outcome"]) for r in records} >= {("tool", "ok"), ("approval", "approved")}
        for serve in (first, second):
            assert serve.stop(signal.SIGTERM) == 0
    finally:
        first.kill()
        second.kill()
