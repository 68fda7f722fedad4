"""``mcpwire fuzz``: fuzz an MCP server and keep the minimal findings, one per root cause.

    mcpwire fuzz [options] [-- CMD ARGS...]            stdio (no command: the bundled demo server)
    mcpwire fuzz [options] URL [-- CMD ARGS...]        HTTP: Streamable HTTP, or legacy SSE for .../sse;
                                                       with a command, the fuzzer starts and restarts it
    mcpwire fuzz --config FILE (NAME | --all)          servers of a config file (--all: every enabled one,
                                                       sharing the time budget)
    mcpwire fuzz --replay TRACE.jsonl [--yes] [URL] [-- CMD ARGS...]

Exit status: 0 when nothing was found (or a replay did not reproduce), 1 when anything was found,
warnings included, or a unit got fewer examples than --min-examples (none at all by default: a
coverage gap), or a replay reproduced its finding; 2 on usage errors or when the server could not
be started; 130 on SIGINT, 143 on SIGTERM (every server the fuzzer started is stopped first).
``--fail-on error`` makes warnings (such as ``answer-slow``) exit 0.

Safe by default: only tools whose annotations say calling them is harmless are called (read-only,
or idempotent and not destructive, and not open-world); ``--tools all`` or ``--tools NAME,...``
opts in to others, ``--deny`` always wins; the skipped tools are listed with the reason.

The time budget is a bound: a run ends within ``--time-budget`` plus a grace of a few seconds
(``BUDGET_GRACE_S``: the example in flight is ended and findings are written), counted from the
start of the process when the fuzzer is its command (start-up and imports included).

Servers the fuzzer starts get a minimal environment (PATH, HOME, locale...), plus ``--env`` and
``--env-pass``. HTTP headers given with ``--header`` (e.g. ``Authorization``) go with every
request, the replay's too; traces, reports and generated pytest files keep only their names (a
generated file reads the values from ``MCPWIRE_FUZZ_HEADERS``, a JSON object). Credentials in a URL
or command are redacted wherever a target is shown or stored; everything shown on a terminal has
its control characters escaped.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from mcpwire.cliargs import interruption
from mcpwire.redaction import SecretValues, clean_terminal, is_secret_name, redact_argv, redact_url, shorten
from mcpwire.transports import split_header

from .messages import PROTOCOL_KINDS
from .runner import BUDGET_GRACE_S, PHASES, SAFE_RULE, SEVERITIES, Config, Report
from .schedule import run as run_fuzz
from .trace import load_trace, recorded_command, replay, write_finding
from .wire import end_every_process

__all__ = ["main"]

log = logging.getLogger("mcpwire.fuzz.cli")


class UsageError(Exception):
    """A one-line message for the user (exit 2)."""


class _Interrupted(BaseException):
    """SIGTERM (or SIGINT) arrived: unwind, stop every server, exit 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpwire fuzz",
        description="Fuzz an MCP server (stdio or HTTP): schema-driven tool arguments, protocol messages and "
        "mutations, a stateful machine, oracles; one finding per root cause, as a JSONL trace and a pytest file.",
    )
    _target_options(p)
    _run_options(p)
    _selection_options(p)
    _server_and_output_options(p)
    return p


def _target_options(p: argparse.ArgumentParser) -> None:
    """Which server: a URL, a config's server, how to reach it over HTTP."""
    p.add_argument("url", nargs="?", help="an HTTP server's URL, or with --config a server's name")
    p.add_argument("--url", dest="url_option", metavar="URL", help="the same as the positional URL")
    p.add_argument("--config", type=Path, metavar="FILE", help="an mcp.json config file: fuzz its server NAME")
    p.add_argument("--all", action="store_true", help="with --config: every enabled server, sharing the budget")
    p.add_argument(
        "--transport",
        choices=["auto", "streamable-http", "sse"],
        default="auto",
        help="HTTP transport (auto: sse when the URL path ends in /sse, else streamable-http)",
    )
    p.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="HTTP request header (repeatable)"
    )
    p.add_argument(
        "--bearer-env",
        metavar="VAR",
        help="send 'Authorization: Bearer $VAR' (the token is read from the environment, not the command line)",
    )


