"""Findings people can trust: one finding per root cause, named by its trigger, the right oracle and
citation, no false alarm on intended behaviour, safe tools by default, coverage gaps reported.

The faults are those real servers showed, planted behind flags in ``fixtures/fuzz_hostile_server.py``:
a decode error that ends the server on any lone surrogate (the Rust SDK), ids above 2^53 dropped
(the TypeScript SDK) or answered through a double (a Go server), a tool whose purpose is to be
slow, stack traces and environment in answers, a bug only an id from an earlier result reaches.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import FIXTURES, run_cli, run_json
from mcpwire.fuzz.citations import CITATIONS, REVISIONS, citation
from mcpwire.fuzz.clusters import trigger
from mcpwire.fuzz.exchange import Answer, Observation, Profile, request
from mcpwire.fuzz.leaks import CANARY, CANARY_ENV, find_leak
from mcpwire.fuzz.oracles import ORACLES, Violation, check
from mcpwire.fuzz.runner import Config, Finding, select_tools, tool_risk
from mcpwire.fuzz.schedule import declared_seconds, rounds, tool_steps
from mcpwire.fuzz.trace import check_trace, replay

HOSTILE = [sys.executable, str(FIXTURES / "fuzz_hostile_server.py")]
PAGES: dict[str, dict[str, list[str]]] = json.loads(
    (Path(__file__).parents[1] / "checker" / "spec_pages.json").read_text(encoding="utf-8")
)["revisions"]


def _anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


# -- one root cause, one finding ------------------------------------------------------------------------


def test_a_server_that_dies_on_any_lone_surrogate_is_one_finding(tmp_path: Path) -> None:
    """Every unit that can send a lone surrogate kills the server; that is one finding, whose
    trigger is named, with its members listed per unit, and the run keeps going."""
    status, report = run_json(
        ["--seed", "3", "--deadline", "1", "--max-examples", "30", "--tools", "echo,add,get_item", "--phase", "tools",
         "--phase", "protocol", "--protocol-kind", "requests", "--protocol-kind", "notifications",
         "--out", str(tmp_path), "--", *HOSTILE, "--die-on-surrogate"]
    )  # fmt: skip
    assert status == 1
    [finding] = report["findings"]
    assert finding["oracle"] == "server-alive"
    assert finding["message"].startswith("A string holding a lone surrogate (such as \\ud800) ends the server:")
    [cluster] = report["clusters"]
    members = {m["unit"] for m in cluster["members"]}
    assert len(members) >= 2 and cluster["trigger"].startswith("a string holding a lone surrogate")
    assert all(u["examples"] == 30 for u in report["units"])  # it kept going in every unit


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flag", "oracle", "effect"),
    [("--drop-big-ids", "answer-deadline", "is never answered"), ("--round-ids", "one-answer", "is answered with")],
)
def test_an_id_above_2_53_is_named_as_the_trigger(tmp_path: Path, flag: str, oracle: str, effect: str) -> None:
    """The id is the trigger, not the method that carried it; an id answered through a double
    is "answered with a different id" (one-answer), not "no answer"."""
    status, report = run_json(
        ["--seed", "3", "--deadline", "1", "--max-examples", "40", "--deny", "crash", "--phase", "protocol",
         "--protocol-kind", "requests", "--protocol-kind", "mutations", "--out", str(tmp_path), "--", *HOSTILE, flag]
    )  # fmt: skip
    assert status == 1
    assert {f["oracle"] for f in report["findings"]} == {oracle}, [f["message"] for f in report["findings"]]
    [finding] = report["findings"]
    assert re.match(
        rf"^A request whose id is above 2\^53 \(\d+: more than a double holds exactly\) {effect}", finding["message"]
    )
    assert "wrong case" not in finding["message"]
    if oracle == "one-answer":
        assert re.search(r"request id \d+ was answered with a different id, [\d.e+]+ \(float\)", finding["message"])


def test_every_violation_of_an_example_is_kept() -> None:
    """A crash that also left an answer malformed: the finding keeps both."""
    profile = Profile({"transport": "stdio"}, "legacy", "2025-11-25")
    steps = [request(1, "ping", None), request(2, "ping", None)]
    obs = Observation(steps)
    obs.answers = {0: Answer(0, {"jsonrpc": "2.0", "id": 1, "result": 5}, 0.0)}
    obs.died_after = 1
    violations = check(obs, profile)
    assert [v.oracle for v in violations] == ["server-alive", "answer-shape"]
    finding = Finding(violations[0], "protocol", None, obs, [], violations=violations)
    assert [v["oracle"] for v in finding.to_json()["also"]] == ["answer-shape"]


# -- wrong oracles -------------------------------------------------------------------------------------------


def test_null_arguments_for_a_tool_that_needs_none_are_not_invalid() -> None:
    """``"arguments": null`` is how a client says "none"; for a tool without required
    fields it is not invalid (no invalid-args-refused), for one with required fields it still is."""
    profile = Profile({"transport": "stdio"}, "legacy", "2025-11-25")
    free = {"name": "list", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}
    needy = {
        "name": "get",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
    }
    seen: dict[str, set[Any]] = {"list": set(), "get": set()}

    from hypothesis import given, settings

    def collect(tool: dict[str, Any]) -> None:
        @settings(max_examples=200, database=None)
        @given(tool_steps(profile, tool, 5.0))
        def draw(steps: list[Any]) -> None:
            if b'"arguments":null' in steps[0].line:
                seen[str(tool["name"])].add(steps[0].valid)

        draw()

    collect(free)
    collect(needy)
    assert seen == {"list": {None}, "get": {False}}


def test_a_slow_tool_that_reports_progress_or_asks_for_the_time_is_not_a_finding(tmp_path: Path) -> None:
    """``long_op`` sleeps the ``duration`` it is asked for (up to 3 s, past a 1 s deadline)
    and reports progress: waited for, never "no answer" nor "slow"."""
    status, report = run_json(
        ["--seed", "2", "--deadline", "1", "--max-examples", "12", "--tools", "long_op", "--phase", "tools",
         "--out", str(tmp_path), "--", *HOSTILE]
    )  # fmt: skip
    assert (status, report["findings"]) == (0, [])
    assert declared_seconds({"properties": {"timeout_ms": {}}}, {"timeout_ms": 1500, "n": 3}) == 1.5
    assert declared_seconds({"properties": {"delay": {"description": "in milliseconds"}}}, {"delay": 500}) == 0.5


def test_the_stateful_machine_waits_for_a_slow_tool_as_the_tools_phase_does(tmp_path: Path) -> None:
    """The machine's tool calls carry a progress token and wait the duration they ask for."""
    status, report = run_json(
        ["--seed", "2", "--deadline", "1", "--machine-runs", "4", "--machine-steps", "4", "--tools", "long_op",
         "--phase", "stateful", "--out", str(tmp_path), "--", *HOSTILE]
    )  # fmt: skip
    assert (status, report["findings"]) == (0, [])
    assert report["units"][0]["rules"]["call_tool"] > 0


