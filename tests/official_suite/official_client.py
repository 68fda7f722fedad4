"""mcpwire driven by the official MCP conformance runner (client scenarios).

The runner starts a mock server per scenario and runs ``python official_client.py <url>`` with
``MCP_CONFORMANCE_SCENARIO`` naming the scenario (``MCP_CONFORMANCE_PROTOCOL_VERSION`` when a
0.2.x runner pins a revision). Each handler does what an application would do in that
situation, through mcpwire's public API only; protocol behaviour (headers, era detection,
resumption, defaults, input rounds) is the library's job. Exit 0 on success.

The runner expects nothing on stdout; diagnostics go to stderr.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

import mcpwire
from mcpwire import Client

log = logging.getLogger("official_client")

_TRACE = os.environ.get("MCPWIRE_CONFORMANCE_TRACE")


def record(line: str) -> None:
    """Appends what the client did to the trace file the tests read (anti-vacuity)."""
    if _TRACE:
        with open(_TRACE, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


class Traced:
    """The client, with each call recorded before it is made."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        async def traced(*args: Any, **kwargs: Any) -> Any:
            detail = f" {args[0]}" if args and isinstance(args[0], str) else ""
            record(f"{name}{detail}")
            return await attr(*args, **kwargs)

        return traced


async def accept(params: dict[str, Any]) -> dict[str, Any]:
    """An application that accepts every elicitation without changing a field: mcpwire
    fills the form's defaults in (SEP-1034)."""
    return {"action": "accept", "content": {}}


async def sample(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "conformance-model"}


def _example(schema: Any) -> Any:
    """A plausible argument value for a JSON Schema (defaults and enums first)."""
    if not isinstance(schema, dict):
        return "x"
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {k: _example(v) for k, v in (schema.get("properties") or {}).items() if k in schema.get("required", [])}
    return "example"


def arguments_for(tool: mcpwire.Tool) -> dict[str, Any]:
    props = tool.input_schema.get("properties") or {}
    required = set(tool.input_schema.get("required") or [])
    return {name: _example(prop) for name, prop in props.items() if name in required}


async def call_every_tool(client: Client) -> None:
    for tool in await client.list_tools():
        result = await client.call_tool(tool.name, arguments_for(tool))
        log.info("%s -> error=%s %s", tool.name, result.is_error, result.text()[:200])


async def run_tools_call(client: Client) -> None:
    await client.list_tools()
    result = await client.call_tool("add_numbers", {"a": 5, "b": 3})
    result.raise_for_error()


async def run_elicitation_defaults(client: Client) -> None:
    await client.list_tools()
    (await client.call_tool("test_client_elicitation_defaults", {})).raise_for_error()


async def run_sse_retry(client: Client) -> None:
    await client.list_tools()
    (await client.call_tool("test_reconnection", {})).raise_for_error()


CUSTOM_HEADER_VALUES: dict[str, Any] = {
    "region": "us-west1",
    "priority": 42,
    "verbose": True,
    "debug": False,
    "non_ascii_val": "Hello, 世界",
    "whitespace_val": "  padded  ",
    "leading_space_val": " leading",
    "trailing_space_val": "trailing ",
    "internal_space_val": "internal spaces here",
    "control_char_val": "bell\x07char",
    "crlf_val": "line1\r\nline2",
    "tab_val": "\ttabbed",
    "query": "SELECT 1",
}


async def run_custom_headers(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    for name, tool in tools.items():
        props = tool.input_schema.get("properties") or {}
        args = {k: CUSTOM_HEADER_VALUES.get(k, _example(v)) for k, v in props.items()}
        if name.endswith("_null"):
            args = {k: v for k, v in args.items() if k in (tool.input_schema.get("required") or [])}
            args["verbose"] = None
        await client.call_tool(name, args)


async def run_default(client: Client) -> None:
    """Unknown or generic scenarios: look at everything the server offers."""
    caps = client.server_capabilities
    if caps.tools is not None:
        await call_every_tool(client)
    if caps.resources is not None:
        for resource in await client.list_resources():
            await client.read_resource(resource.uri)
    if caps.prompts is not None:
        for prompt in await client.list_prompts():
            args = {a.name: "example" for a in prompt.arguments if a.required}
            await client.get_prompt(prompt.name, args)


async def run_list_only(client: Client) -> None:
    await client.list_tools()


async def run_initialize(client: Client) -> None:
    """Connecting is the scenario; list tools only where the server offers them."""
    if client.server_capabilities.tools is not None:
        await client.list_tools()


async def run_schema_preservation(client: Client) -> None:
    """Echo the focal tool's inputSchema back as mcpwire holds it: keywords must survive (JR-46)."""
    tools = {t.name: t for t in await client.list_tools()}
    focal = next(t for name, t in tools.items() if name != "json_schema_echo")
    (await client.call_tool("json_schema_echo", {"schema": focal.input_schema})).raise_for_error()


SCENARIOS: dict[str, Callable[[Client], Awaitable[None]]] = {
    "initialize": run_initialize,
    "json-schema-2020-12-preservation": run_schema_preservation,
    "tools_call": run_tools_call,
    "elicitation-sep1034-client-defaults": run_elicitation_defaults,
    "sse-retry": run_sse_retry,
    "http-custom-headers": run_custom_headers,
    "json-schema-ref-no-deref": run_list_only,
}


async def main(url: str, scenario: str) -> None:
    options: dict[str, Any] = {"elicitation": accept, "sampling": sample, "roots": ["file:///tmp"], "timeout": 20}
    pinned = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
    if pinned:
        options["protocol_version"] = pinned
    handler = SCENARIOS.get(scenario, run_default)
    with trio.fail_after(28):
        async with mcpwire.open_client(url, **options) as client:
            log.info("connected: era %s, revision %s", client.era, client.protocol_version)
            record(f"connected {client.era.value if client.era else '?'} {client.protocol_version}")
            await handler(Traced(client))  # type: ignore[arg-type]
        record("closed")


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    if len(sys.argv) < 2:
        print("usage: MCP_CONFORMANCE_SCENARIO=<name> official_client.py <server-url>", file=sys.stderr)
        sys.exit(2)
    trio.run(main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""))
