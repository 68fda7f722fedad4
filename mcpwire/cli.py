"""The ``mcpwire`` command line: one entry point, one way to name a server.

Every command that reaches a server takes the same target (see :mod:`mcpwire.cliargs`): a URL,
``-- CMD ARGS...``, the NAME of an mcp.json entry, or nothing. Nothing means the servers of mcp.json
when one is given (``--config``) or found (``$MCPWIRE_CONFIG``, ``./mcp.json``, the user's config
file) for the commands that work on many servers (``tools``, ``call``, ``resources``, ``read``,
``prompts``, ``prompt``, ``servers``, ``export``), and the bundled demo server otherwise, so every
command works on a fresh install. ``check``, ``fuzz``, ``login``, ``serve``, ``token`` and ``chat`` live in
their own modules; ``add`` writes mcp.json entries (:mod:`mcpwire.catalog`).

Exit status: 0 on success; 1 when a called tool reports an error (``check``: a MUST fails;
``fuzz``: something was found); 2 on usage, configuration, connection or protocol errors; 130 and
143 after SIGINT and SIGTERM (the servers started are shut down first).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn, TextIO

from ._version import install_hint
from .cliargs import (
    EXIT_SIGINT,
    UsageError,
    add_target_options,
    find_target_config,
    interruption,
    is_url,
    key_values,
    load_target_config,
    resolve_target,
    run_cli,
    split_command,
    target_epilog,
)
from .redaction import SecretValues, clean_terminal

__all__ = ["main"]


@dataclass(frozen=True, slots=True)
class _Command:
    summary: str
    words: str  #: the positional words, for the usage line
    examples: tuple[str, ...]
    many: bool = True  #: without a target, works on the servers of mcp.json


_COMMANDS: Final[dict[str, _Command]] = {
    "info": _Command(
        "show a server's identity, era, protocol revision and capabilities",
        "[TARGET]",
        ("mcpwire info", "mcpwire info http://127.0.0.1:3001/mcp --json", "mcpwire info -- uvx mcp-server-time"),
        many=False,
    ),
    "tools": _Command(
        "list a server's tools (every server's, namespaced, under mcp.json)",
        "[TARGET]",
        (
            "mcpwire tools --schema",
            "mcpwire tools http://127.0.0.1:3001/mcp --bearer-env MCP_TOKEN",
            "mcpwire tools -- npx -y @modelcontextprotocol/server-filesystem ~/notes",
        ),
    ),
    "call": _Command(
        "call a tool; without JSON arguments, with {}",
        "[TARGET] TOOL ['{json}' | -]",
        (
            'mcpwire call echo \'{"text": "hi"}\'',
            "mcpwire call http://127.0.0.1:3001/mcp get-tiny-image",
            'mcpwire call get_current_time \'{"timezone": "UTC"}\' -- uvx mcp-server-time',
            'mcpwire call github__search_issues \'{"q": "bug"}\'   (a server of mcp.json)',
        ),
    ),
    "resources": _Command(
        "list a server's resources and resource templates",
        "[TARGET]",
        ("mcpwire resources", "mcpwire resources -- npx -y @modelcontextprotocol/server-everything"),
    ),
    "read": _Command(
        "read a resource",
        "[TARGET] URI",
        ("mcpwire read demo://static/hello", "mcpwire read http://127.0.0.1:3001/mcp test://static/resource/1"),
    ),
    "prompts": _Command(
        "list a server's prompts and their arguments",
        "[TARGET]",
        ("mcpwire prompts", "mcpwire prompts --config mcp.json github"),
    ),
    "prompt": _Command(
        "render a prompt with its arguments",
        "[TARGET] NAME [KEY=VALUE... | '{json}']",
        ("mcpwire prompt greet name=alice", "mcpwire prompt http://127.0.0.1:3001/mcp simple-prompt"),
    ),
    "servers": _Command(
        "start the servers of mcp.json and show their status",
        "",
        ("mcpwire servers", "mcpwire servers --config ./team.json --json"),
    ),
    "export": _Command(
        "export the tools of mcp.json's servers for an LLM",
        "",
        ("mcpwire export --format anthropic", "mcpwire export --format openai --strict-schema"),
    ),
}

#: subcommands implemented elsewhere: name -> (module, what it needs when missing, summary)
_DELEGATED: Final[dict[str, tuple[str, str, str]]] = {
    "add": ("mcpwire.cliadd", "", "add a well-known server (or a registry server.json) to mcp.json"),
    "check": (
        "mcpwire.conformance.cli",
        "the check extra: " + install_hint("check"),
        "check a server against the MCP specification",
    ),
    "fuzz": (
        "mcpwire.fuzz.cli",
        "the fuzz extra: " + install_hint("fuzz"),
        "property-based fuzzing of a server's tools and protocol",
    ),
    "login": ("mcpwire.auth.cli", "the http extra: " + install_hint("http"), "authorize with an OAuth server"),
    "serve": (
        "mcpwire.service.cli",
        "the serve extra: " + install_hint("serve"),
        "run the host as a service: API, web console, MCP gateway",
    ),
    "token": (
        "mcpwire.service.tokencli",
        "",
        "create, list and revoke the API tokens of mcpwire serve",
    ),
    "chat": (
        "mcpwire.agent.cli",
        "the agent extra: " + install_hint("agent"),
        "talk to an LLM that calls your servers' tools",
    ),
}

_ORDER: Final = (
    "info",
    "tools",
    "call",
    "resources",
    "read",
    "prompts",
    "prompt",
    "servers",
    "export",
    "add",
    "check",
    "fuzz",
    "login",
    "serve",
    "token",
    "chat",
)


def _top_help() -> str:
    lines = [
        "usage: mcpwire COMMAND [OPTIONS] [TARGET | -- CMD ARGS...]",
        "",
        "Talk to MCP servers: inspect them, call their tools, check and fuzz them, run them behind a host.",
        "",
        "commands:",
    ]
    for name in _ORDER:
        summary = _COMMANDS[name].summary if name in _COMMANDS else _DELEGATED[name][2]
        lines.append(f"  {name:<10} {summary}")
    lines += [
        "",
        "naming a server (TARGET):",
        "  (nothing)                   the servers of mcp.json when one is found, else the bundled demo server",
        "  http://127.0.0.1:3001/mcp   an HTTP server (Streamable HTTP or HTTP+SSE)",
        "  -- CMD ARGS...              a stdio server: the command after '--'",
        "  NAME                        an entry of mcp.json (--config FILE, $MCPWIRE_CONFIG, ./mcp.json,",
        "                              ~/.config/mcpwire/mcp.json)",
        "",
        "options:",
        "  -h, --help                  show this help; mcpwire COMMAND --help shows a command's options",
        "  -V, --version               show mcpwire's version and the distribution it comes from",
        "",
        "exit status: 0 ok; 1 a tool reported an error (check: a MUST failed; fuzz: a finding);",
        "2 usage, configuration or connection error; 130/143 interrupted by SIGINT/SIGTERM.",
    ]
    return "\n".join(lines) + "\n"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print the usage and exit
        raise UsageError(f"{message} (see {self.prog} --help)")


def _parser(name: str) -> argparse.ArgumentParser:
    from .host.cli import add_config_options

    command = _COMMANDS[name]
    prog = f"mcpwire {name}"
    examples = "examples:\n" + "".join(f"  {e}\n" for e in command.examples)
    usage = f"{prog} [OPTIONS] {command.words} [-- CMD ARGS...]".replace("  ", " ")
    if not command.words:
        usage = f"{prog} [OPTIONS]"
    epilog = examples if not command.words else target_epilog(prog, examples)
    parser = _Parser(
        prog=prog,
        usage=usage,
        description=command.summary[0].upper() + command.summary[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if command.words:
        parser.add_argument(
            "words",
            nargs="*",
            metavar="TARGET",
            help="a URL or the NAME of an mcp.json entry (see below), "
            + {"call": "then the TOOL and its JSON arguments", "read": "then the resource URI"}.get(
                name, "then the prompt NAME and KEY=VALUE arguments" if name == "prompt" else "or nothing"
            ),
        )
    parser.add_argument("--json", action="store_true", help="JSON output (MCP's camelCase keys)")
    if name == "tools":
        parser.add_argument("--schema", action="store_true", help="show each tool's parameters")
    if command.words:
        add_target_options(parser)
    else:  # servers, export: the servers of mcp.json only
        add_target_options(parser, stdio=False, http=False)
    if command.many:
        add_config_options(parser, name)
    for action in parser._actions:  # under mcp.json a call's own timeout is the configured one
        if action.dest == "timeout" and command.many:
            action.default = None
            action.help = (
                "seconds to wait for each answer (default 30; under mcp.json: the server's configured timeout)"
            )
    return parser


# -- what the words mean -------------------------------------------------------------------------


def _looks_like_json(word: str) -> bool:
    head = word.lstrip()[:1]
    if head in ("{", "[", '"') or word == "-":
        return True
    try:
        json.loads(word)
    except ValueError:
        return False
    return True


@dataclass(slots=True)
class _Words:
    target: list[str]
    command: list[str] | None
    tool: str | None = None
    arguments: str | None = None
    uri: str | None = None
    prompt: str | None = None
    prompt_arguments: tuple[str, ...] = ()


def _split_words(name: str, words: list[str], command: list[str] | None) -> _Words:
    """Which words name the server and which the tool, URI or prompt."""
    if name == "call":
        if command is not None and not words:
            # the older form: -- CMD ARGS... TOOL '{json}'
            if len(command) >= 3 and _looks_like_json(command[-1]):
                words, command = command[-2:], command[:-2]
            else:
                raise UsageError("give the tool's name before '--': mcpwire call TOOL ['{json}'] -- CMD ARGS...")
        cut = next((i for i, w in enumerate(words) if i and _looks_like_json(w)), len(words))
        arguments = words[cut] if cut < len(words) else None
        extra, words = words[cut + 1 :] or words[2:cut], words[: min(cut, 2)]
        if not words:
            raise UsageError("give a tool name: mcpwire call [TARGET] TOOL ['{json}']")
        if extra:
            usage = "mcpwire call [TARGET] TOOL ['{json}'] (JSON arguments start with '{')"
            raise UsageError(f"unexpected {extra[0][:40]!r}: {usage}")
        return _Words(words[:-1], command, tool=words[-1], arguments=arguments)
    if name == "read":
        if not words:
            raise UsageError("give a resource URI: mcpwire read [TARGET] URI")
        if len(words) > 2:
            raise UsageError(f"unexpected {words[2][:40]!r}: mcpwire read [TARGET] URI")
        return _Words(words[:-1], command, uri=words[-1])
    if name == "prompt":
        if not words:
            raise UsageError("give a prompt name: mcpwire prompt [TARGET] NAME [KEY=VALUE...]")
        if is_url(words[0]) or (len(words) >= 2 and not _is_argument(words[1]) and not _is_argument(words[0])):
            target, rest = words[:1], words[1:]
        else:
            target, rest = [], words
        if not rest:
            raise UsageError("give a prompt name: mcpwire prompt [TARGET] NAME [KEY=VALUE...]")
        return _Words(target, command, prompt=rest[0], prompt_arguments=tuple(rest[1:]))
    return _Words(words, command)


def _is_argument(word: str) -> bool:
    return "=" in word or _looks_like_json(word)


def _prompt_arguments(words: Sequence[str], stdin: TextIO) -> dict[str, str]:
    if len(words) == 1 and _looks_like_json(words[0]):
        given = _tool_arguments(words[0], stdin)
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in given.items()}
    return key_values(words, "a prompt")


def _tool_arguments(text: str | None, stdin: TextIO) -> dict[str, object]:
    from .host import cli as host_cli

    if text is None:
        return {}
    try:
        return host_cli.parse_arguments(text, stdin)
    except host_cli.UsageError as exc:
        raise UsageError(str(exc)) from None


class _LogFormatter(logging.Formatter):
    """Log lines for a terminal: control characters escaped, known secrets masked (a server's
    stderr, logged with -v, may repeat the token it was started with)."""

    secrets = SecretValues()

    def format(self, record: logging.LogRecord) -> str:
        return clean_terminal(self.secrets.mask(super().format(record)), newlines=False)


def _configure_logging(verbose: int, err: TextIO) -> _LogFormatter:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(err)
    formatter = _LogFormatter("%(levelname)s %(name)s: %(message)s")
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # without -v, a server's stderr is kept for error messages, not shown as it comes, and the host's
    # warnings about servers are left to the command, which says the same in its own words
    logging.getLogger("mcpwire.server").setLevel(logging.ERROR if verbose == 0 else logging.INFO)
    logging.getLogger("mcpwire.host").setLevel(logging.CRITICAL if verbose == 0 else logging.NOTSET)
    return formatter


def _many_mode_refusals(args: argparse.Namespace) -> None:
    pairs = (("--header", "header"), ("--bearer-env", "bearer_env"), ("--env", "env"), ("--env-pass", "env_pass"))
    given = [flag for flag, dest in (*pairs, ("--cwd", "cwd")) if getattr(args, dest, None)]
    if given:
        raise UsageError(
            f"{', '.join(given)} apply to a server named on the command line (a URL, '-- CMD' or NAME); "
            "for the servers of mcp.json, set them in their entries"
        )


def _run(name: str, argv: list[str], out: TextIO, err: TextIO, stdin: TextIO) -> int:
    from .cliserver import Operands
    from .cliserver import run as run_one

    parser = _parser(name)
    try:
        options, command = split_command(argv)
        args = parser.parse_intermixed_args(options)
    except UsageError as exc:
        err.write(f"mcpwire {name}: {clean_terminal(str(exc))}\n")
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    logs = _configure_logging(args.verbose, err)
    try:
        words = _split_words(name, list(getattr(args, "words", [])), command)
        many = _COMMANDS[name].many and not words.target and words.command is None
        if many and (name in ("servers", "export") or find_target_config(args)[0] is not None):
            _many_mode_refusals(args)
            config = load_target_config(args, stdin=stdin, stderr=err, strict=getattr(args, "strict", False))
            if config is None:
                raise UsageError(
                    "no mcp.json found (searched $MCPWIRE_CONFIG, ./mcp.json, ~/.config/mcpwire/mcp.json): "
                    "pass --config FILE, or add a server with mcpwire add NAME"
                )
            from .host.cli import config_secrets

            logs.secrets = config_secrets(config)
            return _run_many(name, args, words, config, out, err, stdin)
        if name == "info" and not words.target and words.command is None:
            words.target = _only_server(args)
        target = resolve_target(args, words.target, words.command, stdin=stdin, stderr=err)
        logs.secrets = target.secrets
        ops = Operands(
            tool=words.tool,
            arguments=_tool_arguments(words.arguments, stdin) if name == "call" else {},
            uri=words.uri,
            prompt=words.prompt,
            prompt_arguments=_prompt_arguments(words.prompt_arguments, stdin),
        )
    except UsageError as exc:
        err.write(f"mcpwire {name}: {clean_terminal(str(exc))}\n")
        return 2
    if args.timeout is None:
        args.timeout = 30.0
    return run_cli(lambda: run_one(name, target, ops, args, out, err))


def _only_server(args: argparse.Namespace) -> list[str]:
    """``info`` without a target under mcp.json: its one server, else a usage error naming them."""
    path, _ = find_target_config(args)
    if path is None:
        return []
    config = load_target_config(args)
    names = [s.name for s in config.servers if s.enabled] if config else []
    if len(names) == 1:
        return names
    raise UsageError(f"name one of the servers of {path}: {', '.join(names) or 'none'} (or a URL, or -- CMD ARGS...)")


def _run_many(
    name: str, args: argparse.Namespace, words: _Words, config: Any, out: TextIO, err: TextIO, stdin: TextIO
) -> int:
    from .host import cli as host_cli
    from .host.registry import ToolRegistry

    if hasattr(args, "name_format"):
        try:
            ToolRegistry(name_format=args.name_format)
        except ValueError as exc:
            raise UsageError(f"--name-format: {exc}") from None
    if name == "call":
        args.name = words.tool
        args.arguments = _tool_arguments(words.arguments, stdin)
    elif name == "prompt":
        args.name = words.prompt
        args.arguments = _prompt_arguments(words.prompt_arguments, stdin)
    elif name == "read":
        args.uri = words.uri
    elif words.target:  # pragma: no cover - a target never leads here
        raise UsageError("unexpected target")
    return run_cli(lambda: host_cli.run(name, args, config, out, err, stdin=stdin))


def _delegate(command: str, argv: list[str]) -> int:
    import importlib

    module_name, needs, _summary = _DELEGATED[command]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing == "mcpwire" or missing.startswith("mcpwire."):
            reason = f"{missing} is not part of this installation of mcpwire"
        else:
            reason = f"{exc}; it needs {needs}" if needs else str(exc)
        print(f"mcpwire {command}: not available: {reason}", file=sys.stderr)
        return 2
    result: int = module.main(argv)
    return result


#: Exit status when the reader of our output went away (``mcpwire tools | head``), as after SIGPIPE.
EXIT_BROKEN_PIPE: Final = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mcpwire`` console script."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(words)
    except BrokenPipeError:
        # The servers were shut down on the way out; say nothing more to a closed pipe.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except BaseException as exc:
        # A Ctrl+C no command turned into its exit status (at a question, or before its trio run
        # began), bare or inside exception groups: one line, no traceback.
        if interruption(exc) is None:
            raise
        name = _command_first(words)[0] if words else ""
        shown = f"mcpwire {name}" if name in _COMMANDS or name in _DELEGATED else "mcpwire"
        sys.stderr.write(f"{shown}: interrupted\n")
        return EXIT_SIGINT


def _command_first(argv: list[str]) -> tuple[str, list[str]]:
    """The command and its arguments; options given before the command (``mcpwire -v tools``)
    are moved after it, where the command's parser reads them."""
    if argv[0].startswith("-") and "--" not in argv[:1]:
        for i, word in enumerate(argv):
            if word == "--":
                break
            if word in _COMMANDS or word in _DELEGATED:
                return word, argv[:i] + argv[i + 1 :]
    return argv[0], argv[1:]


def _main(argv: list[str]) -> int:
    out, err = sys.stdout, sys.stderr
    if not argv or argv[0] in ("-h", "--help", "help"):
        out.write(_top_help())
        return 0
    if argv[0] in ("-V", "--version"):
        from ._version import version_lines

        line, warnings = version_lines()
        out.write(line + "\n")
        err.writelines(warning + "\n" for warning in warnings)
        return 0
    name, rest = _command_first(argv)
    if name in _DELEGATED:
        return _delegate(name, rest)
    if name not in _COMMANDS:
        import difflib

        close = difflib.get_close_matches(name, list(_ORDER), n=1)
        shown = name[:40]
        hint = f"did you mean {close[0]}? " if close else ""
        err.write(f"mcpwire: unknown command {shown!r}; {hint}(mcpwire --help lists the commands)\n")
        return 2
    return _run(name, rest, out, err, sys.stdin)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
