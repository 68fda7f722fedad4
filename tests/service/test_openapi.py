"""The OpenAPI document comes from the same declarations the handlers use, and schemathesis,
driven by it, finds no 5xx and no response that breaks its schema."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from _harness import demo_entry, running_service, write_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "host"))
from _host_fakes import Factory, FakeServer  # the host tests' fakes

from mcpwire.client import open_client
from mcpwire.host import ServerConfig
from mcpwire.host.config import parse_server
from mcpwire.service.agent_runs import agent_routes
from mcpwire.service.api import API
from mcpwire.service.api.types import ServerEntry, ToolCallIn
from mcpwire.service.settings import Secret, Settings

TOKEN = "schemathesis-token-0123456789"


def test_every_operation_is_documented_from_its_types() -> None:
    doc = API.openapi()
    assert doc["openapi"] == "3.1.0"
    documented = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    assert documented == {(op.method, op.path) for op in API.operations}
    call = doc["paths"]["/api/v1/tools/{name}/call"]["post"]
    assert call["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ToolCallIn"}
    assert doc["components"]["schemas"]["ToolCallIn"] == msgspec.json.schema(ToolCallIn)["$defs"]["ToolCallIn"]
    assert set(call["responses"]) == {"200", "202", "4XX", "5XX"}
    assert "Location" in call["responses"]["202"]["headers"]
    assert call["security"] == [{"bearer": []}]
    entry = doc["components"]["schemas"]["ServerEntry"]
    assert entry["properties"]["name"]["pattern"] == "^[A-Za-z0-9_.-]{1,64}$"
    assert set(entry["properties"]) == {f.encode_name for f in msgspec.structs.fields(ServerEntry)}
    audit = {p["name"]: p for p in doc["paths"]["/api/v1/audit"]["get"]["parameters"]}
    assert set(audit) == {
        "server",
        "tool",
        "outcome",
        "trace_id",
        "run_id",
        "kind",
        "since",
        "until",
        "cursor",
        "limit",
    }
    assert audit["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}
    assert "security" not in doc["paths"]["/healthz"]["get"]
    run = doc["paths"]["/api/v1/agent/runs"]["post"]
    assert run["x-mcpwire-role"] == "caller" and "text/event-stream" in run["responses"]["200"]["content"]
    assert run["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/RunRequest"}
    assert {"servers", "tools"} <= set(doc["components"]["schemas"]["RunRequest"]["properties"])
    assert "/api/v1/agent/conversations/{conversation_id}" in doc["paths"]
    assert doc["paths"]["/api/v1/servers/{name}/check"]["post"]["x-mcpwire-role"] == "viewer"
    patch = doc["paths"]["/api/v1/servers/{name}"]["patch"]["requestBody"]["content"]["application/json"]["schema"]
    assert patch == {"$ref": "#/components/schemas/ServerEntryPatch"}
    assert "securitySchemes" not in API.openapi(secured=False)["components"]


def test_decoding_request_bodies_leaves_a_healthy_process() -> None:
    """A ``pattern`` on a str in a union with an array made msgspec 0.22 free memory twice (the
    process aborted at exit): decode every request type in a child and check it exits cleanly."""
    import subprocess

    code = """
import msgspec
from mcpwire.service.agent_runs import agent_routes
from mcpwire.service.api import API
bodies = [b'{"name": "a", "command": ["x"]}', b'{"name": "a", "command": "npx -y x"}', b'{"name": "a", "url": "http://h/"}',
          b'{"arguments": {}}', b'{"decision": "approve"}', b'{"enabled": false}', b'{"x": [1]}', b'[]']
for op in API.operations:
    for body in bodies:
        if op.body is not None:
            try:
                msgspec.json.decode(body, type=op.body)
            except msgspec.ValidationError:
                pass
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok"), proc.stderr


