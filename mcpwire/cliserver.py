"""The command line's commands on one server: ``info``, ``tools``, ``call``, ``resources``,
``read``, ``prompts`` and ``prompt`` against a URL, a command after ``--``, an mcp.json entry named
on the command line, or the bundled demo server.

Everything a server sends is shown through :mod:`mcpwire.host.render` (control characters
escaped, images and binary resources as placeholders, long descriptions cut with ``…``); JSON
output uses MCP's own camelCase keys.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

import msgspec

from .cliargs import ResolvedTarget, client_options
from .client import Client
from .errors import MCPWireError, RPCError
from .host.render import (
    first_line,
    prompt_text,
    render_for_terminal,
    result_json,
    terminal_contents,
    terminal_json,
    tool_listing,
    unknown_name,
)
from .protocol.types import PromptArgument
from .redaction import clean_terminal

__all__ = ["CommandError", "Operands", "describe_error", "run"]


class CommandError(Exception):
    """A failure the command reports in one line, with its exit status."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Operands:
    """What a command acts on besides the server."""

    tool: str | None = None
    arguments: dict[str, object] = field(default_factory=dict)
    uri: str | None = None
    prompt: str | None = None
    prompt_arguments: dict[str, str] = field(default_factory=dict)


def _json(out: TextIO, value: object) -> None:
    out.write(terminal_json(value) + "\n")


async def _info(ctx: _Run) -> int:
    client, target, args, out = ctx.client, ctx.target, ctx.args, ctx.out
    caps = msgspec.to_builtins(client.server_capabilities)
    if args.json:
        _json(
            out,
            {
                "server": target.label,
                "era": client.era.value if client.era else None,
                "protocolVersion": client.protocol_version,
                "serverInfo": client.server_info,
                "capabilities": caps,
                "instructions": client.instructions,
            },
        )
        return 0
    info = client.server_info
    name = f"{info.name} {info.version}".strip() if info else "?"
    out.write(f"server:       {clean_terminal(name, newlines=False)}\n")
    out.write(f"era:          {client.era.value if client.era else '?'}\n")
    out.write(f"revision:     {client.protocol_version}\n")
    out.write(f"capabilities: {', '.join(sorted(caps)) or '(none)'}\n")
    if client.instructions:
        out.write(f"instructions: {first_line(client.instructions)}\n")
    return 0


async def _tools(ctx: _Run) -> int:
    client, args, out = ctx.client, ctx.args, ctx.out
    tools = await client.list_tools()
    if args.json:
        _json(out, tools)
        return 0
    rows = [(t.name, t.input_schema, t.description, None) for t in tools]
    out.writelines(line + "\n" for line in tool_listing(rows, schema=getattr(args, "schema", False)))
    era = client.era.value if client.era else "?"
    out.write(f"({len(tools)} tools, {era} era, {client.protocol_version})\n")
    return 0


async def _call(ctx: _Run) -> int:
    client, target, ops, args, out = ctx.client, ctx.target, ctx.ops, ctx.args, ctx.out
    assert ops.tool is not None
    tools = await client.list_tools()  # also lets the result be checked against the outputSchema
    names = [t.name for t in tools]
    if ops.tool not in names:
        raise CommandError(unknown_name("tool", ops.tool, names, target.label))
    result = await client.call_tool(ops.tool, ops.arguments)
    if args.json:
        _json(out, result_json(result))
    else:
        text = render_for_terminal(result)
        out.write(text + "\n" if text else "")
    return 1 if result.is_error else 0


def _offers(client: Client, feature: str, target: ResolvedTarget, err: TextIO) -> bool:
    if getattr(client.server_capabilities, feature, None) is not None:
        return True
    err.write(f"mcpwire: {target.label} offers no {feature} (it did not advertise the '{feature}' capability)\n")
    return False


async def _resources(ctx: _Run) -> int:
    client, target, args, out = ctx.client, ctx.target, ctx.args, ctx.out
    if not _offers(client, "resources", target, ctx.err):
        if args.json:
            _json(out, {"resources": [], "resourceTemplates": []})
        return 0
    resources = await client.list_resources()
    try:
        templates = await client.list_resource_templates()
    except RPCError as exc:  # templates are optional within the capability
        if not exc.is_method_not_found:
            raise
        templates = []
    if args.json:
        _json(out, {"resources": resources, "resourceTemplates": templates})
        return 0
    rows = [(r.uri, r.mime_type or "", r.title or r.name, r.description) for r in resources]
    rows += [(t.uri_template, t.mime_type or "", t.title or t.name, t.description) for t in templates]
    shown = [(clean_terminal(u, newlines=False), clean_terminal(m, newlines=False)) for u, m, _, _ in rows]
    uri_w = max((len(u) for u, _ in shown), default=0)
    mime_w = max((len(m) for _, m in shown), default=0)
    for (uri, mime), (_, _, name, description) in zip(shown, rows, strict=True):
        about = first_line(description) or clean_terminal(name, newlines=False)
        out.write(f"{uri:<{uri_w}}  {mime:<{mime_w}}  {about}".rstrip() + "\n")
    out.write(f"({len(resources)} resources, {len(templates)} templates)\n")
    return 0


