"""mcpwire check: the reference server passes every check in every revision (stdio, Streamable
HTTP, HTTP+SSE), and each deliberately broken fixture is flagged by exactly its check."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from _targets import FIXTURES, fixture_argv, fixture_target, http_server, reference_argv
from mcpwire.conformance.cli import reference_tool_policy
from mcpwire.conformance.context import Target, ToolPolicy
from mcpwire.conformance.registry import CATALOGUE
from mcpwire.conformance.runner import ALL_REVISIONS, Result, Run, era_of, run
from mcpwire.conformance.schema import schema_dir

BAD = ("fail", "warning", "error", "not_observed")
REPO = Path(__file__).resolve().parents[2]
#: Checks the reference server cannot exercise, and why: they are covered by the fixtures.
NOT_FOR_THE_REFERENCE = {
    "SV-05b": "it advertises every feature, so no method is served without its capability",
    "SV-19": "it is dual-era; the rule is about 2026-07-28-only servers",
    "SV-39": "it needs no authorization",
}


def _fast(argv: list[str]) -> Target:
    """A stdio target whose interpreter skips ``site`` (the servers import only the stdlib and
    this checkout): the reference run starts hundreds of processes."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(FIXTURES)])}
    # the reference server (-m) runs on mcpwire.server, which needs trio and msgspec from site
    flags = () if "-m" in argv else ("-S",)
    return Target((argv[0], *flags, *argv[1:]), env=env, name=argv[-1].rsplit("/", 1)[-1])


#: (check, revision) pairs that apply but that no server can exercise over a transport, and why.
NOTHING_TO_OBSERVE = {
    "http": {
        ("CN-01", "2026-07-28"): "2026-07-28 HTTP cancels by closing the response stream",
        ("SV-05", "2026-07-28"): "SV-05c judges unknown methods over 2026-07-28 Streamable HTTP (status and code)",
    },
}


def _bad(outcome: Run) -> list[tuple[str, str, str, str]]:
    return [(r.id, r.revision, r.status, r.message) for r in outcome.results if r.status in BAD]


def _passed(outcome: Run) -> set[tuple[str, str]]:
    return {(r.id, r.revision) for r in outcome.results if r.status == "pass"}


def _applicable(outcome: Run, transport: str) -> set[tuple[str, str]]:
    """Every (check, revision) pair of the run whose era, revision range, transport and needed
    capabilities (as advertised in that revision) all apply."""
    capabilities = {p.revision: p.capabilities for p in outcome.probes}
    pairs = {
        (c.id, revision)
        for revision in outcome.revisions
        for c in CATALOGUE.values()
        if transport in c.transports
        and c.applies_to_revision(revision, era_of(revision)) is None
        and all(need in capabilities[revision] for need in c.needs)
        and c.id not in NOT_FOR_THE_REFERENCE
    }
    pairs -= set(NOTHING_TO_OBSERVE.get(transport, {}))
    # SV-06 needs the official schema.json files ($MCPWIRE_SCHEMA_DIR); without them it is skipped
    return pairs if schema_dir() is not None else {p for p in pairs if p[0] != "SV-06"}


def _assert_every_applicable_check_passes(outcome: Run, transport: str) -> None:
    assert _bad(outcome) == []
    assert outcome.exit_code == 0
    assert _passed(outcome) == _applicable(outcome, transport)
    assert {r.status for r in outcome.results if (r.id, r.revision) not in _passed(outcome)} <= {"skipped"}


@pytest.mark.slow
async def test_reference_server_passes_every_check_over_stdio() -> None:
    outcome = await run(
        _fast(reference_argv()), jobs=4, tools=reference_tool_policy(), timeout=10.0, check_timeout=60.0
    )
    assert outcome.revisions == list(ALL_REVISIONS)
    _assert_every_applicable_check_passes(outcome, "stdio")
    for result in outcome.results:
        if result.id in NOT_FOR_THE_REFERENCE:
            assert result.status == "skipped"
    # 2024-11-05 has no tool annotations: the reference's read-only tools are allowed by name
    assert {("SV-35", "2024-11-05"), ("CN-01", "2024-11-05"), ("LG-03", "2024-11-05")} <= _passed(outcome)


