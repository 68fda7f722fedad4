"""Naming a server on the command line: one target syntax and one spelling per option.

Theory of operation: every subcommand that starts or reaches a server (``info``, ``tools``,
``call``, ``check``, ``fuzz``, ``servers``, ``serve``, ``chat``...) builds its parser with
:func:`add_target_options`, splits ``-- CMD ARGS...`` off with :func:`split_command`, and turns
what is left into a :class:`ResolvedTarget` with :func:`resolve_target`:

- a URL positional (``mcpwire tools http://127.0.0.1:3001/mcp``) is an HTTP server; a URL followed
  by more words is a usage error, never a stdio command;
- ``-- CMD ARGS...`` is a stdio server started with the minimal environment
  (:data:`mcpwire.transports.DEFAULT_INHERITED_ENV`) plus ``--env KEY=VALUE`` and ``--env-pass NAME``;
- ``NAME`` (with ``--config FILE``, or found in the config search order) is that entry of mcp.json;
- nothing is the bundled demo server, so every command works on a fresh install.

A project-local ``./mcp.json`` (found by the search, not named with ``--config``) may come from a
cloned repository nobody reviewed: its commands run with ``${env:...}`` expanded. Before the first
run of its servers :func:`confirm_project_config` shows them and asks, remembering the decision per
file and content hash in the user's data directory; ``--yes`` (or ``--trust``) answers for CI.

:func:`run_cli` runs a trio main so that SIGINT and SIGTERM cancel it: the servers it started are
shut down in order (close stdin, SIGTERM, SIGKILL, each bounded) and the exit status is 130 or 143,
with no traceback. A Ctrl+C that arrives where no signal receiver is installed becomes a
``KeyboardInterrupt``, which trio may hand over wrapped in exception groups, nested;
:func:`interruption` finds it there, so every entry point treats it as a bare one.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, TextIO

import msgspec
import trio

from .clitrust import (
    DATA_DIR_ENV_VAR,
    confirm_project_config,
    decide,
    remember_trust,
    shown_command,
    trust_decision,
    trust_file,
)
from .errors import ConfigError, RPCError
from .redaction import SecretValues, argv_secrets, clean_terminal, redact_url
from .transports import DEFAULT_INHERITED_ENV, HttpServer, StdioServer, split_header

if TYPE_CHECKING:
    from .client.options import ClientOptions
    from .host.config import HostConfig
    from .protocol.types import JSONObject

__all__ = [
    "DATA_DIR_ENV_VAR",
    "ResolvedTarget",
    "TARGET_FORMS",
    "UsageError",
    "add_target_options",
    "client_options",
    "confirm_project_config",
    "era_options",
    "find_target_config",
    "interruption",
    "is_url",
    "key_values",
    "load_target_config",
    "output_file",
    "remember_trust",
    "resolve_target",
    "run_cli",
    "shown_command",
    "split_command",
    "target_epilog",
    "trust_decision",
    "trust_file",
]

log = logging.getLogger("mcpwire.cli")

#: Exit statuses after a signal, as shells report them (128 + the signal number).
EXIT_SIGINT: Final = 130
EXIT_SIGTERM: Final = 143
#: The transports ``--transport`` offers, everywhere.
TRANSPORTS: Final = ("auto", "streamable-http", "sse")
#: The eras ``--era`` offers, everywhere.
ERAS: Final = ("auto", "legacy", "modern")

_URL: Final = re.compile(r"^https?://", re.IGNORECASE)

#: How every subcommand's help explains naming a server: (arguments, meaning).
TARGET_FORMS: Final = (
    ("", "the bundled demo server (or the servers of an mcp.json found)"),
    ("http://127.0.0.1:3001/mcp", "an HTTP server (Streamable HTTP or HTTP+SSE)"),
    ("-- npx -y @modelcontextprotocol/server-everything", "a stdio server: the command after '--'"),
    ("--config mcp.json NAME", "one server of an mcp.json file"),
)


class UsageError(Exception):
    """A usage error; its message is the one line the command line prints (exit status 2)."""


@dataclass(frozen=True, slots=True)
class ResolvedTarget:
    """The server a command line names.

    Attributes:
        spec: how to reach it.
        label: how to show it: credentials redacted, control characters escaped, one line.
        secrets: every header value, bearer token and environment value given, to mask in output.
        kind: ``"url"``, ``"command"``, ``"config"`` (an entry of mcp.json) or ``"demo"``.
        name: the entry's name for ``"config"``.
        config_path: the file the entry came from, for ``"config"``.
    """

    spec: StdioServer | HttpServer
    label: str
    secrets: SecretValues
    kind: Literal["url", "command", "config", "demo"]
    name: str | None = None
    config_path: Path | None = None


# -- options -------------------------------------------------------------------------------------


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value


def output_file(text: str) -> str:
    """An ``argparse`` type for options that take a file to write: a URL is refused, so such an
    option never swallows the target that follows it (``check --json http://...``)."""
    if is_url(text):
        shown = redact_url(text)
        raise argparse.ArgumentTypeError(f"expected a file name, not the URL {shown!r} (put the target last)")
    return text


def _input_file(text: str) -> str:
    if is_url(text):
        raise argparse.ArgumentTypeError(
            f"expected a file name, not the URL {redact_url(text)!r}; name the server after the options"
        )
    return text


def add_target_options(
    parser: argparse.ArgumentParser, *, config: bool = True, stdio: bool = True, http: bool = True
) -> None:
    """Adds the options that name and reach a server, spelled the same in every subcommand.

    Args:
        parser: the subcommand's parser; defaults can be changed afterwards with
            ``parser.set_defaults`` (the help text shows the new default).
        config: add ``--config FILE`` (servers named by their mcp.json entry).
        stdio: add the options for started servers (``--env``, ``--env-pass``, ``--cwd``).
        http: add the options for HTTP servers (``--header``, ``--bearer-env``, ``--transport``).
    """
    group = parser.add_argument_group("server options")
    if config:
        group.add_argument(
            "--config",
            metavar="FILE",
            type=_input_file,
            help="mcp.json to take servers from (default: $MCPWIRE_CONFIG, ./mcp.json, ~/.config/mcpwire/mcp.json)",
        )
    if http:
        _add_http_options(group)
    if stdio:
        _add_stdio_options(group)
    group.add_argument(
        "--era",
        choices=ERAS,
        default="auto",
        help="protocol era: legacy (initialize handshake) or modern (2026-07-28); default %(default)s",
    )
    group.add_argument("--protocol-version", metavar="REV", help="use exactly this revision, e.g. 2025-06-18")
    group.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=30.0,
        metavar="S",
        help="seconds to wait for each answer (default %(default)g)",
    )
    group.add_argument(
        "--connect-timeout",
        type=_positive_seconds,
        default=60.0,
        metavar="S",
        help="seconds to start or reach the server and shake hands (default %(default)g)",
    )
    group.add_argument(
        "-y",
        "--yes",
        "--trust",
        dest="yes",
        action="store_true",
        help="trust a project-local ./mcp.json without asking (for CI)",
    )
    group.add_argument(
        "-v", "--verbose", action="count", default=0, help="log to stderr (-v: info, -vv: debug, with server stderr)"
    )


