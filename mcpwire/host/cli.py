"""The command line over the servers of mcp.json: ``servers``, ``tools``, ``call``, ``export``,
``resources``, ``read``, ``prompts`` and ``prompt`` without a target.

``mcpwire`` (:mod:`mcpwire.cli`) parses the command line, finds the config (asking before it runs
the servers of a project-local one) and calls :func:`run`; :func:`main` is the same with its own
parser, for programs that embed these commands. Exit statuses: 0 ok, 1 the tool failed (an
``isError`` result, a failed call, a denied call or an open circuit), 2 usage, configuration or
connection errors; from :func:`main`, 130 and 143 after SIGINT and SIGTERM (the servers are shut
down first, and a Ctrl+C is never a traceback: :func:`mcpwire.cliargs.run_cli`). Problems go to
stderr; with ``--json`` the output is JSON (errors too: ``{"error": {"type": ..., "message": ...}}``),
with MCP's camelCase keys. Everything a server sends is shown through :mod:`mcpwire.host.render`,
never raw.
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TextIO

import msgspec
import trio

from ..cliargs import EXIT_SIGINT, EXIT_SIGTERM, declare_as_serve, run_cli
from ..client import ClientOptions
from ..errors import (
    ApprovalDenied,
    CircuitOpen,
    ConfigError,
    HostError,
    MCPWireError,
    ToolExecutionError,
    UnknownTool,
)
from ..protocol.types import Prompt
from ..redaction import REDACTED, SecretValues, argv_secrets, clean_terminal, is_secret_name, redact_argv, redact_url
from .config import CONFIG_ENV_VAR, HostConfig, ServerConfig, find_config, load_config, search_paths
from .host import Host, ServerInfo, ServerStatus
from .policies import ApprovalPolicy, ApprovalRequest, classify_risk
from .registry import DEFAULT_NAME_FORMAT, NAME_RULES, ToolRegistry
from .render import (
    first_line,
    prompt_text,
    render_for_terminal,
    result_json,
    terminal_contents,
    terminal_json,
    tool_listing,
    unknown_name,
)

__all__ = [
    "COMMANDS",
    "EXIT_OK",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "UsageError",
    "add_config_options",
    "config_secrets",
    "main",
    "parse_arguments",
    "run",
]

COMMANDS: Final = ("servers", "tools", "call", "export", "resources", "read", "prompts", "prompt")
EXIT_OK: Final = 0
EXIT_TOOL_ERROR: Final = 1
EXIT_USAGE: Final = 2
#: Lines of a server's stderr kept to explain why it did not start.
STDERR_TAIL_LINES: Final = 3


class UsageError(Exception):
    """A usage error: message for stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print and sys.exit
        raise UsageError(f"{message}\n{self.format_usage().strip()}")


