"""Config-mode commands: ``servers``, ``tools``, ``call NAME JSON`` and ``export``.

Each command reads the config search order (``--config PATH``, ``$MCPWIRE_CONFIG``,
``./mcp.json``, ``~/.config/mcpwire/mcp.json``), starts the host, prints to stdout and returns
the exit status: 0 ok, 1 the tool failed (an ``isError`` result, a failed call, a denied call or
an open circuit), 2 usage, configuration or connection errors. Problems go to stderr; with
``--json`` the output is JSON (errors too: ``{"error": {"type": ..., "message": ...}}``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TextIO

import msgspec
import trio

from ..errors import ApprovalDenied, CircuitOpen, ConfigError, HostError, MCPWireError, ToolExecutionError
from .config import CONFIG_ENV_VAR, HostConfig, find_config, load_config, search_paths
from .host import Host, ServerStatus
from .policies import ApprovalPolicy, ApprovalRequest, classify_risk
from .registry import DEFAULT_NAME_FORMAT, NAME_RULES, ToolRegistry

__all__ = ["COMMANDS", "EXIT_OK", "EXIT_TOOL_ERROR", "EXIT_USAGE", "main"]

COMMANDS: Final = ("servers", "tools", "call", "export")
EXIT_OK: Final = 0
EXIT_TOOL_ERROR: Final = 1
EXIT_USAGE: Final = 2


class UsageError(Exception):
    """A usage error: message for stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print and sys.exit
        raise UsageError(f"{message}\n{self.format_usage().strip()}")


def _parser(command: str) -> argparse.ArgumentParser:
    descriptions = {
        "servers": "Start the servers of mcp.json and show their status.",
        "tools": "List the namespaced tools of every server of mcp.json.",
        "call": 'Call one namespaced tool, e.g. mcpwire call github__search_issues \'{"q": "bug"}\'.',
        "export": "Export every tool for an LLM provider (OpenAI, Anthropic) or as Markdown.",
    }
    parser = _Parser(prog=f"mcpwire {command}", description=descriptions[command])
    parser.add_argument(
        "--config",
        metavar="PATH",
        help=f"config file (default: ${CONFIG_ENV_VAR}, ./mcp.json, ~/.config/mcpwire/mcp.json)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--strict", action="store_true", help="fail on any configuration problem or unreachable server")
    parser.add_argument("--start-timeout", type=float, default=30.0, metavar="SECONDS", help="wait for servers (30)")
    parser.add_argument("--name-format", default=DEFAULT_NAME_FORMAT, help="tool names, e.g. 'mcp_{server}_{tool}'")
    parser.add_argument("--provider", choices=sorted(NAME_RULES), default="openai", help="tool name rules")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr (-vv: debug)")
    if command in ("tools", "export", "servers"):
        parser.add_argument("--server", action="append", metavar="NAME", help="only this server (repeatable)")
    if command == "call":
        parser.add_argument("name", help="namespaced tool name, e.g. server__tool")
        parser.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments, or - for stdin")
        parser.add_argument("--approve", action="store_true", help="approve calls that need approval")
        parser.add_argument("--timeout", type=float, metavar="SECONDS", help="instead of the configured timeout")
    if command == "export":
        parser.add_argument("--format", choices=("openai", "anthropic", "markdown"), default="openai")
        parser.add_argument("--strict-schema", action="store_true", help="OpenAI strict mode schemas")
        parser.add_argument("--api", choices=("chat", "responses"), default="chat", help="OpenAI API shape")
    return parser


async def _approve_all(request: ApprovalRequest) -> bool:
    return True


def _dump(value: object) -> str:
    return json.dumps(value, indent=2, default=str, ensure_ascii=False)


