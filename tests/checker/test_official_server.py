"""The official MCP conformance runner grades the reference server, over HTTP, scenario by scenario.

Every server scenario of runner 0.1.16 and 0.2.0-alpha.12 runs against
``python -m mcpwire.testing.everything --http``, once per protocol revision the scenario is
tagged with (the runner's ``--spec-version``). Each suite runs its scenarios one after another in
one runner process (a process per scenario would cost a Node start each); then every scenario is
asserted on its own. A scenario passes when the runner graded at least one check a SUCCESS and
none a FAILURE or WARNING; vacuous passes are refused: a check the runner marks "Not testable",
or a tool call answered with ``isError`` (the runner only looks for content, so "unknown tool"
would pass ``tools-call-simple-text``; only ``tools-call-error`` may, with the fixture's own text).

The runner's extension scenarios (tagged ``[extension]``: the Tasks extension, SEP-2663, and the
Skills extension, SEP-2640) are on no revision's timeline, so no suite includes them: each runs in
a runner process of its own (``--scenario NAME --force`` at 2026-07-28, the revision they are
written for), in the same pool as the suites. They are held to more: every check a SUCCESS (a
SKIPPED check there means the server did not declare the extension), the runner's wire-schema
check among them, and no pass that exercised nothing (one page where pagination is judged, no
``_meta`` where its keys are). ``tasks-status-notifications`` is a placeholder in the runner (its
only check is SKIPPED whatever the server does); tests/checker/test_reference_tasks.py covers what it
describes, ``notifications/tasks`` on ``subscriptions/listen``.

The runner and a Node >= 22 are installed by ``tests/official_suite/install_runner.sh`` into
``.cache/conformance``; the runner is loaded with ``tests/official_suite/loopback.cjs`` so that it
only ever talks to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpwire.testing.everything import ERROR_TEXT

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("MCPWIRE_CONFORMANCE_DIR", REPO / ".cache" / "conformance"))
NODE = CACHE / "node22" / "node_modules" / "node" / "bin" / "node"
LOOPBACK = REPO / "tests" / "official_suite" / "loopback.cjs"

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
#: the runner's [extension] scenarios, each run on its own (``--scenario NAME --force``)
EXTENSION_RUNNER = "0.2.0-alpha.12"
EXTENSION_SPEC = "2026-07-28"
EXTENSIONS = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
    "sep-2640-skills-directory",
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
]
EXTENSION_SUITE = (EXTENSION_RUNNER, "extensions")
#: scenarios whose one check the runner marks SKIPPED whatever the server does -> its reason
RUNNER_PLACEHOLDERS = {"tasks-status-notifications": "pending subscriptions/listen rewrite"}
#: runner processes at once: the scenarios' own deadlines are short
PARALLEL = 3
RUN_DEADLINE_S = 300.0
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
        message = f"the conformance runner {version} is not installed (run tests/official_suite/install_runner.sh)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return entry


def _run_all(jobs: list[tuple[str, list[str], Path]]) -> dict[str, tuple[int, str]]:
    """Run each (name, argv, log file), at most PARALLEL at once; name -> (exit status, output)."""
    env = {**os.environ, "PATH": f"{NODE.parent}:{os.environ['PATH']}"}
    waiting = list(jobs)
    running: list[tuple[str, Path, subprocess.Popen[bytes]]] = []
    done: dict[str, tuple[int, str]] = {}
    deadline = time.monotonic() + RUN_DEADLINE_S
    try:
        while waiting or running:
            while waiting and len(running) < PARALLEL:
                name, argv, log = waiting.pop(0)
                with log.open("wb") as sink:  # a file, not a pipe: a full pipe would stall the runner
                    running.append((name, log, subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)))
            try:
                running[0][2].wait(0.1)
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    raise AssertionError(f"runner processes still running after {RUN_DEADLINE_S:g} s") from None
            for item in [r for r in running if r[2].poll() is not None]:
                running.remove(item)
                name, log, proc = item
                done[name] = (proc.returncode, log.read_text(errors="replace"))
    finally:
        for _, _, proc in running:
            proc.kill()
            proc.wait()
    return done


def _scenarios(directory: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in directory.iterdir():
        match = _DIR.match(path.name)
        if match and (path / "checks.json").is_file():
            out[match.group(1)] = json.loads((path / "checks.json").read_text())
    return out


@pytest.fixture(scope="module")
def suites(reference_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    """Every suite, and every extension scenario, run once against the reference server.

    Suite key -> scenario -> checks, plus the log and exit status; EXTENSION_SUITE holds the
    extension scenarios, with a log and an exit status per scenario.
    """
    jobs: list[tuple[str, list[str], Path]] = []
    directories: dict[tuple[str, str], Path] = {}
    for version, spec in SUITES:
        directory = directories[(version, spec)] = tmp_path_factory.mktemp(f"runner-{version}-{spec}")
        argv = [str(NODE), "--require", str(LOOPBACK), str(_runner(version)), "server", "--url", reference_url]
        argv += ["--suite", "all", "--spec-version", spec, "-o", str(directory)]
        jobs.append((f"{version} {spec}", argv, directory / "runner.log"))
    extensions = tmp_path_factory.mktemp(f"runner-{EXTENSION_RUNNER}-extensions")
    logs = tmp_path_factory.mktemp("extension-logs")
    for name in EXTENSIONS:
        argv = [str(NODE), "--require", str(LOOPBACK), str(_runner(EXTENSION_RUNNER)), "server", "--url", reference_url]
        argv += ["--scenario", name, "--force", "--spec-version", EXTENSION_SPEC, "-o", str(extensions)]
        jobs.append((name, argv, logs / f"{name}.log"))
    done = _run_all(jobs)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (version, spec), directory in directories.items():
        status, log = done[f"{version} {spec}"]
        out[(version, spec)] = {"scenarios": _scenarios(directory), "log": log, "status": status}
    out[EXTENSION_SUITE] = {
        "scenarios": _scenarios(extensions),
        "log": {name: done[name][1] for name in EXTENSIONS},
        "status": {name: done[name][0] for name in EXTENSIONS},
    }
    return out


def test_every_suite_ran_exactly_its_scenarios(suites: dict[tuple[str, str], dict[str, Any]]) -> None:
    for key, names in SUITES.items():
        got = suites[key]
        assert sorted(got["scenarios"]) == sorted(names), got["log"][-2000:]
        assert got["status"] == 0, got["log"][-3000:]


#: extension checks that pass without exercising anything -> what their details must show
_EXERCISED: dict[str, tuple[str, Callable[[dict[str, Any]], bool]]] = {
    "sep-2640-skills-list-implemented": ("a non-empty listing", lambda d: d.get("entries", 0) > 0),
    "sep-2640-skills-list-pagination": ("two pages or more", lambda d: d.get("pages", 0) >= 2),
    "sep-2640-skills-list-entry-atomic": ("two pages or more", lambda d: d.get("pages", 0) >= 2),
    "sep-2640-directory-read-pagination": (
        "a nextCursor followed",
        lambda d: str(d.get("paginationDetail", "")).startswith("nextCursor round-tripped"),
    ),
    "sep-2640-meta-prefix": ("_meta keys to judge", lambda d: bool(d.get("metaKeys"))),
    "sep-2640-entry-frontmatter-identical": (
        "fields beyond name and description",
        lambda d: len(d.get("fields", [])) > 2,
    ),
    "sep-2640-limit-resources-per-skill": ("a skill with supporting files", lambda d: d.get("maxObserved", 0) > 1),
    "wire-schema-valid": ("messages validated", lambda d: d.get("messagesValidated", 0) > 0),
}


def _vacuous(scenario: str, check: dict[str, Any]) -> str | None:
    details = check.get("details") or {}
    exercised = _EXERCISED.get(check["id"])
    if check.get("status") == "SUCCESS" and exercised is not None and not exercised[1](details):
        return f"{check['id']}: passed without {exercised[0]}: {json.dumps(details)[:200]}"
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


def test_every_extension_scenario_ran() -> None:
    # the runner's own list, so that a renamed or added extension scenario is noticed
    listing = subprocess.run(
        [str(NODE), "--require", str(LOOPBACK), str(_runner(EXTENSION_RUNNER)), "list", "--server"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    tagged = sorted(re.findall(r"^\s*- (\S+) \[extension\]$", listing.stdout, re.M))
    assert tagged == sorted(EXTENSIONS), listing.stdout[-2000:]


@pytest.mark.parametrize("scenario", EXTENSIONS)
def test_extension_scenario_passes(scenario: str, suites: dict[tuple[str, str], dict[str, Any]]) -> None:
    run = suites[EXTENSION_SUITE]
    checks = run["scenarios"].get(scenario)
    assert checks is not None, f"{scenario} did not run: {run['log'][scenario][-2000:]}"
    assert run["status"][scenario] == 0, run["log"][scenario][-3000:]
    if scenario in RUNNER_PLACEHOLDERS:
        # the runner grades nothing here yet: exactly its one SKIPPED placeholder, or the test
        # must be tightened (test_reference_tasks.py covers notifications/tasks meanwhile)
        assert [(c["id"], c["status"]) for c in checks] == [(scenario, "SKIPPED")]
        assert RUNNER_PLACEHOLDERS[scenario] in checks[0]["description"]
        pytest.skip(f"runner {EXTENSION_RUNNER} does not grade {scenario}: {checks[0]['errorMessage']}")
    bad = [f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in checks if c["status"] != "SUCCESS"]
    assert bad == []
    assert "wire-schema-valid" in {c["id"] for c in checks}
    assert len(checks) >= 2, checks
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
    one_page = {"id": "sep-2640-skills-list-pagination", "status": "SUCCESS", "details": {"pages": 1}}
    assert _vacuous("sep-2640-skills-enumeration", one_page) == (
        'sep-2640-skills-list-pagination: passed without two pages or more: {"pages": 1}'
    )
    assert _vacuous("sep-2640-skills-enumeration", {**one_page, "details": {"pages": 2}}) is None
    no_meta = {"id": "sep-2640-meta-prefix", "status": "SUCCESS", "details": {"note": "no _meta keys"}}
    assert _vacuous("sep-2640-skills-manifest", no_meta) is not None
    single = {"id": "sep-2640-directory-read-pagination", "status": "SUCCESS", "details": {}}
    assert _vacuous("sep-2640-skills-directory", {**single, "details": {"paginationDetail": "single-page"}}) is not None