def add_config_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Adds the options a command has when it works on the servers of mcp.json."""
    group = parser.add_argument_group("options for the servers of mcp.json (no target given)")
    if command in ("servers", "tools", "export", "resources", "prompts"):
        group.add_argument("--server", action="append", metavar="NAME", help="only this server (repeatable)")
    group.add_argument(
        "--strict", action="store_true", help="fail on any configuration problem or server that does not start"
    )
    if command in ("tools", "call", "export", "prompts", "prompt"):
        group.add_argument(
            "--name-format",
            default=DEFAULT_NAME_FORMAT,
            metavar="FORMAT",
            help="how names are namespaced, e.g. 'mcp_{server}_{tool}' (default %(default)s)",
        )
        group.add_argument(
            "--provider", choices=sorted(NAME_RULES), default="openai", help="whose tool-name rules apply (%(default)s)"
        )
    if command == "call":
        group.add_argument(
            "--approve",
            nargs="?",
            const="all",
            choices=("all", "ask", "deny"),
            help="calls that need approval: all (--approve alone) approves them, ask asks on the terminal "
            "(CRITICAL twice), deny refuses them; default: ask on a terminal, else deny",
        )
    if command == "export":
        group.add_argument(
            "--format", choices=("openai", "anthropic", "markdown"), default="openai", help="(%(default)s)"
        )
        group.add_argument("--strict-schema", action="store_true", help="OpenAI strict mode schemas")
        group.add_argument(
            "--api", choices=("chat", "responses"), default="chat", help="OpenAI API shape (%(default)s)"
        )


def _parser(command: str) -> argparse.ArgumentParser:
    """The parser of :func:`main` (``mcpwire`` itself builds a fuller one)."""
    descriptions = {
        "servers": "Start the servers of mcp.json and show their status.",
        "tools": "List the namespaced tools of every server of mcp.json.",
        "call": 'Call one namespaced tool, e.g. mcpwire call github__search_issues \'{"q": "bug"}\'.',
        "export": "Export every tool for an LLM provider (OpenAI, Anthropic) or as Markdown.",
        "resources": "List the resources of every server of mcp.json.",
        "read": "Read a resource of one of the servers of mcp.json.",
        "prompts": "List the namespaced prompts of every server of mcp.json.",
        "prompt": "Render one namespaced prompt.",
    }
    parser = _Parser(prog=f"mcpwire {command}", description=descriptions[command])
    parser.add_argument(
        "--config",
        metavar="PATH",
        help=f"config file (default: ${CONFIG_ENV_VAR}, ./mcp.json, ~/.config/mcpwire/mcp.json)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--start-timeout", dest="connect_timeout", type=float, default=30.0, metavar="SECONDS", help="wait for servers"
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr (-vv: debug)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="instead of the configured timeout")
    if command == "call":
        parser.add_argument("name", help="namespaced tool name, e.g. server__tool")
        parser.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments, or - for stdin")
    if command == "read":
        parser.add_argument("uri", help="the resource's URI")
    if command == "prompt":
        parser.add_argument("name", help="namespaced prompt name")
        parser.add_argument("arguments", nargs="*", metavar="KEY=VALUE", help="the prompt's arguments")
    add_config_options(parser, command)
    return parser


class _Approvals:
    """The approver of ``--approve``: all, deny (keeping what was asked, to say so), or a
    question on the terminal for each confirmation a call needs."""

    def __init__(self, mode: str, stdin: TextIO, err: TextIO) -> None:
        self.mode = mode
        self.stdin = stdin
        self.err = err
        self.refused: ApprovalRequest | None = None

    async def __call__(self, request: ApprovalRequest) -> bool:
        if self.mode == "all":
            return True
        if self.mode == "deny":
            self.refused = request
            return False
        return await trio.to_thread.run_sync(self._ask, request, abandon_on_cancel=True)

    def _ask(self, request: ApprovalRequest) -> bool:
        arguments = {k: REDACTED if is_secret_name(k) else v for k, v in request.arguments.items()}
        if request.confirmation == 1:
            self.err.write(
                clean_terminal(
                    f"{request.name} (tool {request.tool!r} on server {request.server!r}) needs approval: "
                    f"risk {request.risk.name}, {request.reason}\n  arguments: {terminal_json(arguments)}\n"
                )
            )
        step = (
            f" ({request.confirmation} of {request.confirmations_needed})" if request.confirmations_needed > 1 else ""
        )
        self.err.write(f"Run it{step}? [y/N] ")
        self.err.flush()
        approved = self.stdin.readline().strip().lower() in ("y", "yes")
        if not approved:
            self.refused = request
        return approved


def _approvals(opts: argparse.Namespace, stdin: TextIO, err: TextIO) -> _Approvals | None:
    mode = getattr(opts, "approve", None)
    if mode is None and not hasattr(opts, "approve"):
        return None  # not a call
    if mode is None:
        try:
            mode = "ask" if stdin.isatty() else "deny"
        except (AttributeError, ValueError):
            mode = "deny"
    return _Approvals(mode, stdin, err)


class _Output:
    def __init__(self, command: str, as_json: bool, out: TextIO, err: TextIO) -> None:
        self.command = command
        self.json = as_json
        self.out = out
        self.err = err
        #: the configured credentials, masked wherever a server's words are repeated
        self.secrets = SecretValues()

    def mask(self, text: str) -> str:
        return self.secrets.mask(text)

    def warn(self, message: str) -> None:
        self.err.write(f"mcpwire {self.command}: warning: {clean_terminal(self.mask(message), newlines=False)}\n")

    def fail(self, exc: BaseException | str, status: int, *, hint: str = "") -> int:
        message = clean_terminal(self.mask(f"{exc}{hint}"))
        self.err.write(f"mcpwire {self.command}: {message}\n")
        if self.json:
            kind = type(exc).__name__ if isinstance(exc, BaseException) else "UsageError"
            self.write_json({"error": {"type": kind, "message": message}})
        return status

    def write_json(self, value: object) -> None:
        self.out.write(terminal_json(value) + "\n")


class _StderrTails(logging.Handler):
    """Keeps the last lines each server wrote to stderr (``mcpwire.server.<name>``), to say why
    a server that failed to start failed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.tails: dict[str, collections.deque[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        name = record.name.removeprefix("mcpwire.server.")
        tail = self.tails.setdefault(name, collections.deque(maxlen=STDERR_TAIL_LINES))
        tail.append(record.getMessage())


def _select(config: HostConfig, command: str, opts: argparse.Namespace) -> HostConfig:
    """Only the servers the command needs: ``--server``, or for ``call`` and ``prompt`` the ones
    whose namespace the name starts with (all when none does)."""
    names: set[str] | None = None
    if getattr(opts, "server", None):
        names = set(opts.server)
        unknown = names - {s.name for s in config.servers}
        if unknown:
            known = ", ".join(s.name for s in config.servers) or "none"
            raise ConfigError(f"no server named {', '.join(sorted(unknown))} in the configuration; known: {known}")
    elif command in ("call", "prompt"):
        head = opts.name_format.split("{tool}")[0]
        guess = {s.name for s in config.servers if head and opts.name.startswith(head.format(server=s.prefix))}
        names = guess or None
    if names is None:
        return config
    return msgspec.structs.replace(config, servers=tuple(s for s in config.servers if s.name in names))


def config_secrets(config: HostConfig) -> SecretValues:
    """Every credential the configuration holds: environment and header values, tokens, and the
    values of secret-looking arguments and URL parts."""
    values: list[str] = []
    for server in config.servers:
        values += [*server.env.values(), *server.headers.values()]
        values += [server.auth_token] if server.auth_token else []
        values += argv_secrets([server.command or "", *server.args, *([server.url] if server.url else [])])
    return SecretValues(values)


def _shown_target(config: ServerConfig) -> str:
    """The command line or URL of an entry, with credentials redacted."""
    if config.type == "stdio":
        return " ".join(redact_argv([config.command or "", *config.args]))
    return redact_url(config.url or "")


def _why_down(info: ServerInfo, tails: _StderrTails, timeout: float) -> str:
    """A sentence on a server that is not connected, with its stderr's last line when it failed."""
    error = info.error or (info.last_error if info.restart_count else None)
    if error:  # failed (a retry may be under way: the host keeps trying)
        reason = error
        tail = [line for line in tails.tails.get(info.name, ()) if line.strip()]
        if tail and tail[-1] not in reason:
            reason += f" (stderr: {tail[-1].strip()})"
        return f"server {info.name!r} failed to start: {reason}"
    if info.status is ServerStatus.CONNECTING:
        return f"server {info.name!r} did not finish starting within {timeout:g} s (raise --connect-timeout)"
    return f"server {info.name!r} is not connected"


def _status(info: ServerInfo) -> str:
    """What ``servers`` shows: a server retrying after a failure is in error, not connecting."""
    if not info.config.enabled:
        return "disabled"
    if info.status is ServerStatus.CONNECTING and (info.error or (info.restart_count and info.last_error)):
        return ServerStatus.ERROR.value
    return info.status.value


def _host(command: str, opts: argparse.Namespace, config: HostConfig, approver: _Approvals | None) -> Host:
    return Host(
        _select(config, command, opts),
        name_format=getattr(opts, "name_format", DEFAULT_NAME_FORMAT),
        provider=getattr(opts, "provider", "openai"),
        start_timeout=getattr(opts, "connect_timeout", 30.0),
        health_interval=0,
        approver=approver,
        client_options=declare_as_serve(
            ClientOptions(
                era=getattr(opts, "era", None) or "auto", protocol_version=getattr(opts, "protocol_version", None)
            ),
            command,
        ),
    )


async def run(
    command: str,
    opts: argparse.Namespace,
    config: HostConfig,
    out: TextIO,
    err: TextIO,
    *,
    stdin: TextIO | None = None,
) -> int:
    """Runs one command on the servers of ``config``; returns the exit status.

    ``opts`` carries the options of :func:`add_config_options` plus ``json``, ``connect_timeout``
    and, per command, ``name``/``arguments`` (``call``: a dict), ``uri`` (``read``) or
    ``name``/``arguments`` (``prompt``: a dict of strings).

    Cancellation: the servers are stopped in order (bounded), then the cancellation propagates.
    """
    io = _Output(command, bool(getattr(opts, "json", False)), out, err)
    io.secrets = config_secrets(config)
    for problem in config.problems:
        io.warn(f"{problem}; the server is skipped")
    tails = _StderrTails()
    server_log = logging.getLogger("mcpwire.server")
    saved = (server_log.level, server_log.propagate)
    server_log.addHandler(tails)
    if server_log.getEffectiveLevel() > logging.INFO:  # kept for messages, not shown as they come
        server_log.setLevel(logging.INFO)
        server_log.propagate = False
    try:
        approver = _approvals(opts, stdin or sys.stdin, err) if command == "call" else None
        host = _host(command, opts, config, approver)
        async with host:
            return await _dispatch(command, host, opts, io, tails, approver)
    except ConfigError as exc:
        return io.fail(exc, EXIT_USAGE)
    except HostError as exc:  # UnknownTool and friends: the name or the setup is wrong
        return io.fail(exc, EXIT_USAGE)
    except MCPWireError as exc:
        return io.fail(exc, EXIT_USAGE)
    finally:
        server_log.removeHandler(tails)
        server_log.setLevel(saved[0])
        server_log.propagate = saved[1]


async def _dispatch(
    command: str, host: Host, opts: argparse.Namespace, io: _Output, tails: _StderrTails, approver: _Approvals | None
) -> int:
    timeout = getattr(opts, "connect_timeout", 30.0)
    down = [i for i in host.list() if i.config.enabled and i.status is not ServerStatus.CONNECTED]
    strict_failure = EXIT_USAGE if getattr(opts, "strict", False) and down else EXIT_OK
    if command == "servers":
        _servers(host, io, tails, timeout)
        return strict_failure
    what = {"resources": "resources", "read": "resources", "prompts": "prompts", "prompt": "prompts"}.get(
        command, "tools"
    )
    for info in down if command != "call" else ():  # a failed call says why in its own message
        io.warn(f"{_why_down(info, tails, timeout)}; its {what} are missing")
    everything_down = down and len(down) == len([i for i in host.list() if i.config.enabled])
    if everything_down and command not in ("call", "prompt", "read"):  # those say why about their own name
        return io.fail(f"none of the {len(down)} configured server(s) started", EXIT_USAGE)
    if command == "tools":
        _print_tools(host, opts, io)
    elif command == "export":
        _export(host, opts, io)
    elif command == "call":
        return await _call(host, opts, io, tails, timeout, approver)
    elif command == "resources":
        await _resources(host, io)
    elif command == "read":
        return await _read(host, opts, io)
    elif command == "prompts":
        await _prompts(host, io)
    else:
        return await _prompt(host, opts, io)
    return strict_failure


def _servers(host: Host, io: _Output, tails: _StderrTails, timeout: float) -> None:
    rows = []
    for i in host.list():
        status = _status(i)
        error = None
        if i.config.enabled and i.status is not ServerStatus.CONNECTED:
            error = _why_down(i, tails, timeout).split(": ", 1)[-1]
        rows.append(
            {
                "name": i.name,
                "transport": i.config.type,
                "status": status,
                "era": i.era,
                "protocolVersion": i.protocol_version,
                "tools": i.tool_count,
                "error": None if error is None else io.mask(error),
                "description": i.config.description,
                "target": _shown_target(i.config),
            }
        )
    if io.json:
        io.write_json(rows)
    else:
        io.out.write(_table(rows))


def _export(host: Host, opts: argparse.Namespace, io: _Output) -> None:
    registry = host.registry
    if opts.format == "markdown":
        text = registry.to_markdown()
        if io.json:
            io.write_json({"format": "markdown", "text": text})
        else:
            io.out.write(clean_terminal(text))
    elif opts.format == "anthropic":
        io.write_json(registry.to_anthropic())
    else:
        io.write_json(registry.to_openai(strict=opts.strict_schema, api=opts.api))


def _print_tools(host: Host, opts: argparse.Namespace, io: _Output) -> None:
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
                "inputSchema": t.tool.input_schema,
            }
        )
    if io.json:
        io.write_json(rows)
        return
    if not rows:
        io.out.write("no tools\n")
        return
    listed = [(r["name"], r["inputSchema"], r["description"], r["risk"]) for r in rows]
    io.out.writelines(line + "\n" for line in tool_listing(listed, schema=getattr(opts, "schema", False)))