def _run_options(p: argparse.ArgumentParser) -> None:
    """How much and how long: examples, budgets, deadlines, isolation."""
    p.add_argument("--seed", type=int, help="make the run deterministic")
    p.add_argument("--max-examples", type=int, default=100, help="examples per tool and per phase (default 100)")
    p.add_argument(
        "--min-examples",
        type=int,
        default=0,
        metavar="N",
        help="a unit with fewer examples fails the run (a coverage gap; default: a unit with none)",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        metavar="S",
        help=f"seconds the whole command may take, from its start: a bound (plus a grace of {BUDGET_GRACE_S:g}s "
        "to stop the server and write findings); units get examples in rounds, so every unit runs",
    )
    p.add_argument("--shrink-time", type=float, default=30.0, metavar="S", help="seconds to shrink one finding")
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


def _selection_options(p: argparse.ArgumentParser) -> None:
    """What is fuzzed: tools, phases, protocol kinds, the stateful machine's size."""
    p.add_argument(
        "--tools",
        action="append",
        metavar="all|NAME,...",
        help=f"the tools to call: 'all', or names (repeatable); default: the safe ones ({SAFE_RULE})",
    )
    p.add_argument("--deny", action="append", default=[], metavar="TOOL", help="never call this tool (repeatable)")
    p.add_argument("--allow", action="append", metavar="TOOL", help="the same as --tools TOOL (repeatable)")
    p.add_argument("--phase", action="append", choices=PHASES, help="run only these phases (repeatable)")
    p.add_argument(
        "--protocol-kind",
        action="append",
        choices=PROTOCOL_KINDS,
        help="the protocol phase's kinds of messages (repeatable; default all)",
    )
    p.add_argument("--machine-runs", type=int, default=10, help="rule sequences of the stateful phase (default 10)")
    p.add_argument("--machine-steps", type=int, default=12, help="rules per sequence (default 12)")
    p.add_argument(
        "--no-edges",
        dest="edges",
        action="store_false",
        help="no edge values first (each tool's empty string, NUL, long string, negative number...): only the search",
    )


def _server_and_output_options(p: argparse.ArgumentParser) -> None:
    """The server process's environment, and what the run writes and prints."""
    p.add_argument("--out", type=Path, default=Path("mcpwire-fuzz-findings"), help="where traces and tests go")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="server environment (repeatable)")
    p.add_argument(
        "--env-pass", action="append", default=[], metavar="NAME", help="pass this variable of ours to the server"
    )
    p.add_argument("--cwd", help="server working directory")
    p.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    p.add_argument(
        "--fail-on",
        choices=SEVERITIES,
        default="warning",
        help="exit 1 when a finding of this severity or a worse one was found (default warning: any finding)",
    )
    p.add_argument("--replay", type=Path, metavar="TRACE", help="replay a trace instead of fuzzing")
    p.add_argument(
        "-y", "--yes", "--trust", dest="yes", action="store_true", help="run a replay's recorded command without asking"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines, no unit table")
    p.add_argument(
        "-v", "--verbose", action="count", default=0, help="progress lines even off a terminal; -vv: debug logs"
    )


def _default_server() -> list[str]:
    return [sys.executable, "-m", "mcpwire.testing.demo_server"]


# -- output ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Out:
    """Everything the CLI prints goes through here: secrets masked, control characters escaped."""

    secrets: SecretValues
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)

    def safe(self, text: str) -> str:
        return clean_terminal(self.secrets.mask(text), newlines=False)

    def line(self, text: str) -> None:
        print(self.safe(text), file=self.stdout)

    def err(self, text: str) -> None:
        print(self.safe(text), file=self.stderr, flush=True)