class _Output:
    def __init__(self, command: str, as_json: bool, out: TextIO, err: TextIO) -> None:
        self.command = command
        self.json = as_json
        self.out = out
        self.err = err

    def warn(self, message: str) -> None:
        self.err.write(f"mcpwire {self.command}: warning: {message}\n")

    def fail(self, exc: BaseException | str, status: int, *, hint: str = "") -> int:
        message = f"{exc}{hint}"
        self.err.write(f"mcpwire {self.command}: {message}\n")
        if self.json:
            kind = type(exc).__name__ if isinstance(exc, BaseException) else "UsageError"
            self.out.write(_dump({"error": {"type": kind, "message": message}}) + "\n")
        return status


def _select(config: HostConfig, command: str, opts: argparse.Namespace) -> HostConfig:
    """Only the servers the command needs: ``--server``, or for ``call`` the ones whose
    namespace the tool name starts with (all when none does)."""
    names: set[str] | None = None
    if getattr(opts, "server", None):
        names = set(opts.server)
        unknown = names - {s.name for s in config.servers}
        if unknown:
            known = ", ".join(s.name for s in config.servers) or "none"
            raise ConfigError(f"no server named {', '.join(sorted(unknown))} in the configuration; known: {known}")
    elif command == "call":
        head = opts.name_format.split("{tool}")[0]
        guess = {s.name for s in config.servers if head and opts.name.startswith(head.format(server=s.prefix))}
        names = guess or None
    if names is None:
        return config
    return msgspec.structs.replace(config, servers=tuple(s for s in config.servers if s.name in names))


async def _run(command: str, opts: argparse.Namespace, config: HostConfig, io: _Output) -> int:
    approver = _approve_all if getattr(opts, "approve", False) else None
    host = Host(
        _select(config, command, opts),
        name_format=opts.name_format,
        provider=opts.provider,
        start_timeout=opts.start_timeout,
        health_interval=0,
        approver=approver,
    )
    out = io.out
    async with host:
        down = [i for i in host.list() if i.config.enabled and i.status is not ServerStatus.CONNECTED]
        if command == "servers":
            rows = [
                {
                    "name": i.name,
                    "transport": i.config.type,
                    "status": i.status.value if i.config.enabled else "disabled",
                    "era": i.era,
                    "protocol_version": i.protocol_version,
                    "tools": i.tool_count,
                    "error": i.error,
                    "description": i.config.description,
                    "target": i.config.target,
                }
                for i in host.list()
            ]
            if io.json:
                out.write(_dump(rows) + "\n")
            else:
                out.write(_table(rows))
            return EXIT_USAGE if opts.strict and down else EXIT_OK
        for info in down:
            io.warn(
                f"server {info.name!r} is {info.status.value}: {info.error or 'not connected'}; its tools are missing"
            )
        if command == "tools":
            _print_tools(host, io)
        elif command == "export":
            registry = host.registry
            if opts.format == "markdown":
                text = registry.to_markdown()
                out.write(_dump({"format": "markdown", "text": text}) + "\n" if io.json else text)
            elif opts.format == "anthropic":
                out.write(_dump(registry.to_anthropic()) + "\n")
            else:
                out.write(_dump(registry.to_openai(strict=opts.strict_schema, api=opts.api)) + "\n")
        else:
            return await _call(host, opts, io)
        return EXIT_USAGE if opts.strict and down else EXIT_OK


def _print_tools(host: Host, io: _Output) -> None:
    policies = {i.name: ApprovalPolicy(trust_annotations=i.config.policy.trust_annotations) for i in host.list()}
    rows: list[dict[str, Any]] = []
    for t in host.tools():
        ann = t.tool.annotations
        risk = classify_risk(
            t.tool.name,
            read_only=t.read_only,
            destructive=t.destructive,
            idempotent=t.idempotent,
            open_world=t.open_world,
            trust_annotations=policies[t.server].trust_annotations,
        )
        rows.append(
            {
                "name": t.name,
                "server": t.server,
                "tool": t.tool.name,
                "description": t.tool.description,
                "risk": risk.name,
                "annotations": None if ann is None else msgspec.to_builtins(ann),
                "input_schema": t.tool.input_schema,
            }
        )
    if io.json:
        io.out.write(_dump(rows) + "\n")
        return
    if not rows:
        io.out.write("no tools\n")
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        desc = (r["description"] or "").strip().splitlines()[0] if r["description"] else ""
        io.out.write(f"{r['name']:<{width}}  {r['risk']:<8}  {desc}\n")


