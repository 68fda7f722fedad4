"""Findings on disk: a JSONL trace per finding, a pytest file per finding, and their replay.

Theory of operation: a trace is JSON Lines. The first line is a header (``"type": "header"``):
format, the target (transport, the command and URL with credentials redacted, the *names* of the
extra environment variables and HTTP headers, never their values), era and revision, the tools'
outputSchemas, the request deadline and the longer one a missed deadline was confirmed with, and
the finding (oracle, severity, message, every violation, its root cause; for ``list-stable``, also
the lists learnt at the start). Then one line per event of the minimal exchange: ``send`` lines
carry the exact bytes written (``line``, or ``line_hex`` when not UTF-8) and the step's metadata
(kind, id, method, tool, valid, framing, its own deadline); lines the exchange added by itself
(barrier requests, replies to server requests) are marked ``"kind": "auto"``; ``recv``, ``note``
(HTTP statuses) and ``exit`` lines are what the server did, for the reader. Every line is JSON
with C1 controls, bidi overrides, line separators and lone surrogates written as ``\\uXXXX``
escapes, and known secret values masked, so no server text can act on a terminal or an editor.

:func:`replay` rebuilds the steps from the ``send`` lines, runs them on a fresh session with the
same :func:`~fuzz.exchange.execute` and judges them with the same oracles, keeping the finding's
meaning: an ``answer-slow`` finding is replayed with the longer deadline and judged by the first,
so it comes back as the same warning, not as a hang.

The generated pytest file holds no text from the server at all: it names the trace file next to
it and calls :func:`check_trace`, which reads it as JSON. Where the recorded command or URL does
not fit (or holds redacted credentials), ``MCPWIRE_FUZZ_ARGV`` (a JSON list) and
``MCPWIRE_FUZZ_URL`` point it at the server; ``MCPWIRE_FUZZ_HEADERS`` (a JSON object) gives the
HTTP headers, and the environment variables the trace names are taken from the test's own
environment: their values are secrets, so neither the trace nor the file holds them.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpwire.redaction import REDACTED, SecretValues, clean_terminal

from .exchange import Profile, Step
from .oracles import LISTS, ORACLES, Violation, check, late_answers, list_stability
from .runner import Config, Finding, make_target, run_steps

__all__ = [
    "HEADERS_ENV",
    "TRACE_FORMAT",
    "Replay",
    "check_trace",
    "json_line",
    "load_trace",
    "pytest_source",
    "recorded_command",
    "replay",
    "trace_lines",
    "write_finding",
]

#: the environment variable a generated pytest file reads HTTP headers from (a JSON object)
HEADERS_ENV = "MCPWIRE_FUZZ_HEADERS"

TRACE_FORMAT = "mcpwire-fuzz-trace/3"
_READABLE = (TRACE_FORMAT, "mcpwire-fuzz-trace/2", "mcpwire-fuzz-trace/1")
#: characters that JSON may carry raw but that act on a terminal or hide text: written as escapes
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
#: what a header name may be (RFC 9110 token); only such names are named in a generated file
_TOKEN = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")


def json_line(value: Any, secrets: SecretValues | None = None) -> str:
    """``value`` as one line of JSON, safe to show: see the module docstring."""
    text = json.dumps(value, ensure_ascii=False)
    text = _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return secrets.mask(text) if secrets else text


def trace_lines(
    finding: Finding,
    profile: Profile,
    deadline: float | None = None,
    confirm_deadline: float | None = None,
    secrets: SecretValues | None = None,
) -> list[str]:
    """The finding as JSONL lines (header first)."""
    header = {
        "type": "header",
        "format": TRACE_FORMAT,
        "target": profile.target,
        "era": profile.era,
        "revision": profile.revision,
        "deadline": deadline,
        "confirm_deadline": confirm_deadline,
        "output_schemas": {
            t["name"]: t["outputSchema"] for t in profile.tools if isinstance(t.get("outputSchema"), dict)
        },
        "finding": finding.to_json(),
    }
    if finding.violation.oracle == "list-stable":  # what the lists were, to judge a replay by
        learnt = {"tools/list": profile.tools, "prompts/list": profile.prompts, "resources/list": profile.resources}
        header["lists"] = {
            method: [str(i.get(field)) for i in learnt[method] if isinstance(i, dict)]
            for method, (key, field) in LISTS.items()
            if key in profile.capabilities
        }
    lines = [json_line(header, secrets)]
    steps = list(finding.observation.steps)
    position = 0
    for entry in finding.entries:
        record = entry.to_json()
        if entry.direction == "send":
            step = steps[position] if position < len(steps) else None
            if step is not None and step.line == entry.raw():
                record.update(step.to_json())
                position += 1
            else:  # sent by execute() itself: a barrier request or a reply to a server request
                record["kind"] = "auto"
            lines.append(json_line(record))  # exactly what was sent: never masked (a replay sends it)
        else:
            lines.append(json_line(record, secrets))
    return lines


def load_trace(text: str) -> tuple[dict[str, Any], list[Step]]:
    """The header and the steps of a trace (raises ``ValueError`` naming the bad line)."""
    header: dict[str, Any] = {}
    steps: list[Step] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"line {number} is not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise ValueError(f"line {number} is not a JSON object")
        if record.get("type") == "header":
            if record.get("format") not in _READABLE:
                raise ValueError(f"line {number}: not a {TRACE_FORMAT} trace (format {record.get('format')!r})")
            if "target" not in record:  # format 1: stdio only
                record["target"] = {"transport": "stdio", "argv": record.get("argv")}
            header = record
            continue
        if record.get("dir") != "send" or record.get("kind") in (None, "auto"):
            continue
        if record["kind"] not in ("request", "notification", "malformed"):
            raise ValueError(f"line {number}: unknown step kind {record['kind']!r}")
        line = bytes.fromhex(record["line_hex"]) if "line_hex" in record else str(record["line"]).encode()
        steps.append(Step.from_json(line, record))
    if not header:
        raise ValueError("the trace has no header line")
    return header, steps


def recorded_command(header: dict[str, Any]) -> tuple[list[str] | None, str | None]:
    """The command a replay of the trace would start and the URL it would talk to (as recorded:
    credentials appear as ``***``)."""
    target = header.get("target") or {}
    argv = target.get("argv")
    return (list(argv) if isinstance(argv, list) else None), target.get("url")


@dataclass(slots=True)
class Replay:
    header: dict[str, Any]
    violations: list[Violation]

    @property
    def oracle(self) -> str | None:
        finding = self.header.get("finding") or {}
        oracle = finding.get("oracle")
        return oracle if oracle in ORACLES else None

    @property
    def reproduced(self) -> bool:
        """Whether the recorded violation happened again (same oracle)."""
        return any(v.oracle == self.oracle for v in self.violations)

    @property
    def errors(self) -> list[Violation]:
        """The error-level violations of the replay (a warning that came back is not one)."""
        return [v for v in self.violations if v.severity == "error"]

    def describe(self) -> str:
        if not self.violations:
            return "no violation"
        text = "; ".join(f"[{v.oracle}] ({v.severity}) {v.message}" for v in self.violations)
        return clean_terminal(text, newlines=False)


def _target_config(
    header: dict[str, Any],
    argv: Sequence[str] | None,
    url: str | None,
    deadline: float,
    env: dict[str, str] | None,
    headers: dict[str, str] | None,
) -> Config:
    recorded = header["target"]
    command = list(argv) if argv else recorded.get("argv")
    where = url or recorded.get("url")
    if command and any(REDACTED in word for word in command):
        raise ValueError("the recorded command holds redacted credentials: give the command after --")
    if where and REDACTED in where:
        raise ValueError("the recorded URL holds redacted credentials: give the URL")
    config = Config(
        command,
        url=where,
        transport=str(recorded.get("transport", "stdio")) if not url else "auto",
        headers=dict(headers or {}),
        deadline=deadline,
        env=dict(env or {}),
        cwd=recorded.get("cwd"),
    )
    if config.url and config.transport == "stdio":
        config.transport = "auto"
    return config


def replay(
    text: str,
    *,
    argv: Sequence[str] | None = None,
    url: str | None = None,
    deadline: float | None = None,
    env: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Replay:
    """Replays a trace on a fresh session (``argv`` / ``url`` override the recorded target;
    ``deadline`` the recorded one; ``env`` and ``headers`` are the values of the environment
    variables and HTTP headers the trace names but never holds). Raises ``ValueError`` for a trace
    it cannot replay as it is (e.g. a command whose credentials were redacted)."""
    header, steps = load_trace(text)
    first = float(deadline if deadline is not None else header.get("deadline") or 5.0)
    slow = (header.get("finding") or {}).get("oracle") == "answer-slow"
    # answer-slow: wait as long as the confirming replay did, judge the answer's time by the deadline
    wait = float(header.get("confirm_deadline") or 3 * first) if slow else first
    config = _target_config(header, argv, url, wait, env, headers)
    target = make_target(config)
    try:
        profile = Profile(target.describe(), header["era"], header["revision"])
        schemas: dict[str, Any] = header.get("output_schemas", {})
        profile.tools = [{"name": name, "outputSchema": schema} for name, schema in schemas.items()]
        lists: dict[str, list[str]] | None = header.get("lists")
        if lists is not None:
            profile.tools = [
                {"name": name, **({"outputSchema": schemas[name]} if name in schemas else {})}
                for name in lists.get("tools/list", [])
            ]
            profile.prompts = [{"name": name} for name in lists.get("prompts/list", [])]
            profile.resources = [{"uri": uri} for uri in lists.get("resources/list", [])]
        body = [s for s in steps if not s.setup]  # run_steps adds the era's prologue itself
        obs, _ = run_steps(target, profile, body, deadline=config.deadline)
        violations = check(obs, profile)
        if slow:
            violations += [v.at(profile) for v in late_answers(obs, first)]
        if lists is not None:
            violations += list_stability(obs, profile)
        return Replay(header, violations)
    finally:
        target.close()


def check_trace(path: str | Path, deadline: float | None = None) -> None:
    """The body of a generated pytest file: replays the trace at ``path`` and fails (an
    ``AssertionError``) while the server still shows an error-level violation; a warning-level
    finding that comes back is a ``UserWarning``, as it was a warning when found.

    ``MCPWIRE_FUZZ_ARGV`` (a JSON list), ``MCPWIRE_FUZZ_URL`` and :data:`HEADERS_ENV` (a JSON object)
    override the recorded command, URL and headers; the environment variables the trace names are
    taken from this process's environment."""
    text = Path(path).read_text(encoding="utf-8")
    header, _ = load_trace(text)
    argv = json.loads(os.environ["MCPWIRE_FUZZ_ARGV"]) if os.environ.get("MCPWIRE_FUZZ_ARGV") else None
    headers = json.loads(os.environ[HEADERS_ENV]) if os.environ.get(HEADERS_ENV) else None
    names = [str(n) for n in (header.get("target") or {}).get("env") or []]
    env = {name: os.environ[name] for name in names if name in os.environ}
    result = replay(
        text,
        argv=argv,
        url=os.environ.get("MCPWIRE_FUZZ_URL") or None,
        deadline=deadline,
        env=env,
        headers=headers,
    )
    if result.errors:
        raise AssertionError(result.describe())
    if result.reproduced:
        warnings.warn(f"still there (a warning when found): {result.describe()}", UserWarning, stacklevel=2)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "x"