def _add_http_options(group: argparse._ArgumentGroup) -> None:
    """``--header``, ``--bearer-env`` and ``--transport``: how an HTTP server is reached."""
    group.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="HTTP header for URL targets, as 'NAME: VALUE' or NAME=VALUE (repeatable; values are never shown)",
    )
    group.add_argument(
        "--bearer-env",
        metavar="VAR",
        help="send 'Authorization: Bearer $VAR' (the token is read from the environment, not the command line)",
    )
    group.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="auto",
        help="HTTP transport: auto detects Streamable HTTP or the older HTTP+SSE (default %(default)s)",
    )


def _add_stdio_options(group: argparse._ArgumentGroup) -> None:
    """``--env``, ``--env-pass`` and ``--cwd``: the environment of a server we start."""
    group.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a variable in the server's environment (repeatable; values are never shown)",
    )
    group.add_argument(
        "--env-pass",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this variable of our environment to the server (repeatable); "
        f"otherwise it gets only {', '.join(DEFAULT_INHERITED_ENV[:5])}... and --env",
    )
    group.add_argument("--cwd", metavar="DIR", help="the server's working directory")


def target_epilog(prog: str, extra: str = "") -> str:
    """The epilog that shows how to name a server, for a subcommand's help; ``extra`` follows it
    (examples, say)."""
    lines = ["naming a server:"]
    for words, meaning in TARGET_FORMS:
        example = f"{prog} {words}".rstrip()
        if len(example) > 40:
            lines += [f"  {example}", f"  {'':<40}  {meaning}"]
        else:
            lines.append(f"  {example:<40}  {meaning}")
    return "\n".join(lines) + "\n" + (f"\n{extra}" if extra else "")


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Splits ``[options...] -- CMD ARGS...`` at the first ``--``.

    Returns:
        The words before ``--`` and the server command after it (``None`` without ``--``).

    Raises:
        UsageError: ``--`` with nothing after it.
    """
    words = list(argv)
    if "--" not in words:
        return words, None
    cut = words.index("--")
    command = words[cut + 1 :]
    if not command:
        raise UsageError(
            "nothing after '--': give the server's command, e.g. -- npx -y @modelcontextprotocol/server-everything"
        )
    return words[:cut], command


def is_url(text: str) -> bool:
    """Whether a command-line word is an ``http://`` or ``https://`` URL."""
    return bool(_URL.match(text))


