"""The official MCP conformance runner grades the reference server, over HTTP, scenario by scenario.

Every server scenario of runner 0.1.16 and 0.2.0-alpha.12 runs against
``python -m mcpwire.testing.everything --http``, once per protocol revision the scenario is
tagged with (the runner's ``--spec-version``). Each suite runs its scenarios one after another in
one runner process (a process per scenario would cost a Node start each); then every scenario is
asserted on its own. A scenario passes when the runner graded at least one check a SUCCESS and
none a FAILURE or WARNING; vacuous passes are refused: a check the runner marks "Not testable",
or a tool call answered with ``isError`` (the runner only looks for content, so "unknown tool"
would pass ``tools-call-simple-text``; only ``tools-call-error`` may, with the fixture's own text).

The runner and a Node >= 22 are installed by ``tests/conformance/install_runner.sh`` into
``.cache/conformance``; the runner is loaded with ``tests/conformance/loopback.cjs`` so that it
only ever talks to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpwire.testing.everything import ERROR_TEXT

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("MCPWIRE_CONFORMANCE_DIR", REPO / ".cache" / "conformance"))
NODE = CACHE / "node22" / "node_modules" / "node" / "bin" / "node"
LOOPBACK = REPO / "tests" / "conformance" / "loopback.cjs"

pytestmark = pytest.mark.real

_LEGACY_COMMON = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
]
_2025_11_25 = [
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "dns-rebinding-protection",
]
_2026_07_28 = [
    "server-stateless",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "json-schema-2020-12",
    "server-sse-multiple-streams",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "sep-2164-resource-not-found",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
    "caching",
    "http-header-validation",
    "http-custom-header-server-validation",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-missing-input-response",
    "input-required-result-non-tool-request",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
]
#: (runner version, --spec-version) -> every scenario that suite must run
SUITES: dict[tuple[str, str], list[str]] = {
    ("0.1.16", "2025-06-18"): _LEGACY_COMMON,
    ("0.1.16", "2025-11-25"): _LEGACY_COMMON + _2025_11_25,
    ("0.2.0-alpha.12", "2025-03-26"): ["server-session-lifecycle"],
    ("0.2.0-alpha.12", "2025-06-18"): ["server-session-lifecycle", *_LEGACY_COMMON],
    ("0.2.0-alpha.12", "2025-11-25"): ["server-session-lifecycle", *_LEGACY_COMMON, *_2025_11_25],
    ("0.2.0-alpha.12", "2026-07-28"): _2026_07_28,
}
CASES = [(version, spec, scenario) for (version, spec), names in SUITES.items() for scenario in names]
_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@pytest.fixture(scope="module")
def reference_url() -> Iterator[str]:
    command = [sys.executable, "-u", "-m", "mcpwire.testing.everything", "--http", "127.0.0.1:0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on "), line
        yield line.removeprefix("listening on ")
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _runner(version: str) -> Path:
    entry = CACHE / f"runner-{version}" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (entry.is_file() and NODE.is_file()):
        message = f"the conformance runner {version} is not installed (run tests/conformance/install_runner.sh)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return entry


@pytest.fixture(scope="module")
def suites(reference_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    """Every suite run once against the reference server; scenario -> checks, plus the log."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    procs = []
    for version, spec in SUITES:
        directory = tmp_path_factory.mktemp(f"runner-{version}-{spec}")
        argv = [str(NODE), "--require", str(LOOPBACK), str(_runner(version)), "server", "--url", reference_url]
        argv += ["--suite", "all", "--spec-version", spec, "-o", str(directory)]
        env = {**os.environ, "PATH": f"{NODE.parent}:{os.environ['PATH']}"}
        procs.append(
            (
                (version, spec),
                directory,
                subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
            )
        )
        if len(procs) % 3 == 0:  # three at a time: the scenarios' own deadlines are short
            for proc in procs[-3:]:
                proc[2].wait(300)
    for key, directory, proc in procs:
        log, _ = proc.communicate(timeout=300)
        scenarios: dict[str, Any] = {}
        for path in directory.iterdir():
            match = _DIR.match(path.name)
            if match and (path / "checks.json").is_file():
                scenarios[match.group(1)] = json.loads((path / "checks.json").read_text())
        out[key] = {"scenarios": scenarios, "log": log, "status": proc.returncode}
    return out


def test_every_suite_ran_exactly_its_scenarios(suites: dict[tuple[str, str], dict[str, Any]]) -> None:
    for key, names in SUITES.items():
        got = suites[key]
        assert sorted(got["scenarios"]) == sorted(names), got["log"][-2000:]
        assert got["status"] == 0, got["log"][-3000:]


def _vacuous(scenario: str, check: dict[str, Any]) -> str | None:
    details = check.get("details") or {}
    if str(check.get("errorMessage") or "").startswith("Not testable") or details.get("untestable"):
        return f"{check['id']}: not testable: {check.get('errorMessage')}"
    result = details.get("result")
    if check.get("status") == "SUCCESS" and isinstance(result, dict) and result.get("isError"):
        text = " ".join(i.get("text", "") for i in result.get("content") or [] if isinstance(i, dict))
        if scenario != "tools-call-error" or text != ERROR_TEXT:
            return f"{check['id']}: passed on an isError result ({text[:120]!r})"
    return None


@pytest.mark.parametrize(("version", "spec", "scenario"), CASES, ids=[f"{v}-{s}-{n}" for v, s, n in CASES])
def test_scenario_passes(version: str, spec: str, scenario: str, suites: dict[tuple[str, str], dict[str, Any]]) -> None:
    checks = suites[(version, spec)]["scenarios"].get(scenario)
    assert checks is not None, f"{scenario} did not run"
    bad = [
        f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in checks if c["status"] in ("FAILURE", "WARNING")
    ]
    assert bad == []
    assert any(c["status"] == "SUCCESS" for c in checks), f"no graded check succeeded: {checks}"
    vacuous = [v for c in checks if (v := _vacuous(scenario, c))]
    assert vacuous == []


def test_the_vacuity_guard_refuses_passes_that_prove_nothing() -> None:
    unknown = {"isError": True, "content": [{"type": "text", "text": "Tool test_simple_text not found"}]}
    passed_on_error = {"id": "tools-call-simple-text", "status": "SUCCESS", "details": {"result": unknown}}
    assert _vacuous("tools-call-simple-text", passed_on_error) == (
        "tools-call-simple-text: passed on an isError result ('Tool test_simple_text not found')"
    )
    assert _vacuous("tools-call-error", passed_on_error) is not None  # not the fixture's own error
    own = {"isError": True, "content": [{"type": "text", "text": ERROR_TEXT}]}
    assert (
        _vacuous("tools-call-error", {"id": "tools-call-error", "status": "SUCCESS", "details": {"result": own}})
        is None
    )
    untestable = {"id": "x", "status": "FAILURE", "errorMessage": "Not testable: no tool", "details": {}}
    assert _vacuous("any", untestable) == "x: not testable: Not testable: no tool"
