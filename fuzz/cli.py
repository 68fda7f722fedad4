"""``mcpwire fuzz``: fuzz an MCP server and keep the minimal findings.

    mcpwire fuzz [options] [-- CMD ARGS...]            stdio (no command: the bundled demo server)
    mcpwire fuzz [options] URL [-- CMD ARGS...]        HTTP: Streamable HTTP, or legacy SSE for .../sse;
                                                       with a command, the fuzzer starts and restarts it
    mcpwire fuzz --replay TRACE.jsonl [URL] [-- CMD ARGS...]

Exit status: 0 when nothing was found (or a replay did not reproduce), 1 when anything was found,
warnings included (or a replay reproduced its finding), 2 on usage errors or when the server could
not be started. ``--fail-on error`` makes warnings (such as ``answer-slow``) exit 0.

HTTP headers given with ``--header`` (e.g. ``Authorization``) go with every request, the replay's
too; traces, reports and generated pytest files keep only their names (a generated file reads the
values from ``MCPWIRE_FUZZ_HEADERS``, a JSON object).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from mcpwire.transports import split_header

from .messages import PROTOCOL_KINDS
from .runner import PHASES, SEVERITIES, Config, Report, fuzz
from .trace import load_trace, replay, write_finding

__all__ = ["main"]

log = logging.getLogger("mcpwire.fuzz.cli")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpwire fuzz",
        description="Fuzz an MCP server (stdio or HTTP): schema-driven tool arguments, protocol messages and "
        "mutations, a stateful machine, oracles; minimal findings as JSONL traces and pytest files.",
    )
    p.add_argument("url", nargs="?", help="an HTTP server's URL (else: the stdio command after --)")
    p.add_argument("--url", dest="url_option", metavar="URL", help="the same as the positional URL")
    p.add_argument(
        "--transport",
        choices=["auto", "streamable-http", "sse"],
        default="auto",
        help="HTTP transport (auto: sse when the URL path ends in /sse, else streamable-http)",
    )
    p.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="HTTP request header (repeatable)"
    )
    p.add_argument("--seed", type=int, help="make the run deterministic")
    p.add_argument("--max-examples", type=int, default=100, help="examples per tool and per phase (default 100)")
    p.add_argument("--time-budget", type=float, help="seconds of searching in all (shrinking may go on)")
    p.add_argument("--deadline", type=float, default=5.0, help="seconds a request may take (default 5)")
    p.add_argument(
        "--confirm-deadline",
        type=float,
        help="seconds a missed deadline is confirmed with, on a replay (default: 3 x --deadline)",
    )
    p.add_argument("--settle", type=float, default=0.0, help="extra seconds to wait for answers to a notification")
    p.add_argument("--connect-timeout", type=float, default=20.0, help="seconds to start and learn the server")
    p.add_argument("--database", type=Path, help="Hypothesis example database directory (replays past failures)")
    p.add_argument("--era", choices=["auto", "legacy", "modern"], default="auto")
    p.add_argument(
        "--isolation",
        choices=["auto", "process"],
        default="auto",
        help="auto (default): examples share a session, replaced after any trouble, and every finding is "
        "confirmed on a fresh one; process: a fresh process per example",
    )
    p.add_argument("--deny", action="append", default=[], metavar="TOOL", help="never call this tool (repeatable)")
    p.add_argument("--allow", action="append", metavar="TOOL", help="call only these tools (repeatable)")
    p.add_argument("--phase", action="append", choices=PHASES, help="run only these phases (repeatable)")
    p.add_argument(
        "--protocol-kind",
        action="append",
        choices=PROTOCOL_KINDS,
        help="the protocol phase's kinds of messages (repeatable; default all)",
    )
    p.add_argument("--machine-runs", type=int, default=10, help="rule sequences of the stateful phase (default 10)")
    p.add_argument("--machine-steps", type=int, default=12, help="rules per sequence (default 12)")
    p.add_argument("--out", type=Path, default=Path("mcpwire-fuzz-findings"), help="where traces and tests go")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="server environment")
    p.add_argument("--cwd", help="server working directory")
    p.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    p.add_argument(
        "--fail-on",
        choices=SEVERITIES,
        default="warning",
        help="exit 1 when a finding of this severity or a worse one was found (default warning: any finding)",
    )
    p.add_argument("--replay", type=Path, metavar="TRACE", help="replay a trace instead of fuzzing")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("-v", "--verbose", action="count", default=0)
    return p


def _target(command: list[str] | None, url: str | None) -> list[str] | None:
    if command or url:
        return command
    return [sys.executable, "-m", "mcpwire.testing.demo_server"]


def _report_json(report: Report, written: list[tuple[Path, Path]]) -> str:
    profile = report.profile
    out = {
        "server": None
        if profile is None
        else {
            **profile.target,
            "era": profile.era,
            "revision": profile.revision,
            "info": profile.server_info,
        },
        "examples": report.examples,
        "duration_s": round(report.duration, 3),
        "units": [u.to_json() for u in report.units],
        "skipped_tools": report.skipped_tools,
        "error": report.error,
        "findings": [
            {**f.to_json(), "trace": str(t), "test": str(p)} for f, (t, p) in zip(report.findings, written, strict=True)
        ],
    }
    return json.dumps(out, indent=2, ensure_ascii=False)


def main(argv: Sequence[str]) -> int:
    """Runs ``mcpwire fuzz`` with the arguments after the word ``fuzz``; returns the exit status."""
    args_list = list(argv)
    command: list[str] | None = None
    if "--" in args_list:
        i = args_list.index("--")
        args_list, command = args_list[:i], args_list[i + 1 :]
        if not command:
            print("mcpwire fuzz: nothing after '--': give the server's command", file=sys.stderr)
            return 2
    try:
        args = _parser().parse_args(args_list)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"mcpwire fuzz: --env wants KEY=VALUE, not {item!r}", file=sys.stderr)
            return 2
        env[key] = value
    headers: dict[str, str] = {}
    for item in args.header:
        try:
            name, value = split_header(item)
        except ValueError as exc:
            print(f"mcpwire fuzz: --header: {exc}", file=sys.stderr)
            return 2
        headers[name] = value
    if args.url and args.url_option and args.url != args.url_option:
        print("mcpwire fuzz: two different URLs given (positional and --url)", file=sys.stderr)
        return 2
    url: str | None = args.url or args.url_option
    if url is not None and not url.startswith(("http://", "https://")):
        print(f"mcpwire fuzz: {url!r} is not an http(s) URL; put a stdio server's command after --", file=sys.stderr)
        return 2

    if args.replay is not None:
        try:
            text = args.replay.read_text(encoding="utf-8")
            recorded, _ = load_trace(text)
            wanted = [str(n) for n in recorded["target"].get("headers") or []]
            given = {n.lower() for n in headers}
            missing = [n for n in wanted if n.lower() not in given]
            if missing:
                print(
                    f"mcpwire fuzz: the trace was recorded with the HTTP header(s) {', '.join(missing)}; "
                    "give their values with --header NAME:VALUE",
                    file=sys.stderr,
                )
            deadline = args.deadline if "--deadline" in args_list else None
            result = replay(text, argv=command, url=url, deadline=deadline, env=env, headers=headers)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            print(f"mcpwire fuzz: cannot replay {args.replay}: {exc}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps({"reproduced": result.reproduced, "violations": [v.to_json() for v in result.violations]}))
        else:
            print(("reproduced: " if result.reproduced else "not reproduced: ") + result.describe())
        return 1 if result.reproduced else 0

    def progress(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    config = Config(
        _target(command, url),
        url=url,
        transport=args.transport,
        headers=headers,
        max_examples=args.max_examples,
        time_budget=args.time_budget,
        deadline=args.deadline,
        confirm_deadline=args.confirm_deadline,
        settle=args.settle,
        connect_timeout=args.connect_timeout,
        seed=args.seed,
        database=args.database,
        era=args.era,
        isolation=args.isolation,
        deny=tuple(args.deny),
        allow=tuple(args.allow) if args.allow else None,
        phases=tuple(args.phase) if args.phase else PHASES,
        protocol_kinds=tuple(args.protocol_kind) if args.protocol_kind else PROTOCOL_KINDS,
        machine_runs=args.machine_runs,
        machine_steps=args.machine_steps,
        env=env,
        cwd=args.cwd,
        progress=None if args.quiet else progress,
    )
    report = fuzz(config)
    written: list[tuple[Path, Path]] = []
    if report.profile is not None:
        for index, finding in enumerate(report.findings, 1):
            written.append(write_finding(args.out, index, finding, report.profile, args.deadline))
    if args.json:
        print(_report_json(report, written))
    else:
        if report.error:
            print(f"mcpwire fuzz: {report.error}", file=sys.stderr)
        for finding, (trace_path, test_path) in zip(report.findings, written, strict=True):
            v = finding.violation
            where = finding.tool or finding.phase
            extra = " (did not reproduce on a fresh session)" if finding.flaky else ""
            print(f"{v.info.severity.upper()} [{v.oracle}] {where}: {v.message}{extra}")
            print(f"    spec: {v.info.spec}")
            print(f"    trace: {trace_path}  test: {test_path}")
        if not args.quiet and report.units:
            print("unit                                   examples  seconds  findings", file=sys.stderr)
            for unit in report.units:
                cut = "  (time share used up)" if unit.cut_short else ""
                print(
                    f"{unit.unit[:38]:<38} {unit.examples:>9} {unit.duration:>8.1f} {unit.findings:>9}{cut}",
                    file=sys.stderr,
                )
        print(
            f"{len(report.findings)} finding(s), {report.examples} examples in {report.duration:.1f}s"
            + (f"; skipped tools: {', '.join(report.skipped_tools)}" if report.skipped_tools else "")
        )
    if report.profile is None:
        return 2
    return 1 if report.failed(args.fail_on) else 0
