"""``mcpwire fuzz`` against a fixture server with planted bugs: found, shrunk, written, replayed.

One run of the tools, protocol and lists phases (default budgets, a fixed seed, a short request
deadline so the planted hang costs little) is shared by the tests of this module; it takes most of
this directory's time. The stateful phase has tests of its own.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from fuzz.cli import main
from fuzz.trace import load_trace, replay

FIXTURE = str(Path(__file__).with_name("fixtures") / "buggy_server.py")
SERVER = [sys.executable, FIXTURE]
DEADLINE = "0.5"


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(args)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("findings")
    status, stdout, _ = run_cli(
        [
            "--seed",
            "7",
            "--deadline",
            DEADLINE,
            "--json",
            "--out",
            str(out),
            "--database",
            str(out / "db"),
            *("--phase", "tools", "--phase", "protocol", "--phase", "lists"),
            "--",
            *SERVER,
        ]
    )
    return status, json.loads(stdout), out


def findings_by(report: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    return {(f["oracle"], f["tool"]): f for f in report["findings"]}


def call_arguments(finding: dict[str, Any]) -> Any:
    request = json.loads(finding["input"][0])
    assert request["method"] == "tools/call"
    return request["params"]["arguments"]


def test_exit_status_and_report(full_run: tuple[int, dict[str, Any], Path]) -> None:
    status, report, _ = full_run
    assert status == 1
    assert report["server"]["era"] == "legacy" and report["server"]["info"]["name"] == "buggy"
    assert report["examples"] >= 500
    found = sorted(findings_by(report))
    assert found == sorted(
        [
            ("server-alive", "greet"),
            ("answer-deadline", "countdown"),
            ("server-alive", "store"),
            ("server-alive", "lookup"),
            ("output-schema", "total"),
            ("notification-silence", None),
        ]
    ), "no finding beyond the planted bugs (echo is correct)"
    for finding in report["findings"]:
        assert finding["severity"] == "error" and finding["spec"] and not finding["flaky"]


def test_crash_on_empty_string_shrinks_to_exactly_empty(full_run: tuple[int, dict[str, Any], Path]) -> None:
    finding = findings_by(full_run[1])[("server-alive", "greet")]
    assert call_arguments(finding) == {"name": ""}
    assert "status 4" in finding["message"]


def test_hang_on_negative_integer_shrinks_to_minus_one(full_run: tuple[int, dict[str, Any], Path]) -> None:
    finding = findings_by(full_run[1])[("answer-deadline", "countdown")]
    assert call_arguments(finding) == {"n": -1}


def test_crash_on_long_string_shrinks_to_the_boundary(full_run: tuple[int, dict[str, Any], Path]) -> None:
    finding = findings_by(full_run[1])[("server-alive", "store")]
    arguments = call_arguments(finding)
    assert list(arguments) == ["text"] and len(arguments["text"]) == 301


def test_crash_on_nul_shrinks_to_one_nul(full_run: tuple[int, dict[str, Any], Path]) -> None:
    finding = findings_by(full_run[1])[("server-alive", "lookup")]
    assert call_arguments(finding) == {"key": "\x00"}


def test_output_schema_break_shrinks_to_just_past_the_threshold(full_run: tuple[int, dict[str, Any], Path]) -> None:
    finding = findings_by(full_run[1])[("output-schema", "total")]
    arguments = call_arguments(finding)
    assert arguments["a"] + arguments["b"] == 1001
    assert min(abs(arguments["a"]), abs(arguments["b"])) == 0


def test_answered_notification_shrinks_to_the_bare_notification(full_run: tuple[int, dict[str, Any], Path]) -> None:
    finding = findings_by(full_run[1])[("notification-silence", None)]
    assert [json.loads(line) for line in finding["input"][:-1]] == [
        {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    ]


def test_traces_and_pytest_files_are_written(full_run: tuple[int, dict[str, Any], Path]) -> None:
    _, report, out = full_run
    for finding in report["findings"]:
        trace, test = Path(finding["trace"]), Path(finding["test"])
        assert trace.parent == out and test.parent == out
        header, steps = load_trace(trace.read_text(encoding="utf-8"))
        assert header["finding"]["oracle"] == finding["oracle"]
        sent = [s.line.decode() for s in steps if not s.setup]
        assert sent and sent == finding["input"][: len(sent)]  # the liveness probe is not sent after a crash
        source = test.read_text(encoding="utf-8")
        compile(source, str(test), "exec")
        assert "def test_" in source and finding["oracle"] in source
    assert any((out / "db").iterdir()), "the Hypothesis example database was written"


def test_replay_reproduces_and_passes_once_fixed(full_run: tuple[int, dict[str, Any], Path]) -> None:
    finding = findings_by(full_run[1])[("server-alive", "greet")]
    text = Path(finding["trace"]).read_text(encoding="utf-8")
    again = replay(text, deadline=float(DEADLINE))
    assert again.reproduced and again.violations[0].oracle == "server-alive"
    fixed = replay(text, argv=[*SERVER, "--fixed"], deadline=float(DEADLINE))
    assert not fixed.reproduced and fixed.violations == []
    assert run_cli(["--replay", finding["trace"]])[0] == 1
    assert run_cli(["--replay", finding["trace"], "--", *SERVER, "--fixed"])[0] == 0


def test_generated_pytest_file_fails_while_the_bug_is_there(full_run: tuple[int, dict[str, Any], Path]) -> None:
    finding = findings_by(full_run[1])[("answer-deadline", "countdown")]
    namespace: dict[str, Any] = {}
    exec(compile(Path(finding["test"]).read_text(encoding="utf-8"), finding["test"], "exec"), namespace)
    test = next(v for k, v in namespace.items() if k.startswith("test_"))
    with pytest.raises(AssertionError, match=r"answer-deadline"):
        test()


def test_modern_era_allow_list_and_deny_list(tmp_path: Path) -> None:
    """2026-07-28: the same bug is found with per-request _meta; allow/deny pick the tools."""
    status, stdout, _ = run_cli(
        [
            "--seed",
            "3",
            "--deadline",
            DEADLINE,
            "--json",
            "--out",
            str(tmp_path),
            "--phase",
            "tools",
            "--allow",
            "greet",
            "--allow",
            "echo",
            "--deny",
            "echo",
            "--",
            *SERVER,
            "--modern",
        ]
    )
    report = json.loads(stdout)
    assert status == 1
    assert report["server"]["era"] == "modern" and report["server"]["revision"] == "2026-07-28"
    assert sorted(report["skipped_tools"]) == ["countdown", "echo", "lookup", "store", "total"]
    [finding] = report["findings"]
    assert (finding["oracle"], finding["tool"]) == ("server-alive", "greet")
    request = json.loads(finding["input"][0])
    assert request["params"]["arguments"] == {"name": ""}
    assert request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


def test_clean_server_exits_zero(tmp_path: Path) -> None:
    status, stdout, _ = run_cli(
        ["--seed", "1", "--max-examples", "30", "--json", "--out", str(tmp_path / "none"), "--", *SERVER, "--fixed"]
    )
    assert status == 0
    assert json.loads(stdout)["findings"] == []
    assert not (tmp_path / "none").exists()


def test_usage_and_start_errors_exit_two(tmp_path: Path) -> None:
    assert run_cli(["--max-examples", "x"])[0] == 2
    assert run_cli(["--"])[0] == 2
    missing = str(tmp_path / "no-such-server")
    status, _, err = run_cli(["--connect-timeout", "2", "--", sys.executable, missing])
    assert status == 2 and "answered neither" in err


def test_no_process_is_left_behind(full_run: tuple[int, dict[str, Any], Path]) -> None:
    """Every fixture server the fuzzer started was reaped: none is still a child of this process."""
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    if not children.exists():
        pytest.skip("no /proc children file on this system")
    left = []
    for pid in children.read_text().split():
        with contextlib.suppress(OSError):
            if FIXTURE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                left.append(pid)
    assert left == []


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_stateful_machine_finds_nothing_on_the_demo_server(tmp_path: Path, era: str) -> None:
    """Both eras: list, call, read, get prompt, cancel, re-list and subscribe in any order."""
    status, stdout, _ = run_cli(
        ["--phase", "stateful", "--phase", "lists", "--deny", "crash", "--deny", "slow", "--deny", "big", "--seed", "2",
         "--deadline", "5", "--json", "--out", str(tmp_path), "--",
         sys.executable, "-m", "mcpwire.testing.demo_server", "--era", era]
    )  # fmt: skip
    report = json.loads(stdout)
    assert report["server"]["era"] == era
    assert (status, report["findings"]) == (0, [])


def test_stateful_machine_shrinks_to_the_one_breaking_rule(tmp_path: Path) -> None:
    """Whichever planted bug the rules meet first, the sequence shrinks to that one rule."""
    status, stdout, _ = run_cli(
        ["--phase", "stateful", "--allow", "greet", "--seed", "5", "--deadline", DEADLINE, "--json",
         "--out", str(tmp_path), "--", *SERVER]
    )  # fmt: skip
    report = json.loads(stdout)
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
        assert replay(text, deadline=float(DEADLINE)).reproduced


def test_no_target_fuzzes_the_bundled_demo_server(tmp_path: Path) -> None:
    status, stdout, _ = run_cli(
        ["--phase", "tools", "--allow", "echo", "--allow", "add", "--max-examples", "25", "--seed", "1", "--json",
         "--out", str(tmp_path)]
    )  # fmt: skip
    report = json.loads(stdout)
    assert report["server"]["info"]["name"] == "mcpwire-demo"
    assert (status, report["findings"]) == (0, [])
    assert "crash" in report["skipped_tools"]
