"""The management API end to end: real HTTP to the app under hypercorn, real demo servers behind
the host, and a real store (SQLite here; the store's own tests cover PostgreSQL)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _harness import demo_entry, running_service, write_config

from mcpwire.host import ServerStatus

TRACE = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'service.db'}"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "mcp.json", {"demo": demo_entry(), "legacy": demo_entry("--era", "legacy")})


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["traceId"] == response.headers["x-trace-id"]
    return body


async def test_servers_tools_and_a_call(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        servers = (await svc.client.get("/api/v1/servers")).json()["items"]
        assert [(s["name"], s["status"], s["source"], s["era"]) for s in servers] == [
            ("demo", "connected", "config", "modern"),
            ("legacy", "connected", "config", "legacy"),
        ]
        demo = servers[0]
        assert demo["tools"] == 11 and demo["transport"] == "stdio" and demo["revision"] == "2026-07-28"
        assert demo["uptimeSeconds"] >= 0 and demo["breaker"] == "closed" and demo["error"] is None
        assert demo["target"].endswith("-m mcpwire.testing.demo_server")
        one = await svc.client.get("/api/v1/servers/legacy")
        assert one.json()["revision"] == "2025-11-25"

        tools = (await svc.client.get("/api/v1/tools", params={"server": "legacy", "q": "ECHO"})).json()["items"]
        assert [t["name"] for t in tools] == ["legacy__echo"]
        assert tools[0]["inputSchema"]["properties"]["text"] == {"type": "string"}
        assert (await svc.client.get("/api/v1/tools/demo__add")).json()["tool"] == "add"

        reply = await svc.client.post(
            "/api/v1/tools/demo__echo/call", json={"arguments": {"text": "héllo"}}, headers={"X-Trace-ID": "my-trace.1"}
        )
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["text"] == "héllo" and body["isError"] is False and body["server"] == "demo"
        assert body["content"] == [{"type": "text", "text": "héllo"}]
        assert body["traceId"] == reply.headers["x-trace-id"] == "my-trace.1"
        assert float(reply.headers["x-process-time"]) > 0

        err = await svc.client.post("/api/v1/tools/demo__fail/call", json={})
        assert err.status_code == 200 and err.json()["isError"] is True


async def test_problems_name_the_bad_field(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        c = svc.client
        body = problem(await c.post("/api/v1/tools/demo__echo/call", json={"arguments": {}, "argumnets": 1}), 422)
        assert body["errors"] == [{"in": "body", "path": "$", "message": "Object contains unknown field `argumnets`"}]
        body = problem(await c.post("/api/v1/tools/demo__echo/call", json={"arguments": []}), 422)
        assert body["errors"] == [{"in": "body", "path": "$.arguments", "message": "Expected `object`, got `array`"}]
        body = problem(
            await c.post(
                "/api/v1/tools/demo__echo/call",
                content=b'{"arguments": {',
                headers={"content-type": "application/json"},
            ),
            422,
        )
        assert body["errors"][0]["message"].startswith("not valid JSON: ")
        body = problem(
            await c.post("/api/v1/tools/demo__echo/call", content=b"{}", headers={"content-type": "text/plain"}), 415
        )
        assert body["detail"] == "send the request body as application/json, not text/plain"
        body = problem(await c.get("/api/v1/audit", params={"limit": "lots"}), 422)
        assert body["errors"] == [{"in": "query", "path": "limit", "message": "Expected `int`, got `str`"}]
        body = problem(await c.get("/api/v1/tools/nope__x"), 404)
        assert body["detail"] == "no tool named 'nope__x'; GET /api/v1/tools lists them"
        body = problem(await c.post("/api/v1/tools/nope__x/call", json={}), 404)
        body = problem(await c.get("/api/v1/servers/ghost"), 404)
        assert body["detail"] == "no server named 'ghost'"
        body = problem(await c.get("/nowhere"), 404)
        assert body["detail"] == "nothing at /nowhere; the API is under /api/v1 (see /api/v1/openapi.json)"
        put = await c.put("/api/v1/servers")
        body = problem(put, 405)
        assert set(put.headers["allow"].split(", ")) == {"GET", "HEAD", "POST"}
        if svc.service.gateway is None:
            body = problem(await c.post("/mcp", json={}), 503)
            assert body["title"] == "Gateway unavailable"


def _errors(body: dict[str, Any]) -> list[tuple[str, str]]:
    assert all(e["in"] == "body" for e in body["errors"])
    return [(e["path"], e["message"]) for e in body["errors"]]


async def test_post_server_says_what_the_config_loader_says(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        c = svc.client
        body = problem(await c.post("/api/v1/servers", json={"name": "x", "command": 5}), 422)
        assert _errors(body) == [("$.command", "expected a string or a non-empty list of strings, got a number")]
        assert body["detail"] == (
            "the server entry 'x' has a problem: $.command: expected a string or a non-empty list of strings, "
            "got a number"
        )
        body = problem(await c.post("/api/v1/servers", json={"name": "x", "command": "run 'quoted arg"}), 422)
        assert _errors(body) == [("$.command", """cannot split "run 'quoted arg" into words: No closing quotation""")]
        body = problem(await c.post("/api/v1/servers", json={"name": "bad name", "command": "x"}), 422)
        assert _errors(body) == [
            ("$.name", "expected a server name of 1 to 64 letters, digits, '_', '-' or '.', got 'bad name'")
        ]
        body = problem(await c.post("/api/v1/servers", json={"name": "x", "url": "ftp://h/"}), 422)
        assert _errors(body) == [("$.url", "expected an http:// or https:// URL, got 'ftp://h/'")]
        entry = {"name": "x", "command": "x", "env": {"A": "${env:NOPE_NOT_SET}", "B": "${other:x}"}}
        body = problem(await c.post("/api/v1/servers", json=entry), 422)
        assert body["detail"].startswith("the server entry 'x' has 2 problems: $.env.A: environment variable")
        assert _errors(body) == [
            ("$.env.A", "environment variable 'NOPE_NOT_SET' is not set (used as ${env:NOPE_NOT_SET})"),
            ("$.env.B", "the placeholder ${other:x} is not supported; use ${env:NAME}, ${NAME} or {BASE_PATH}"),
        ]
        body = problem(await c.post("/api/v1/servers", json={"name": "x"}), 422)
        assert _errors(body) == [("$", "expected a 'command' (stdio server) or a 'url' (HTTP server); it has neither")]
        # every problem at once, unknown keys named (a did-you-mean where one is close)
        entry = {
            "name": "x", "url": "ftp://x", "timeout_seconds": -1, "headres": {}, "colour": "blue",
            "auth": {"type": "bearer", "token": "t", "tokn": 1}, "policy": {"retries": -2, "shiny": True},
        }  # fmt: skip
        body = problem(await c.post("/api/v1/servers", json=entry), 422)
        assert sorted(_errors(body)) == [
            ("$.auth.tokn", "unknown key; did you mean 'token'?"),
            ("$.colour", "unknown key"),
            ("$.headres", "unknown key; did you mean 'headers'?"),
            ("$.policy.retries", "expected a non-negative integer, got -2"),
            ("$.policy.shiny", "unknown key"),
            ("$.timeout_seconds", "expected a positive number, got -1"),
            ("$.url", "expected an http:// or https:// URL, got 'ftp://x'"),
        ]
        # null removes a key in a PATCH; in a new entry it is a mistake, named at its path
        nulls = {"name": "x", "url": "https://example.com/mcp", "health_interval_seconds": None, "cwd": None}
        body = problem(await c.post("/api/v1/servers", json=nulls), 422)
        assert sorted(_errors(body)) == [
            ("$.cwd", "expected a value; null removes a key only in a PATCH"),
            ("$.health_interval_seconds", "expected a value; null removes a key only in a PATCH"),
        ]
        body = problem(await c.post("/api/v1/servers", json=["not", "an", "object"]), 422)
        assert body["errors"][0]["path"] == "$"
        body = problem(await c.post("/api/v1/servers", json={"name": "demo", **demo_entry()}), 409)
        assert body["detail"] == "a server named 'demo' already exists; PATCH or DELETE it first"
        assert [s["name"] for s in (await c.get("/api/v1/servers")).json()["items"]] == ["demo", "legacy"]


async def test_post_server_takes_every_shape_the_config_file_takes(db: str, config: Path) -> None:
    demo = demo_entry()
    spec07 = {"name": "spec07", "type": "local", "command": [demo["command"], *demo["args"]],
              "environment": {"GREETING": "hello", "PORT": 8080}}  # fmt: skip
    vscode = {"name": "vscode", "type": "stdio", **demo, "env": {"MODE": "${env:HOME}"}, "timeout": 1500}
    async with running_service(db, config) as svc:
        c = svc.client
        for entry in (spec07, vscode):
            added = await c.post("/api/v1/servers", json=entry)
            assert added.status_code == 201, added.text
        spec = svc.host.get("spec07").config
        assert (spec.command, spec.args) == (demo["command"], tuple(demo["args"]))
        assert dict(spec.env) == {"GREETING": "hello", "PORT": "8080"}  # SPEC-07's environment, honoured
        vs = svc.host.get("vscode").config
        assert dict(vs.env) == {"MODE": str(Path.home())} and vs.policy.timeout_seconds == 1.5
        await svc.host.wait_status("spec07", ServerStatus.CONNECTED, timeout=30)
        # stored as given (placeholders unexpanded), and read back so after a restart
        row = {r.name: r for r in await svc.store.servers()}["vscode"]
        assert row.entry is not None and row.entry["env"] == {"MODE": "${env:HOME}"}
    async with running_service(db, config) as svc:
        assert dict(svc.host.get("spec07").config.env) == {"GREETING": "hello", "PORT": "8080"}


async def test_changes_through_the_api_survive_a_restart(db: str, config: Path) -> None:
    before = await trio.Path(config).read_text()
    async with running_service(db, config) as svc:
        c = svc.client
        added = await c.post("/api/v1/servers", json={"name": "extra", **demo_entry(), "description": "added"})
        assert added.status_code == 201, added.text
        assert added.headers["location"] == "/api/v1/servers/extra"
        assert added.json()["source"] == "api"
        await svc.host.wait_status("extra", ServerStatus.CONNECTED, timeout=30)
        assert any(t["name"] == "extra__echo" for t in (await c.get("/api/v1/tools")).json()["items"])
        patched = await c.patch("/api/v1/servers/legacy", json={"enabled": False})
        assert patched.status_code == 200, patched.text
        assert patched.json()["enabled"] is False and patched.json()["status"] == "disconnected"
        edited = await c.patch("/api/v1/servers/extra", json={"timeout_seconds": 7.5, "disabled_tools": ["fail"]})
        assert edited.status_code == 200, edited.text
        assert (await c.delete("/api/v1/servers/demo")).status_code == 204
        problem(await c.delete("/api/v1/servers/demo"), 404)
        assert (await c.patch("/api/v1/servers/extra", json={})).json()["name"] == "extra"  # changes nothing
        body = problem(await c.patch("/api/v1/servers/extra", json={"comand": "x"}), 422)
        assert body["errors"] == [{"in": "body", "path": "$.comand", "message": "unknown key; did you mean 'command'?"}]
    assert await trio.Path(config).read_text() == before  # the user's mcp.json is never rewritten
    async with running_service(db, config) as svc:
        servers = {s["name"]: s for s in (await svc.client.get("/api/v1/servers")).json()["items"]}
        assert set(servers) == {"legacy", "extra"}
        assert servers["legacy"]["enabled"] is False and servers["legacy"]["source"] == "config"
        assert servers["extra"]["source"] == "api" and servers["extra"]["description"] == "added"
        assert svc.host.get("extra").config.policy.timeout_seconds == 7.5
        tools = [t["name"] for t in (await svc.client.get("/api/v1/tools")).json()["items"]]
        assert "extra__echo" in tools and "extra__fail" not in tools
        assert (await svc.client.post("/api/v1/servers/extra/restart")).status_code == 202


async def test_trace_ids(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        c = svc.client
        parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        assert (await c.get("/healthz", headers={"traceparent": parent})).headers["x-trace-id"] == (
            "4bf92f3577b34da6a3ce929d0e0e4736"
        )
        made = (await c.get("/healthz", headers={"X-Trace-ID": "bad id\twith spaces"})).headers["x-trace-id"]
        assert TRACE.match(made)
        zero = "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
        assert TRACE.match((await c.get("/healthz", headers={"traceparent": zero})).headers["x-trace-id"])
        assert (await c.get("/healthz")).headers["x-trace-id"] != (await c.get("/healthz")).headers["x-trace-id"]


async def test_metrics_and_probes(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        c = svc.client
        await c.post("/api/v1/tools/demo__echo/call", json={"arguments": {"text": "x"}})
        text = (await c.get("/metrics")).text
        assert 'mcpwire_host_calls_total{server="demo",tool="echo"} 1' in text
        assert 'mcpwire_http_requests_total{route="/api/v1/tools/{name}/call",method="POST",code="200"} 1' in text
        assert 'mcpwire_python_gc_collections_total{generation="0"} ' in text
        assert "# TYPE mcpwire_python_gc_frozen_objects gauge" in text
        assert 'mcpwire_http_request_duration_seconds_bucket{route="/api/v1/tools/{name}/call",le="+Inf"} 1' in text
        assert 'mcpwire_host_server_up{server="demo"} 1' in text and "mcpwire_store_up 1" in text
        assert 'mcpwire_call_duration_seconds_count{server="demo",tool="echo"} 1' in text
        assert 'mcpwire_call_duration_seconds_bucket{server="demo",tool="echo",le="+Inf"} 1' in text
        health = (await c.get("/healthz")).json()
        assert health["status"] == "ok" and health["uptimeSeconds"] >= 0
        assert (await c.get("/readyz")).json() == {"ready": True, "waitingFor": [], "store": "ok"}


async def test_readiness_waits_for_every_enabled_server(db: str, tmp_path: Path) -> None:
    slow = tmp_path / "slow.py"
    slow.write_text("import time, sys\ntime.sleep(30)\n")
    config = write_config(
        tmp_path / "mcp.json", {"demo": demo_entry(), "slow": {"command": "python3", "args": [str(slow)]}}
    )
    async with running_service(db, config, wait_ready=False) as svc:
        await svc.host.wait_status("demo", ServerStatus.CONNECTED, timeout=30)
        reply = await svc.client.get("/readyz")
        assert reply.status_code == 503
        assert reply.json() == {"ready": False, "waitingFor": ["slow"], "store": "ok"}
        assert (await svc.client.get("/healthz")).status_code == 200


async def test_events_stream_and_resume(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        seen: list[tuple[str, str, dict[str, Any]]] = []
        async with svc.client.stream("GET", "/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            await svc.client.patch("/api/v1/servers/legacy", json={"enabled": False})
            with trio.fail_after(20):
                async for event in _sse(stream):
                    seen.append(event)
                    if event[1] == "status" and event[2]["data"]["status"] == "disconnected":
                        break
        assert all(kind in ("status", "tools", "prompts", "resources", "audit") for _, kind, _ in seen)
        first_id = seen[0][0]
        assert re.match(r"^[0-9a-f]{8}-\d+$", first_id)
        resumed: list[tuple[str, str, dict[str, Any]]] = []
        async with svc.client.stream("GET", "/events", headers={"Last-Event-ID": first_id}) as stream:
            with trio.fail_after(20):
                async for event in _sse(stream):
                    resumed.append(event)
                    if event[0] == seen[-1][0]:
                        break
        assert [e[0] for e in resumed] == [e[0] for e in seen[1:]]
        async with svc.client.stream("GET", "/events", headers={"Last-Event-ID": "deadbeef-3"}) as stream:
            with trio.fail_after(20):
                async for event in _sse(stream):
                    assert event[1] == "reset"
                    assert event[2]["data"]["reason"] == "the service restarted since the event named"
                    break


async def _sse(stream: httpx.Response) -> Any:
    import json

    event_id = kind = ""
    data: list[str] = []
    async for line in stream.aiter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line == "" and data:
            yield event_id, kind, json.loads("\n".join(data))
            data = []


async def test_the_era_pin_is_kept_across_a_restart(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        assert (await svc.client.get("/api/v1/servers/demo")).json()["era"] == "modern"
        pinned = await svc.client.patch("/api/v1/servers/demo", json={"era": "legacy"})
        assert pinned.status_code == 200, pinned.text
        await svc.host.wait_status("demo", ServerStatus.CONNECTED, timeout=30)
        assert (await svc.client.get("/api/v1/servers/demo")).json()["era"] == "legacy"
        added = await svc.client.post("/api/v1/servers", json={"name": "old", **demo_entry(), "era": "legacy"})
        assert added.status_code == 201, added.text
    async with running_service(db, config) as svc:
        servers = {s["name"]: s for s in (await svc.client.get("/api/v1/servers")).json()["items"]}
        assert servers["demo"]["era"] == "legacy" and servers["old"]["era"] == "legacy"


async def _audit(c: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    reply = await c.get("/api/v1/audit", params=params)
    assert reply.status_code == 200, reply.text
    items: list[dict[str, Any]] = reply.json()["items"]
    return items


async def test_the_audit_is_filtered_by_run_kind_and_time(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        c = svc.client
        for text in ("first", "second"):
            called = await c.post("/api/v1/tools/demo__echo/call", json={"arguments": {"text": text}})
            assert called.status_code == 200, called.text
        with trio.fail_after(30):
            while len(calls := await _audit(c, kind="tool", tool="echo")) < 2:  # noqa: ASYNC110 - the API under test, polled as a client would
                await trio.sleep(0.05)
        assert {r["kind"] for r in calls} == {"tool"}
        newest, oldest = calls
        assert newest["runId"] != oldest["runId"]
        assert [r["id"] for r in await _audit(c, run_id=oldest["runId"])] == [oldest["id"]]
        assert await _audit(c, run_id="run_nothing") == []
        others = await _audit(c, kind="pin")  # what the host pinned at start-up
        assert others and {r["kind"] for r in others} == {"pin"}
        # since is included, until is not
        at = newest["time"]
        assert newest["id"] in [r["id"] for r in await _audit(c, kind="tool", since=at)]
        assert newest["id"] not in [r["id"] for r in await _audit(c, kind="tool", until=at)]
        assert await _audit(c, kind="tool", since=at + 3600) == []
        body = problem(await c.get("/api/v1/audit", params={"runid": "x", "color": "red"}), 422)
        assert body["detail"].startswith("GET /api/v1/audit has no query parameter 'color', 'runid'; it takes server,")
        assert body["errors"] == [
            {"in": "query", "path": "color", "message": "unknown query parameter"},
            {"in": "query", "path": "runid", "message": "unknown query parameter; did you mean 'run_id'?"},
        ]
        body = problem(await c.get("/api/v1/servers", params={"q": "x"}), 422)
        assert body["detail"] == "GET /api/v1/servers has no query parameter 'q'; it takes none"
        problem(await c.get("/api/v1/audit", params={"since": "yesterday"}), 422)


async def test_a_call_says_its_server_is_reconnecting_and_takes_a_timeout_under_a_second(
    db: str, tmp_path: Path
) -> None:
    broken = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    config = write_config(tmp_path / "mcp.json", {"demo": demo_entry(), "broken": broken})
    async with running_service(db, config, wait_ready=False) as svc:
        c = svc.client
        await svc.host.wait_status("demo", ServerStatus.CONNECTED, timeout=30)
        await svc.host.wait_status("broken", ServerStatus.ERROR, timeout=30)
        reply = await c.post("/api/v1/tools/broken__echo/call", json={"arguments": {}})
        body = problem(reply, 503)
        assert reply.headers["retry-after"] == "5"
        assert body["title"] == "Server not connected"
        assert body["detail"].startswith("server 'broken' is not connected (")
        assert body["detail"].endswith(
            "the host keeps retrying in the background: its tools, 'broken__echo' among them if it has it, "
            "come back once it is connected; try again in 5 s"
        )
        # a name no server could have is still a 404
        problem(await c.post("/api/v1/tools/nobody__echo/call", json={}), 404)
        problem(await c.post("/api/v1/tools/demo__nothing/call", json={}), 404)
        # seed 000's 200 ms per call
        started = trio.current_time()
        slow = await c.post(
            "/api/v1/tools/demo__slow/call", json={"arguments": {"seconds": 5, "steps": 1}, "timeoutSeconds": 0.2}
        )
        assert problem(slow, 504)["detail"].startswith("tool 'slow' on server 'demo' failed: RequestTimeout")
        assert trio.current_time() - started < 4
        refused = problem(await c.post("/api/v1/tools/demo__echo/call", json={"timeoutSeconds": 0.01}), 422)
        assert refused["errors"][0]["path"] == "$.timeoutSeconds"