def pytest_source(trace_name: str, finding: Finding, deadline: float, header_names: Sequence[str] = ()) -> str:
    """A pytest file that replays the trace ``trace_name`` (a file next to it) and fails while the
    server still has the bug. It holds no text from the server (names are reduced to ``[a-z0-9_]``;
    the oracle's id, title and citation are the fuzzer's own) and always compiles."""
    v = finding.violation
    oracle = v.oracle if v.oracle in ORACLES else "unknown"
    name = _slug(f"{oracle}_{finding.phase}")  # no server text: not even a tool's name
    if not re.fullmatch(r"finding_[a-z0-9_]+\.jsonl", trace_name):
        raise ValueError(f"not a trace file name the fuzzer writes: {trace_name!r}")
    safe_headers = [h for h in header_names if _TOKEN.match(h)]
    needs = (
        f"\nThe server was fuzzed with the HTTP header(s) {', '.join(safe_headers)}: set {HEADERS_ENV} to a JSON"
        "\nobject of their values (this file never holds them)."
        if safe_headers
        else ""
    )
    title = ORACLES[oracle].title if oracle in ORACLES else ""
    docstring = (
        f"Regression test written by ``mcpwire fuzz``: [{oracle}] {title}.\n\n"
        f"Spec: {v.spec if oracle in ORACLES else ''}\n"
        f"The finding, the exchange and what the server said are in {trace_name}, next to this file,\n"
        "which this test replays. Replay by hand: ``mcpwire fuzz --replay TRACE.jsonl``. This test fails while\n"
        "the server has the bug (a warning-level finding only warns). Where the recorded server command or\n"
        "URL does not fit, set MCPWIRE_FUZZ_ARGV (a JSON list) or MCPWIRE_FUZZ_URL; HTTP headers (such as\n"
        f"Authorization) come from {HEADERS_ENV} (a JSON object).{needs}\n"
    )
    # all of it is the fuzzer's own text; escaped anyway, so the literal cannot end early
    literal = docstring.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return (
        f'"""{literal}"""\n\n'
        "from pathlib import Path\n\n"
        "from mcpwire.fuzz.trace import check_trace\n\n"
        f"TRACE = Path(__file__).with_name({json.dumps(trace_name)})\n\n\n"
        f"def test_{name}() -> None:\n"
        f"    check_trace(TRACE, deadline={float(deadline)!r})\n"
    )


def write_finding(
    directory: Path,
    index: int,
    finding: Finding,
    profile: Profile,
    deadline: float,
    confirm_deadline: float | None = None,
    secrets: SecretValues | None = None,
) -> tuple[Path, Path]:
    """Writes ``finding_NN_<oracle>_<where>.jsonl`` and ``test_finding_NN_<oracle>_<where>.py``."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{index:02d}_{_slug(finding.violation.oracle)}_{_slug(finding.tool or finding.phase)}"
    text = "\n".join(trace_lines(finding, profile, deadline, confirm_deadline, secrets)) + "\n"
    trace_path = directory / f"finding_{stem}.jsonl"
    trace_path.write_text(text, encoding="utf-8")
    test_path = directory / f"test_finding_{stem}.py"
    names = [str(n) for n in profile.target.get("headers") or []]
    test_path.write_text(pytest_source(trace_path.name, finding, deadline, names), encoding="utf-8")
    return trace_path, test_path