async def _call(host: Host, opts: argparse.Namespace, io: _Output) -> int:
    try:
        result = await host.call_tool(opts.arguments_name, opts.parsed_arguments, timeout=opts.timeout)
    except (ToolExecutionError, ApprovalDenied, CircuitOpen) as exc:
        hint = " (use --approve to approve it)" if isinstance(exc, ApprovalDenied) and "no approver" in str(exc) else ""
        return io.fail(exc, EXIT_TOOL_ERROR, hint=hint)
    if io.json:
        payload = {
            "name": result.name,
            "server": result.server,
            "tool": result.tool,
            "is_error": result.is_error,
            "text": result.text,
            "result": msgspec.to_builtins(result.result),
        }
        io.out.write(_dump(payload) + "\n")
    else:
        io.out.write(result.text + "\n")
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no servers configured\n"
    headers = ("NAME", "TRANSPORT", "STATUS", "ERA", "REVISION", "TOOLS", "DETAIL")
    cells = [
        (
            r["name"],
            r["transport"],
            r["status"],
            r["era"] or "-",
            r["protocol_version"] or "-",
            str(r["tools"]),
            r["error"] or r["description"] or "",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in [headers, *cells]]
    return "\n".join(lines) + "\n"


def _arguments(text: str, stdin: TextIO) -> dict[str, object]:
    if text == "-":
        text = stdin.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"the arguments are not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(value, dict):
        raise UsageError(f'the arguments must be a JSON object, e.g. \'{{"text": "hi"}}\', not {type(value).__name__}')
    return value


@contextmanager
def _logging(verbose: int, err: TextIO) -> Iterator[None]:
    """-v: the library's log lines on stderr; otherwise none (the command reports problems)."""
    logger = logging.getLogger("mcpwire")
    saved = (logger.level, logger.propagate)
    handler: logging.Handler
    if verbose:
        handler = logging.StreamHandler(err)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.setLevel(logging.INFO if verbose == 1 else logging.DEBUG)
    else:
        handler = logging.NullHandler()
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def main(command: str, argv: Sequence[str]) -> int:
    """Runs one config-mode command and returns its exit status (0 ok, 1 tool error, 2 usage,
    configuration or connection error)."""
    out, err = sys.stdout, sys.stderr
    if command not in COMMANDS:
        err.write(f"mcpwire: unknown command {command!r}; expected one of {', '.join(COMMANDS)}\n")
        return EXIT_USAGE
    as_json = "--json" in argv
    io = _Output(command, as_json, out, err)
    parser = _parser(command)
    try:
        opts = parser.parse_args(list(argv))
        if command == "call":
            opts.arguments_name = opts.name
            opts.parsed_arguments = _arguments(opts.arguments, sys.stdin)
        try:
            ToolRegistry(name_format=opts.name_format)
        except ValueError as exc:
            raise UsageError(f"--name-format: {exc}") from None
    except UsageError as exc:
        return io.fail(exc, EXIT_USAGE)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    with _logging(opts.verbose, err):
        try:
            path = find_config(opts.config)
            if path is None:
                searched = ", ".join([f"${CONFIG_ENV_VAR}", *(str(p) for p in search_paths())])
                return io.fail(f"no configuration file found (searched {searched}); pass --config PATH", EXIT_USAGE)
            config = load_config(path, strict=opts.strict)
            for problem in config.problems:
                io.warn(f"{problem}; the server is skipped")
            return trio.run(_run, command, opts, config, io)
        except ConfigError as exc:
            return io.fail(exc, EXIT_USAGE)
        except HostError as exc:  # UnknownTool and friends: the name or the setup is wrong
            return io.fail(exc, EXIT_USAGE)
        except MCPWireError as exc:
            return io.fail(exc, EXIT_USAGE)
        except KeyboardInterrupt:
            err.write(f"mcpwire {command}: interrupted\n")
            return 130