async def test_reference_server_passes_every_check_over_streamable_http() -> None:
    async with http_server(reference_argv()) as url:
        # transport "auto": the runner detects Streamable HTTP
        target = Target(url=url, transport="auto", name="reference over HTTP")
        outcome = await run(target, jobs=4, tools=reference_tool_policy(), timeout=10.0, check_timeout=60.0)
    assert outcome.transport == "http"
    assert outcome.revisions == list(ALL_REVISIONS)
    _assert_every_applicable_check_passes(outcome, "http")
    assert {("SV-35", "2024-11-05"), ("CN-01", "2024-11-05"), ("LG-03", "2024-11-05")} <= _passed(outcome)
    # the HTTP evidence model: every result knows its transport and links its spec page
    sv20 = next(r for r in outcome.results if r.id == "SV-20" and r.revision == "2025-11-25")
    assert (sv20.transport, sv20.spec_url) == (
        "http",
        "https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#sending-messages-to-the-server",
    )
    assert {p.revision: p.server_info.get("name") for p in outcome.probes} == dict.fromkeys(
        ALL_REVISIONS, "mcpwire-everything"
    )


async def test_reference_server_passes_every_check_over_http_sse() -> None:
    async with http_server(reference_argv()) as url:
        target = Target(url=url.removesuffix("/mcp") + "/sse", transport="auto", name="reference over HTTP+SSE")
        outcome = await run(target, jobs=4, tools=reference_tool_policy(), timeout=10.0, check_timeout=60.0)
    assert outcome.transport == "sse"
    assert outcome.revisions == [r for r in ALL_REVISIONS if r < "2026-07-28"]
    # every check that applies to HTTP+SSE in a legacy revision passed
    _assert_every_applicable_check_passes(outcome, "sse")


# -- broken fixtures --------------------------------------------------------------------------