def _unknown_tool(host: Host, name: str, tails: _StderrTails, timeout: float) -> str:
    head = host.registry.name_format.split("{tool}")[0]
    for info in host.list():
        prefix = head.format(server=info.config.prefix)
        if prefix and name.startswith(prefix) and info.status is not ServerStatus.CONNECTED:
            if not info.config.enabled:
                return f"no tool named {name!r}: server {info.name!r} is disabled in the configuration"
            return f"no tool named {name!r}: {_why_down(info, tails, timeout)}"
    return unknown_name("tool", name, [t.name for t in host.tools()], "the servers of the configuration")


async def _call(
    host: Host, opts: argparse.Namespace, io: _Output, tails: _StderrTails, timeout: float, approver: _Approvals | None
) -> int:
    try:
        result = await host.call_tool(opts.name, opts.arguments, timeout=opts.timeout)
    except UnknownTool:
        return io.fail(_unknown_tool(host, opts.name, tails, timeout), EXIT_USAGE)
    except ApprovalDenied as exc:
        refused = approver.refused if approver is not None else None
        if refused is None:
            return io.fail(exc, EXIT_TOOL_ERROR)
        where = f"tool {refused.tool!r} on server {refused.server!r}"
        if approver is not None and approver.mode == "ask":
            return io.fail(f"not run: {where} was not approved", EXIT_TOOL_ERROR)
        return io.fail(
            f"{where} needs approval: {refused.reason} (risk {refused.risk.name}); on a terminal you are asked",
            EXIT_TOOL_ERROR,
            hint=" (use --approve to approve it)",
        )
    except (ToolExecutionError, CircuitOpen) as exc:
        return io.fail(exc, EXIT_TOOL_ERROR)
    if io.json:
        io.write_json(
            {
                "name": result.name,
                "server": result.server,
                "tool": result.tool,
                "isError": result.is_error,
                "text": result.text,
                "result": result_json(result.result),
            }
        )
    else:
        text = render_for_terminal(result.result)
        if result.is_error:
            text = f"Error: {text}" if text else "Error: the tool failed without a message"
        io.out.write(text + "\n" if text else "")
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