def test_a_slow_answer_replays_as_the_same_warning_not_as_a_hang(
    tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    """``sluggish`` answers after 1.6 s with a 1 s deadline: answer-slow (a warning); its
    replay waits as long as the confirming replay did and reports the same warning, not a hang, and
    the generated test warns instead of failing for ever."""
    status, report = run_json(
        ["--seed", "1", "--deadline", "1", "--confirm-deadline", "4", "--max-examples", "2", "--tools", "sluggish",
         "--phase", "tools", "--out", str(tmp_path), "--", *HOSTILE, "--sluggish", "1.6"]
    )  # fmt: skip
    assert status == 1
    [finding] = report["findings"]
    assert (finding["oracle"], finding["severity"]) == ("answer-slow", "warning")
    text = Path(finding["trace"]).read_text(encoding="utf-8")
    again = replay(text)
    assert again.reproduced and again.errors == []
    assert [v.oracle for v in again.violations] == ["answer-slow"]
    assert again.violations[0].message.startswith("tools/call 'sluggish' was answered after 1.")
    check_trace(finding["trace"])
    assert any("still there (a warning when found): [answer-slow]" in str(w.message) for w in recwarn)


def test_the_leak_oracle_finds_stack_traces_and_the_environment(tmp_path: Path) -> None:
    """An error that carries a Python stack trace, and a tool that returns its environment
    (the canary the fuzzer planted in it), are leak warnings."""
    status, report = run_json(
        ["--seed", "1", "--max-examples", "20", "--tools", "add,env", "--phase", "tools", "--out", str(tmp_path),
         "--", *HOSTILE, "--leak"]
    )  # fmt: skip
    assert status == 1
    leaks = {f["tool"]: f for f in report["findings"] if f["oracle"] == "leak"}
    assert set(leaks) == {"add", "env"}
    assert all(f["severity"] == "warning" for f in leaks.values())
    assert leaks["add"]["message"].startswith("the answer to tools/call 'add' holds a Python stack trace ")
    assert leaks["env"]["message"] == (
        f"the answer to tools/call 'env' holds the server's environment (the value of {CANARY_ENV}, planted by "
        "the fuzzer)"
    )
    assert CANARY not in json.dumps(report)  # the value is never shown


def test_a_tool_that_leaks_wherever_it_is_called_is_one_finding(tmp_path: Path) -> None:
    """``env`` returns the environment whether the tools phase or the stateful machine calls it:
    one root cause, the tool's, with the machine's sequence among its members."""
    status, report = run_json(
        ["--seed", "1", "--max-examples", "5", "--machine-runs", "5", "--tools", "env", "--phase", "tools",
         "--phase", "stateful", "--out", str(tmp_path), "--", *HOSTILE, "--leak"]
    )  # fmt: skip
    assert status == 1
    assert [(f["oracle"], f["tool"]) for f in report["findings"]] == [("leak", "env")]
    [cluster] = report["clusters"]
    # the machine met it too, and did not report it again
    assert {m["unit"] for m in cluster["members"]} == {"tools:env", "stateful"}
    units = {u["unit"]: u for u in report["units"]}
    assert units["stateful"]["known_cause_examples"] >= 1


def test_triggers_name_ids_beyond_a_bound_on_either_side() -> None:
    assert trigger({"id-above-2^53": 2**53 + 1}) == (
        "a request whose id is above 2^53 (9007199254740993: more than a double holds exactly)"
    )
    assert trigger({"id-above-2^53": -(2**63)}) == (
        "a request whose id is below -2^53 (-9223372036854775808: more than a double holds exactly)"
    )
    assert trigger({"id-above-2^63": -(2**64), "id-above-2^53": -(2**64)}) == (
        "a request whose id is below -2^63, beyond 64 bits (-18446744073709551616) and a request whose id is "
        "below -2^53 (-18446744073709551616: more than a double holds exactly)"
    )


def test_a_duration_left_out_counts_with_its_default() -> None:
    """server-everything's ``trigger-long-running-operation`` sleeps ``duration`` (default 10 s)."""
    schema = {"properties": {"duration": {"type": "number", "default": 10}, "steps": {"type": "number", "default": 5}}}
    assert declared_seconds(schema, {}) == 10.0
    assert declared_seconds(schema, None) == 10.0
    assert declared_seconds(schema, {"duration": 2}) == 2.0
    assert declared_seconds({"properties": {"wait_ms": {"default": 250}}}, {"x": 1}) == 0.25


def test_find_leak_looks_past_what_the_request_held() -> None:
    sent = b'{"params":{"text":"File \\"/x.py\\", line 3, in f"}}'
    echoed = {"result": {"content": [{"type": "text", "text": 'File "/x.py", line 3, in f'}]}}
    assert find_leak(echoed, sent) is None  # an echo of our own input
    node = {"error": {"code": -32603, "message": "boom\n    at run (/srv/app/server.js:10:5)"}}
    assert find_leak(node, b"{}") == 'a Node.js stack trace "at run (/srv/app/server.js:10:5)"'
    key = {"result": {"content": [{"type": "text", "text": "key AKIAABCDEFGHIJKLMNOP"}]}}
    assert find_leak(key, b"{}") == "an AWS access key id (value not shown)"
    assert find_leak({"result": {"content": [{"type": "text", "text": "/home/user/file.txt"}]}}, b"{}") is None


# -- citations -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("oracle", sorted(ORACLES))
def test_every_citation_names_a_page_and_section_of_its_revision(oracle: str) -> None:
    """What each oracle cites, in each revision, is a page of that revision (or JSON-RPC 2.0)."""
    for revision in REVISIONS:
        for transport in ("stdio", "streamable-http", "sse"):
            text = citation(oracle, revision, transport)
            if text.startswith("JSON-RPC 2.0 §"):
                continue
            match = re.match(r'^(\d{4}-\d\d-\d\d) ([a-z/_-]+)(?: §([^:]+))?: "', text)
            assert match is not None, text
            page_revision, page, section = match.groups()
            assert page in PAGES[page_revision], f"{oracle} at {revision}: {page} is not a page of {page_revision}"
            if section:
                assert _anchor(section) in {_anchor(h) for h in PAGES[page_revision][page]}, text
            # its own revision's page; another only for a rule defined elsewhere or only later
            pinned = any(c.revision == page_revision for c in CITATIONS[oracle])
            newer = all(c.since > revision or transport not in c.transports for c in CITATIONS[oracle])
            assert page_revision == revision or pinned or newer, f"{oracle} at {revision} cites {page_revision}"


def test_legacy_sessions_cite_their_own_revision() -> None:
    assert citation("notification-silence", "2024-11-05").startswith('JSON-RPC 2.0 §4.1: "The Server MUST NOT reply')
    assert citation("notification-silence", "2025-06-18").startswith("2025-06-18 basic/index §Notifications")
    assert citation("one-answer", "2024-11-05").startswith("2024-11-05 basic/messages §Responses")
    assert citation("stdout-clean", "2025-11-25").startswith("2025-11-25 basic/transports §stdio")
    assert citation("stdout-clean", "2026-07-28").startswith("2026-07-28 basic/transports/stdio: ")
    assert citation("answer-slow", "2026-07-28").startswith("2026-07-28 basic/patterns/cancellation §Timeouts")
    # server-alive: the rule broken is "every request gets a response", not "only the client ends stdio"
    assert citation("server-alive", "2025-11-25").startswith('JSON-RPC 2.0 §5: "When a rpc call is made')
    assert "Shutdown" not in citation("server-alive", "2025-11-25")
    assert Violation("list-stable", "x", revision="2025-11-25").severity == "warning"
    assert Violation("list-stable", "x", revision="2026-07-28").severity == "error"


# -- safe by default, coverage, time -------------------------------------------------------------------------


@pytest.mark.slow
def test_only_safe_tools_are_called_by_default(tmp_path: Path) -> None:
    """``danger`` (no annotations) ends the server when called: the default run never calls
    it, and says why; ``--tools all`` does (and finds it)."""
    status, out, err = run_cli(
        ["--seed", "1", "--max-examples", "5", "--deny", "crash", "--out", str(tmp_path / "a"), "--", *HOSTILE]
    )  # fmt: skip
    assert status == 0, out + err
    assert (
        "skipped tool danger: no annotations (by default a tool may change things and reach the outside world)" in err
    )
    assert out.splitlines()[-1].endswith("; skipped tools: crash, danger")
    status, report = run_json(
        ["--seed", "1", "--max-examples", "5", "--tools", "all", "--deny", "crash", "--phase", "tools",
         "--out", str(tmp_path / "b"), "--", *HOSTILE]
    )  # fmt: skip
    assert status == 1 and {(f["oracle"], f["tool"]) for f in report["findings"]} == {("server-alive", "danger")}


def test_the_safety_rule() -> None:
    def tool(**hints: bool) -> dict[str, Any]:
        return {"name": "t", "annotations": hints}

    assert tool_risk({"name": "t"}) is not None
    assert tool_risk(tool(readOnlyHint=True)) == "open-world (openWorldHint is not false)"
    assert tool_risk(tool(readOnlyHint=True, openWorldHint=False)) is None
    assert tool_risk(tool(idempotentHint=True, destructiveHint=False, openWorldHint=False)) is None
    assert tool_risk(tool(idempotentHint=True, openWorldHint=False)) == (
        "destructive (not read-only, destructiveHint is not false)"
    )
    assert tool_risk(tool(readOnlyHint=False, openWorldHint=False)) == "neither read-only nor idempotent"
    tools = [tool(readOnlyHint=True, openWorldHint=False) | {"name": "a"}, {"name": "b"}]
    assert select_tools(Config(None), tools)[1] == {"b": tool_risk({"name": "b"})}
    assert [t["name"] for t in select_tools(Config(None, tools="all", deny=("a",)), tools)[0]] == ["b"]
    assert select_tools(Config(None, tools=["b"]), tools)[1] == {"a": "not named (--tools)"}


def test_units_below_min_examples_are_a_coverage_gap(tmp_path: Path) -> None:
    """--min-examples N fails the run when a unit got fewer (here: more than it may run)."""
    status, out, _ = run_cli(
        ["-q", "--seed", "1", "--max-examples", "3", "--min-examples", "5", "--tools", "echo", "--phase", "tools",
         "--out", str(tmp_path), "--", *HOSTILE]
    )  # fmt: skip
    assert status == 1
    assert out.splitlines()[-1].endswith("; coverage gap (fewer than 5 examples): tools:echo")


def test_rounds_give_one_example_then_double_from_a_tenth() -> None:
    assert rounds(100) == [1, 10, 20, 40, 80, 100]
    assert rounds(8) == [1, 2, 4, 8]
    assert rounds(1) == [1]


@pytest.mark.slow
def test_the_stateful_machine_feeds_values_from_earlier_results(tmp_path: Path) -> None:
    """``get_item`` fails only for an id ``create_item`` returned (the id holds the process
    id, so it differs in every session): the machine finds it by passing that value on, and the
    trace says where the value came from, so a replay passes the id of its own session."""
    status, report = run_json(
        ["--seed", "4", "--phase", "stateful", "--tools", "create_item,get_item", "--machine-runs", "40",
         "--shrink-time", "60", "--deadline", "2", "--out", str(tmp_path), "--", *HOSTILE, "--fragile-items"]
    )  # fmt: skip
    assert status == 1
    [finding] = report["findings"]
    assert (finding["oracle"], finding["phase"]) == ("server-alive", "stateful")
    calls = [json.loads(line)["params"] for line in finding["input"] if '"tools/call"' in line]
    assert [c["name"] for c in calls][-2:] == ["create_item", "get_item"]
    assert calls[-1]["arguments"]["id"].startswith("item-1-")
    assert report["units"][0]["fed_values"] > 0
    text = Path(finding["trace"]).read_text(encoding="utf-8")
    fed = [record["fed"] for record in map(json.loads, text.splitlines()) if record.get("fed")]
    # the id create_item answered, in its structuredContent or in its JSON text (both hold it)
    [[argument, _source, path]] = fed[-1]
    assert argument == "id" and path in (["structuredContent", "id"], ["content", 0, "text", "<json>", "id"])
    assert replay(text).reproduced  # another process, another id: passed on again