# (fixture, transport, revision, tool policy, the check that must flag it, status)
CASES = [
    ("banner", "stdio", "2025-11-25", "none", "SV-01", "fail"),
    ("big_ids", "http", "2026-07-28", "none", "SV-02", "fail"),
    ("float_code", "http", "2025-11-25", "none", "SV-03", "fail"),
    ("answers_notifications", "stdio", "2025-11-25", "none", "SV-04", "fail"),
    ("wrong_unknown_method_code", "http", "2025-11-25", "none", "SV-05", "fail"),
    ("unadvertised", "http", "2025-11-25", "none", "SV-05b", "fail"),
    ("unknown_method_200", "http", "2026-07-28", "none", "SV-05c", "fail"),
    ("nameless_resource", "http", "2025-11-25", "none", "SV-06", "fail"),
    ("batch_answer", "http", "2025-06-18", "none", "SV-07", "fail"),
    ("batch_dropped", "http", "2025-03-26", "none", "SV-07b", "fail"),
    ("ignores_eof", "stdio", "2025-11-25", "none", "SV-08", "warning"),
    ("no_server_version", "http", "2025-11-25", "none", "SV-09", "fail"),
    ("unaccepted_counter_offer", "stdio", "2024-11-05", "none", "SV-09", "fail"),
    ("bogus_counter_offer", "http", "2025-11-25", "none", "SV-09b", "fail"),
    ("early_roots", "stdio", "2025-11-25", "none", "SV-10", "warning"),
    ("unasked_sampling", "stdio", "2025-11-25", "none", "SV-11", "fail"),
    ("unadvertised_list_changed", "stdio", "2025-11-25", "none", "SV-11", "fail"),
    # before 2025-06-18 the rule is a SHOULD
    ("unadvertised_logging", "stdio", "2025-03-26", "none", "SV-11", "warning"),
    ("ping_result", "http", "2025-11-25", "none", "SV-12", "fail"),
    ("discover_no_ttl", "http", "2026-07-28", "none", "SV-13", "fail"),
    ("wrong_version_error", "http", "2026-07-28", "none", "SV-14", "fail"),
    ("version_error_200", "http", "2026-07-28", "none", "SV-14b", "fail"),
    ("caps_optional", "http", "2026-07-28", "none", "SV-15", "fail"),
    ("version_optional", "http", "2026-07-28", "none", "SV-15", "fail"),
    ("remembers_meta", "http", "2026-07-28", "none", "SV-15b", "fail"),
    ("no_result_type", "http", "2026-07-28", "none", "SV-16", "fail"),
    ("server_request_modern", "stdio", "2026-07-28", "none", "SV-17", "fail"),
    ("undeclared_input", "http", "2026-07-28", "read-only", "SV-18", "fail"),
    ("modern_only_get", "http", "2026-07-28", "none", "SV-19", "warning"),
    ("notification_200", "http", "2025-11-25", "none", "SV-20", "fail"),
    ("text_plain_answers", "http", "2025-11-25", "none", "SV-21", "fail"),
    ("stray_notification", "http", "2026-07-28", "none", "SV-21b", "fail"),
    ("no_origin_check", "http", "2025-11-25", "none", "SV-22", "fail"),
    ("no_host_check", "http", "2025-11-25", "none", "SV-22b", "warning"),
    ("ignores_version_header", "http", "2025-11-25", "none", "SV-23", "fail"),
    ("spaced_session", "http", "2025-11-25", "none", "SV-24", "fail"),
    ("session_missing_404", "http", "2025-11-25", "none", "SV-24b", "warning"),
    ("delete_keeps_session", "http", "2025-11-25", "none", "SV-24c", "fail"),
    ("get_json", "http", "2025-11-25", "none", "SV-25", "fail"),
    ("repeated_event_ids", "http", "2025-11-25", "none", "SV-26", "fail"),
    ("no_priming", "http", "2025-11-25", "none", "SV-26b", "warning"),
    ("no_retry", "http", "2025-11-25", "none", "SV-26b", "warning"),
    ("unvalidated_method_header", "http", "2026-07-28", "none", "SV-27", "fail"),
    ("raw_name_compare", "http", "2026-07-28", "none", "SV-27b", "fail"),
    ("unvalidated_param_headers", "http", "2026-07-28", "read-only", "SV-27c", "fail"),
    ("buffered_sse", "http", "2026-07-28", "none", "SV-28", "warning"),
    ("bad_schema", "http", "2025-11-25", "none", "SV-29", "fail"),
    ("duplicate_tools", "http", "2025-11-25", "none", "SV-29b", "warning"),
    ("invalid_schema", "http", "2025-11-25", "none", "SV-29c", "fail"),
    ("array_output_schema", "http", "2025-11-25", "none", "SV-29d", "fail"),
    ("wrong_structured", "http", "2025-11-25", "read-only", "SV-30", "fail"),
    ("unknown_tool_result", "http", "2025-11-25", "none", "SV-31", "warning"),
    ("args_protocol_error", "http", "2025-11-25", "read-only", "SV-31b", "warning"),
    ("empty_not_found", "http", "2026-07-28", "none", "SV-32", "fail"),
    ("both_text_blob", "http", "2025-11-25", "none", "SV-32b", "fail"),
    ("wrong_not_found_code", "http", "2025-11-25", "none", "SV-32c", "warning"),
    ("ignores_cursor", "http", "2025-11-25", "none", "SV-33", "warning"),
    ("cursor_cycle", "http", "2025-11-25", "none", "SV-33b", "fail"),
    ("random_tools", "stdio", "2026-07-28", "none", "SV-34", "fail"),
    ("shuffled_tools", "http", "2026-07-28", "none", "SV-34b", "warning"),
    ("decreasing_progress", "http", "2025-11-25", "read-only", "SV-35", "fail"),
    ("unasked_logs", "http", "2026-07-28", "none", "SV-36", "fail"),
    ("logs_unasked_in_calls", "http", "2026-07-28", "read-only", "SV-36b", "fail"),
    ("late_ack", "http", "2026-07-28", "none", "SV-37", "fail"),
    ("leaky_subscription", "http", "2026-07-28", "read-only", "SV-37b", "fail"),
    ("bad_retry", "http", "2026-07-28", "read-only", "SV-38", "fail"),
    ("prm_without_servers", "http", "2025-11-25", "none", "SV-39", "fail"),
    ("prm_foreign_resource", "http", "2025-11-25", "none", "SV-39", "fail"),
    ("asks_password", "http", "2025-11-25", "read-only", "SV-40", "warning"),
    ("answers_cancelled", "http", "2025-11-25", "read-only", "CN-01", "warning"),
    ("no_cache_hints", "http", "2026-07-28", "none", "CA-01", "fail"),
    ("modern_fewer_tools", "http", "2026-07-28", "none", "ERA-01", "warning"),
    ("parse_error_code", "stdio", "2025-11-25", "none", "FR-01", "warning"),
    ("sse_hello_first", "sse", "2025-11-25", "none", "HS-01", "fail"),
    ("sse_foreign_endpoint", "sse", "2025-11-25", "none", "HS-02", "fail"),
    ("no_origin_check_sse", "sse", "2025-11-25", "none", "HS-08", "fail"),
    ("no_host_check_sse", "sse", "2025-11-25", "none", "HS-08b", "warning"),
    ("setlevel_error", "http", "2025-11-25", "none", "LG-01", "fail"),
    ("bad_log_level_ok", "http", "2026-07-28", "none", "LG-02", "warning"),
    ("ignores_log_level", "http", "2025-11-25", "read-only", "LG-03", "warning"),
    ("nameless_prompt_arg", "http", "2025-11-25", "none", "PR-01", "fail"),
    ("roleless_message", "http", "2025-11-25", "none", "PR-02", "fail"),
    ("unknown_prompt_ok", "http", "2025-11-25", "none", "PR-03", "warning"),
    ("template_no_uri", "http", "2025-11-25", "none", "RS-03", "fail"),
    ("too_many_completions", "http", "2025-11-25", "none", "CP-01", "fail"),
    ("completion_unknown_ok", "http", "2025-11-25", "none", "CP-02", "warning"),
]
#: Extra headers a fixture needs (its credentials).
HEADERS = {
    "prm_without_servers": {"Authorization": "Bearer fixture-token"},
    "prm_foreign_resource": {"Authorization": "Bearer fixture-token"},
}
#: How many fixtures are checked at once (each runs its checks 4 at a time).
PARALLEL = 4


