"""mcpwire check: the reference server passes, each broken fixture is flagged by exactly its check."""

from __future__ import annotations

import pytest
from _targets import fixture_target

from conformance.cli import reference_target
from conformance.registry import CATALOGUE
from conformance.runner import ALL_REVISIONS, run

BAD = ("fail", "warning", "error", "not_observed")


async def test_reference_server_passes_every_check_in_every_revision() -> None:
    outcome = await run(reference_target(), jobs=2)
    assert outcome.revisions == list(ALL_REVISIONS)
    bad = [(r.id, r.revision, r.status, r.message) for r in outcome.results if r.status in BAD]
    assert bad == []
    assert outcome.exit_code == 0
    # every check ran (passed) in at least one revision; SV-05b needs a feature the server does not
    # advertise, and the reference server advertises them all (the unadvertised fixture covers it)
    passed = {r.id for r in outcome.results if r.status == "pass"}
    assert passed == set(CATALOGUE) - {"SV-05b"}


# (fixture, the check that must flag it, revisions to run, status expected)
CASES = [
    ("banner", "SV-01", ("2025-11-25", "2026-07-28"), "fail"),
    ("big_ids", "SV-02", ("2025-06-18", "2026-07-28"), "fail"),
    ("ping_result", "SV-12", ("2024-11-05",), "fail"),
    ("bad_schema", "SV-29", ("2025-03-26", "2026-07-28"), "fail"),
    ("empty_not_found", "SV-32", ("2025-11-25", "2026-07-28"), "fail"),
    ("unasked_logs", "SV-36", ("2026-07-28",), "fail"),
    ("batch_answer", "SV-07", ("2025-06-18", "2026-07-28"), "fail"),
    ("unadvertised", "SV-05b", ("2025-11-25", "2026-07-28"), "warning"),
]


@pytest.mark.parametrize(("fixture", "check_id", "revisions", "status"), CASES, ids=[c[0] for c in CASES])
async def test_broken_fixture_is_flagged_by_exactly_its_check(
    fixture: str, check_id: str, revisions: tuple[str, ...], status: str
) -> None:
    outcome = await run(fixture_target(fixture), revisions=revisions, jobs=2)
    flagged = {(r.id, r.status) for r in outcome.results if r.status in BAD}
    assert flagged == {(check_id, status)}
    assert {r.revision for r in outcome.results if r.id == check_id and r.status == status} == set(revisions)
    failure = next(r for r in outcome.results if r.id == check_id and r.status == status)
    assert failure.exchanges  # the evidence that proves it
    assert outcome.exit_code == (1 if status == "fail" else 0)


async def test_server_ignoring_stdin_eof_is_flagged_by_sv08_only() -> None:
    outcome = await run(fixture_target("ignores_eof", eof_grace=0.3), revisions=("2025-11-25",), jobs=2)
    flagged = {(r.id, r.status) for r in outcome.results if r.status in BAD}
    # SHOULD-level: a warning, and the run still passes
    assert flagged == {("SV-08", "warning")}
    message = next(r.message for r in outcome.results if r.id == "SV-08")
    assert message == "still running 0.3 s after stdin EOF; SIGTERM was needed"
    assert outcome.exit_code == 0


async def test_strict_turns_should_violations_into_failures() -> None:
    outcome = await run(
        fixture_target("ignores_eof", eof_grace=0.2), revisions=("2025-11-25",), only=("SV-08",), strict=True
    )
    assert [(r.id, r.status) for r in outcome.results] == [("SV-08", "fail")]
    assert outcome.exit_code == 1


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
