"""Findings on disk: a JSONL trace per finding, a pytest file per finding, and their replay.

Theory of operation: a trace is JSON Lines. The first line is a header
(``"type": "header"``): format, target argv, era and revision, the tools' outputSchemas, and
the violation. Then one line per event of the minimal exchange: ``send`` lines carry the exact
bytes written (``line``, or ``line_hex`` when not UTF-8) and the step's metadata (kind, id,
method, tool, valid); ``recv`` and ``exit`` lines are what the server did, for the reader.
:func:`replay` rebuilds the steps from the ``send`` lines, runs them on a fresh process with the
same :func:`~fuzz.exchange.execute` and judges them with the same oracles. The generated
pytest file embeds the trace, so it can be kept and run anywhere the server command works.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .exchange import Profile, Step
from .oracles import Violation, check
from .runner import Config, Finding, run_steps

__all__ = ["TRACE_FORMAT", "Replay", "load_trace", "pytest_source", "replay", "trace_lines", "write_finding"]

TRACE_FORMAT = "mcpwire-fuzz-trace/1"


def trace_lines(finding: Finding, profile: Profile) -> list[str]:
    """The finding as JSONL lines (header first)."""
    header = {
        "type": "header",
        "format": TRACE_FORMAT,
        "argv": profile.argv,
        "era": profile.era,
        "revision": profile.revision,
        "output_schemas": {
            t["name"]: t["outputSchema"] for t in profile.tools if isinstance(t.get("outputSchema"), dict)
        },
        "finding": finding.to_json(),
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    steps = iter(finding.observation.steps)
    for entry in finding.entries:
        record = entry.to_json()
        if entry.direction == "send":
            step = next(steps, None)
            if step is not None and step.line == entry.raw():
                record.update(step.to_json())
            else:  # sent by execute() itself: a barrier request or a reply to a server request
                record["kind"] = "auto"
        lines.append(json.dumps(record, ensure_ascii=False))
    return lines


def load_trace(text: str) -> tuple[dict[str, Any], list[Step]]:
    """The header and the steps of a trace."""
    header: dict[str, Any] = {}
    steps: list[Step] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        record = json.loads(raw)
        if record.get("type") == "header":
            if record.get("format") != TRACE_FORMAT:
                raise ValueError(f"line {number}: not a {TRACE_FORMAT} trace")
            header = record
            continue
        if record.get("dir") != "send" or record.get("kind") in (None, "auto"):
            continue
        line = bytes.fromhex(record["line_hex"]) if "line_hex" in record else record["line"].encode()
        steps.append(
            Step(
                line,
                record["kind"],
                record.get("request_id"),
                record.get("method"),
                record.get("tool"),
                record.get("valid"),
                bool(record.get("setup", False)),
            )
        )
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
        return any(v.oracle == oracle for v in self.violations)

    def describe(self) -> str:
        if not self.violations:
            return "no violation"
        return "; ".join(f"[{v.oracle}] {v.message}" for v in self.violations)


def replay(text: str, *, argv: Sequence[str] | None = None, deadline: float = 5.0) -> Replay:
    """Replays a trace on a fresh process (``argv`` overrides the recorded command)."""
    header, steps = load_trace(text)
    command = list(argv) if argv else list(header["argv"])
    profile = Profile(command, header["era"], header["revision"])
    profile.tools = [
        {"name": name, "outputSchema": schema} for name, schema in header.get("output_schemas", {}).items()
    ]
    config = Config(command, deadline=deadline)
    body = [s for s in steps if not s.setup]  # run_steps adds the era's prologue itself
    obs, _ = run_steps(config, profile, body)
    return Replay(header, check(obs, profile))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "x"


def pytest_source(trace_text: str, finding: Finding, deadline: float) -> str:
    """A self-contained pytest file: it fails while the server still has the bug."""
    v = finding.violation
    name = _slug(f"{v.oracle}_{finding.tool or finding.phase}")
    return f'''"""Regression test written by ``mcpwire fuzz``: [{v.oracle}] {v.info.title}.

Spec: {v.info.spec}
Found: {v.message[:300]!r}
Replay by hand: ``mcpwire fuzz --replay TRACE.jsonl``. This test fails while the server has the bug.
"""

from fuzz.trace import replay

TRACE = {trace_text!r}


def test_{name}() -> None:
    result = replay(TRACE, deadline={deadline!r})
    assert not result.reproduced, result.describe()
'''


def write_finding(
    directory: Path, index: int, finding: Finding, profile: Profile, deadline: float
) -> tuple[Path, Path]:
    """Writes ``finding-N-<oracle>.jsonl`` and ``test_finding_N_<oracle>.py``; returns both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{index:02d}_{_slug(finding.violation.oracle)}_{_slug(finding.tool or finding.phase)}"
    text = "\n".join(trace_lines(finding, profile)) + "\n"
    trace_path = directory / f"finding_{stem}.jsonl"
    trace_path.write_text(text, encoding="utf-8")
    test_path = directory / f"test_finding_{stem}.py"
    test_path.write_text(pytest_source(text, finding, deadline), encoding="utf-8")
    return trace_path, test_path
