"""The run's server processes: a process serves a later check only when nothing the earlier ones
did could have changed it, and a reused process's evidence tells its whole story."""

from __future__ import annotations

import sys
from pathlib import Path

import trio
from _targets import fixture_argv, fixture_target, reference_argv
from mcpwire.conformance.context import CLIENT_INFO, Target
from mcpwire.conformance.model import Probe
from mcpwire.conformance.pool import WirePool
from mcpwire.conformance.registry import CATALOGUE
from mcpwire.conformance.runner import _schedule, run
from mcpwire.conformance.targets import reference_tool_policy

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
    # SV-31b calls a tool (checks that call tools start first): it takes the probe's process, and
    # SV-12 a new one, for the call may have changed the first
    target = Target(tuple(reference_argv()))
    tools = reference_tool_policy()
    outcome = await run(target, revisions=["2025-11-25"], only=["SV-31b", "SV-12"], jobs=1, tools=tools)
    assert {r.status for r in outcome.results} == {"pass"}
    assert (outcome.processes_started, outcome.sessions_reused) == (6, 1)


async def test_a_check_that_ends_its_session_starts_after_the_others_of_its_revision() -> None:
    # LG-01 (logging/setLevel) and SV-08 (stdin closed) leave their process to no later check: they
    # start after SV-12 and PR-02, on the process those left (the probe's), one after the other;
    # the level LG-01 set reaches no other check, and SV-08 ends a process that served before
    target = Target(tuple(reference_argv()))
    only = ["SV-08", "SV-12", "LG-01", "PR-02"]
    outcome = await run(target, revisions=["2025-11-25"], only=only, jobs=1)
    assert {r.status for r in outcome.results} == {"pass"}
    # the probe's process: SV-12, PR-02, then the first of LG-01 and SV-08; a new one for the second
    assert (outcome.processes_started, outcome.sessions_reused) == (6, 3)


async def test_a_request_the_server_sends_unasked_is_answered_and_the_process_serves_on() -> None:
    # as FastMCP's proxy: roots/list right after every handshake. The pool answers it as the checks
    # do (no roots) before it lends the process again; every later check finds the request among
    # the frames the handshake left, so SV-11 fails on a reused process as on a fresh one
    target = fixture_target("asks_roots")
    only = ["SV-11", *LISTS]
    outcome = await run(target, revisions=["2025-11-25"], only=only, jobs=1)
    fresh = await run(target, revisions=["2025-11-25"], only=only, jobs=1, reuse=False)
    verdicts = {(r.id, r.status, r.message) for r in outcome.results}
    assert verdicts == {(r.id, r.status, r.message) for r in fresh.results}
    expected = "sent roots/list to a client that declared no capabilities"
    assert ("SV-11", "fail", expected) in verdicts
    assert {status for _, status, _ in verdicts - {("SV-11", "fail", expected)}} == {"pass"}
    # every check on the probe's process (SV-11's verdict does not change the process)
    assert (outcome.processes_started, outcome.sessions_reused) == (5, 5)
    assert (fresh.processes_started, fresh.sessions_reused) == (10, 0)


async def test_the_pool_answers_an_unasked_request_before_it_lends_the_process_again() -> None:
    async with trio.open_nursery() as nursery:
        pool = WirePool(nursery, fixture_argv("asks_roots"), env=None, eof_grace=2.0, cwd=None)
        first = await pool.session("2025-11-25")
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}
        await first.wire.request("initialize", params, timeout=10)
        await first.wire.notify("notifications/initialized")
        pool.handshake_done(first)
        asked = await first.wire.recv(10)  # the check left it unanswered
        assert asked is not None and asked.value["method"] == "roots/list"
        pool.give_back(first, clean=True)
        second = await pool.session("2025-11-25")
        assert not second.fresh
        # the lease finds the request among its frames, as a fresh process would have sent it
        assert [f.value.get("method") for f in second.wire.frames] == ["roots/list"]
        assert await second.wire.request("ping", {}, timeout=10) == {"jsonrpc": "2.0", "id": 1000001, "result": {}}
        # its evidence: the handshake, the request and the answer, then its own exchanges
        record = second.record()
        lines = [(e.direction, e.text) for e in record.exchanges]
        request = ("<", '{"jsonrpc":"2.0","id":"fixture-ask-roots","method":"roots/list"}')
        answer = (">", '{"jsonrpc":"2.0","id":"fixture-ask-roots","result":{"roots":[]}}')
        assert (
            lines.index(request)
            < lines.index(answer)
            < lines.index((">", '{"jsonrpc":"2.0","id":1000001,"method":"ping","params":{}}'))
        )
        assert record.preface is not None and "then any request the server sent unasked since" in record.preface
        pool.give_back(second, clean=True)
        pool.close_all()
    # the server (now ended) got the answer a client without the roots capability gets from the checks
    assert b'roots answered: {"jsonrpc":"2.0","id":"fixture-ask-roots","result":{"roots":[]}}' in second.wire.stderr