class _CleanFormatter(logging.Formatter):
    """Log lines on the terminal: secrets masked, control characters escaped (tracebacks keep their lines)."""

    def __init__(self, secrets: SecretValues) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        return clean_terminal(self.secrets.mask(super().format(record)))


def _logging(verbose: int, secrets: SecretValues) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_CleanFormatter(secrets))
    root = logging.getLogger("mcpwire")
    root.handlers[:] = [handler]
    root.propagate = False
    root.setLevel(logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)


# -- targets --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Target:
    """One server to fuzz: its command and/or URL, and how to reach it."""

    label: str
    argv: list[str] | None
    url: str | None
    transport: str = "auto"
    env: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{option} wants KEY=VALUE, not {shorten(clean_terminal(key, newlines=False), 40)!r}=...")
        out[key] = value
    return out


def _env(args: argparse.Namespace) -> dict[str, str]:
    env = _pairs(args.env, "--env")
    for name in args.env_pass:
        if name not in os.environ:
            raise UsageError(f"--env-pass {name}: {name} is not set in this environment")
        env[name] = os.environ[name]
    return env


def _headers(args: argparse.Namespace) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in args.header:
        try:
            name, value = split_header(item)
        except ValueError as exc:
            raise UsageError(f"--header: {exc}") from None
        headers[name] = value
    if args.bearer_env:
        token = os.environ.get(args.bearer_env)
        if not token:
            raise UsageError(f"--bearer-env {args.bearer_env}: that environment variable is not set or empty")
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _config_targets(args: argparse.Namespace, env: dict[str, str], headers: dict[str, str]) -> list[_Target]:
    from mcpwire.errors import ConfigError
    from mcpwire.host import load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    wanted = args.url
    if args.all == (wanted is not None):
        raise UsageError("with --config, name one server or give --all")
    chosen = [s for s in config.servers if s.enabled] if args.all else [s for s in config.servers if s.name == wanted]
    if not chosen:
        names = ", ".join(s.name for s in config.servers) or "none"
        raise UsageError(f"{args.config}: no server named {wanted!r} (servers: {names})" if wanted else "no server")
    targets = []
    for server in chosen:
        extra = dict(server.headers)
        if server.auth_type == "bearer" and server.auth_token:
            extra["Authorization"] = f"Bearer {server.auth_token}"
        elif server.auth_type == "api_key" and server.auth_token:
            extra[server.auth_header] = server.auth_token
        if server.type == "stdio":
            argv = [server.command or "", *server.args]
            targets.append(_Target(server.name, argv, None, env={**server.env, **env}, cwd=server.cwd or args.cwd))
        else:
            transport = "sse" if server.type == "sse" else args.transport
            targets.append(_Target(server.name, None, server.url, transport, dict(env), {**extra, **headers}, args.cwd))
    return targets


def _targets(args: argparse.Namespace, command: list[str] | None) -> list[_Target]:
    env, headers = _env(args), _headers(args)
    if args.config is not None:
        if command:
            raise UsageError("give either --config or a command after --, not both")
        return _config_targets(args, env, headers)
    if args.all:
        raise UsageError("--all needs --config FILE")
    if args.url and args.url_option and args.url != args.url_option:
        raise UsageError("two different URLs given (positional and --url)")
    url: str | None = args.url or args.url_option
    if url is not None and not url.startswith(("http://", "https://")):
        shown = shorten(clean_terminal(redact_url(url), newlines=False), 80)
        raise UsageError(f"{shown!r} is not an http(s) URL; put a stdio server's command after --")
    argv = command if (command or url) else _default_server()
    label = redact_url(url) if url else " ".join(redact_argv(argv or []))
    return [_Target(label, argv, url, args.transport, env, headers, args.cwd)]


