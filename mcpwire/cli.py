"""The ``mcpwire`` command line.

    mcpwire info  [--json] [-- CMD ARGS... | -- URL]   era, revision, server, capabilities
    mcpwire tools [--json] [-- CMD ARGS...]            the server's tools
    mcpwire call  [--json] TOOL ['{json}']             call a tool of the demo server
    mcpwire call  [--json] -- CMD ARGS... TOOL '{json}'
    mcpwire check [OPTIONS] [-- CMD ARGS... | URL | NAME]  conformance report (mcpwire.conformance.cli)
    mcpwire fuzz  [OPTIONS] [-- CMD ARGS... | URL]         property-based fuzzing (mcpwire.fuzz.cli)
    mcpwire servers | tools | call NAME '{json}' | export   the servers of mcp.json (host.cli)
    mcpwire login URL                                      OAuth authorization (auth.cli)

With no command the bundled demo server (``python -m mcpwire.testing.demo_server``) is used, so
every command works on a fresh install; ``tools`` and ``call`` use the servers of ``mcp.json``
instead when one is given (``--config``) or found (``$MCPWIRE_CONFIG``, ``./mcp.json``, the user's
config file). Exit status: 0 on success, 1 when a called tool reports an error (for ``check``:
when a MUST fails; for ``fuzz``: when something was found), 2 on usage, connection or protocol
errors.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import msgspec
import trio

from .errors import MCPWireError, RPCError
from .transports import HttpServer, StdioServer, split_header

__all__ = ["main"]


class UsageError(Exception):
    pass


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Splits ``[opts...] -- CMD ARGS...`` into options and the server command."""
    if "--" in argv:
        i = list(argv).index("--")
        command = list(argv[i + 1 :])
        if not command:
            raise UsageError("nothing after '--': give the server's command, e.g. -- npx -y @scope/server")
        return list(argv[:i]), command
    return list(argv), None


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--era", choices=["auto", "legacy", "modern"], default="auto", help="force a protocol era")
    common.add_argument("--protocol-version", help="force one revision, e.g. 2025-06-18")
    common.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    common.add_argument("--connect-timeout", type=float, default=60.0, help="seconds to start and handshake")
    common.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="server environment")
    common.add_argument("--cwd", help="server working directory")
    common.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="HTTP header (URL targets; NAME:VALUE works too)",
    )
    common.add_argument(
        "--bearer-env",
        metavar="VAR",
        help="send 'Authorization: Bearer $VAR' (URL targets; the token is read from the environment, not argv)",
    )
    common.add_argument(
        "--transport", choices=["auto", "streamable-http", "sse"], default="auto", help="HTTP transport"
    )
    common.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv for debug)")
    parser = argparse.ArgumentParser(
        prog="mcpwire",
        description="Talk to MCP servers. After '--' comes the server command; without it, the bundled demo server.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", parents=[common], help="show era, revision, server info and capabilities")
    sub.add_parser("tools", parents=[common], help="list the server's tools")
    call = sub.add_parser("call", parents=[common], help="call a tool: TOOL '{json arguments}'")
    for name, (_module, _needs) in _DELEGATED.items():  # listed in --help; parsed by their modules
        sub.add_parser(name, help=_DELEGATED_HELP.get(name, ""), add_help=False)
    call.add_argument("tool", nargs="?", help="tool name (with a server command: the last two words after --)")
    call.add_argument("arguments", nargs="?", help="JSON object of arguments")
    return parser


def _spec(args: argparse.Namespace, command: list[str] | None) -> StdioServer | HttpServer | None:
    if command is not None and len(command) == 1 and command[0].startswith(("http://", "https://")):
        headers: dict[str, str] = {}
        for item in args.header:
            try:
                key, value = split_header(item)
            except ValueError as exc:
                raise UsageError(f"--header: {exc}") from None
            headers[key] = value
        token = None
        if args.bearer_env:
            token = os.environ.get(args.bearer_env)
            if not token:
                raise UsageError(f"--bearer-env {args.bearer_env}: that environment variable is not set")
        try:
            return HttpServer(url=command[0], headers=headers, bearer_token=token, transport=args.transport)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.header or args.bearer_env:
        raise UsageError("--header and --bearer-env need a URL after '--'")
    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--env takes KEY=VALUE, not {item!r}")
        env[key] = value
    if command is None:
        if env or args.cwd:
            raise UsageError("--env and --cwd need a server command after '--'")
        return None
    return StdioServer(command=command[0], args=tuple(command[1:]), env=env, cwd=args.cwd)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "era": args.era,
        "protocol_version": args.protocol_version,
        "timeout": args.timeout,
        "connect_timeout": args.connect_timeout,
    }


def _to_json(value: object) -> Any:
    return msgspec.to_builtins(value)


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(_to_json(value), indent=2, ensure_ascii=False) + "\n")