# -- resolving a target --------------------------------------------------------------------------


def _headers(args: argparse.Namespace) -> tuple[dict[str, str], str | None]:
    headers: dict[str, str] = {}
    for item in getattr(args, "header", None) or []:
        try:
            key, value = split_header(item)
        except ValueError as exc:
            raise UsageError(f"--header: {exc}") from None
        headers[key] = value
    token = None
    variable = getattr(args, "bearer_env", None)
    if variable:
        token = os.environ.get(variable)
        if not token:
            raise UsageError(f"--bearer-env {variable}: that environment variable is not set or empty")
    return headers, token


def key_values(items: Sequence[str], what: str) -> dict[str, str]:
    """``KEY=VALUE`` words as a dict; a word without ``=`` (shown without what follows it: it may be
    a bare secret) is a :class:`UsageError` naming ``what`` (``--env``, say)."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or any(c.isspace() for c in key):
            shown = key if sep else item[:40]
            raise UsageError(f"{what} takes KEY=VALUE, not {shown!r}")
        pairs[key] = value
    return pairs


def _environment(args: argparse.Namespace) -> dict[str, str]:
    env = key_values(getattr(args, "env", None) or [], "--env")
    for name in getattr(args, "env_pass", None) or []:
        if not name or "=" in name:
            raise UsageError(f"--env-pass takes a variable name, not {name[:40]!r}")
        value = os.environ.get(name)
        if value is None:
            raise UsageError(f"--env-pass {clean_terminal(name, newlines=False)}: that variable is not set")
        env.setdefault(name, value)
    return env


def _http_given(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "header", None) or getattr(args, "bearer_env", None))


def _stdio_given(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "env", None) or getattr(args, "env_pass", None) or getattr(args, "cwd", None))


def _command_label(argv: Sequence[str], secrets: SecretValues) -> str:
    return clean_terminal(secrets.mask(shown_command(argv)), newlines=False)


def _url_label(url: str, secrets: SecretValues) -> str:
    return clean_terminal(secrets.mask(redact_url(url)), newlines=False)


def _transport(args: argparse.Namespace) -> Literal["auto", "streamable-http", "sse"]:
    value = getattr(args, "transport", None) or "auto"
    if value == "streamable-http":
        return "streamable-http"
    if value == "sse":
        return "sse"
    if value != "auto":
        raise UsageError(f"--transport: expected one of {', '.join(TRANSPORTS)}, not {value!r}")
    return "auto"


def _http_target(url: str, args: argparse.Namespace) -> ResolvedTarget:
    if _stdio_given(args):
        raise UsageError("--env, --env-pass and --cwd are for servers we start; a URL names a running server")
    headers, token = _headers(args)
    if token is None and not any(key.lower() == "authorization" for key in headers):
        # a loopback URL of the local `mcpwire serve` (it left a note in its data folder): its token
        from .service.localfiles import token_for_url

        token = token_for_url(url)
    transport = _transport(args)
    try:
        spec = HttpServer(url=url, headers=headers, bearer_token=token, transport=transport)
    except ValueError as exc:
        raise UsageError(clean_terminal(str(exc), newlines=False)) from None
    secrets = SecretValues([*headers.values(), *([token] if token else []), *argv_secrets([url])])
    return ResolvedTarget(spec=spec, label=_url_label(url, secrets), secrets=secrets, kind="url")


def _stdio_target(command: list[str], args: argparse.Namespace) -> ResolvedTarget:
    if _http_given(args):
        raise UsageError("--header and --bearer-env are for HTTP servers; give a URL instead of a command")
    env = _environment(args)
    spec = StdioServer(command=command[0], args=tuple(command[1:]), env=env, cwd=getattr(args, "cwd", None))
    secrets = SecretValues([*env.values(), *argv_secrets(command)])
    return ResolvedTarget(spec=spec, label=_command_label(command, secrets), secrets=secrets, kind="command")


def _demo_target(args: argparse.Namespace) -> ResolvedTarget:
    from .testing import demo_server_spec

    if _http_given(args):
        raise UsageError("--header and --bearer-env are for HTTP servers; give a URL")
    spec = demo_server_spec()
    env = _environment(args)
    spec = msgspec.structs.replace(spec, env=env, cwd=getattr(args, "cwd", None))
    return ResolvedTarget(spec=spec, label="the bundled demo server", secrets=SecretValues(env.values()), kind="demo")


def _config_target(name: str, args: argparse.Namespace, stdin: TextIO | None, stderr: TextIO | None) -> ResolvedTarget:
    config = load_target_config(args, stdin=stdin, stderr=stderr)
    shown = repr(name)
    if config is None:
        raise UsageError(
            f"{shown} is not a URL, and there is no mcp.json to find a server of that name in: "
            f"give a URL, '-- CMD ARGS...' or --config FILE {name}"
        )
    entries = {s.name: s for s in config.servers}
    entry = entries.get(name)
    if entry is None:
        prefixes = (f"$.mcpServers.{name}", f"$.servers.{name}")
        problem = next((p for p in config.problems if p.startswith(prefixes)), None)
        if problem is not None:
            raise UsageError(f"server {shown} in {config.path} is invalid: {clean_terminal(problem, newlines=False)}")
        import difflib

        close = difflib.get_close_matches(name, list(entries), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else f"; its servers: {', '.join(entries) or 'none'}"
        raise UsageError(f"no server named {shown} in {config.path}{hint}")
    if not entry.enabled:
        log.info("server %r is disabled in %s; starting it because it was named", name, config.path)
    spec = entry.to_spec()
    extra_secrets: list[str] = []
    if isinstance(spec, StdioServer):
        if _http_given(args):
            raise UsageError(f"--header and --bearer-env are for HTTP servers; {shown} is started with a command")
        env = {**spec.env, **_environment(args)}
        spec = msgspec.structs.replace(spec, env=env, cwd=getattr(args, "cwd", None) or spec.cwd)
        extra_secrets += [*env.values(), *argv_secrets(spec.argv)]
    else:
        if _stdio_given(args):
            raise UsageError(f"--env, --env-pass and --cwd are for servers we start; {shown} is reached by URL")
        headers, token = _headers(args)
        transport = _transport(args)
        spec = msgspec.structs.replace(
            spec,
            headers={**spec.headers, **headers},
            bearer_token=token or spec.bearer_token,
            transport=spec.transport if transport == "auto" else transport,
        )
        extra_secrets += [*spec.headers.values(), *(v for v in (spec.bearer_token, spec.api_key) if v)]
        extra_secrets += argv_secrets([spec.url])
    secrets = SecretValues(extra_secrets)
    where = _command_label(spec.argv, secrets) if isinstance(spec, StdioServer) else _url_label(spec.url, secrets)
    return ResolvedTarget(
        spec=spec,
        label=f"{clean_terminal(name, newlines=False)} ({where})",
        secrets=secrets,
        kind="config",
        name=name,
        config_path=Path(config.path) if config.path else None,
    )


def resolve_target(
    args: argparse.Namespace,
    positional: Sequence[str],
    command: Sequence[str] | None,
    *,
    stdin: TextIO | None = None,
    stderr: TextIO | None = None,
) -> ResolvedTarget:
    """The server a command line names (see the module docstring for the rules).

    Args:
        args: the parsed options of :func:`add_target_options`.
        positional: the words that name the target (at most one: a URL or an mcp.json NAME).
        command: the server command after ``--``, from :func:`split_command`.
        stdin: where the project-config question is answered (default ``sys.stdin``).
        stderr: where it is asked (default ``sys.stderr``).

    Raises:
        UsageError: the words do not name one server, or an option does not fit the target.
    """
    words = list(positional)
    if command is not None and is_url(command[0]):
        # `-- URL` is accepted for a URL too, but never as the start of a stdio command.
        if len(command) > 1:
            raise UsageError(
                f"a URL takes no further words: {_url_label(command[0], SecretValues())} was followed by "
                f"{clean_terminal(shown_command(command[1:2]), newlines=False)}; "
                "a stdio server's command starts with a program"
            )
        if words:
            raise UsageError("give either a target or '-- URL', not both")
        return _http_target(command[0], args)
    if words and is_url(words[0]):
        if len(words) > 1:
            raise UsageError(
                f"a URL takes no further words: {_url_label(words[0], SecretValues())} was followed by "
                f"{words[1][:40]!r}"
            )
        if command is not None:
            raise UsageError("give either a URL or a command after '--', not both")
        return _http_target(words[0], args)
    if command is not None:
        if words:
            raise UsageError(f"give either a server name ({words[0][:40]!r}) or a command after '--', not both")
        return _stdio_target(list(command), args)
    if len(words) > 1:
        shown = " ".join(w[:40] for w in words[1:])
        raise UsageError(f"one server at a time: unexpected {shown!r} after {words[0][:40]!r}")
    if words:
        return _config_target(words[0], args, stdin, stderr)
    if getattr(args, "config", None):
        shown = clean_terminal(str(args.config), newlines=False)
        raise UsageError(f"--config {shown}: name one of its servers (mcpwire servers --config {shown} lists them)")
    return _demo_target(args)


def client_options(args: argparse.Namespace) -> ClientOptions:
    """The connection options of :func:`add_target_options`: era, revision and timeouts."""
    return era_options(args).replace(
        timeout=getattr(args, "timeout", 30.0), connect_timeout=getattr(args, "connect_timeout", 60.0)
    )


def era_options(args: argparse.Namespace) -> ClientOptions:
    """The era and revision the options pin (``--era``, ``--protocol-version``), as client options."""
    from .client.options import ClientOptions  # here: the client is not imported to parse options

    return ClientOptions(
        era=getattr(args, "era", None) or "auto", protocol_version=getattr(args, "protocol_version", None)
    )


def declare_as_serve(options: ClientOptions, command: str) -> ClientOptions:
    """``options`` declaring to servers what ``mcpwire serve`` declares (sampling, elicitation,
    roots), each answered with a refusal naming ``command`` where ``options`` has no handler.

    Some servers list tools only to clients that declare a capability (server-everything lists 13
    tools to a client that declares none, 16 to one that declares all three): declaring the same
    everywhere, ``mcpwire servers``, ``call``, ``chat`` and ``serve`` show one server the same
    tools, and the same count. A call of such a tool from a command that cannot answer its
    question fails, saying which commands can.
    """
    elsewhere = "mcpwire serve passes it on to its clients" if command != "chat" else "mcpwire serve can"

    async def no_sampling(params: JSONObject) -> JSONObject:
        # 2025-11-25 client/sampling: "User rejected sampling request" is error code -1
        raise RPCError(-1, f"mcpwire {command} cannot answer a sampling request ({elsewhere}; so does mcpwire chat)")

    async def no_elicitation(params: JSONObject) -> JSONObject:
        return {"action": "decline"}  # nobody was there to ask: the request is declined, not answered

    async def no_roots() -> list[str | JSONObject]:
        raise RPCError(-32603, f"mcpwire {command} offers no roots ({elsewhere})")

    return options.replace(
        sampling=options.sampling or no_sampling,
        elicitation=options.elicitation or no_elicitation,
        roots=options.roots if options.roots is not None else no_roots,
    )


# -- configuration files and trust ---------------------------------------------------------------


def find_target_config(args: argparse.Namespace) -> tuple[Path | None, bool]:
    """The config file the options name or the search finds, and whether it is project-local.

    Project-local means ``./mcp.json`` found by the search: named with neither ``--config`` nor
    ``$MCPWIRE_CONFIG``, and not the user's own ``~/.config/mcpwire/mcp.json``.

    Raises:
        UsageError: ``--config`` or ``$MCPWIRE_CONFIG`` names a file that does not exist.
    """
    from .host.config import CONFIG_ENV_VAR, find_config, search_paths

    explicit = getattr(args, "config", None)
    try:
        path = find_config(explicit)
    except ConfigError as exc:
        raise UsageError(clean_terminal(str(exc), newlines=False)) from None
    if path is None or explicit is not None or os.environ.get(CONFIG_ENV_VAR):
        return path, False
    return path, path == search_paths()[0]


def load_target_config(
    args: argparse.Namespace,
    *,
    stdin: TextIO | None = None,
    stderr: TextIO | None = None,
    strict: bool = False,
) -> HostConfig | None:
    """Finds and loads mcp.json, asking first when it is project-local and not yet trusted.

    Returns:
        The configuration, or ``None`` when no file is named or found.

    Raises:
        UsageError: the file is missing, unreadable, has no valid entry, or is not trusted.
    """
    from .host.config import load_config

    path, project_local = find_target_config(args)
    if path is None:
        return None
    if project_local:
        trusted, refusal = decide(
            path, assume_yes=bool(getattr(args, "yes", False)), stdin=stdin or sys.stdin, stderr=stderr or sys.stderr
        )
        if not trusted:
            raise UsageError(refusal)
    try:
        config = load_config(path, strict=strict)
    except ConfigError as exc:
        raise UsageError(clean_terminal(str(exc), newlines=True)) from None
    if not config.servers and config.problems:
        listed = "; ".join(clean_terminal(p, newlines=False) for p in config.problems[:5])
        more = f" (and {len(config.problems) - 5} more)" if len(config.problems) > 5 else ""
        raise UsageError(f"{path}: no valid server entry: {listed}{more}")
    return config


# -- running --------------------------------------------------------------------------------------


def interruption(
    exc: BaseException, kinds: tuple[type[BaseException], ...] = (KeyboardInterrupt,)
) -> BaseException | None:
    """The interrupt ``exc`` is or carries: itself, or the first instance of ``kinds`` inside an
    exception group at any depth (trio wraps what its tasks raise, so a Ctrl+C can arrive nested).

    When a group carries an interrupt and other errors as well, the interrupt wins (the caller exits
    as interrupted), and every other error but ``trio.Cancelled`` is logged at ERROR with its
    traceback, as unexpected errors are: a bug met on the way out is not lost.

    Returns:
        The interrupt, or ``None`` when ``exc`` carries none (the caller re-raises ``exc``).
    """
    found, others = _split(exc, kinds)
    if not found:
        return None
    _log_unexpected(others, "while interrupted")
    return found[0]


def _split(
    exc: BaseException, kinds: tuple[type[BaseException], ...]
) -> tuple[list[BaseException], list[BaseException]]:
    """The leaves of ``exc`` (itself, or what its groups hold at any depth) that are instances of
    ``kinds``, and the others but ``trio.Cancelled``."""
    if isinstance(exc, BaseExceptionGroup):
        found: list[BaseException] = []
        others: list[BaseException] = []
        for member in exc.exceptions:
            more, rest = _split(member, kinds)
            found += more
            others += rest
        return found, others
    if isinstance(exc, kinds):
        return [exc], []
    return [], [] if isinstance(exc, trio.Cancelled) else [exc]


def _log_unexpected(errors: Sequence[BaseException], when: str) -> None:
    for error in errors:
        log.error("%s: unexpected %s", when, type(error).__name__, exc_info=error)


def run_cli(async_main: Callable[[], Awaitable[int | None]]) -> int:
    """Runs a trio main; SIGINT and SIGTERM cancel it cleanly.

    On the first signal ``async_main`` is cancelled, so its ``async with`` blocks close the servers
    it started (bounded; further signals meanwhile are ignored). No traceback is printed, also for a
    Ctrl+C that arrives as a ``KeyboardInterrupt`` (before the signal receiver is installed, after it
    is closed, or raised by ``async_main``), bare or inside exception groups; what else went wrong
    meanwhile is logged (:func:`interruption`).

    Returns:
        What ``async_main`` returned (``None`` is 0), or 130 after SIGINT and 143 after SIGTERM.

    Raises:
        Whatever ``async_main`` raised when no signal arrived.
    """
    if threading.current_thread() is not threading.main_thread():  # signal handlers need the main thread
        return trio.run(async_main) or 0
    received: list[int] = []
    failure: list[BaseException] = []
    result: list[int] = []

    async def guarded() -> None:
        main_scope = trio.CancelScope()

        async def watch(signals: AsyncIterator[int]) -> None:
            async for signum in signals:
                if not received:
                    received.append(signum)
                    log.info("signal %d: shutting down", signum)
                    main_scope.cancel()

        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch, signals)
                with main_scope:
                    try:
                        result.append(await async_main() or 0)
                    except trio.Cancelled:
                        raise
                    except BaseException as exc:  # re-raised outside the nursery, not as a group
                        failure.append(exc)
                nursery.cancel_scope.cancel()

    interrupted = False
    try:
        trio.run(guarded)
    except BaseException as exc:  # a Ctrl+C while no receiver was installed, bare or in groups
        if interruption(exc) is None:
            raise
        interrupted = True
    if failure and interruption(failure[0]) is not None:
        interrupted = True
    elif failure and (received or interrupted):  # the signal decides; an error on the way out is shown
        _log_unexpected(_split(failure[0], ())[1], "after the signal")
    elif failure:
        raise failure[0]
    if received:
        return EXIT_SIGTERM if received[0] == signal.SIGTERM else EXIT_SIGINT
    if interrupted:
        return EXIT_SIGINT
    return result[0] if result else 0
