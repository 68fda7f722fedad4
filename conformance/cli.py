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
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import trio

from mcpwire.cliargs import (
    EXIT_SIGINT,
    EXIT_SIGTERM,
    UsageError,
    add_target_options,
    interruption,
    load_target_config,
    output_file,
    resolve_target,
    run_cli,
    split_command,
    target_epilog,
)
from mcpwire.redaction import clean_terminal
from mcpwire.transports import StdioServer

from .baseline import apply_baseline, read_baseline
from .context import Target, ToolPolicy
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
from .targets import config_targets, entry_era, reference_target, reference_tool_policy, spec_target

__all__ = ["UsageError", "main", "reference_target", "reference_tool_policy"]

_log = logging.getLogger("mcpwire.check.cli")


def _split(values: Sequence[str] | None) -> list[str]:
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpwire check",
        description="Check an MCP server against the specification: every rule of every revision it accepts. "
        "Without a target, the bundled reference server; with --config FILE and no server name (or --all), "
        "every enabled server of the config.",
        epilog=target_epilog(
            "mcpwire check",
            "examples:\n  mcpwire check http://127.0.0.1:3000/mcp --html report.html\n"
            "  mcpwire check --call-tools read-only -- npx -y @modelcontextprotocol/server-everything\n"
            "  mcpwire check --config mcp.json --json report.json   (every enabled server: one matrix)",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", nargs="*", help="a URL or a server name from mcp.json")
    p.add_argument("--all", action="store_true", help="check every enabled server of the config (found or --config)")
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
    p.add_argument(
        "--json", nargs="?", const="-", type=output_file, metavar="FILE", help="JSON report to FILE (or stdout)"
    )
    p.add_argument("--junit", type=output_file, metavar="FILE", help="JUnit XML report")
    p.add_argument(
        "--html", type=output_file, metavar="FILE", help="self-contained HTML report (several servers: an index)"
    )
    p.add_argument("--baseline", type=Path, metavar="FILE", help="expected failures: ID or ID@REVISION per line")
    p.add_argument(
        "--call-tools",
        choices=("none", "read-only", "all"),
        default=None,
        help="which tools checks may call: none (default for your servers), read-only (annotated "
        "readOnlyHint), all; the reference server defaults to read-only",
    )
    p.add_argument("--call-tool", action="append", metavar="NAME", help="also allow calling this tool (repeatable)")
    p.add_argument("--eof-grace", type=float, default=2.0, help="seconds to exit after stdin EOF (default 2)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help=f"checks run at once (default {DEFAULT_JOBS}; over stdio, as many more that call tools, each on a server "
        "process of its own); with several servers, servers checked at once (default 2)",
    )
    p.add_argument(
        "--no-reuse",
        action="store_true",
        help="a new server process for every check (by default a process is reused after checks that only "
        "listed or read, when nothing unasked came from it)",
    )
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress")
    add_target_options(p)
    # -v: a line per check off a terminal and the evidence in the summary; -vv: debug logs too
    p.set_defaults(timeout=5.0, connect_timeout=10.0)
    return p


def _resolved(options: argparse.Namespace, command: list[str] | None) -> Target:
    """The one target of the command line (cliargs' rules), as the checker's :class:`Target`."""
    resolved = resolve_target(options, options.target, command)
    if resolved.kind == "demo":
        base = reference_target()
        env = dict(base.env or {})
        env.update(resolved.spec.env if isinstance(resolved.spec, StdioServer) else {})
        target = dataclasses.replace(base, env=env, cwd=options.cwd)
    elif resolved.kind == "config":
        era = entry_era(resolved.config_path, resolved.name or "")
        target = spec_target(resolved.spec, name=resolved.name or "", era=era)
    else:
        target = spec_target(resolved.spec)
    return dataclasses.replace(target, masked=resolved.secrets, eof_grace=options.eof_grace)


def _with_era(options: argparse.Namespace, target: Target) -> Target:
    if options.era in ("legacy", "modern"):
        target = dataclasses.replace(target, era=options.era)
    return target


def _targets(options: argparse.Namespace, command: list[str] | None) -> Target | list[tuple[str, Target | str]]:
    """One target, or every server of a config (``--all``, or ``--config`` without a name)."""
    if (options.all or options.config) and not options.target and command is None:
        if options.header or options.bearer_env or options.env or options.env_pass or options.cwd:
            raise UsageError(
                "with several servers, put headers and environments in the config, not on the command line"
            )
        config = load_target_config(options)
        if config is None:
            raise UsageError("--all: no mcp.json found (give --config FILE)")
        servers = config_targets(config)
        return [(name, t if isinstance(t, str) else _with_era(options, t)) for name, t in servers]
    if options.all:
        raise UsageError("--all checks the servers of a config; it takes no target")
    return _with_era(options, _resolved(options, command))


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


def _tool_policy(options: argparse.Namespace, command: list[str] | None) -> ToolPolicy:
    extra = tuple(_split(options.call_tool))
    bundled = not options.target and command is None and not options.all and not options.config
    if options.call_tools is None and bundled:
        reference = reference_tool_policy()
        return ToolPolicy(reference.mode, reference.allow + extra)
    return ToolPolicy(options.call_tools or "none", extra)


def _color(stream: Any) -> bool:
    return bool(stream.isatty()) and "NO_COLOR" not in os.environ


def _revisions(options: argparse.Namespace) -> list[str]:
    revisions = _split(options.revision)
    if options.protocol_version:
        revisions.append(options.protocol_version)
    return revisions


async def _check(target: Target, options: argparse.Namespace, tools: ToolPolicy, progress: _Progress | None) -> Run:
    return await run(
        target,
        revisions=_revisions(options),
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


def _interrupted(code: int) -> bool:
    if code in (EXIT_SIGINT, EXIT_SIGTERM):
        print("mcpwire check: interrupted; every server process was shut down", file=sys.stderr)
        return True
    return False


def _check_one(options: argparse.Namespace, target: Target, tools: ToolPolicy, entries: list[str]) -> int:
    progress = _Progress(options, target.label)
    runs: list[Run] = []

    async def check() -> int:
        runs.append(await _check(target, options, tools, progress))
        return 0

    try:
        with progress.shown():
            code = run_cli(check)
    except OSError as exc:
        print(f"mcpwire check: {_unreachable(target, exc)}", file=sys.stderr)
        return 2
    if _interrupted(code) or not runs:
        return code
    outcome = runs[0]
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
        print(to_terminal(outcome, color=_color(sys.stdout), verbose=bool(options.verbose)))
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

    async def each() -> int:
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
        return 0

    code = run_cli(each)
    if _interrupted(code):
        return code
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
    try:
        words, command = split_command(argv)
    except UsageError as exc:
        print(f"mcpwire check: {exc}", file=sys.stderr)
        return 2
    try:
        options = _parser().parse_args(words)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if options.list:
        for c in CATALOGUE.values():
            print(f"{c.id:8} {c.level.value:6} {clean_terminal(c.title)}  [{c.spec}]")
        return 0
    if options.verbose > 1:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s: %(message)s")
    try:
        unknown = [r for r in _revisions(options) if r not in ALL_REVISIONS]
        if unknown:
            raise UsageError(f"unknown revision(s) {', '.join(unknown)}; known: {', '.join(ALL_REVISIONS)}")
        if options.jobs is not None and options.jobs < 1:
            raise UsageError(f"--jobs must be at least 1, not {options.jobs}")
        chosen = _targets(options, command)
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
    except BaseException as exc:  # a Ctrl+C outside the runs (at the trust question), bare or in groups
        if interruption(exc) is None:
            raise
        _interrupted(EXIT_SIGINT)
        return EXIT_SIGINT
