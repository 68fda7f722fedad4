"""``mcpwire check [OPTIONS] [TARGET] [-- CMD ARGS...]``: the command line of the checker.

TARGET is a URL (Streamable HTTP, or the 2024-11-05 HTTP+SSE transport: detected, or
``--transport``) or the name of a server in an ``mcp.json`` (``--config``); ``-- CMD ARGS...`` is
a stdio server; nothing is the bundled reference server. A config entry may pin the era
checked with ``"era": "legacy"`` or ``"modern"``.

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

Exit status: 0 when every MUST passes (and no baseline entry is stale), 1 otherwise, 2 on usage
or connection errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from mcpwire.transports import split_header

from .baseline import apply_baseline, read_baseline
from .context import Target, ToolPolicy
from .http_harness import TargetUnreachable
from .registry import CATALOGUE
from .report import progress_line, to_html, to_json, to_junit, to_terminal
from .runner import ALL_REVISIONS, Result, run

__all__ = ["main", "reference_target", "reference_tool_policy"]

_log = logging.getLogger("mcpwire.check.cli")


class UsageError(Exception):
    """Bad command line; exit status 2."""


def reference_target() -> Target:
    """The bundled reference server (the default target)."""
    return Target((sys.executable, "-u", "-m", "mcpwire.testing.everything"), name="mcpwire reference server")


def reference_tool_policy() -> ToolPolicy:
    """``read-only`` plus, by name, every tool the reference server annotates read-only (its own
    word, read in-process from a 2025-11-25 ``tools/list``): 2024-11-05 lists the same tools without
    annotations."""
    from mcpwire.testing.everything import EverythingServer

    answers: list[Any] = []
    server = EverythingServer(answers.append, name="mcpwire reference server")
    try:
        params: Any = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "mcpwire", "version": "0"},
        }
        server.handle_message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        server.handle_message({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.handle_message({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    finally:
        server.close()
    listed = next((a["result"].get("tools") for a in answers if isinstance(a, dict) and a.get("id") == 2), None)
    policy = ToolPolicy("read-only")
    safe = tuple(str(t.get("name")) for t in listed or () if isinstance(t, dict) and policy.refuses(t) is None)
    return ToolPolicy("read-only", safe)


def _split(values: Sequence[str] | None) -> list[str]:
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpwire check",
        description="Check an MCP server against the specification. Targets: '-- CMD ARGS...' (stdio), a URL, "
        "or a server name from mcp.json; none = the bundled reference server.",
    )
    p.add_argument("target", nargs="?", help="a URL or a server name from mcp.json")
    p.add_argument("--config", type=Path, default=Path("mcp.json"), help="mcp.json to find TARGET in")
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
    p.add_argument("--html", metavar="FILE", help="self-contained HTML report")
    p.add_argument("--baseline", type=Path, metavar="FILE", help="expected failures: ID or ID@REVISION per line")
    p.add_argument(
        "--transport",
        choices=("auto", "http", "sse"),
        default="auto",
        help="URL targets: Streamable HTTP, the 2024-11-05 HTTP+SSE transport, or detect (default)",
    )
    p.add_argument(
        "--header",
        action="append",
        metavar="NAME:VALUE",
        help="an HTTP header for every request (e.g. 'Authorization: Bearer ...'); never shown in reports",
    )
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
    p.add_argument("--jobs", type=int, default=2, help="checks run at once (default 2)")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return p


def _from_config(path: Path, name: str) -> Target:
    from mcpwire.errors import ConfigError
    from mcpwire.host.config import parse_config

    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        config = parse_config(data, base_path=path.resolve().parent)
    except (OSError, ValueError, ConfigError) as exc:
        raise UsageError(f"cannot read server {name!r} from {path}: {exc}")
    server = next((s for s in config.servers if s.name == name), None)
    if server is None:
        problems = [p for p in config.problems if f".{name}" in p]
        detail = f": {'; '.join(problems)}" if problems else ""
        raise UsageError(f"{path} has no usable server named {name!r}{detail}")
    entries = data.get("mcpServers") or data.get("servers") or {}
    era = entries.get(name, {}).get("era") if isinstance(entries.get(name), dict) else None
    if era not in (None, "legacy", "modern"):
        raise UsageError(f'{path}: server {name!r} has "era": {era!r}; expected "legacy" or "modern"')
    spec = server.to_spec()
    from mcpwire.transports import HttpServer

    if isinstance(spec, HttpServer):
        transport = {"auto": "auto", "streamable-http": "http", "sse": "sse"}[spec.transport]
        if server.type == "sse":
            transport = "sse"
        return Target(url=spec.url, transport=transport, headers=spec.auth_headers(), name=name, era=era)
    return Target(tuple(spec.argv), env=spec.environment(), name=name, era=era, cwd=spec.cwd)


def _target(options: argparse.Namespace, command: list[str]) -> Target:
    target = _base_target(options, command)
    headers = dict(target.headers or {})
    for header in options.header or ():
        try:
            header_name, value = split_header(header)
        except ValueError as exc:
            raise UsageError(f"--header: {exc}") from None
        headers[header_name] = value
    if headers and not target.is_http:
        raise UsageError("--header applies to URL targets only")
    return dataclasses.replace(target, eof_grace=options.eof_grace, headers=headers or target.headers)


def _base_target(options: argparse.Namespace, command: list[str]) -> Target:
    if command:
        if options.target:
            raise UsageError("give either TARGET or '-- CMD ARGS...', not both")
        return Target(tuple(command))
    if options.target is None:
        return reference_target()
    if options.target.startswith(("http://", "https://")):
        parts = urllib.parse.urlsplit(options.target)
        if not parts.netloc:
            raise UsageError(f"{options.target!r} is not an http(s) URL with a host")
        return Target(url=options.target, transport=options.transport)
    return _from_config(options.config, options.target)


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(path).write_text(text + "\n", encoding="utf-8")


def _missing_extra() -> str | None:
    """The checker validates with jsonschema and speaks HTTP with httpx: name what is missing."""
    import importlib.util

    missing = [name for name in ("jsonschema", "httpx", "httpx_sse") if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return f"mcpwire check needs {', '.join(missing)}: pip install 'mcpwire[check]'"


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
        target = _target(options, command)
        revisions = _split(options.revision)
        unknown = [r for r in revisions if r not in ALL_REVISIONS]
        if unknown:
            raise UsageError(f"unknown revision(s) {', '.join(unknown)}; known: {', '.join(ALL_REVISIONS)}")
        entries = read_baseline(options.baseline) if options.baseline else []
    except UsageError as exc:
        print(f"mcpwire check: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"mcpwire check: cannot read the baseline: {exc}", file=sys.stderr)
        return 2

    extra = tuple(_split(options.call_tool))
    if options.call_tools is None and options.target is None and not command:
        reference = reference_tool_policy()
        tools = ToolPolicy(reference.mode, reference.allow + extra)
    else:
        tools = ToolPolicy(options.call_tools or "none", extra)

    def progress(result: Result) -> None:
        if not options.quiet:
            print(progress_line(result), file=sys.stderr, flush=True)

    try:
        outcome = trio.run(
            lambda: run(
                target,
                revisions=revisions,
                only=_split(options.only),
                skip=_split(options.skip),
                strict=options.strict,
                timeout=options.timeout,
                jobs=options.jobs,
                on_result=progress,
                tools=tools,
            )
        )
    except TargetUnreachable as exc:  # it names the URL already
        print(f"mcpwire check: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        verb = "reach" if target.is_http else "start"
        print(f"mcpwire check: cannot {verb} {target.label!r}: {exc}", file=sys.stderr)
        return 2
    if not any(p.accepted for p in outcome.probes):
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
        print(to_terminal(outcome))
    return outcome.exit_code
