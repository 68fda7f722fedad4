"""Who may do what, from outside the process: every endpoint against every kind of caller.

The table below is the documented answer (docs/deploy.md has the same one): each endpoint needs
a role, each role includes the ones before it, no credential or a bad one is a 401 and too small a
role a 403. An endpoint's own answer to an allowed caller (200, 404 for a made-up id, 422 for a
bad body) is anything but 401 and 403.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _harness import demo_entry, running_service, write_config

from mcpwire.service.agent_runs import agent_routes
from mcpwire.service.identity import Role, hash_credential, new_token
from mcpwire.service.settings import Secret, Settings

ADMIN = "roles-admin-token-0123456789"

#: (method, path, body, the least role) for every endpoint that needs one
ENDPOINTS: list[tuple[str, str, Any, Role]] = [
    ("GET", "/api/v1/servers", None, Role.VIEWER),
    ("GET", "/api/v1/servers/demo", None, Role.VIEWER),
    ("GET", "/api/v1/tools", None, Role.VIEWER),
    ("GET", "/api/v1/tools/demo__echo", None, Role.VIEWER),
    ("GET", "/api/v1/prompts", None, Role.VIEWER),
    ("GET", "/api/v1/resources", None, Role.VIEWER),
    ("GET", "/api/v1/approvals", None, Role.VIEWER),
    ("GET", "/api/v1/approvals/nope", None, Role.VIEWER),
    ("GET", "/api/v1/pins", None, Role.VIEWER),
    ("GET", "/api/v1/audit", None, Role.VIEWER),
    ("GET", "/metrics", None, Role.VIEWER),
    ("GET", "/api/v1/agent/conversations", None, Role.VIEWER),
    ("GET", "/api/v1/agent/conversations/nope", None, Role.VIEWER),
    ("POST", "/api/v1/servers/demo/check", None, Role.VIEWER),
    ("POST", "/api/v1/agent/runs", {"preset": "nope", "input": "hi"}, Role.CALLER),
    ("POST", "/api/v1/tools/demo__add/call", {"arguments": {"a": 1, "b": 2}}, Role.CALLER),
    ("POST", "/api/v1/prompts/demo__greet/get", {"arguments": {"name": "a"}}, Role.CALLER),
    ("GET", "/api/v1/resources/read?uri=demo://static/hello", None, Role.CALLER),
    ("POST", "/mcp", "ping", Role.CALLER),
    ("POST", "/api/v1/approvals/nope", {"decision": "approve"}, Role.APPROVER),
    ("POST", "/api/v1/pins/demo/echo/approve", None, Role.APPROVER),
    ("POST", "/api/v1/servers", {"name": "sh", "command": "sh", "args": ["-c", "true"]}, Role.ADMIN),
    ("PATCH", "/api/v1/servers/demo", {"timeout": 30}, Role.ADMIN),
    ("PATCH", "/api/v1/servers/demo", {"command": "sh", "args": ["-c", "true"]}, Role.ADMIN),
    ("POST", "/api/v1/servers/nope/restart", None, Role.ADMIN),
    ("DELETE", "/api/v1/servers/nope", None, Role.ADMIN),
    ("GET", "/api/v1/tokens", None, Role.ADMIN),
    ("POST", "/api/v1/tokens", {"name": "made-by-test", "role": "viewer"}, Role.ADMIN),
    ("DELETE", "/api/v1/tokens/nope", None, Role.ADMIN),
]
PUBLIC = [("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/api/v1/openapi.json")]
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": MODERN_META}}


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'service.db'}"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    entry = {**demo_entry(), "policy": {"tools": {"add": {"approval": "ask"}}}}
    return write_config(tmp_path / "mcp.json", {"demo": entry})


async def _tokens(svc: Any) -> dict[str, str]:
    """A token for each role, and one revoked."""
    made = {}
    for role in Role:
        token = new_token()
        await svc.store.access.create_token(role.label, role.label, hash_credential(token))
        made[role.label] = token
    revoked = new_token()
    await svc.store.access.create_token("gone", "admin", hash_credential(revoked))
    await svc.store.access.revoke_token("gone")
    made["revoked"] = revoked
    return made


async def _send(client: httpx.AsyncClient, method: str, path: str, body: Any, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    if body == "ping":
        headers.update({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "ping",
                        "Accept": "application/json, text/event-stream"})  # fmt: skip
        body = PING
    kwargs: dict[str, Any] = {"json": body} if body is not None else {}
    response = await client.request(method, path, headers=headers, **kwargs)
    return response.status_code


#: who is calling: a credential (or none) and the role it has, None when it must be refused
Callers = dict[str, tuple[str | None, Role | None]]


async def unexpected_answers(client: httpx.AsyncClient, callers: Callers) -> list[str]:
    """Every endpoint as every caller: the answers that are not the documented one."""
    wrong: list[str] = []
    for method, path in PUBLIC:
        status = await _send(client, method, path, None, None)
        if status in (401, 403):
            wrong.append(f"{method} {path} without a token: {status}")
    for who, (token, role) in callers.items():
        for method, path, body, needed in ENDPOINTS:
            status = await _send(client, method, path, body, token)
            expected = "401" if role is None else "403" if role < needed else "allowed"
            got = str(status) if status in (401, 403) else "allowed"
            if got != expected:
                wrong.append(f"{method} {path} as {who}: {status}, expected {expected}")
    return wrong


async def test_every_endpoint_answers_every_caller_as_documented(db: str, config: Path) -> None:
    settings = Settings(port=0, rate_limit=0, token=Secret(ADMIN))
    agent = lambda host, store: agent_routes(host, None, store)  # noqa: E731
    async with running_service(db, config, settings=settings, routes=agent) as svc:
        tokens = await _tokens(svc)
        callers: Callers = {
            "no token": (None, None),
            "a token it does not know": ("mcpw_" + "x" * 43, None),
            "revoked": (tokens["revoked"], None),
            "viewer": (tokens["viewer"], Role.VIEWER),
            "caller": (tokens["caller"], Role.CALLER),
            "approver": (tokens["approver"], Role.APPROVER),
            "admin": (tokens["admin"], Role.ADMIN),
            "the admin token": (ADMIN, Role.ADMIN),
        }
        async with httpx.AsyncClient(base_url=svc.url, timeout=30) as client:
            assert await unexpected_answers(client, callers) == []


async def test_a_caller_cannot_approve_its_own_call_nor_add_a_server(db: str, config: Path) -> None:
    settings = Settings(port=0, rate_limit=0, token=Secret(ADMIN))
    async with running_service(db, config, settings=settings) as svc:
        tokens = await _tokens(svc)
        caller = {"Authorization": f"Bearer {tokens['caller']}"}
        approver = {"Authorization": f"Bearer {tokens['approver']}"}
        async with httpx.AsyncClient(base_url=svc.url, timeout=30) as client:
            asked = await client.post(
                "/api/v1/tools/demo__add/call", json={"arguments": {"a": 2, "b": 3}}, headers=caller
            )
            assert asked.status_code == 202, asked.text
            approval = asked.json()["approvalId"]
            mine = await client.post(f"/api/v1/approvals/{approval}", json={"decision": "approve"}, headers=caller)
            assert mine.status_code == 403
            assert mine.json()["detail"] == "this needs the approver role; token:caller is a caller"
            added = await client.post("/api/v1/servers", json={"name": "x", "command": "sh"}, headers=caller)
            assert added.status_code == 403
            assert "x" not in [s["name"] for s in (await client.get("/api/v1/servers", headers=caller)).json()["items"]]
            decided = await client.post(f"/api/v1/approvals/{approval}", json={"decision": "approve"}, headers=approver)
            assert decided.status_code == 200, decided.text
            with trio.fail_after(30):
                while True:
                    page = (await client.get("/api/v1/audit?server=demo", headers=approver)).json()["items"]
                    calls = [r for r in page if r["tool"] == "add" and r["outcome"] == "ok"]
                    if calls:
                        break
                    await trio.sleep(0.1)
        # the audit record names the token behind the call
        assert "token:caller" in (calls[0]["caller"] or "")


async def test_a_batch_of_calls_costs_as_many_calls(db: str, config: Path) -> None:
    settings = Settings(port=0, rate_limit=1, rate_burst=100, token=Secret(ADMIN))
    headers = {"Authorization": f"Bearer {ADMIN}", "Accept": "application/json, text/event-stream"}
    async with (
        running_service(db, config, settings=settings) as svc,
        httpx.AsyncClient(base_url=svc.url, timeout=60, headers=headers) as client,
    ):
        init = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        opened = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-03-26"}
        await client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)

        def batch(n: int, first: int) -> list[dict[str, Any]]:
            params = {"name": "demo__echo", "arguments": {"text": "x"}}
            return [{"jsonrpc": "2.0", "id": first + i, "method": "tools/call", "params": params} for i in range(n)]

        # 300 calls in one HTTP request are 300 calls: far over a burst of 100
        refused = await client.post("/mcp", content=json.dumps(batch(300, 1)), headers=session)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        audit = (await client.get("/api/v1/audit?tool=echo")).json()["items"]
        assert [r for r in audit if r["kind"] == "tool"] == []  # nothing of it ran
        # a batch within what is left runs whole
        ran = await client.post("/mcp", content=json.dumps(batch(20, 1000)), headers=session)
        assert ran.status_code == 200, ran.text


async def test_sign_in_attempts_are_limited_per_address(db: str, config: Path) -> None:
    settings = Settings(port=0, rate_limit=0, token=Secret(ADMIN))
    async with (
        running_service(db, config, settings=settings) as svc,
        httpx.AsyncClient(base_url=svc.url, timeout=30) as browser,
    ):
        statuses = [
            (await browser.post("/login", data={"token": f"wrong-{n}-0123456789", "next": "/"})).status_code
            for n in range(12)
        ]
        assert statuses[:10] == [401] * 10 and statuses[10:] == [429, 429]
        # even the right token waits out the limit
        right = await browser.post("/login", data={"token": ADMIN, "next": "/"})
        assert right.status_code == 429 and int(right.headers["retry-after"]) >= 1