async def _check_fixture(case: tuple[str, ...]) -> Run:
    name, transport, revision, policy = case[:4]
    tools = ToolPolicy(policy)
    options: dict[str, Any] = {"revisions": [revision], "jobs": 4, "tools": tools, "timeout": 10.0}
    if transport == "stdio":
        target = _fast(fixture_argv(name))
        if name == "ignores_eof":
            target = dataclasses.replace(target, eof_grace=0.3)
        return await run(target, **options)
    async with http_server(fixture_argv(name)) as url:
        if transport == "sse":
            url = url.removesuffix("/mcp") + "/sse"
        return await run(Target(url=url, transport=transport, name=name, headers=HEADERS.get(name)), **options)


@pytest.fixture(scope="module")
def fixture_runs() -> dict[str, Run]:
    """Every fixture checked once, a few at a time (they are independent servers)."""
    runs: dict[str, Run] = {}

    async def main() -> None:
        limiter = trio.CapacityLimiter(PARALLEL)

        async def one(case: tuple[str, ...]) -> None:
            async with limiter:
                runs[case[0]] = await _check_fixture(case)

        async with trio.open_nursery() as nursery:
            for case in CASES:
                nursery.start_soon(one, case)

    trio.run(main)
    return runs


def test_every_check_has_a_fixture_or_a_reason() -> None:
    flagged = {case[4] for case in CASES}
    assert set(CATALOGUE) == flagged
    assert len({case[0] for case in CASES}) == len(CASES)
    for case in CASES:
        assert (FIXTURES / f"{case[0]}.py").is_file()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_broken_fixture_is_flagged_by_exactly_its_check(case: tuple[str, ...], fixture_runs: dict[str, Run]) -> None:
    name, _, revision, _, check_id, status = case
    if check_id == "SV-06" and schema_dir() is None:
        pytest.skip("SV-06 needs the official schema.json files ($MCPWIRE_SCHEMA_DIR)")
    outcome = fixture_runs[name]
    flagged = {(r.id, r.status) for r in outcome.results if r.status in BAD}
    assert flagged == {(check_id, status)}, [(r.id, r.status, r.message) for r in outcome.results if r.status in BAD]
    failure = next(r for r in outcome.results if r.id == check_id)
    assert failure.revision == revision
    assert failure.exchanges  # the evidence that proves it
    if failure.transport != "stdio":
        assert failure.http_exchanges
        assert all("status" in e and "request_headers" in e for e in failure.http_exchanges)
    assert outcome.exit_code == (1 if status == "fail" else 0)