async def _resources(host: Host, io: _Output) -> None:
    resources, templates = host.resources(), host.resource_templates()
    if io.json:
        io.write_json(
            {
                "resources": [{"server": r.server, **msgspec.to_builtins(r.resource)} for r in resources],
                "resourceTemplates": [{"server": t.server, **msgspec.to_builtins(t.template)} for t in templates],
            }
        )
        return
    rows = [
        (r.server, r.resource.uri, r.resource.mime_type or "", first_line(r.resource.description) or r.resource.name)
        for r in resources
    ]
    rows += [
        (
            t.server,
            t.template.uri_template,
            t.template.mime_type or "",
            first_line(t.template.description) or t.template.name,
        )
        for t in templates
    ]
    cells = [tuple(clean_terminal(c, newlines=False) for c in row) for row in rows]
    if not cells:
        io.out.write("no resources\n")
        return
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    for cell in cells:
        io.out.write(
            ("  ".join(v.ljust(w) for v, w in zip(cell[:3], widths, strict=True)) + f"  {cell[3]}").rstrip() + "\n"
        )


async def _read(host: Host, opts: argparse.Namespace, io: _Output) -> int:
    """Reads a URI from the one server that lists it (or whose template's fixed start it has)."""
    uri: str = opts.uri
    owners = sorted({r.server for r in host.resources() if r.resource.uri == uri})
    if not owners:  # a template's fixed start (`demo://items/` of `demo://items/{id}`)
        owners = sorted(
            {
                t.server
                for t in host.resource_templates()
                if uri.startswith(t.template.uri_template.split("{")[0] or "\0")
            }
        )
    offering = sorted({r.server for r in host.resources()} | {t.server for t in host.resource_templates()})
    if not owners and len(offering) == 1:
        owners = offering
    shown = clean_terminal(uri, newlines=False)
    if len(owners) != 1:
        which = (
            f"several servers have it ({', '.join(owners)})" if owners else "no server of the configuration lists it"
        )
        return io.fail(f"cannot tell which server to read {shown!r} from: {which}; name one: mcpwire read NAME URI", 2)
    result = await host.read_resource(owners[0], uri, timeout=getattr(opts, "timeout", None))
    if io.json:
        io.write_json({"server": owners[0], **msgspec.to_builtins(result)})
    else:
        for contents in result.contents:
            text = terminal_contents(contents)
            io.out.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def _without_name(prompt: Prompt) -> dict[str, object]:
    data: dict[str, object] = msgspec.to_builtins(prompt)
    data.pop("name", None)
    return data