def _secrets(targets: Sequence[_Target]) -> SecretValues:
    """Every value the user gave that may be a secret: header and --env values, credentials in URLs
    and commands (masked wherever they would be shown)."""
    values: list[str] = []
    for target in targets:
        values += list(target.headers.values()) + list(target.env.values())
        if target.url:
            from urllib.parse import parse_qsl, urlsplit

            parts = urlsplit(target.url)
            values += [v for v in (parts.password, parts.username) if v]
            values += [v for k, v in parse_qsl(parts.query) if is_secret_name(k)]
        words = target.argv or []
        values += [w for w, shown in zip(words, redact_argv(words), strict=True) if w != shown and "=" not in w]
        values += [w.partition("=")[2] for w, s in zip(words, redact_argv(words), strict=True) if w != s and "=" in w]
    return SecretValues(values)


# -- signals --------------------------------------------------------------------------------------------


@contextmanager
def _signals() -> Iterator[None]:
    """SIGTERM and SIGINT unwind the run (``finally`` blocks stop the servers); restored after."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Interrupted(signum)

    if sys.platform == "win32" or not _main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# -- replay ---------------------------------------------------------------------------------------------


def _confirm_replay(header: dict[str, Any], args: argparse.Namespace, command: list[str] | None, out: _Out) -> None:
    """A replay starts the command recorded in the trace: show it (redacted) and ask, unless --yes or
    the command is given after ``--``."""
    argv, _ = recorded_command(header)
    if command or not argv:
        return
    cwd = (header.get("target") or {}).get("cwd")
    out.err(
        f"mcpwire fuzz: the trace starts this command: {' '.join(redact_argv(argv))}" + (f" (in {cwd})" if cwd else "")
    )
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise UsageError("--replay starts the command recorded in the trace; give --yes to allow it")
    print("Run it? [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise UsageError("replay not run")


def _replay(args: argparse.Namespace, command: list[str] | None, out: _Out) -> int:
    env, headers = _env(args), _headers(args)
    url = args.url or args.url_option
    try:
        text = args.replay.read_text(encoding="utf-8")
        recorded, _ = load_trace(text)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot replay {args.replay}: {exc}") from None
    _confirm_replay(recorded, args, command, out)
    target = recorded.get("target") or {}
    missing = [str(n) for n in target.get("headers") or [] if str(n).lower() not in {h.lower() for h in headers}]
    if missing:
        out.err(
            f"mcpwire fuzz: the trace was recorded with the HTTP header(s) {', '.join(missing)}; "
            "give their values with --header NAME:VALUE"
        )
    unset = [str(n) for n in target.get("env") or [] if str(n) not in env]
    if unset:
        out.err(
            f"mcpwire fuzz: the trace was recorded with the environment variable(s) {', '.join(unset)}; "
            "give them with --env NAME=VALUE or --env-pass NAME"
        )
    deadline = args.deadline if args.deadline_given else None
    try:
        result = replay(text, argv=command, url=url, deadline=deadline, env=env, headers=headers)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise UsageError(f"cannot replay {args.replay}: {exc}") from None
    if args.json:
        payload = {"reproduced": result.reproduced, "violations": [v.to_json() for v in result.violations]}
        print(json.dumps(payload, ensure_ascii=True))
    else:
        out.line(("reproduced: " if result.reproduced else "not reproduced: ") + result.describe())
    return 1 if result.reproduced else 0


# -- fuzzing --------------------------------------------------------------------------------------------


def _report_json(report: Report, written: list[tuple[Path, Path]], label: str) -> dict[str, Any]:
    profile = report.profile
    return {
        "target": label,
        "server": None
        if profile is None
        else {**profile.target, "era": profile.era, "revision": profile.revision, "info": profile.server_info},
        "examples": report.examples,
        "duration_s": round(report.duration, 3),
        "time_budget_s": report.time_budget,
        "first_finding_s": None if report.first_finding is None else round(report.first_finding, 3),
        "units": [u.to_json() for u in report.units],
        "coverage_gaps": report.coverage_gaps,
        "skipped_tools": report.skipped_tools,
        "skipped_reasons": report.skipped_reasons,
        "error": report.error,
        "findings": [
            {**f.to_json(), "trace": str(t), "test": str(p)} for f, (t, p) in zip(report.findings, written, strict=True)
        ],
        "clusters": [f.cluster.to_json() for f in report.findings if f.cluster is not None],
    }


def _print_report(report: Report, written: list[tuple[Path, Path]], args: argparse.Namespace, out: _Out) -> None:
    if report.error:
        out.err(f"mcpwire fuzz: {report.error}")
    for finding, (trace_path, test_path) in zip(report.findings, written, strict=True):
        v = finding.violation
        where = finding.tool or finding.phase
        extra = " (did not reproduce on a fresh session)" if finding.flaky else ""
        out.line(f"{v.severity.upper()} [{v.oracle}] {where}: {v.message}{extra}")
        cluster = finding.cluster
        if cluster is not None and sum(cluster.members.values()) + sum(cluster.predicted.values()) > 1:
            counts = [(u, n + cluster.predicted[u]) for u, n in sorted(cluster.members.items())]
            out.line(f"    failing examples of this cause: {', '.join(f'{u} {n}' for u, n in counts)}")
        out.line(f"    spec: {v.spec}")
        out.line(f"    trace: {trace_path}  test: {test_path}")
    if not args.quiet and report.units:
        out.err("unit                                   examples  seconds  findings  known")
        for unit in report.units:
            cut = "  (time share used up)" if unit.cut_short else ""
            gap = "  COVERAGE GAP" if unit.unit in report.coverage_gaps else ""
            out.err(
                f"{unit.unit[:38]:<38} {unit.examples:>9} {unit.duration:>8.1f} {unit.findings:>9} {unit.known:>6}"
                f"{cut}{gap}"
            )
    if report.skipped_reasons and not args.quiet:
        for name, reason in report.skipped_reasons.items():
            out.err(f"skipped tool {name}: {reason}")
    summary = f"{len(report.findings)} finding(s), {report.examples} examples in {report.duration:.1f}s"
    if report.skipped_tools:
        summary += f"; skipped tools: {', '.join(report.skipped_tools)}"
    if report.coverage_gaps:
        floor = max(1, args.min_examples)
        summary += f"; coverage gap ({'no' if floor == 1 else f'fewer than {floor}'} examples): "
        summary += ", ".join(report.coverage_gaps)
    out.line(summary)


def _progress(args: argparse.Namespace, out: _Out) -> Callable[[str], None] | None:
    if args.quiet or not (sys.stderr.isatty() or args.verbose):
        return None

    def progress(message: str) -> None:
        out.err(f"[{time.strftime('%H:%M:%S')}] {message}")

    return progress


#: the options that go into the :class:`Config` field of the same name as they are
_AS_GIVEN = (
    "max_examples",
    "deadline",
    "confirm_deadline",
    "settle",
    "connect_timeout",
    "seed",
    "database",
    "era",
    "isolation",
    "machine_runs",
    "machine_steps",
    "edges",
    "min_examples",
    "shrink_time",
)


def _config(
    args: argparse.Namespace, target: _Target, budget: float | None, out: _Out, started: float | None
) -> Config:
    tools: str | list[str] | None = None
    if args.tools:
        names = [n.strip() for item in args.tools for n in item.split(",") if n.strip()]
        tools = "all" if "all" in names else names
    return Config(
        target.argv,
        url=target.url,
        transport=target.transport,
        headers=target.headers,
        time_budget=budget,
        tools=tools,
        deny=tuple(args.deny),
        allow=tuple(args.allow) if args.allow else None,
        phases=tuple(args.phase) if args.phase else PHASES,
        protocol_kinds=tuple(args.protocol_kind) if args.protocol_kind else PROTOCOL_KINDS,
        env=target.env,
        cwd=target.cwd,
        progress=_progress(args, out),
        started=started,
        **{name: getattr(args, name) for name in _AS_GIVEN},
    )


def _directory(name: str) -> str:
    """A config entry's name as a directory name (no separators, no leading dot)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "server"


