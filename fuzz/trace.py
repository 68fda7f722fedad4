"""Findings on disk: a JSONL trace per finding, a pytest file per finding, and their replay.

Theory of operation: a trace is JSON Lines. The first line is a header (``"type": "header"``):
format, the target (transport, argv, url, the *names* of the extra environment variables and
HTTP headers, never their values), era and revision, the tools' outputSchemas, the request
deadline, and the violation (for ``list-stable``, also the lists learnt at the start). Then one
line per event of the minimal exchange: ``send`` lines carry the exact bytes written (``line``,
or ``line_hex`` when not UTF-8) and the step's metadata (kind, id, method, tool, valid,
framing); lines the exchange added by itself (barrier requests, replies to server requests) are
marked ``"kind": "auto"``; ``recv``, ``note`` (HTTP statuses) and ``exit`` lines are what the
server did, for the reader. On 2026-07-28 HTTP a ``notifications/cancelled`` send line
stands for closing the cancelled request's stream (HT-M10; a note says so).

:func:`replay` rebuilds the steps from the ``send`` lines, runs them on a fresh session with the
same :func:`~fuzz.exchange.execute` and judges them with the same oracles. The generated pytest
file embeds the trace and replays it; ``MCPWIRE_FUZZ_ARGV`` (a JSON list) and
``MCPWIRE_FUZZ_URL`` point it at the server where it runs, if the recorded command or URL does
not fit there, and ``MCPWIRE_FUZZ_HEADERS`` (a JSON object) gives the HTTP headers a server
behind authentication needs: their values are secrets, so neither the trace nor the file holds
them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .exchange import Profile, Step
from .oracles import LISTS, Violation, check, list_stability
from .runner import Config, Finding, make_target, run_steps

__all__ = [
    "HEADERS_ENV",
    "TRACE_FORMAT",
    "Replay",
    "load_trace",
    "pytest_source",
    "replay",
    "trace_lines",
    "write_finding",
]

#: the environment variable a generated pytest file reads HTTP headers from (a JSON object)
HEADERS_ENV = "MCPWIRE_FUZZ_HEADERS"

TRACE_FORMAT = "mcpwire-fuzz-trace/2"
_READABLE = (TRACE_FORMAT, "mcpwire-fuzz-trace/1")


def trace_lines(finding: Finding, profile: Profile, deadline: float | None = None) -> list[str]:
    """The finding as JSONL lines (header first)."""
    header = {
        "type": "header",
        "format": TRACE_FORMAT,
        "target": profile.target,
        "era": profile.era,
        "revision": profile.revision,
        "deadline": deadline,
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
    lines = [json.dumps(header, ensure_ascii=False)]
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
        lines.append(json.dumps(record, ensure_ascii=False))
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


@dataclass(slots=True)
class Replay:
    header: dict[str, Any]
    violations: list[Violation]

    @property
    def reproduced(self) -> bool:
        """Whether the recorded violation happened again (same oracle)."""
        oracle = self.header.get("finding", {}).get("oracle")
        if oracle == "answer-slow":
            oracle = "answer-deadline"
        return any(v.oracle == oracle for v in self.violations)

    def describe(self) -> str:
        if not self.violations:
            return "no violation"
        return "; ".join(f"[{v.oracle}] {v.message}" for v in self.violations)


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
    variables and HTTP headers the trace names but never holds)."""
    header, steps = load_trace(text)
    recorded = header["target"]
    config = Config(
        list(argv) if argv else recorded.get("argv"),
        url=url or recorded.get("url"),
        transport=str(recorded.get("transport", "stdio")) if not url else "auto",
        headers=dict(headers or {}),
        deadline=float(deadline if deadline is not None else header.get("deadline") or 5.0),
        env=dict(env or {}),
        cwd=recorded.get("cwd"),
    )
    if config.url and config.transport == "stdio":
        config.transport = "auto"
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
        if lists is not None:
            violations += list_stability(obs, profile)
        return Replay(header, violations)
    finally:
        target.close()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "x"


def pytest_source(trace_text: str, finding: Finding, deadline: float, header_names: Sequence[str] = ()) -> str:
    """A self-contained pytest file: it fails while the server still has the bug. ``header_names``:
    the HTTP headers the run used; the file names them and reads their values from
    :data:`HEADERS_ENV`, never holding them itself."""
    v = finding.violation
    name = _slug(f"{v.oracle}_{finding.tool or finding.phase}")
    needs = (
        f"\nThe server was fuzzed with the HTTP header(s) {', '.join(header_names)}: set {HEADERS_ENV} to a JSON"
        "\nobject of their values (this file never holds them)."
        if header_names
        else ""
    )
    return f'''"""Regression test written by ``mcpwire fuzz``: [{v.oracle}] {v.info.title}.

Spec: {v.info.spec}
Found: {v.message[:300]!r}
Replay by hand: ``mcpwire fuzz --replay TRACE.jsonl``. This test fails while the server has the bug.
Where the recorded server command or URL does not fit, set MCPWIRE_FUZZ_ARGV (a JSON list) or
MCPWIRE_FUZZ_URL; HTTP headers (such as Authorization) come from {HEADERS_ENV} (a JSON object).{needs}
"""

import json
import os

from mcpwire.fuzz.trace import replay

TRACE = {trace_text!r}


def test_{name}() -> None:
    argv = json.loads(os.environ["MCPWIRE_FUZZ_ARGV"]) if os.environ.get("MCPWIRE_FUZZ_ARGV") else None
    headers = json.loads(os.environ["{HEADERS_ENV}"]) if os.environ.get("{HEADERS_ENV}") else None
    result = replay(
        TRACE,
        argv=argv,
        url=os.environ.get("MCPWIRE_FUZZ_URL") or None,
        deadline={deadline!r},
        headers=headers,
    )
    assert not result.reproduced, result.describe()
'''


def write_finding(
    directory: Path, index: int, finding: Finding, profile: Profile, deadline: float
) -> tuple[Path, Path]:
    """Writes ``finding_NN_<oracle>_<where>.jsonl`` and ``test_finding_NN_<oracle>_<where>.py``."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{index:02d}_{_slug(finding.violation.oracle)}_{_slug(finding.tool or finding.phase)}"
    text = "\n".join(trace_lines(finding, profile, deadline)) + "\n"
    trace_path = directory / f"finding_{stem}.jsonl"
    trace_path.write_text(text, encoding="utf-8")
    test_path = directory / f"test_finding_{stem}.py"
    names = [str(n) for n in profile.target.get("headers") or []]
    test_path.write_text(pytest_source(text, finding, deadline, names), encoding="utf-8")
    return trace_path, test_path