def _only_config_servers(real: Any) -> Any:
    """A client factory that starts only the config file's server (``real``, its spec): every
    server the fuzzer POSTs is an in-process fake without tools, its command never run, its URL
    never reached. The fuzzer may copy the real entry's fields (its stateful phase does), so the
    spec is compared whole: anything else, a new name or working directory included, is a fake."""

    @asynccontextmanager
    async def factory(config: ServerConfig) -> AsyncIterator[Any]:
        if config.to_spec() != real:
            async with Factory(FakeServer(config.name, tools=[]))(config) as fake:
                yield fake
            return
        async with open_client(real, timeout=config.policy.timeout_seconds) as client:
            yield client

    return factory


async def _schemathesis(url: str, report: Path, *extra: str) -> tuple[int, str]:
    st = Path(sys.executable).with_name("st")
    if not st.exists():
        pytest.skip(f"schemathesis is not installed ({st} is missing)")
    argv = [
        str(st), "run", f"{url}/api/v1/openapi.json",
        "--exclude-path", "/events",  # an endless stream: read by test_api's events tests
        "--max-examples", "12", "--max-time", "60", "--seed", "7", "--no-shrink",
        "--workers", "1", "--request-timeout", "60",
        "--report", "ndjson", "--report-dir", str(report),
        *extra,
    ]  # fmt: skip
    # Every check runs (the default), but two, which the options on the command line would
    # override for every operation alike:
    # - a call's arguments, a prompt's arguments and an approval's edits are judged by the backend
    #   server, whose schemas the API cannot declare: its refusal (422) of a body that fits the
    #   API's schema is right, so "schema-valid bodies are accepted" does not hold here;
    # - a call, a prompt or a read reaches a backend: a server the run itself added (at a URL that
    #   answers nothing here) is "not connected", a 503 about that backend, not about the API.
    config = report.parent / "schemathesis.toml"
    config.write_text(
        "[checks.positive_data_acceptance]\n"
        "enabled = false\n"
        "\n"
        "[[operations]]\n"
        'include-path-regex = "^/api/v1/(tools/[^/]+/call|prompts/[^/]+/get|resources/read)$"\n'
        "checks.not_a_server_error.enabled = false\n"
    )
    argv.insert(1, f"--config-file={config}")  # (before the command: st --config-file=FILE run ...)
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "", "NO_COLOR": "1"}
    proc = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, env=env)
    return proc.returncode, proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.parametrize("secured", [False, True], ids=["open", "token"])
async def test_schemathesis_finds_no_server_error_and_no_schema_violation(tmp_path: Path, secured: bool) -> None:
    # the demo server's tools that sleep, exit, or build huge answers on request are left out:
    # their 504/503 would be about the backend, not the API
    entry = {**demo_entry(), "disabled_tools": ["slow", "crash", "big"]}
    config = write_config(tmp_path / "mcp.json", {"demo": entry})
    real = parse_server("demo", entry).to_spec()
    settings = Settings(port=0, rate_limit=0, token=Secret(TOKEN) if secured else None)
    headers = {"Authorization": f"Bearer {TOKEN}"} if secured else {}
    async with running_service(
        f"sqlite:///{tmp_path / 's.db'}",
        config,
        settings=settings,
        headers=headers,
        host_options={"client_factory": _only_config_servers(real), "backoff_base": 5.0},
        routes=lambda host, store: agent_routes(host, config, store),  # the agent's operations too
    ) as svc:
        extra = ["-H", f"Authorization: Bearer {TOKEN}"] if secured else []
        with trio.fail_after(240):
            code, output = await _schemathesis(svc.url, tmp_path / "report", *extra)
        doc = (await svc.client.get("/api/v1/openapi.json")).json()
    assert ("securitySchemes" in doc["components"]) is secured
    assert "/api/v1/agent/runs" in doc["paths"]
    (report,) = (tmp_path / "report").glob("*.ndjson")
    events = [json.loads(line) for line in report.read_text().splitlines()]
    assert events, output
    assert code == 0, output[-6000:]
    assert "Test cases:" in output and "generated" in output