async def _prompts(host: Host, io: _Output) -> None:
    found = host.prompts()
    if io.json:
        io.write_json(
            [{"name": p.name, "server": p.server, "prompt": p.prompt.name, **_without_name(p.prompt)} for p in found]
        )
        return
    if not found:
        io.out.write("no prompts\n")
        return
    heads = [
        clean_terminal(
            f"{p.name}({', '.join(a.name + ('' if a.required else '?') for a in p.prompt.arguments)})", newlines=False
        )
        for p in found
    ]
    width = max(len(h) for h in heads)
    for head, reg in zip(heads, found, strict=True):
        io.out.write(f"{head:<{width}}  {first_line(reg.prompt.description or reg.prompt.title)}".rstrip() + "\n")


async def _prompt(host: Host, opts: argparse.Namespace, io: _Output) -> int:
    reg = next((p for p in host.prompts() if p.name == opts.name), None)
    if reg is None:
        names = [p.name for p in host.prompts()]
        return io.fail(unknown_name("prompt", opts.name, names, "the servers of the configuration"), EXIT_USAGE)
    missing = [a.name for a in reg.prompt.arguments if a.required and a.name not in opts.arguments]
    if missing:
        return io.fail(f"prompt {opts.name!r} needs " + " ".join(f"{m}=VALUE" for m in missing), EXIT_USAGE)
    result = await host.get_prompt(opts.name, opts.arguments, timeout=getattr(opts, "timeout", None))
    if io.json:
        io.write_json({"name": opts.name, "server": reg.server, **msgspec.to_builtins(result)})
    else:
        io.out.write(prompt_text(result) + "\n")
    return EXIT_OK


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no servers configured\n"
    headers = ("NAME", "TRANSPORT", "STATUS", "ERA", "REVISION", "TOOLS", "DETAIL")
    cells = [
        tuple(
            clean_terminal(str(v), newlines=False)
            for v in (
                r["name"],
                r["transport"],
                r["status"],
                r["era"] or "-",
                r["protocolVersion"] or "-",
                r["tools"],
                r["error"] or r["description"] or "",
            )
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in [headers, *cells]]
    return "\n".join(lines) + "\n"


def parse_arguments(text: str, stdin: TextIO) -> dict[str, object]:
    """A tool's JSON arguments from the command line (``-``: read from ``stdin``).

    Raises:
        UsageError: not JSON, or not an object; the message says where.
    """
    import json

    if text == "-":
        text = stdin.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise UsageError(f"the arguments are not valid JSON ({exc.msg} at {where})") from None
    if not isinstance(value, dict):
        kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list"}
        kind = "null" if value is None else kinds.get(type(value), type(value).__name__)
        raise UsageError(f'the arguments must be a JSON object, e.g. \'{{"text": "hi"}}\', not {kind}')
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
    """Runs one command on the servers of mcp.json and returns its exit status (0 ok, 1 tool
    error, 2 usage, configuration or connection error). Unlike ``mcpwire``, this does not ask
    before running the servers of a project-local ./mcp.json."""
    out, err = sys.stdout, sys.stderr
    if command not in COMMANDS:
        err.write(f"mcpwire: unknown command {command!r}; expected one of {', '.join(COMMANDS)}\n")
        return EXIT_USAGE
    io = _Output(command, "--json" in argv, out, err)
    parser = _parser(command)
    try:
        opts = parser.parse_args(list(argv))
        if command == "call":
            opts.arguments = parse_arguments(opts.arguments, sys.stdin)
        if command == "prompt":
            opts.arguments = dict(a.partition("=")[::2] for a in opts.arguments)
        if hasattr(opts, "name_format"):
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
        except ConfigError as exc:
            return io.fail(exc, EXIT_USAGE)

    async def quietly() -> int:
        with _logging(opts.verbose, err):
            return await run(command, opts, config, out, err)

    # outside the quiet logging: an error that comes with a Ctrl+C is logged where it is seen
    code = run_cli(quietly)
    if code in (EXIT_SIGINT, EXIT_SIGTERM):
        err.write(f"mcpwire {command}: interrupted\n")
    return code
