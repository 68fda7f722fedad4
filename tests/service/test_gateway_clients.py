"""Clients of every kind against the gateway, with a caller's token: the official TypeScript SDK's
``SSEClientTransport`` (the 2024-11-05 HTTP+SSE transport, at /sse) and
``StreamableHTTPClientTransport`` (at /mcp), and the MCP Inspector's command line (``--cli``) over
both. Each lists the tools of the service's servers and calls one; without the token, each is
refused."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio
from _gateway import FIXTURES, SERVERS, require
from _harness import Running, demo_entry, running_service, write_config

from mcpwire.service.identity import hash_credential, new_token
from mcpwire.service.settings import Secret, Settings

pytestmark = [pytest.mark.real, pytest.mark.slow]

CLIENTS = SERVERS / "clients" / "node_modules"
ADMIN = "gateway-clients-admin-0123456789"
ECHO = {"text": "hello from a client"}


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    return node


async def _caller_token(svc: Running) -> str:
    token = new_token()
    await svc.store.access.create_token("a-client", "caller", hash_credential(token))
    return token


async def _run(argv: list[str], home: Path) -> tuple[int, str, str]:
    env = {**os.environ, "HOME": str(home)}  # (the Inspector keeps a catalogue and its sign-ins there)
    with trio.fail_after(120):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, env=env)
    return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "mcp.json", {"demo": demo_entry()})


def _settings() -> Settings:
    return Settings(port=0, rate_limit=0, token=Secret(ADMIN))


@pytest.mark.parametrize(("transport", "path"), [("sse", "/sse"), ("streamable", "/mcp")])
async def test_the_typescript_sdk_connects_over_both_transports(
    tmp_path: Path, config: Path, transport: str, path: str
) -> None:
    node = _node()
    sdk = require(CLIENTS / "@modelcontextprotocol" / "sdk")
    script = str(FIXTURES / "ts_client.mjs")
    async with running_service(f"sqlite:///{tmp_path / 's.db'}", config, settings=_settings()) as svc:
        token = await _caller_token(svc)
        code, out, err = await _run(
            [node, script, sdk, transport, svc.url + path, token, "demo__echo", json.dumps(ECHO)], tmp_path
        )
        assert code == 0, err[-3000:]
        answer: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        assert answer["text"] == "hello from a client" and answer["isError"] is False
        assert "demo__echo" in answer["tools"] and "demo__add" in answer["tools"]
        if transport == "streamable":
            assert answer["revision"] is not None
        # the call went through the host, under the token's name
        audit = (await svc.client.get("/api/v1/audit", params={"tool": "echo"}, headers=_admin())).json()["items"]
        assert [r["caller"] for r in audit if r["kind"] == "tool"] and all(
            "token:a-client" in (r["caller"] or "") for r in audit if r["kind"] == "tool"
        )
        code, out, err = await _run(
            [node, script, sdk, transport, svc.url + path, "mcpw_" + "x" * 43, "demo__echo", "{}"], tmp_path
        )
        assert code != 0 and "401" in err, (out, err)


def _admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


@pytest.mark.parametrize(("transport", "path"), [("http", "/mcp"), ("sse", "/sse")])
async def test_the_inspector_cli_lists_and_calls(tmp_path: Path, config: Path, transport: str, path: str) -> None:
    _node()
    inspector = require(CLIENTS / ".bin" / "mcp-inspector")
    async with running_service(f"sqlite:///{tmp_path / 's.db'}", config, settings=_settings()) as svc:
        token = await _caller_token(svc)
        base = [
            inspector,
            "--cli",
            svc.url + path,
            "--transport",
            transport,
            "--header",
            f"Authorization: Bearer {token}",
        ]
        code, out, err = await _run([*base, "--method", "tools/list"], tmp_path)
        assert code == 0, (out[-2000:], err[-3000:])
        tools = json.loads(out)["tools"]
        assert {"demo__echo", "demo__add"} <= {t["name"] for t in tools}
        code, out, err = await _run(
            [*base, "--method", "tools/call", "--tool-name", "demo__echo", "--tool-arg", "text=hello from a client"],
            tmp_path,
        )
        assert code == 0, (out[-2000:], err[-3000:])
        result = json.loads(out)
        assert [b["text"] for b in result["content"] if b["type"] == "text"] == ["hello from a client"]
        assert not result.get("isError")
        # without a token the service answers 401, and the Inspector would start an OAuth sign-in
        refused = [inspector, "--cli", svc.url + path, "--transport", transport, "--method", "tools/list"]
        code, out, err = await _run(refused, tmp_path)
        assert code != 0 and '"code":"auth_required"' in err, (out[-2000:], err[-2000:])
