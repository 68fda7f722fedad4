"""The checker on a busy machine: a slow server is slow, not wrong; and what no check's rule named.

Each case is a fixture server (``fixtures/``) reproducing what real servers did on a loaded
machine, or a defect the checks missed:

- ``slow_machine``: 2.5 s to start and 2.5 s to exit after stdin EOF, against ``--timeout 1``.
  Before the windows followed the observed start-up, every revision's probe was "no answer"
  (nothing checked), SV-02 failed 2026-07-28 ("no response to the request with id ..."), and SV-08
  warned ("still running 2 s after stdin EOF"). Now nothing fails or warns.
- ``txt_content``: a tool result whose content item is ``"type": "txt"`` passed every check, with
  every tool callable; SV-06 now validates every result against the revision's schema and reports
  the defect once.
- ``late_roots``: ``roots/list`` asked 1.5 s after ``notifications/initialized`` of a client that
  declared no capability; SV-11 read 0.2 s after its lists and passed. It now watches long enough.
"""

from __future__ import annotations

import os

import pytest
from _targets import fixture_argv
from mcpwire.conformance.context import Target, ToolPolicy
from mcpwire.conformance.pace import Pace
from mcpwire.conformance.runner import Run, run
from mcpwire.conformance.schema import schema_dir

BAD = ("fail", "warning", "error")


def _target(name: str, **env: str) -> Target:
    return Target(tuple(fixture_argv(name)), env={**os.environ, **env}, name=name)


def _bad(outcome: Run) -> list[tuple[str, str, str, str]]:
    return [(r.id, r.revision, r.status, r.message) for r in outcome.results if r.status in BAD]


async def test_a_slow_server_on_a_busy_machine_is_judged_not_failed() -> None:
    target = _target("slow_machine", MCPWIRE_FIXTURE_START_S="2.5", MCPWIRE_FIXTURE_EXIT_S="2.5")
    outcome = await run(
        target,
        revisions=["2025-11-25", "2026-07-28"],
        only=["SV-01", "SV-02", "SV-03", "SV-05", "SV-08", "SV-12", "FR-01", "SV-29"],
        timeout=1.0,
        jobs=4,
    )
    assert {"2026-07-28", "2025-11-25"} <= set(outcome.accepted)  # every probe answered in the end
    assert _bad(outcome) == []
    passed = {(r.id, r.revision) for r in outcome.results if r.status == "pass"}
    assert {("SV-02", "2026-07-28"), ("SV-08", "2025-11-25"), ("SV-08", "2026-07-28")} <= passed


async def test_a_server_that_never_answers_in_time_is_not_judged_instead_of_failed() -> None:
    # 12 s to start: past every window of --timeout 1 (ceiling 60 s, but nothing answered yet to
    # learn from, so the probes' waits stay short): no revision is accepted, nothing fails
    target = _target("slow_machine", MCPWIRE_FIXTURE_START_S="12", MCPWIRE_FIXTURE_EXIT_S="0")
    outcome = await run(target, revisions=["2025-11-25"], only=["SV-01", "SV-02"], timeout=1.0)
    assert not [r for r in outcome.results if r.status == "fail"], _bad(outcome)


@pytest.mark.skipif(schema_dir() is None, reason="SV-06 needs the official schema.json files")
async def test_a_tool_result_with_an_unknown_content_type_is_one_schema_failure() -> None:
    outcome = await run(
        _target("txt_content"), revisions=["2025-11-25"], tools=ToolPolicy("none", allow=("echo",)), jobs=4
    )
    bad = _bad(outcome)
    assert [(check, status) for check, _, status, _ in bad] == [("SV-06", "fail")], bad
    message = bad[0][3]
    assert "tools/call result is not a valid CallToolResult: type 'txt' is none of 'text'" in message
    assert message.count("type 'txt'") == 1  # one defect, however many calls showed it


async def test_a_server_request_sent_seconds_after_the_handshake_is_caught() -> None:
    outcome = await run(_target("late_roots"), revisions=["2025-11-25"], only=["SV-11"])
    [sv11] = [r for r in outcome.results if r.id == "SV-11"]
    assert (sv11.status, sv11.message) == ("fail", "sent roots/list to a client that declared no capabilities")


def test_windows_grow_with_what_the_run_observed_between_a_floor_and_a_ceiling() -> None:
    pace = Pace()
    assert (pace.answer_window(5.0), pace.first_window(5.0)) == (5.0, 10.0)  # nothing seen: the floor
    pace.observe_startup(9.0)  # a Python SDK server at load 15
    pace.observe_answer(0.1)
    assert pace.first_window(5.0) == 27.0 and pace.answer_window(5.0) == 5.0
    pace.observe_startup(100.0)
    assert pace.first_window(5.0) == 60.0  # the ceiling: max(60 s, 6 x --timeout)
    assert pace.exit_grace(2.0, 0.1, 5.0) == 2.0  # a process that started fast gets the base grace
    assert pace.exit_grace(2.0, 3.0, 5.0) == 9.0  # one that took 3 s to start gets 3 x that
    assert pace.scale(5.0) == 6.0