async def _run(
    args: argparse.Namespace, spec: StdioServer | HttpServer | None, call: tuple[str, dict[str, Any]] | None
) -> int:
    from .client import open_client

    async with open_client(spec, **_options(args)) as client:
        if args.command == "info":
            info = {
                "server": client.label,
                "era": client.era.value if client.era else None,
                "protocolVersion": client.protocol_version,
                "serverInfo": _to_json(client.server_info),
                "capabilities": _to_json(client.server_capabilities),
                "instructions": client.instructions,
            }
            if args.json:
                _print_json(info)
            else:
                si = client.server_info
                print(f"server:       {si.name if si else '?'} {si.version if si else ''}".rstrip())
                print(f"era:          {info['era']}")
                print(f"revision:     {client.protocol_version}")
                caps = info["capabilities"] or {}
                print(f"capabilities: {', '.join(sorted(caps)) or '(none)'}")
                if client.instructions:
                    print(f"instructions: {client.instructions.splitlines()[0][:100]}")
            return 0
        if args.command == "tools":
            tools = await client.list_tools()
            if args.json:
                _print_json(tools)
            else:
                width = max((len(t.name) for t in tools), default=0)
                for tool in tools:
                    summary = (tool.description or "").strip().splitlines()
                    print(f"{tool.name:<{width}}  {summary[0][:100] if summary else ''}")
                print(f"({len(tools)} tools, {client.era.value if client.era else '?'} era, {client.protocol_version})")
            return 0
        assert call is not None
        name, arguments = call
        await client.list_tools()  # so the result is checked against the tool's outputSchema
        result = await client.call_tool(name, arguments)
        if args.json:
            payload = {
                "content": _to_json(result.content),
                "isError": result.is_error,
            }
            if not isinstance(result.structured_content, msgspec.UnsetType):
                payload["structuredContent"] = result.structured_content
            _print_json(payload)
        else:
            text = result.text()
            print(text if text else json.dumps(_to_json(result.content), ensure_ascii=False))
        return 1 if result.is_error else 0


_DELEGATED_HELP: dict[str, str] = {
    "check": "check a server against the specification: check [-- CMD ARGS... | URL | NAME]",
    "fuzz": "property-based fuzzing of a server's tools and protocol: fuzz [-- CMD ARGS... | URL]",
    "servers": "start the servers of mcp.json and show their status",
    "export": "export the tools of mcp.json for an LLM: export --format openai|anthropic|markdown",
    "login": "authorize with an OAuth-protected server and store the tokens: login URL",
    "serve": "run the host as a service: management API, web console and MCP gateway",
    "chat": "talk to an LLM that calls the tools of your MCP servers",
}

#: subcommands implemented elsewhere: name -> (module, what it needs when missing)
_DELEGATED: dict[str, tuple[str, str]] = {
    "check": ("mcpwire.conformance.cli", "the check extra: pip install 'mcpwire[check]'"),
    "fuzz": ("mcpwire.fuzz.cli", "the fuzz extra: pip install 'mcpwire[fuzz]'"),
    "servers": ("mcpwire.host.cli", "the http extra for HTTP servers: pip install 'mcpwire[http]'"),
    "export": ("mcpwire.host.cli", "the http extra for HTTP servers: pip install 'mcpwire[http]'"),
    "login": ("mcpwire.auth.cli", "the http extra: pip install 'mcpwire[http]'"),
    "serve": ("mcpwire.service.cli", "the serve extra: pip install 'mcpwire[serve]'"),
    "chat": ("mcpwire.agent.cli", "the agent extra: pip install 'mcpwire[agent]'"),
}

#: commands that take their servers from mcp.json (the host); `tools` and `call` join them when a
#: config is given or found and no server command follows '--'
_HOST_COMMANDS = frozenset({"servers", "export", "tools", "call"})


def _delegate(command: str, argv: list[str]) -> int:
    import importlib

    module_name, needs = _DELEGATED.get(command, ("mcpwire.host.cli", ""))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(f"mcpwire {command}: not available ({exc}); it needs {needs}", file=sys.stderr)
        return 2
    result: int = module.main(command, argv) if command in _HOST_COMMANDS else module.main(argv)
    return result


def _uses_config(argv: Sequence[str]) -> bool:
    """``tools``/``call`` without ``-- CMD``: the servers of mcp.json when one is given or found.

    Found means ``--config``, ``$MCPWIRE_CONFIG``, ``./mcp.json`` or the user's config file (the
    host's search order); with none of them the bundled demo server answers, as on a fresh install.
    """
    if "--" in argv:
        return False
    if any(a == "--config" or a.startswith("--config=") for a in argv):
        return True
    from .host.config import CONFIG_ENV_VAR, find_config

    if os.environ.get(CONFIG_ENV_VAR):
        return True
    try:
        return find_config() is not None
    except MCPWireError:  # pragma: no cover - only an explicit path can be missing
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mcpwire`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and (argv[0] in _DELEGATED or (argv[0] in _HOST_COMMANDS and _uses_config(argv[1:]))):
        return _delegate(argv[0], argv[1:])
    parser = _parser()
    try:
        options, command = _split_command(argv)
        call: tuple[str, dict[str, Any]] | None = None
        if options and options[0] == "call" and command is not None:
            # `call -- CMD ARGS... TOOL '{json}'`: the last two words are the tool and its arguments.
            if len(command) < 3:
                raise UsageError("usage: mcpwire call -- CMD [ARGS...] TOOL '{json arguments}'")
            options = [*options, command[-2], command[-1]]
            command = command[:-2]
        args = parser.parse_args(options)
        if args.command == "call":
            if not args.tool:
                raise UsageError("call needs a tool name: mcpwire call TOOL '{json arguments}'")
            try:
                arguments = json.loads(args.arguments) if args.arguments else {}
            except json.JSONDecodeError as exc:
                raise UsageError(f"the arguments are not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(arguments, dict):
                raise UsageError('the arguments must be a JSON object, e.g. \'{"text": "hi"}\'')
            call = (args.tool, arguments)
        spec = _spec(args, command)
    except UsageError as exc:
        print(f"mcpwire: {exc}", file=sys.stderr)
        return 2
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if args.verbose == 0:
        logging.getLogger("mcpwire.server").setLevel(logging.ERROR)
    try:
        return trio.run(_run, args, spec, call)
    except RPCError as exc:
        print(f"mcpwire: {exc}", file=sys.stderr)
        return 2
    except MCPWireError as exc:
        print(f"mcpwire: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