def test_fixture_credentials_never_reach_the_evidence(fixture_runs: dict[str, Run]) -> None:
    results = fixture_runs["prm_without_servers"].results
    assert "fixture-token" not in repr([(r.http_exchanges, r.exchanges) for r in results])
    sv39 = next(r for r in results if r.id == "SV-39")
    assert [e["status"] for e in sv39.http_exchanges if e["method"] == "POST"] == [401]


def test_server_ignoring_stdin_eof_says_which_signal_was_needed(fixture_runs: dict[str, Run]) -> None:
    message = next(r.message for r in fixture_runs["ignores_eof"].results if r.id == "SV-08")
    # the grace is 0.3 s, or three times the process's own start-up when that is longer
    assert re.match(
        r"^still running [\d.]+ s after stdin EOF( \(it took [\d.]+ s to start\))?; SIGTERM was needed$", message
    )


async def test_strict_turns_should_violations_into_failures() -> None:
    outcome = await run(
        fixture_target("ignores_eof", eof_grace=0.2), revisions=("2025-11-25",), only=("SV-08",), strict=True
    )
    assert [(r.id, r.status) for r in outcome.results] == [("SV-08", "fail")]
    assert outcome.exit_code == 1


async def test_strict_keeps_heuristic_warnings_as_warnings() -> None:
    # SV-40's secret detection is a guess on field names: a warning, whatever --strict says
    async with http_server(fixture_argv("asks_password")) as url:
        target = Target(url=url, transport="http", name="asks_password")
        options: dict[str, Any] = {"revisions": ("2025-11-25",), "only": ("SV-40",), "tools": ToolPolicy("read-only")}
        lenient = await run(target, **options)
        strict = await run(target, strict=True, **options)
    assert [(r.id, r.status, r.level) for r in lenient.results] == [("SV-40", "warning", "MUST")]
    assert [(r.id, r.status, r.level) for r in strict.results] == [("SV-40", "warning", "MUST")]
    assert strict.exit_code == 0


