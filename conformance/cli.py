"""``mcpwire check [OPTIONS] [TARGET] [-- CMD ARGS...]``: the command line of the checker.

TARGET is a URL (Streamable HTTP, or the 2024-11-05 HTTP+SSE transport: detected, or
``--transport``) or the name of a server in an ``mcp.json`` (``--config``); ``-- CMD ARGS...`` is
a stdio server, started with a minimal environment (``--env``, ``--env-pass`` add to it); nothing
is the bundled reference server. A config entry may pin the era checked with ``"era": "legacy"``
or ``"modern"``. ``--config FILE`` without a server name, or ``--all``, checks every enabled server
of the config, ``--jobs`` at a time, and prints one matrix of servers by area.

Tool calls: checks that need to call tools (structured output, progress, cancellation, MRTR,
logging levels) are skipped unless ``--call-tools read-only`` (tools annotated ``readOnlyHint``
and not ``destructiveHint``), ``--call-tools all`` or ``--call-tool NAME`` allows them: calling
the tools of a real server can have real effects. The reference server is checked with
``read-only`` by default (all its tools are harmless except ``crash``, which is not read-only), and
its read-only tools are also allowed by name: 2024-11-05 has no tool annotations, so ``read-only``
alone would refuse every tool there.

``--strict``: a SHOULD-level violation fails the run (a MUST-level one always does). A warning that
proves no violation stays a warning: heuristics (SV-40's guess that a form field asks for a
secret) and cases the spec leaves open (SV-09b: an error instead of a counter-offer; SV-24c: a
DELETE answered neither 2xx nor 405). MAY-level rules never fail the run.

Output: on a terminal, a progress bar while the checks run, then the summary in colour; off a
terminal (CI) no line per check unless ``-v``. Every value given with ``--header``,
``--bearer-env`` or in a config's headers, and credentials in the URL or command line, are masked
in every output.

Exit status: 0 when every MUST passes (and no baseline entry is stale), 1 otherwise (a broken
handshake included), 2 on usage errors, a server that cannot be started or reached, or one that
answered no probe in any way that could be judged; 130 on SIGINT and 143 on SIGTERM, after every
server process was shut down.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from mcpwire.redaction import clean_terminal

from .baseline import apply_baseline, read_baseline
from .context import Target, ToolPolicy
from .harness import lone_errors
from .http_harness import TargetUnreachable
from .model import ALL_REVISIONS, Result, Run
from .registry import CATALOGUE
from .report import (
    ProgressBar,
    dumps,
    index_html,
    matrix_text,
    multi_exit_code,
    multi_to_dict,
    multi_to_junit,
    progress_line,
    to_html,
    to_json,
    to_junit,
    to_terminal,
)
from .runner import DEFAULT_JOBS, redactor_for, run
from .targets import (
    UsageError,
    config_target,
    config_targets,
    env_additions,
    headers_from,
    minimal_env,
    reference_target,
    reference_tool_policy,
    url_target,
)

__all__ = ["UsageError", "main", "reference_target", "reference_tool_policy", "run_interruptibly"]

_log = logging.getLogger("mcpwire.check.cli")
T = TypeVar("T")


def _split(values: Sequence[str] | None) -> list[str]:
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpwire check",
        description="Check an MCP server against the specification. Targets: '-- CMD ARGS...' (stdio), a URL, "
        "or a server name from mcp.json; none = the bundled reference server.",
        epilog="examples:\n  mcpwire check http://127.0.0.1:3000/mcp\n  mcpwire check -- npx -y "
        "@modelcontextprotocol/server-everything\n  mcpwire check --config mcp.json github\n  mcpwire check "
        "--config mcp.json --json report.json   (every enabled server)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", nargs="?", help="a URL or a server name from mcp.json")
    p.add_argument("--config", type=Path, help="mcp.json to find TARGET in; without TARGET, check all its servers")
    p.add_argument("--all", action="store_true", help="check every enabled server of the config (mcp.json found)")
    p.add_argument(
        "--revision",
        action="append",
        help=f"revision(s) to check (default: every one accepted); {', '.join(ALL_REVISIONS)}",
    )
    p.add_argument("--only", action="append", help="check ids or tags to run (comma separated)")
    p.add_argument("--skip", action="append", help="check ids or tags to skip (comma separated)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="SHOULD-level violations fail the run too; warnings that prove no violation (heuristics such as "
        "SV-40's secret-name guess, cases the spec leaves open such as SV-09b and SV-24c) stay warnings",
    )
    p.add_argument("--json", nargs="?", const="-", metavar="FILE", help="JSON report to FILE (or stdout)")
    p.add_argument("--junit", metavar="FILE", help="JUnit XML report")
    p.add_argument("--html", metavar="FILE", help="self-contained HTML report (several servers: an index)")
    p.add_argument("--baseline", type=Path, metavar="FILE", help="expected failures: ID or ID@REVISION per line")
    p.add_argument(
        "--transport",
        choices=("auto", "http", "streamable-http", "sse"),
        default="auto",
        help="URL targets: Streamable HTTP, the 2024-11-05 HTTP+SSE transport, or detect (default)",
    )
    p.add_argument(
        "--header",
        action="append",
        metavar="'NAME: VALUE'",
        help="an HTTP header for every request (NAME: VALUE or NAME=VALUE); its value is never shown",
    )
    p.add_argument("--bearer-env", metavar="VAR", help="send 'Authorization: Bearer $VAR'; never shown")
    p.add_argument("--env", action="append", metavar="NAME=VALUE", help="set a variable for a stdio server")
    p.add_argument("--env-pass", action="append", metavar="NAME", help="pass our variable NAME to a stdio server")
    p.add_argument("--cwd", metavar="DIR", help="working directory of a stdio server")
    p.add_argument(
        "--call-tools",
        choices=("none", "read-only", "all"),
        default=None,
        help="which tools checks may call: none (default for your servers), read-only (annotated "
        "readOnlyHint), all; the reference server defaults to read-only",
    )
    p.add_argument("--call-tool", action="append", metavar="NAME", help="also allow calling this tool (repeatable)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each answer (default 5)")
    p.add_argument("--eof-grace", type=float, default=2.0, help="seconds to exit after stdin EOF (default 2)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help=f"checks run at once (default {DEFAULT_JOBS}); with several servers, servers checked at once (default 2)",
    )
    p.add_argument(
        "--no-reuse",
        action="store_true",
        help="a new server process for every check (by default a process is reused after checks that only "
        "listed or read, when nothing unasked came from it)",
    )
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="a line per check (off a terminal) and evidence in the summary"
    )
    return p


def _with_options(target: Target, options: argparse.Namespace) -> Target:
    """``target`` with the connection options of the command line: headers for a URL; for a
    stdio server, ``--env``/``--env-pass`` added to its (minimal or configured) environment and
    ``--cwd``."""
    headers = dict(target.headers or {})
    headers.update(headers_from(options.header or (), options.bearer_env))
    if target.is_http:
        if options.env or options.env_pass or options.cwd:
            raise UsageError("--env, --env-pass and --cwd apply to stdio servers only")
        return dataclasses.replace(target, headers=headers or target.headers)
    if headers:
        raise UsageError("--header and --bearer-env apply to URL targets only")
    added, secrets = env_additions(options.env or (), options.env_pass or ())
    env = minimal_env()[0] if target.env is None else dict(target.env)
    env.update(added)
    return dataclasses.replace(
        target, env=env, secrets=target.secrets + secrets, cwd=options.cwd or target.cwd, eof_grace=options.eof_grace
    )


def _targets(options: argparse.Namespace, command: list[str]) -> Target | list[tuple[str, Target | str]]:
    """One target, or every server of a config (``--all``, or ``--config`` without a name)."""
    json_value = options.json
    if isinstance(json_value, str) and "://" in json_value:
        # `--json URL`: the URL is the target and the report goes to stdout; a file option never
        # swallows a target
        if options.target is not None or command:
            raise UsageError(f"--json takes a file, not the URL {json_value!r}")
        options.target, options.json = json_value, "-"
    for name in ("junit", "html"):
        value = getattr(options, name)
        if isinstance(value, str) and "://" in value:
            raise UsageError(f"--{name} takes a file, not the URL {value!r}; give the report file first")
    if command:
        if options.target or options.all:
            raise UsageError("give either TARGET or '-- CMD ARGS...', not both")
        return _with_options(Target(tuple(command), env=minimal_env()[0]), options)
    if options.target is not None and "://" in options.target:
        if options.all:
            raise UsageError("--all checks a config's servers; it takes no URL")
        transport = {"streamable-http": "http"}.get(options.transport, options.transport)
        return _with_options(url_target(options.target, transport), options)
    if options.target is not None:
        path = options.config or Path("mcp.json")
        return _with_options(config_target(path, options.target), options)
    if options.all or options.config is not None:
        path = options.config or _found_config()
        return [(name, t if isinstance(t, str) else _with_options(t, options)) for name, t in config_targets(path)]
    return _with_options(reference_target(), options)


def _found_config() -> Path:
    from mcpwire.errors import ConfigError
    from mcpwire.host.config import find_config

    try:
        found = find_config()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if found is None:
        raise UsageError("--all: no mcp.json found (give --config FILE)")
    return found


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text + "\n")
    else:
        try:
            Path(path).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _missing_extra() -> str | None:
    """The checker validates with jsonschema and speaks HTTP with httpx: name what is missing."""
    import importlib.util

    missing = [name for name in ("jsonschema", "httpx", "httpx_sse") if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return f"mcpwire check needs {', '.join(missing)}: pip install 'mcpwire[check]'"


def run_interruptibly(async_fn: Callable[[], Awaitable[T]]) -> tuple[T | None, int | None]:
    """Run ``async_fn`` under trio so that SIGINT and SIGTERM cancel it cleanly (every server
    process shut down, no traceback): ``(result, None)``, or ``(None, 130 | 143)`` on a signal."""
    received: list[int] = []

    async def guarded() -> T | None:
        if threading.current_thread() is not threading.main_thread():  # no signal handling to take over
            return await async_fn()
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    async for number in signals:
                        received.append(int(number))
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(watch)
                result = await async_fn()
                nursery.cancel_scope.cancel()
                return result
        return None  # pragma: no cover - the nursery above returns or is cancelled

    with lone_errors():  # the run's own error, as itself
        result = trio.run(guarded)
    if received:
        return None, 128 + received[0]
    return result, None


class _Progress:
    """Where progress goes: a bar on a terminal, a line per result with ``-v``, else nowhere."""

    def __init__(self, options: argparse.Namespace, label: str) -> None:
        self._bar: ProgressBar | None = None
        self._lines = options.verbose and not options.quiet
        if not options.quiet and sys.stderr.isatty():
            self._bar = ProgressBar(sys.stderr, label=label)
            self._lines = False

    @contextlib.contextmanager
    def shown(self) -> Iterator[_Progress]:
        if self._bar is None:
            yield self
            return
        with self._bar:
            yield self

    def plan(self, total: int) -> None:
        if self._bar is not None:
            self._bar.plan(total)

    def add(self, result: Result) -> None:
        if self._bar is not None:
            self._bar.add(result)
        elif self._lines:
            print(progress_line(result), file=sys.stderr, flush=True)


def _tool_policy(options: argparse.Namespace, command: list[str]) -> ToolPolicy:
    extra = tuple(_split(options.call_tool))
    if options.call_tools is None and options.target is None and not command and not options.all:
        reference = reference_tool_policy()
        return ToolPolicy(reference.mode, reference.allow + extra)
    return ToolPolicy(options.call_tools or "none", extra)


def _color(stream: Any) -> bool:
    return bool(stream.isatty()) and "NO_COLOR" not in os.environ


async def _check(target: Target, options: argparse.Namespace, tools: ToolPolicy, progress: _Progress | None) -> Run:
    return await run(
        target,
        revisions=_split(options.revision),
        only=_split(options.only),
        skip=_split(options.skip),
        strict=options.strict,
        timeout=options.timeout,
        jobs=options.jobs or DEFAULT_JOBS,
        on_result=progress.add if progress is not None else None,
        on_plan=progress.plan if progress is not None else None,
        tools=tools,
        reuse=not options.no_reuse,
    )


def _unreachable(target: Target, exc: OSError) -> str:
    text = redactor_for(target).text(str(exc))
    if isinstance(exc, TargetUnreachable):  # it names the URL already
        return text
    verb = "reach" if target.is_http else "start"
    return f"cannot {verb} {target.label!r}: {text}"


def _check_one(options: argparse.Namespace, target: Target, tools: ToolPolicy, entries: list[str]) -> int:
    progress = _Progress(options, target.label)
    try:
        with progress.shown():
            outcome, interrupted = run_interruptibly(lambda: _check(target, options, tools, progress))
    except OSError as exc:
        print(f"mcpwire check: {_unreachable(target, exc)}", file=sys.stderr)
        return 2
    if interrupted is not None or outcome is None:
        print("mcpwire check: interrupted; every server process was shut down", file=sys.stderr)
        return interrupted or 130
    if not outcome.judged:
        details = "; ".join(f"{p.revision}: {p.detail}" for p in outcome.probes)
        print(f"mcpwire check: {target.label!r} accepted no protocol revision ({details})", file=sys.stderr)
        return 2
    apply_baseline(outcome, entries)
    if options.json:
        _write(options.json, to_json(outcome))
    if options.junit:
        _write(options.junit, to_junit(outcome))
    if options.html:
        _write(options.html, to_html(outcome))
    if options.json != "-":
        print(to_terminal(outcome, color=_color(sys.stdout), verbose=options.verbose))
    return outcome.exit_code


def _page_name(html: str, index: int, name: str) -> str:
    stem = Path(html).stem
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:60] or "server"
    return f"{stem}-{index}-{safe}.html"


def _check_many(
    options: argparse.Namespace, servers: list[tuple[str, Target | str]], tools: ToolPolicy, entries: list[str]
) -> int:
    results: dict[str, Run | str] = {name: why for name, why in servers if isinstance(why, str)}
    chatty = not options.quiet and (options.verbose or sys.stderr.isatty())

    async def each() -> None:
        limiter = trio.CapacityLimiter(max(1, options.jobs or 2))

        async def one(name: str, target: Target) -> None:
            async with limiter:
                if chatty:
                    print(f"mcpwire check: checking {clean_terminal(name)}", file=sys.stderr, flush=True)
                try:
                    outcome = await _check(target, options, tools, None)
                except OSError as exc:
                    results[name] = _unreachable(target, exc)
                    return
                if not outcome.judged:
                    results[name] = "accepted no protocol revision"
                    return
                apply_baseline(outcome, entries)
                results[name] = outcome

        async with trio.open_nursery() as nursery:
            for name, target in servers:
                if not isinstance(target, str):
                    nursery.start_soon(one, name, target)

    _, interrupted = run_interruptibly(each)
    if interrupted is not None:
        print("mcpwire check: interrupted; every server process was shut down", file=sys.stderr)
        return interrupted
    ordered = [(name, results[name]) for name, _ in servers]
    if options.json:
        _write(options.json, dumps(multi_to_dict(ordered)))
    if options.junit:
        _write(options.junit, multi_to_junit(ordered))
    if options.html:
        pages: list[tuple[str, Run | str, str | None]] = []
        for i, (name, outcome) in enumerate(ordered, 1):
            href = None
            if isinstance(outcome, Run):
                href = _page_name(options.html, i, name)
                _write(str(Path(options.html).parent / href), to_html(outcome))
            pages.append((name, outcome, href))
        _write(options.html, index_html(pages))
    if options.json != "-":
        print(matrix_text(ordered, color=_color(sys.stdout)))
    return multi_exit_code(ordered)


def main(argv: list[str]) -> int:
    """Run the checker with the arguments after ``check``; returns the exit status."""
    problem = _missing_extra()
    if problem is not None:
        print(f"mcpwire check: {problem}", file=sys.stderr)
        return 2
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
        if not command:
            print("mcpwire check: '--' must be followed by a command", file=sys.stderr)
            return 2
    try:
        options = _parser().parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if options.list:
        for c in CATALOGUE.values():
            print(f"{c.id:8} {c.level.value:6} {c.title}  [{c.spec}]")
        return 0
    try:
        chosen = _targets(options, command)
        revisions = _split(options.revision)
        unknown = [r for r in revisions if r not in ALL_REVISIONS]
        if unknown:
            raise UsageError(f"unknown revision(s) {', '.join(unknown)}; known: {', '.join(ALL_REVISIONS)}")
        if options.jobs is not None and options.jobs < 1:
            raise UsageError(f"--jobs must be at least 1, not {options.jobs}")
        entries = read_baseline(options.baseline) if options.baseline else []
        tools = _tool_policy(options, command)
        if isinstance(chosen, list):
            return _check_many(options, chosen, tools, entries)
        return _check_one(options, chosen, tools, entries)
    except UsageError as exc:
        print(f"mcpwire check: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"mcpwire check: cannot read the baseline: {exc.strerror or exc}", file=sys.stderr)
        return 2
