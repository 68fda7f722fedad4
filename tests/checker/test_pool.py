"""The run's server processes: a process serves a later check only when nothing the earlier ones
did could have changed it, and a reused process's evidence tells its whole story."""

from __future__ import annotations

import sys
from pathlib import Path

from _targets import fixture_target, reference_argv
from mcpwire.conformance.context import Target
from mcpwire.conformance.runner import run

HOSTILE = Path(__file__).parent / "hostile"
LISTS = ["SV-29", "PR-01", "RS-03", "SV-12"]  # they list, read or ping, nothing else


async def test_checks_that_only_list_or_read_share_one_process_per_revision() -> None:
    target = Target(tuple(reference_argv()))
    outcome = await run(target, revisions=["2025-11-25"], only=LISTS, jobs=1)
    assert {r.status for r in outcome.results} == {"pass"}
    # one process per probed revision; the four checks of 2025-11-25 ran on its probe's process
    assert (outcome.processes_started, outcome.sessions_reused) == (5, 4)
    fresh = await run(target, revisions=["2025-11-25"], only=LISTS, jobs=1, reuse=False)
    assert {r.status for r in fresh.results} == {"pass"}
    assert (fresh.processes_started, fresh.sessions_reused) == (9, 0)


async def test_a_server_that_sends_anything_unasked_never_serves_a_second_check() -> None:
    target = Target((sys.executable, "-u", str(HOSTILE / "chatty.py")))
    outcome = await run(target, revisions=["2025-11-25"], only=LISTS, jobs=1)
    # the note after initialize's answer came during the handshake: the probe's process serves the
    # first check (which finds that note as a fresh process would give it); the notes after that
    # check's own requests end its reuse, and so for every later process
    assert (outcome.processes_started, outcome.sessions_reused) == (8, 1)


async def test_a_check_that_changes_state_gets_a_process_no_later_check_uses() -> None:
    # checks start in catalogue order: SV-12 (ping) on the probe's process, LG-01 (logging/setLevel)
    # on it too, and PR-02 on a new one: the level LG-01 set must not reach it
    target = Target(tuple(reference_argv()))
    outcome = await run(target, revisions=["2025-11-25"], only=["SV-12", "LG-01", "PR-02"], jobs=1)
    assert [r.id for r in outcome.results] == ["SV-12", "LG-01", "PR-02"]
    assert {r.status for r in outcome.results} == {"pass"}
    assert (outcome.processes_started, outcome.sessions_reused) == (6, 2)


async def test_the_evidence_of_a_reused_process_starts_with_its_handshake() -> None:
    outcome = await run(fixture_target("ping_result"), revisions=["2025-11-25"], only=["SV-12"])
    (result,) = outcome.results
    assert result.status == "fail" and outcome.sessions_reused == 1
    first, *rest = result.exchanges
    assert first.direction == "note" and first.text.startswith("this server process was used 1 time(s) before")
    sent = [e.text for e in rest if e.direction == "sent"]
    assert ['"method":"initialize"' in sent[0], '"notifications/initialized"' in sent[1], '"ping"' in sent[2]] == [
        True,
        True,
        True,
    ]


async def test_notifications_of_the_handshake_do_not_prevent_reuse_and_reach_every_later_check() -> None:
    # as server-everything: tools/list_changed before the answer to initialize; its processes
    # serve later checks, and each later check finds that notification as on a fresh process
    target = Target((sys.executable, "-u", str(HOSTILE / "announces.py")))
    outcome = await run(target, revisions=["2025-11-25"], only=LISTS, jobs=1)
    assert {r.status for r in outcome.results} == {"pass"}
    assert (outcome.processes_started, outcome.sessions_reused) == (5, 4)
    # unadvertised, the notification breaks SV-11, which sees it on a reused process too
    target = Target((sys.executable, "-u", str(HOSTILE / "announces.py"), "--unadvertised"))
    outcome = await run(target, revisions=["2025-11-25"], only=["SV-11"], jobs=1)
    sv11 = next(r for r in outcome.results if r.id == "SV-11")
    expected = "sent notifications/tools/list_changed without advertising tools.listChanged"
    assert (sv11.status, sv11.message) == ("fail", expected)
    assert outcome.sessions_reused == 1  # the probe's process
    assert any("its handshake is shown first" in (e.text or "") for e in sv11.exchanges)