async def test_a_legacy_empty_contents_answer_is_a_should_violation() -> None:
    # 2026-07-28 made "never an empty contents array" a MUST; before, an error for a missing
    # resource is a SHOULD (server/resources.mdx §Error Handling)
    target = fixture_target("empty_not_found")
    lenient = await run(target, revisions=("2024-11-05",), only=("SV-32", "SV-32c"))
    assert [(r.id, r.status, r.level) for r in lenient.results] == [
        ("SV-32", "warning", "SHOULD"),
        ("SV-32c", "skipped", "SHOULD"),
    ]
    assert lenient.exit_code == 0
    strict = await run(target, revisions=("2024-11-05",), only=("SV-32",), strict=True)
    assert [(r.id, r.status) for r in strict.results] == [("SV-32", "fail")]
    assert strict.exit_code == 1


async def test_a_counter_offered_revision_is_judged_by_the_negotiation_check_only() -> None:
    # initialize 2024-11-05 is answered with 2025-03-26, which the server accepts: correct
    outcome = await run(fixture_target("counter_offers"), only=("SV-09", "SV-12"))
    assert outcome.revisions == list(ALL_REVISIONS)  # 2024-11-05 included: it was counter-offered
    probe = next(p for p in outcome.probes if p.revision == "2024-11-05")
    assert (probe.accepted, probe.counter_offer) == (False, "2025-03-26")
    statuses = {(r.id, r.revision): (r.status, r.message) for r in outcome.results if r.revision == "2024-11-05"}
    assert statuses == {
        ("SV-09", "2024-11-05"): ("pass", ""),
        (
            "SV-12",
            "2024-11-05",
        ): (
            "skipped",
            "the server does not accept 2024-11-05: initialize 2024-11-05 was answered with protocolVersion "
            '"2025-03-26"',
        ),
    }
    assert outcome.exit_code == 0


async def test_a_revision_the_server_refuses_is_reported_as_skipped() -> None:
    outcome = await run(fixture_target("legacy_only"), revisions=("2026-07-28", "2025-06-18"), only=("SV-13", "SV-12"))
    statuses = {(r.id, r.revision): r.status for r in outcome.results}
    assert statuses == {
        ("SV-13", "2026-07-28"): "skipped",
        ("SV-12", "2026-07-28"): "skipped",
        ("SV-13", "2025-06-18"): "skipped",
        ("SV-12", "2025-06-18"): "pass",
    }
    assert [p.accepted for p in outcome.probes] == [False, True, True, True, True]


async def test_an_era_pin_limits_the_revisions_checked() -> None:
    pinned = Target(fixture_target("legacy_only").argv, name="pinned", era="modern")
    outcome = await run(pinned, only=("SV-12",))
    assert outcome.revisions == []  # it accepts no modern revision
    legacy = await run(dataclasses.replace(_fast(reference_argv()), era="legacy"), only=("SV-12",))
    assert legacy.revisions == [r for r in ALL_REVISIONS if r < "2026-07-28"]


async def test_tool_calls_are_off_unless_allowed() -> None:
    target = _fast(reference_argv())
    began = time.monotonic()
    outcome = await run(target, revisions=("2025-11-25",), only=("tool-calls",))
    assert {r.status for r in outcome.results} == {"skipped"}
    assert {r.message for r in outcome.results if r.id == "SV-30"} == {
        "tool calls are off (enable with --call-tools read-only|all or --call-tool NAME)"
    }
    assert time.monotonic() - began < 30  # skipped before any server process starts
    allowed = await run(target, revisions=("2025-11-25",), only=("SV-30",), tools=ToolPolicy("none", ("add",)))
    assert [(r.id, r.status) for r in allowed.results] == [("SV-30", "pass")]


def test_result_model_is_only_extended() -> None:
    # report.py reads these; fields are added, never renamed or removed
    fields = set(Result.__dataclass_fields__)
    assert {
        "id",
        "title",
        "level",
        "spec",
        "quote",
        "revision",
        "status",
        "message",
        "duration_s",
        "exchanges",
    } <= fields
    assert {"tags", "http_exchanges", "transport", "spec_url"} <= fields
    assert sys.version_info >= (3, 11)
