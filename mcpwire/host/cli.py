"""Config-mode commands: ``servers``, ``tools``, ``call NAME JSON`` and ``export``.

Each command reads the config search order (``--config PATH``, ``$MCPWIRE_CONFIG``,
``./mcp.json``, ``~/.config/mcpwire/mcp.json``), starts the host, and prints to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import msgspec
import trio

from ..errors import MCPWireError
from .host import Host
from .policies import ApprovalRequest

__all__ = ["COMMANDS", "main"]

COMMANDS = ("servers", "tools", "call", "export")


def _parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"mcpwire {command}")
    parser.add_argument("--config", metavar="PATH", help="config file (default: the search order)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--strict", action="store_true", help="fail on any configuration problem")
    parser.add_argument("--start-timeout", type=float, default=30.0, help="seconds to wait for servers")
    if command == "call":
        parser.add_argument("--approve", action="store_true", help="approve calls that need approval")
        parser.add_argument("name", help="namespaced tool name, e.g. server__tool")
        parser.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
    if command == "export":
        parser.add_argument("--format", choices=("openai", "anthropic", "markdown"), default="openai")
        parser.add_argument("--strict-schema", action="store_true", help="OpenAI strict mode schemas")
    return parser


async def _approve_all(request: ApprovalRequest) -> bool:
    return True


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, default=str)


async def _run(command: str, opts: argparse.Namespace) -> int:
    approver = _approve_all if getattr(opts, "approve", False) else None
    host = Host.from_config(
        opts.config, strict=opts.strict, start_timeout=opts.start_timeout, health_interval=0, approver=approver
    )
    out = sys.stdout
    async with host:
        if command == "servers":
            rows = [
                {
                    "name": i.name,
                    "status": i.status.value,
                    "tools": i.tool_count,
                    "era": i.era,
                    "protocol_version": i.protocol_version,
                    "error": i.error,
                }
                for i in host.list()
            ]
            if opts.json:
                out.write(_dump(rows) + "\n")
            else:
                for r in rows:
                    extra = f"  {r['error']}" if r["error"] else ""
                    out.write(f"{r['name']:<20} {r['status']:<12} {r['tools']:>3} tools{extra}\n")
            return 0
        if command == "tools":
            tools = host.tools()
            if opts.json:
                rows2 = [
                    {"name": t.name, "server": t.server, "tool": t.tool.name, "description": t.tool.description}
                    for t in tools
                ]
                out.write(_dump(rows2) + "\n")
            else:
                for t in sorted(tools, key=lambda t: t.name):
                    desc = (t.tool.description or "").splitlines()[0] if t.tool.description else ""
                    out.write(f"{t.name:<40} {desc}\n")
            return 0
        if command == "export":
            if opts.format == "markdown":
                out.write(host.registry.to_markdown())
            elif opts.format == "anthropic":
                out.write(_dump(host.registry.to_anthropic()) + "\n")
            else:
                out.write(_dump(host.registry.to_openai(strict=opts.strict_schema)) + "\n")
            return 0
        # call
        try:
            arguments = json.loads(opts.arguments)
        except json.JSONDecodeError as exc:
            sys.stderr.write(f"mcpwire call: arguments are not valid JSON: {exc}\n")
            return 2
        if not isinstance(arguments, dict):
            sys.stderr.write("mcpwire call: arguments must be a JSON object\n")
            return 2
        result = await host.call_tool(opts.name, arguments)
        if opts.json:
            out.write(msgspec.json.encode(result).decode() + "\n")
        else:
            out.write(result.text() + "\n")
        return 1 if result.is_error else 0


def main(command: str, argv: Sequence[str]) -> int:
    """Runs one config-mode command; returns the exit status (2 for usage errors)."""
    if command not in COMMANDS:
        sys.stderr.write(f"mcpwire: unknown command {command!r}; expected one of {', '.join(COMMANDS)}\n")
        return 2
    opts = _parser(command).parse_args(list(argv))
    try:
        return trio.run(_run, command, opts)
    except MCPWireError as exc:
        sys.stderr.write(f"mcpwire {command}: {exc}\n")
        return 1
