"""``mcpwire check [OPTIONS] [TARGET] [-- CMD ARGS...]``: the command line of the checker.

Exit status: 0 when every MUST passes (and no baseline entry is stale), 1 otherwise, 2 on usage
or connection errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from conformance.baseline import apply_baseline, read_baseline
from conformance.context import Target
from conformance.registry import CATALOGUE
from conformance.report import progress_line, to_html, to_json, to_junit, to_terminal
from conformance.runner import ALL_REVISIONS, Result, run

__all__ = ["main", "reference_target"]

_log = logging.getLogger("mcpwire.check.cli")


class UsageError(Exception):
    """Bad command line; exit status 2."""


def reference_target() -> Target:
    """The bundled reference server (the default target)."""
    return Target((sys.executable, "-u", "-m", "mcpwire.testing.everything"), name="mcpwire reference server")


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
    p.add_argument("--strict", action="store_true", help="SHOULD violations fail the run")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE", help="JSON report to FILE (or stdout)")
    p.add_argument("--junit", metavar="FILE", help="JUnit XML report")
    p.add_argument("--html", metavar="FILE", help="self-contained HTML report")
    p.add_argument("--baseline", type=Path, metavar="FILE", help="expected failures: ID or ID@REVISION per line")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each answer (default 5)")
    p.add_argument("--eof-grace", type=float, default=2.0, help="seconds to exit after stdin EOF (default 2)")
    p.add_argument("--jobs", type=int, default=2, help="checks run at once (default 2)")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return p


def _from_config(path: Path, name: str) -> Target:
    try:
        config: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read server {name!r} from {path}: {exc}")
    servers = config.get("mcpServers") or config.get("servers") or {} if isinstance(config, dict) else {}
    entry = servers.get(name) if isinstance(servers, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        raise UsageError(f"{path} has no stdio server named {name!r}")
    argv = (entry["command"], *[str(a) for a in entry.get("args") or []])
    env = None
    if isinstance(entry.get("env"), dict):
        import os

        env = {**os.environ, **{str(k): str(v) for k, v in entry["env"].items()}}
    return Target(argv, env=env, name=name)


def _target(options: argparse.Namespace, command: list[str]) -> Target:
    target = _base_target(options, command)
    return dataclasses.replace(target, eof_grace=options.eof_grace)


def _base_target(options: argparse.Namespace, command: list[str]) -> Target:
    if command:
        if options.target:
            raise UsageError("give either TARGET or '-- CMD ARGS...', not both")
        return Target(tuple(command))
    if options.target is None:
        return reference_target()
    if options.target.startswith(("http://", "https://")):
        raise UsageError("HTTP targets: not yet supported")
    return _from_config(options.config, options.target)


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(path).write_text(text + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    """Run the checker with the arguments after ``check``; returns the exit status."""
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
            )
        )
    except OSError as exc:
        print(f"mcpwire check: cannot start {target.label!r}: {exc}", file=sys.stderr)
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
