"""``mcpwire fuzz`` over stdio against a fixture server with planted bugs: found, shrunk, written, replayed.

One run with the default budgets (100 examples per tool and for the notifications, a fixed seed,
a short request deadline so the planted hang costs little) is shared by most tests of this
module. Every planted bug must be found and shrunk to exactly its minimal input, nothing else may
be reported, and each finding's trace, replay and generated pytest file must reproduce it. The
other protocol kinds and the stateful phase run against the fixed server (nothing to report).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import (
    BUGGY,
    DEMO,
    FIXED,
    SERVER,
    by_key,
    call_arguments,
    our_children,
    run_cli,
    run_json,
)

from fuzz.trace import load_trace, replay

DEADLINE = "0.3"
PLANTED = {
    ("server-alive", "greet"): {"name": ""},
    ("answer-deadline", "countdown"): {"n": -1},
    ("server-alive", "store"): {"text": "a" * 301},
    ("server-alive", "lookup"): {"key": "\x00"},
    ("output-schema", "total"): {"a": 0, "b": 1001},
}
Run = tuple[int, dict[str, Any], Path]


@pytest.fixture(scope="module")
def stdio_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("findings")
    status, report = run_json(
        ["--seed", "7", "--deadline", DEADLINE, "--confirm-deadline", "0.6", "--out", str(out),
         "--database", str(out / "db"), "--phase", "tools", "--phase", "protocol", "--protocol-kind", "notifications",
         "--phase", "lists", "--deny", "launch", "--", *SERVER]
    )  # fmt: skip
    return status, report, out


def test_every_planted_bug_is_found_and_nothing_else(stdio_run: Run) -> None:
    status, report, _ = stdio_run
    assert status == 1
    assert report["server"]["era"] == "legacy" and report["server"]["info"]["name"] == "buggy"
    assert report["server"]["transport"] == "stdio" and report["server"]["argv"] == SERVER
    assert report["skipped_tools"] == ["launch"]
    assert sorted(by_key(report)) == sorted([*PLANTED, ("notification-silence", None)]), "echo has no bug"
    for finding in by_key(report).values():
        assert finding["spec"] and not finding["flaky"] and finding["reproduced"] is True


def test_default_budget_reaches_every_unit(stdio_run: Run) -> None:
    units = {u["unit"]: u for u in stdio_run[1]["units"]}
    expected = [f"tools:{t}" for t in ("echo", "greet", "countdown", "store", "lookup", "total")]
    assert list(units) == [*expected, "protocol-notifications", "lists"]
    assert units["tools:echo"]["examples"] == 100  # the only tool without a bug: the whole budget
    assert all(u["examples"] < 150 and not u["cut_short"] and u["error"] is None for u in units.values())


@pytest.mark.parametrize(("oracle", "tool"), sorted(PLANTED))
def test_tool_bug_shrinks_to_exactly_its_minimal_input(stdio_run: Run, oracle: str, tool: str) -> None:
    finding = by_key(stdio_run[1])[(oracle, tool)]
    assert call_arguments(finding) == PLANTED[(oracle, tool)]


def test_answered_notification_shrinks_to_the_bare_notification(stdio_run: Run) -> None:
    finding = by_key(stdio_run[1])[("notification-silence", None)]
    assert finding["phase"] == "protocol-notifications"
    assert json.loads(finding["input"][0]) == {"jsonrpc": "2.0", "method": "notifications/cancelled"}


def test_traces_and_pytest_files_are_written(stdio_run: Run) -> None:
    _, report, out = stdio_run
    for finding in report["findings"]:
        trace, test = Path(finding["trace"]), Path(finding["test"])
        assert trace.parent == out and test.parent == out
        header, steps = load_trace(trace.read_text(encoding="utf-8"))
        assert header["finding"]["oracle"] == finding["oracle"] and header["target"]["argv"] == SERVER
        sent = [s.line.decode() for s in steps if not s.setup]
        assert sent and sent == finding["input"][: len(sent)]  # the liveness probe is not sent after a crash
        source = test.read_text(encoding="utf-8")
        assert "def test_" in source and finding["oracle"] in source
    assert any((out / "db").iterdir()), "the Hypothesis example database was written"


def test_generated_pytest_files_fail_while_the_bugs_are_there(stdio_run: Run) -> None:
    """Run as pytest would run them where they are kept: each fails against the buggy server and
    passes against the fixed one (MCPWIRE_FUZZ_ARGV points the files at another command)."""
    _, report, out = stdio_run
    tests = sorted(str(Path(f["test"]).name) for f in report["findings"])
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(out), *tests]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPWIRE_FUZZ_")}
    buggy = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True, timeout=120)
    assert buggy.returncode == 1, buggy.stdout[-3000:]
    assert f"{len(tests)} failed" in buggy.stdout
    fixed = subprocess.run(
        command, cwd=out, env={**env, "MCPWIRE_FUZZ_ARGV": json.dumps(FIXED)}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stdout[-3000:]
    assert f"{len(tests)} passed" in fixed.stdout


def test_replay_reproduces_every_finding_and_passes_once_fixed(stdio_run: Run) -> None:
    for finding in stdio_run[1]["findings"]:
        assert run_cli(["--replay", finding["trace"]])[0] == 1, finding["oracle"]
        assert run_cli(["--replay", finding["trace"], "--", *FIXED])[0] == 0, finding["oracle"]
    finding = by_key(stdio_run[1])[("server-alive", "greet")]
    again = replay(Path(finding["trace"]).read_text(encoding="utf-8"))
    assert again.reproduced and again.violations[0].oracle == "server-alive"
    assert "status 4" in again.violations[0].message


def test_no_process_is_left_behind(stdio_run: Run) -> None:
    """Every fixture server the fuzzer started was reaped: none is still a child of this process."""
    if not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists():
        pytest.skip("no /proc children file on this system")
    assert our_children(BUGGY) == []


def test_same_seed_same_run_in_both_isolation_modes(tmp_path: Path) -> None:
    """--seed makes a run deterministic; a process per example changes nothing but the cost."""
    args = ["--seed", "3", "--max-examples", "25", "--phase", "tools", "--allow", "greet", "--allow", "total"]
    runs = [
        run_json([*args, "--out", str(tmp_path / mode), "--isolation", mode, "--", *SERVER])[1]
        for mode in ("auto", "auto", "process")
    ]
    shapes = [
        ([u["examples"] for u in r["units"]], [(f["oracle"], f["input"]) for f in r["findings"]]) for r in runs
    ]
    assert shapes[0] == shapes[1] == shapes[2]
    assert [oracle for oracle, _ in shapes[0][1]] == ["server-alive"]  # greet; total's threshold not reached in 25


def test_modern_era_allow_list_and_deny_list(tmp_path: Path) -> None:
    """2026-07-28: the same bug is found with per-request _meta; allow/deny pick the tools."""
    status, report = run_json(
        ["--seed", "3", "--deadline", DEADLINE, "--out", str(tmp_path), "--phase", "tools", "--allow", "greet",
         "--allow", "echo", "--deny", "echo", "--", *SERVER, "--modern"]
    )  # fmt: skip
    assert status == 1
    assert report["server"]["era"] == "modern" and report["server"]["revision"] == "2026-07-28"
    assert sorted(report["skipped_tools"]) == ["countdown", "echo", "launch", "lookup", "store", "total"]
    [finding] = report["findings"]
    assert (finding["oracle"], finding["tool"]) == ("server-alive", "greet")
    request = json.loads(finding["input"][0])
    assert request["params"]["arguments"] == {"name": ""}
    assert request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


def test_clean_server_exits_zero_in_every_phase(tmp_path: Path) -> None:
    """Every protocol kind (valid requests of the revision's schema, which name real tools too,
    mutations, malformed lines, broken framing) and the stateful machine: a correct server gets no
    finding, and the denied tool (which ends the server when called) is never called."""
    status, report = run_json(
        ["--seed", "1", "--max-examples", "40", "--machine-runs", "5", "--deny", "launch",
         "--out", str(tmp_path / "none"), "--", *FIXED]
    )  # fmt: skip
    assert (status, report["findings"]) == (0, [])
    kinds = ("requests", "notifications", "mutations", "malformed", "framing")
    assert [u["unit"] for u in report["units"]][6:] == [*(f"protocol-{k}" for k in kinds), "stateful", "lists"]
    assert all(u["examples"] == 40 for u in report["units"][:11])
    assert not (tmp_path / "none").exists()


def test_time_budget_gives_every_unit_a_share(tmp_path: Path) -> None:
    """A budget far too small for 100 examples each: every unit still runs, cut short."""
    status, report = run_json(
        ["--seed", "1", "--time-budget", "2", "--deny", "crash", "--deny", "slow", "--deny", "big",
         "--out", str(tmp_path), "--", *DEMO, "--era", "legacy"]
    )  # fmt: skip
    assert (status, report["findings"]) == (0, [])
    units = {u["unit"]: u for u in report["units"]}
    assert {"protocol-requests", "protocol-framing", "stateful", "lists"} <= set(units)
    assert all(u["unit"].startswith("tools:") for u in report["units"][: len(report["units"]) - 7])
    assert any(u["cut_short"] for u in units.values())
    assert all(u["examples"] < 100 for u in units.values())


def test_usage_and_start_errors_exit_two(tmp_path: Path) -> None:
    assert run_cli(["--max-examples", "x"])[0] == 2
    assert run_cli(["--"])[0] == 2
    status, _, err = run_cli(["--env", "NOVALUE", "--", *SERVER])
    assert status == 2 and "--env wants KEY=VALUE" in err
    status, _, err = run_cli(["--header", "no-colon", "http://127.0.0.1:9/mcp"])
    assert status == 2 and "--header: expected NAME: VALUE or NAME=VALUE" in err and "no-colon" not in err
    status, _, err = run_cli(["ftp://example.com/mcp"])
    assert status == 2 and "not an http(s) URL" in err
    status, _, err = run_cli(["--replay", str(tmp_path / "missing.jsonl")])
    assert status == 2 and "cannot replay" in err
    (tmp_path / "bad.jsonl").write_text('{"type": "header", "format": "other"}\n')
    status, _, err = run_cli(["--replay", str(tmp_path / "bad.jsonl")])
    assert status == 2 and "not a mcpwire-fuzz-trace/2 trace" in err
    missing = str(tmp_path / "no-such-server")
    status, _, err = run_cli(["--connect-timeout", "2", "--", sys.executable, missing])
    assert status == 2 and "answered neither" in err


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_stateful_machine_finds_nothing_on_the_demo_server(tmp_path: Path, era: str) -> None:
    """Both eras: list, call, read, get prompt, cancel (answered and in flight), re-list, subscribe
    (legacy resources/subscribe, 2026-07-28 subscriptions/listen) in any order."""
    status, report = run_json(
        ["--phase", "stateful", "--phase", "lists", "--deny", "crash", "--deny", "slow", "--deny", "big",
         "--seed", "2", "--deadline", "5", "--out", str(tmp_path), "--", *DEMO, "--era", era]
    )  # fmt: skip
    assert report["server"]["era"] == era
    assert (status, report["findings"]) == (0, [])


def test_stateful_machine_shrinks_to_the_one_breaking_rule(tmp_path: Path) -> None:
    """Whichever planted bug the rules meet first, the sequence shrinks to that one rule."""
    status, report = run_json(
        ["--phase", "stateful", "--allow", "greet", "--seed", "5", "--deadline", DEADLINE, "--machine-runs", "5",
         "--out", str(tmp_path), "--", *SERVER]
    )  # fmt: skip
    assert status == 1 and report["findings"]
    expected = {
        "server-alive": {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "greet", "arguments": {"name": ""}}},
        "notification-silence": {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                 "params": {"requestId": 999999}},
    }  # fmt: skip
    for finding in report["findings"]:
        assert finding["phase"] == "stateful"
        text = Path(finding["trace"]).read_text(encoding="utf-8")
        _, steps = load_trace(text)
        assert [json.loads(s.line) for s in steps if not s.setup] == [expected[finding["oracle"]]]
        assert replay(text).reproduced


def test_no_target_fuzzes_the_bundled_demo_server(tmp_path: Path) -> None:
    status, report = run_json(
        ["--phase", "tools", "--allow", "echo", "--allow", "add", "--max-examples", "25", "--seed", "1",
         "--out", str(tmp_path)]
    )  # fmt: skip
    assert report["server"]["info"]["name"] == "mcpwire-demo"
    assert (status, report["findings"]) == (0, [])
    assert "crash" in report["skipped_tools"]


def test_progress_and_the_text_report(tmp_path: Path) -> None:
    """Without --json: progress lines and a per-unit table on stderr, the findings on stdout."""
    status, out, err = run_cli(
        ["--phase", "tools", "--allow", "greet", "--seed", "3", "--out", str(tmp_path), "--", *SERVER]
    )
    assert status == 1
    assert "server buggy (stdio): legacy 2025-11-25, 7 tools" in err
    assert "tools:greet: fuzzing (up to 100 examples)" in err and "tools:greet: FOUND [server-alive]" in err
    assert "unit                                   examples  seconds  findings" in err
    lines = out.splitlines()
    assert lines[0] == "ERROR [server-alive] greet: the server exited (status 4) after tools/call 'greet'"
    assert lines[1].startswith("    spec: ") and lines[2].startswith(f"    trace: {tmp_path}")
    assert lines[-1].startswith("1 finding(s), ")
    assert "skipped tools: echo, countdown, store, lookup, total, launch" in out
    quiet = run_cli(["-q", "--phase", "tools", "--allow", "echo", "--max-examples", "5", "--", *FIXED])
    assert quiet[0] == 0 and quiet[2] == ""
