"""``mcpwire fuzz`` over stdio against a fixture server with planted bugs: found, shrunk, written, replayed.

The run with the default budgets (100 examples per tool and for the notifications, a short
request deadline so the planted hang costs little) is made with three seeds, at the same time
(two of them in subprocesses: the runs mostly wait on the servers). With every seed, every
planted bug must be found and shrunk to exactly its minimal input, and nothing else may be
reported; the first seed's run is shared by the other tests of this module: each finding's trace,
replay and generated pytest file must reproduce it, and its example database must be reused by a
second run. The other protocol kinds and the stateful phase run against the fixed server (nothing
to report); other planted bugs (a list that changes, arguments accepted against the schema) are
asked for with their own flags.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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
from mcpwire.fuzz.runner import BUDGET_GRACE_S
from mcpwire.fuzz.trace import load_trace, replay

DEADLINE = "0.3"
#: the seeds of the default-budget run: 7 is shared by most tests; 3 and 19 once drew no NUL at all
SEEDS = (7, 3, 19)
DEFAULT_BUDGET = ["--deadline", DEADLINE, "--confirm-deadline", "0.6", "--phase", "tools", "--phase", "protocol",
                  "--protocol-kind", "notifications", "--phase", "lists", "--deny", "launch"]  # fmt: skip
PLANTED = {
    ("server-alive", "greet"): {"name": ""},
    ("answer-deadline", "countdown"): {"n": -1},
    ("server-alive", "store"): {"text": "a" * 301},
    ("server-alive", "lookup"): {"key": "\x00"},
    ("output-schema", "total"): {"a": 0, "b": 1001},
}
#: other inputs just as small: the edge values change one argument of the simplest call at a time,
#: the first argument first, and its value is then made as small as still fails
EQUALLY_SMALL = {("output-schema", "total"): {"a": 1001, "b": 0}}
Run = tuple[int, dict[str, Any], Path]


@pytest.fixture(scope="module")
def planted_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Run]:
    """The default-budget run with each seed: the first in this process, the others in subprocesses
    started before it and collected after it."""
    outs = {seed: tmp_path_factory.mktemp(f"findings-{seed}") for seed in SEEDS}

    def args(seed: int) -> list[str]:
        out = outs[seed]
        return ["--seed", str(seed), *DEFAULT_BUDGET, "--out", str(out), "--database", str(out / "db"), "--", *SERVER]

    command = [sys.executable, "-m", "mcpwire.fuzz", "--json", "-q"]
    others = {
        seed: subprocess.Popen([*command, *args(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for seed in SEEDS[1:]
    }
    try:
        runs: dict[int, Run] = {SEEDS[0]: (*run_json(args(SEEDS[0])), outs[SEEDS[0]])}
        for seed, proc in others.items():
            stdout, stderr = proc.communicate(timeout=300)
            assert stdout, f"seed {seed}: no JSON report (status {proc.returncode}): {stderr[-2000:]}"
            runs[seed] = (proc.returncode, json.loads(stdout), outs[seed])
    finally:
        for proc in others.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return runs


@pytest.fixture(scope="module")
def stdio_run(planted_runs: dict[int, Run]) -> Run:
    return planted_runs[SEEDS[0]]


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_every_planted_bug_is_found_and_shrunk_whatever_the_seed(planted_runs: dict[int, Run], seed: int) -> None:
    status, report, _ = planted_runs[seed]
    assert status == 1
    found = by_key(report)
    assert sorted(found) == sorted([*PLANTED, ("notification-silence", None)]), "echo has no bug"
    for key, minimal in PLANTED.items():
        assert call_arguments(found[key]) in (minimal, EQUALLY_SMALL.get(key)), key
    cancelled = found[("notification-silence", None)]
    assert cancelled["phase"] == "protocol-notifications"
    assert json.loads(cancelled["input"][0]) == {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    units = {u["unit"]: u for u in report["units"]}
    assert all(units[f"tools:{tool}"]["first_failure"] <= 100 for _, tool in PLANTED)  # within the budget


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
    assert list(units) == ["lists", *expected, "protocol-notifications"]
    assert units["tools:echo"]["examples"] == 100  # the only tool without a bug: the whole budget
    assert units["tools:echo"]["first_failure"] is None and units["lists"]["first_failure"] is None
    assert all(u["examples"] < 150 and not u["cut_short"] and u["error"] is None for u in units.values())


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


def test_a_second_run_reuses_the_example_database(tmp_path: Path) -> None:
    """Another seed, the same database: each failure the first run searched for is the second
    run's very first example, under the same database keys (none is added). Both runs search
    only (``--no-edges``): an edge value would find these bugs before any search."""
    database = tmp_path / "db"

    def fuzz(seed: str, out: str) -> tuple[int, dict[str, Any]]:
        return run_json(
            ["--seed", seed, "--deadline", DEADLINE, "--confirm-deadline", "0.6", "--phase", "tools", "--no-edges",
             "--allow", "lookup", "--allow", "total", "--database", str(database), "--out", str(tmp_path / out),
             "--", *SERVER]
        )  # fmt: skip

    _, report = fuzz("1", "first")
    keys = sorted(p.name for p in database.iterdir())
    assert keys, "the first run wrote the database"
    status, again = fuzz("8", "second")
    assert status == 1
    first = {u["unit"]: u for u in report["units"]}
    second = {u["unit"]: u for u in again["units"]}
    for key in [("server-alive", "lookup"), ("output-schema", "total")]:
        unit = f"tools:{key[1]}"
        assert first[unit]["first_failure"] > 1  # found by searching
        assert second[unit]["first_failure"] == 1  # replayed from the database at once
        assert call_arguments(by_key(again)[key]) == PLANTED[key]
    assert sorted(p.name for p in database.iterdir()) == keys


def test_generated_pytest_files_fail_while_the_bugs_are_there(stdio_run: Run) -> None:
    """Run as pytest would run them where they are kept: each fails against the buggy server and
    passes against the fixed one (MCPWIRE_FUZZ_ARGV points the files at another command); the two
    pytest runs go at the same time."""
    _, report, out = stdio_run
    tests = sorted(str(Path(f["test"]).name) for f in report["findings"])
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(out), *tests]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPWIRE_FUZZ_")}
    runs = {
        name: subprocess.Popen(
            command, cwd=out, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for name, run_env in (("buggy", env), ("fixed", {**env, "MCPWIRE_FUZZ_ARGV": json.dumps(FIXED)}))
    }
    outputs = {name: (proc.communicate(timeout=120)[0], proc.returncode) for name, proc in runs.items()}
    stdout, status = outputs["buggy"]
    assert status == 1 and f"{len(tests)} failed" in stdout, stdout[-3000:]
    stdout, status = outputs["fixed"]
    assert status == 0 and f"{len(tests)} passed" in stdout, stdout[-3000:]


def test_replay_reproduces_every_finding_and_passes_once_fixed(stdio_run: Run) -> None:
    for finding in stdio_run[1]["findings"]:
        assert run_cli(["--replay", finding["trace"], "--yes"])[0] == 1, finding["oracle"]
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
    args = ["--seed", "3", "--max-examples", "25", "--phase", "tools", "--allow", "greet", "--allow", "echo"]
    runs = [
        run_json([*args, "--out", str(tmp_path / mode), "--isolation", mode, "--", *SERVER])[1]
        for mode in ("auto", "auto", "process")
    ]
    shapes = [([u["examples"] for u in r["units"]], [(f["oracle"], f["input"]) for f in r["findings"]]) for r in runs]
    assert shapes[0] == shapes[1] == shapes[2]
    assert [oracle for oracle, _ in shapes[0][1]] == ["server-alive"]  # greet (echo has no bug)


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
    assert [u["unit"] for u in report["units"]][7:] == [*(f"protocol-{k}" for k in kinds), "stateful"]
    assert report["units"][0]["unit"] == "lists"
    assert all(u["examples"] == 40 for u in report["units"][1:12])
    assert not (tmp_path / "none").exists()


def test_time_budget_gives_every_unit_examples_in_rounds(tmp_path: Path) -> None:
    """A budget far too small for the examples asked (a million per unit, more than any machine runs
    in ten seconds): every unit still gets examples (rounds: each unit gets some before any gets
    many), the budget cuts the run short, and it ends within the budget and its grace."""
    started = time.monotonic()
    status, report = run_json(
        ["--seed", "1", "--time-budget", "10", "--max-examples", "1000000", "--tools", "all", "--deny", "crash",
         "--deny", "slow", "--deny", "big", "--out", str(tmp_path), "--", *DEMO, "--era", "legacy"]
    )  # fmt: skip
    assert time.monotonic() - started <= 10 + BUDGET_GRACE_S + 2  # + starting the interpreter
    assert (status, report["findings"], report["coverage_gaps"]) == (0, [], [])
    units = {u["unit"]: u for u in report["units"]}
    assert {"protocol-requests", "protocol-framing", "stateful", "lists"} <= set(units)
    assert all(u["examples"] >= 1 for u in units.values())
    assert any(u["cut_short"] for u in units.values())
    assert all(u["examples"] < 1_000_000 for u in units.values())


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
    assert status == 2 and "not a mcpwire-fuzz-trace/3 trace" in err
    missing = str(tmp_path / "no-such-server")
    status, _, err = run_cli(["--connect-timeout", "2", "--", sys.executable, missing])
    assert status == 2 and "answered neither" in err


MACHINE_RULES = {"list_tools", "call_tool", "get_prompt", "read_resource", "list_prompts", "list_resources",
                 "cancel_answered", "cancel_in_flight"}  # fmt: skip


@pytest.mark.parametrize(("era", "subscribing"), [("legacy", "subscribe"), ("modern", "listen")])
def test_stateful_machine_finds_nothing_on_the_demo_server(tmp_path: Path, era: str, subscribing: str) -> None:
    """Both eras: list, call, read, get prompt, cancel (answered and in flight), re-list, subscribe
    (legacy resources/subscribe, 2026-07-28 subscriptions/listen) in any order: every rule of the
    era really runs, and the lists (tools, prompts, resources) stay the same. Hypothesis turns some
    rules off in each sequence (swarm testing): 20 sequences make sure every rule gets its turn."""
    status, report = run_json(
        ["--phase", "stateful", "--phase", "lists", "--tools", "all", "--deny", "crash", "--deny", "slow",
         "--deny", "big", "--seed", "2", "--machine-runs", "20", "--deadline", "5", "--out", str(tmp_path), "--",
         *DEMO, "--era", era]
    )  # fmt: skip
    assert report["server"]["era"] == era
    assert (status, report["findings"]) == (0, [])
    units = {u["unit"]: u for u in report["units"]}
    machine = units["stateful"]
    assert machine["examples"] >= 20  # --machine-runs sequences (and any Hypothesis threw away)
    assert set(machine["rules"]) == {*MACHINE_RULES, subscribing}, machine["rules"]
    assert all(count > 0 for count in machine["rules"].values())
    assert sum(machine["rules"].values()) > 20 * 3  # sequences of more than a few rules


def test_stateful_machine_shrinks_to_the_one_breaking_rule(tmp_path: Path) -> None:
    """Whichever planted bug the rules meet first, the sequence shrinks to that one rule. The
    example database keeps the sequences per server: the same server replays its failure first,
    another command (the same bug) searches from scratch under a key of its own."""
    database = tmp_path / "db"

    def machine(seed: int, server: list[str], out: str) -> tuple[int, dict[str, Any]]:
        return run_json(
            ["--phase", "stateful", "--allow", "greet", "--seed", str(seed), "--deadline", DEADLINE,
             "--machine-runs", "5", "--database", str(database), "--out", str(tmp_path / out), "--", *server]
        )  # fmt: skip

    status, report = machine(5, SERVER, "first")
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
    searched = report["units"][0]["first_failure"]
    assert searched > 1
    keys = {p.name for p in database.iterdir()}
    again = machine(6, SERVER, "again")[1]["units"][0]
    assert again["first_failure"] == 1  # the stored sequence, replayed first
    assert {p.name for p in database.iterdir()} == keys
    other = machine(5, [*SERVER, "--lenient"], "other")[1]["units"][0]
    assert other["first_failure"] > 1  # searched again: nothing of the other server's was replayed
    assert {p.name for p in database.iterdir()} > keys


@pytest.mark.parametrize(
    ("kind", "phases", "era"),
    [
        ("tools", ["lists"], "legacy"),
        ("resources", ["lists"], "legacy"),
        ("prompts", ["lists", "stateful"], "legacy"),
        ("tools", ["lists"], "modern"),
    ],
)
def test_a_list_that_changes_between_calls_is_found(tmp_path: Path, kind: str, phases: list[str], era: str) -> None:
    """SV-34: the fixture's KIND/list gains an item from its second call on. The lists phase (two
    lists of each kind in a fresh session) finds it, and so does the stateful machine (a re-list;
    run for one kind only, as shrinking a rule sequence costs a process per try); each trace
    replays it against the server with the bug, and not against one without it. It is an error
    from 2026-07-28 on (a list "MUST NOT vary ... as a side effect"), a warning before (a list may
    change; the server SHOULD then say so with list_changed, which the fixture does not)."""
    flags = ["--modern"] if era == "modern" else []
    status, report = run_json(
        ["--seed", "1", "--allow", "echo", "--machine-runs", "3", "--machine-steps", "6", "--deadline", "5",
         *(f"--phase={phase}" for phase in phases), "--out", str(tmp_path), "--", *FIXED, "--unstable", kind, *flags]
    )  # fmt: skip
    assert status == 1
    found = {f["phase"]: f for f in report["findings"]}
    assert sorted(found) == sorted(phases)
    severity = "error" if era == "modern" else "warning"
    assert all(f["oracle"] == "list-stable" and f["severity"] == severity for f in found.values())
    ghost = "file:///ghost.txt" if kind == "resources" else "ghost"
    assert found["lists"]["message"] == (
        f'{kind}/list answer #2 differs from the first list: added ["{ghost}"], removed [] (in a new session)'
    )
    if era == "modern":
        assert found["lists"]["spec"].startswith('2026-07-28 server/tools §Capabilities: "MUST NOT vary')
    else:
        assert found["lists"]["spec"].startswith("2025-11-25 server/tools §List Changed Notification")
    if "stateful" in found:
        sent = [json.loads(line)["method"] for line in found["stateful"]["input"]]
        assert sent == [f"{kind}/list", f"{kind}/list"]  # shrunk to the two lists that differ
    for finding in found.values():
        assert run_cli(["--replay", finding["trace"], "--yes"])[0] == 1
        assert run_cli(["--replay", finding["trace"], "--", *FIXED])[0] == 0


def test_warnings_alone_exit_one_unless_only_errors_fail(tmp_path: Path) -> None:
    """Exit 1 when anything was found, warnings included; --fail-on error lets warnings pass."""
    args = ["--phase", "tools", "--allow", "echo", "--max-examples", "60", "--seed", "1", "--", *FIXED, "--lenient"]
    status, out, _ = run_cli(["-q", "--out", str(tmp_path / "a"), *args])
    assert status == 1
    assert out.startswith("WARNING [invalid-args-refused] echo: tools/call 'echo' accepted arguments its inputSchema")
    status, report = run_json(["--fail-on", "error", "--out", str(tmp_path / "b"), *args])
    assert status == 0
    assert {(f["oracle"], f["severity"]) for f in report["findings"]} == {("invalid-args-refused", "warning")}
    assert run_cli(["--fail-on", "info", *args])[0] == 2


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
        ["-v", "--phase", "tools", "--allow", "greet", "--seed", "3", "--out", str(tmp_path), "--", *SERVER]
    )
    assert status == 1
    assert "server buggy (stdio): legacy 2025-11-25, 7 tools (1 fuzzed)" in err
    assert "tools:greet: fuzzing (up to 100 examples, in rounds)" in err and "tools:greet: FOUND [server-alive]" in err
    assert "unit                                   examples  seconds  findings  known" in err
    lines = [line for line in out.splitlines() if not line.startswith("    failing examples of this cause: ")]
    assert lines[0] == "ERROR [server-alive] greet: the server exited (status 4) after tools/call 'greet'"
    assert lines[1] == (
        '    spec: JSON-RPC 2.0 §5: "When a rpc call is made, the Server MUST reply with a Response, except for in'
        ' the case of Notifications."; (§5.1: -32700 Parse error, -32600 Invalid Request for a message it cannot'
        " read); SV-02"
    )
    assert lines[2].startswith(f"    trace: {tmp_path}")
    assert lines[-1].startswith("1 finding(s), ")
    assert "skipped tools: echo, countdown, store, lookup, total, launch" in out
    quiet = run_cli(["-q", "--phase", "tools", "--allow", "echo", "--max-examples", "5", "--", *FIXED])
    assert quiet[0] == 0 and quiet[2] == ""
    # off a terminal, without -v: no progress lines, only the unit table
    plain = run_cli(["--phase", "tools", "--allow", "echo", "--max-examples", "5", "--", *FIXED])
    assert plain[0] == 0 and "fuzzing (up to" not in plain[2] and "unit " in plain[2]
