"""One root cause, one finding, named by what changed; and the false findings real servers showed.

Each case is a fault of ``fixtures/fuzz_hostile_server.py`` behind a flag, as a real server showed
it (the Rust SDK exits on any line it cannot decode; a tool hangs on a negative number and is met
by two units; a threaded server answers a cancelled call late; an invalid request's error answer
comes late under the id the server read; a tool that needs no argument reads ``arguments: 0`` as
none), or a server whose tools the safe default leaves alone (no annotations). Each test failed
before the fuzzer was changed for it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _support import DEMO, FIXTURES, run_json
from mcpwire.fuzz.exchange import Step, execute, notification, prologue, request
from mcpwire.fuzz.oracles import check
from mcpwire.fuzz.runner import Config, learn
from mcpwire.fuzz.wire import StdioTarget

HOSTILE = [sys.executable, str(FIXTURES / "fuzz_hostile_server.py")]


def test_a_server_that_exits_on_any_undecodable_line_is_one_finding(tmp_path: Path) -> None:
    """The Rust SDK's defect: every malformed input ends the server, however it is malformed (lone
    surrogate, invalid UTF-8, deep nesting, params not an object, no jsonrpc member). One finding,
    named by what the server does, with each unit that met it as a member."""
    status, report = run_json(
        ["--out", str(tmp_path), "--seed", "5", "--deadline", "1", "--max-examples", "25", "--tools", "echo",
         "--phase", "protocol", "--protocol-kind", "malformed", "--protocol-kind", "mutations",
         "--protocol-kind", "requests", "--", *HOSTILE, "--die-on-undecodable"]
    )  # fmt: skip
    assert status == 1
    alive = [f for f in report["findings"] if f["oracle"] == "server-alive"]
    assert len(alive) == 1, [f["message"] for f in alive]
    assert alive[0]["message"].startswith("Any line the server cannot decode (JSON cut short, JSON that is no message")
    assert ") ends the server: the server exited (status 101)" in alive[0]["message"]
    [cluster] = [c for c in report["clusters"] if c["oracle"] == "server-alive"]
    assert cluster["any_malformed"] is True
    assert len({m["unit"] for m in cluster["members"]}) >= 2  # met by several units, reported once


def test_a_hang_met_by_two_units_is_one_finding_named_by_its_delta(tmp_path: Path) -> None:
    """``count`` hangs on a negative ``n``: the tools phase and the stateful machine both meet it,
    and it is one finding whose trigger is the one change from a passing call."""
    status, report = run_json(
        ["--out", str(tmp_path), "--seed", "2", "--deadline", "1", "--max-examples", "20", "--machine-runs", "6",
         "--tools", "count", "--phase", "tools", "--phase", "stateful", "--", *HOSTILE, "--hang-on-negative"]
    )  # fmt: skip
    assert status == 1
    hangs = [f for f in report["findings"] if f["oracle"] == "answer-deadline"]
    assert len(hangs) == 1, [(f["phase"], f["message"]) for f in hangs]
    message = hangs[0]["message"]
    assert message.startswith("A request whose params.arguments.n is -1 (with 0 it is answered) is never answered:")


def test_arguments_that_are_not_an_object_are_not_judged_for_a_tool_that_needs_none(tmp_path: Path) -> None:
    """``arguments: 0`` (or null, or a list) read as no arguments by a tool with no required field
    breaks no rule: no invalid-args-refused finding."""
    status, report = run_json(
        ["--out", str(tmp_path), "--seed", "1", "--deadline", "1", "--max-examples", "60",
         "--tools", "env,create_item", "--phase", "tools", "--", *HOSTILE, "--lenient-arguments"]
    )  # fmt: skip
    assert [f["message"] for f in report["findings"] if f["oracle"] == "invalid-args-refused"] == []
    assert status == 0, report["findings"]


def _profile_and_target(*flags: str) -> tuple[object, StdioTarget]:
    target = StdioTarget([*HOSTILE, *flags])
    return learn(Config(argv=target.argv, deadline=2.0), target), target


def test_a_late_answer_to_a_request_the_fuzzer_cancelled_is_ignored() -> None:
    """A cancelled call answered after its window (in the next execution on the session) is no
    "notification answered" and no stray: the sender of a cancellation ignores it."""
    profile, target = _profile_and_target("--threaded-long-op")
    with target.open() as peer:
        execute(peer, prologue(profile), deadline=2.0, barrier=profile.probe)  # type: ignore[attr-defined]
        call = request(5, "tools/call", {"name": "long_op", "arguments": {"duration": 0.6}}, tool="long_op")
        call.answer = "optional"
        cancel = notification("notifications/cancelled", {"requestId": 5, "reason": "fuzz"}, cancels=5)
        first = execute(peer, [call, cancel], deadline=2.0, settle=0.0, barrier=profile.probe)  # type: ignore[attr-defined]
        assert 0 not in first.answers  # the answer comes after the call's window
        time.sleep(0.9)
        later = [notification("notifications/cancelled", {"requestId": 999_999})]
        second = execute(peer, later, deadline=2.0, settle=0.2, barrier=profile.probe)  # type: ignore[attr-defined]
    assert check(second, profile) == []  # type: ignore[arg-type]
    assert second.late_cancelled == 1


def test_a_malformed_requests_own_late_error_answer_is_that_requests() -> None:
    """An invalid request (``jsonrpc: "1.0"``) answered with an error under its own id, after the
    next request was sent: the answer is the invalid request's, not "matched no outstanding request"."""
    profile, target = _profile_and_target("--slow-errors", "0.5")
    invalid = Step(b'{"jsonrpc":"1.0","id":7,"method":"ping"}', "malformed")
    with target.open() as peer:
        steps = [*prologue(profile), invalid, request(8, "ping", {}), request(9, "ping", {})]  # type: ignore[attr-defined]
        steps[-1].deadline = 2.0
        obs = execute(peer, steps, deadline=2.0, settle=0.0, barrier=profile.probe)  # type: ignore[attr-defined]
        time.sleep(0.7)
        late = execute(peer, [request(10, "ping", {})], deadline=2.0, barrier=profile.probe)  # type: ignore[attr-defined]
    found = [*check(obs, profile), *check(late, profile)]  # type: ignore[arg-type]
    assert [v.message for v in found if v.oracle == "one-answer"] == []


def test_a_server_whose_tools_the_safe_default_skips_is_a_coverage_gap_naming_the_option(tmp_path: Path) -> None:
    status, report = run_json(
        ["--out", str(tmp_path), "--seed", "1", "--max-examples", "2", "--phase", "tools", "--", *DEMO]
    )
    assert report["skipped_tools"]
    gaps = [g for g in report["coverage_gaps"] if g.startswith("tools (0 of ")]
    assert len(gaps) == 1 and "--tools all" in gaps[0], report["coverage_gaps"]
    assert status == 1