async def test_requests_the_checker_names_itself_leave_the_process_as_new() -> None:
    # ids of every JSON type (SV-02), a string id and a method of the checker's own namespace
    # (SV-05), a notification of it (SV-04), a tool no server offers (SV-03): nothing runs, and
    # every check shares the probe's process
    target = Target(tuple(reference_argv()))
    outcome = await run(target, revisions=["2025-11-25"], only=["SV-02", "SV-03", "SV-04", "SV-05", "SV-12"], jobs=1)
    assert {r.status for r in outcome.results} == {"pass"}
    assert (outcome.processes_started, outcome.sessions_reused) == (5, 5)


async def test_an_id_sent_twice_on_one_process_ends_its_reuse() -> None:
    # a session never sees one request id twice: the lease that repeats one (here by hand) gives
    # back a process no later lease gets
    async with trio.open_nursery() as nursery:
        pool = WirePool(nursery, reference_argv(), env=None, eof_grace=2.0, cwd=None)
        ids = []
        for _ in range(3):
            lease = await pool.session("2025-11-25")
            wire = lease.wire
            if lease.fresh:
                params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}
                await wire.request("initialize", params, timeout=10)
                await wire.notify("notifications/initialized")
                pool.handshake_done(lease)
            answer = await wire.request("ping", {}, request_id="same", timeout=10)
            assert answer["result"] == {}
            ids.append((lease.fresh, pool.started, pool.reused))
            pool.give_back(lease, clean=True)
        pool.close_all()
    # the second lease reuses the first's process and repeats "same": the third gets a new one
    assert ids == [(True, 1, 0), (False, 1, 1), (True, 2, 1)]


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


async def test_the_2026_07_28_checks_share_processes_too() -> None:
    # no handshake, every request with its own _meta: a process that only answered reads serves on
    target = Target(tuple(reference_argv()))
    outcome = await run(target, revisions=["2026-07-28"], only=["SV-13", "SV-16", "SV-36", "CA-01"], jobs=1)
    assert {r.status for r in outcome.results} == {"pass"}
    assert (outcome.processes_started, outcome.sessions_reused) == (5, 4)


def test_over_stdio_checks_go_check_by_check_across_revisions_and_over_http_revision_by_revision() -> None:
    # over stdio each revision then has a check or two at a time, whose processes serve its next
    # checks; over HTTP, where every check talks to the one server, a revision's sessions stay
    # together. Either way checks that call tools come first, and those that end their process last
    tested = [Probe("2025-11-25", True), Probe("2025-06-18", True)]
    checks = [CATALOGUE[c] for c in ("SV-08", "SV-12", "SV-35", "PR-01")]
    stdio = [(checks[j].id, tested[i].revision[:7]) for i, j in _schedule(tested, checks, stdio=True)]
    http = [(checks[j].id, tested[i].revision[:7]) for i, j in _schedule(tested, checks, stdio=False)]
    assert stdio == [
        ("SV-35", "2025-11"),
        ("SV-35", "2025-06"),
        ("SV-12", "2025-11"),
        ("SV-12", "2025-06"),
        ("PR-01", "2025-11"),
        ("PR-01", "2025-06"),
        ("SV-08", "2025-11"),
        ("SV-08", "2025-06"),
    ]
    assert http == [
        ("SV-35", "2025-11"),
        ("SV-35", "2025-06"),
        ("SV-12", "2025-11"),
        ("PR-01", "2025-11"),
        ("SV-08", "2025-11"),
        ("SV-12", "2025-06"),
        ("PR-01", "2025-06"),
        ("SV-08", "2025-06"),
    ]