def _fuzz(args: argparse.Namespace, targets: list[_Target], out: _Out, started: float) -> int:
    status = 0
    reports = []
    for index, target in enumerate(targets):
        budget = args.time_budget
        begin: float | None = started
        if budget is not None and len(targets) > 1:  # shared: each server gets an equal share of what is left
            begin = time.monotonic()
            budget = max(0.0, budget - (begin - started)) / (len(targets) - index)
        if len(targets) > 1:
            out.err(f"== {target.label}")
        report = run_fuzz(_config(args, target, budget, out, begin))
        directory = args.out / _directory(target.label) if len(targets) > 1 else args.out
        written = []
        if report.profile is not None:
            for number, finding in enumerate(report.findings, 1):
                written.append(
                    write_finding(
                        directory, number, finding, report.profile, args.deadline, args.confirm_deadline, out.secrets
                    )
                )
        if args.json:
            reports.append(_report_json(report, written, target.label))
        else:
            _print_report(report, written, args, out)
        status = max(status, 2 if report.profile is None else 1 if report.failed(args.fail_on) else 0)
    if args.json:
        payload: Any = {"servers": reports} if args.all else reports[0]
        print(out.secrets.mask(json.dumps(payload, indent=2, ensure_ascii=True)))
    return status


#: a process older than this when ``main`` starts is not one started for this command (see below)
STARTUP_LIMIT_S = 60.0