async def _read(ctx: _Run) -> int:
    client, ops, args, out = ctx.client, ctx.ops, ctx.args, ctx.out
    assert ops.uri is not None
    result = await client.read_resource(ops.uri)
    if args.json:
        _json(out, result)
        return 0
    for contents in result.contents:
        text = terminal_contents(contents)
        out.write(text if text.endswith("\n") else text + "\n")
    return 0


async def _prompts(ctx: _Run) -> int:
    client, target, args, out = ctx.client, ctx.target, ctx.args, ctx.out
    if not _offers(client, "prompts", target, ctx.err):
        if args.json:
            _json(out, [])
        return 0
    prompts = await client.list_prompts()
    if args.json:
        _json(out, prompts)
        return 0
    heads = [
        clean_terminal(f"{p.name}({', '.join(_argument(a) for a in p.arguments)})", newlines=False) for p in prompts
    ]
    width = max((len(h) for h in heads), default=0)
    for head, prompt in zip(heads, prompts, strict=True):
        out.write(f"{head:<{width}}  {first_line(prompt.description or prompt.title)}".rstrip() + "\n")
    out.write(f"({len(prompts)} prompts)\n")
    return 0


def _argument(argument: PromptArgument) -> str:
    return argument.name + ("" if argument.required else "?")


async def _prompt(ctx: _Run) -> int:
    client, target, ops, args, out = ctx.client, ctx.target, ctx.ops, ctx.args, ctx.out
    assert ops.prompt is not None
    prompts = await client.list_prompts()
    names = [p.name for p in prompts]
    if ops.prompt not in names:
        raise CommandError(unknown_name("prompt", ops.prompt, names, target.label))
    wanted = next(p for p in prompts if p.name == ops.prompt)
    missing = [a.name for a in wanted.arguments if a.required and a.name not in ops.prompt_arguments]
    if missing:
        usage = " ".join(f"{clean_terminal(m, newlines=False)}=VALUE" for m in missing)
        raise CommandError(f"prompt {ops.prompt!r} needs {usage}")
    result = await client.get_prompt(ops.prompt, ops.prompt_arguments)
    if args.json:
        _json(out, result)
        return 0
    out.write(prompt_text(result) + "\n")
    return 0


@dataclass(slots=True)
class _Run:
    client: Client
    target: ResolvedTarget
    ops: Operands
    args: argparse.Namespace
    out: TextIO
    err: TextIO


_HANDLERS: Mapping[str, Callable[[_Run], Awaitable[int]]] = {
    "info": _info,
    "tools": _tools,
    "call": _call,
    "resources": _resources,
    "read": _read,
    "prompts": _prompts,
    "prompt": _prompt,
}


def describe_error(exc: BaseException, target: ResolvedTarget) -> str:
    """One terminal-safe line for a failure, with the known secrets masked and a hint for 401."""
    text = target.secrets.mask(str(exc)) or type(exc).__name__
    line = clean_terminal(" ".join(text.split("\n")), newlines=False)
    if (" 401" in text or "Unauthorized" in text) and "--bearer-env" not in text:
        line += (
            " (for a token pass --bearer-env VAR or --header 'Authorization: Bearer ...'; for OAuth: mcpwire login URL)"
        )
    return line


async def run(
    command: str, target: ResolvedTarget, ops: Operands, args: argparse.Namespace, out: TextIO, err: TextIO
) -> int:
    """Connects to ``target`` and runs one command; returns the exit status.

    Cancellation: leaving early closes the connection (the server is shut down, bounded).
    """
    from .client import open_client

    try:
        async with open_client(target.spec, options=client_options(args)) as client:
            return await _HANDLERS[command](_Run(client, target, ops, args, out, err))
    except CommandError as exc:
        err.write(f"mcpwire {command}: {exc}\n")
        return exc.status
    except MCPWireError as exc:
        err.write(f"mcpwire {command}: {describe_error(exc, target)}\n")
        return 2