def _process_age() -> float:
    """Seconds since this process started (from Linux's /proc), 0 where that cannot be read."""
    try:
        fields = Path("/proc/self/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22 of stat: the start time, in clock ticks since boot
        uptime = float(Path("/proc/uptime").read_text(encoding="ascii").split()[0])
        return max(0.0, uptime - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _command_start(argv: Sequence[str]) -> float:
    """The ``time.monotonic()`` moment the command started, from which the time budget counts: when
    ``main`` runs as the process's own command (``mcpwire fuzz ...``, ``python -m mcpwire.fuzz ...``),
    the start of the process, so that the interpreter's start-up and imports (seconds on a loaded
    machine) are inside the budget; otherwise (called in-process, as the tests do) now."""
    now = time.monotonic()
    args = list(argv)
    if sys.argv[len(sys.argv) - len(args) :] != args or len(sys.argv) <= len(args):
        return now
    age = _process_age()
    return now - age if age < STARTUP_LIMIT_S else now


def main(argv: Sequence[str]) -> int:
    """Runs ``mcpwire fuzz`` with the arguments after the word ``fuzz``; returns the exit status."""
    started = _command_start(argv)  # the time budget counts from here
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
    args.deadline_given = "--deadline" in args_list
    out = _Out(SecretValues())
    try:
        with _signals():
            if args.replay is not None:
                out.secrets = SecretValues([*_headers(args).values(), *_env(args).values()])
                _logging(args.verbose, out.secrets)
                return _replay(args, command, out)
            targets = _targets(args, command)
            out.secrets = _secrets(targets)
            _logging(args.verbose, out.secrets)
            return _fuzz(args, targets, out, started)
    except UsageError as exc:
        out.err(f"mcpwire fuzz: {exc}")
        return 2
    except BaseException as exc:  # a signal, bare or inside exception groups; anything else goes on
        interrupt = interruption(exc, (_Interrupted, KeyboardInterrupt))
        if interrupt is None:
            raise
        signum = interrupt.signum if isinstance(interrupt, _Interrupted) else signal.SIGINT
        stopped = end_every_process()
        name = signal.Signals(signum).name
        out.err(f"mcpwire fuzz: interrupted ({name}); stopped {stopped} server process(es) still running")
        return 128 + int(signum)
