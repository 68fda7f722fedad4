"""``mcpwire fuzz`` as a user runs it: the servers of a config file (one, or all with a shared
budget), progress on a terminal (examples, findings, time left), quiet off a terminal."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from _support import FIXED, FIXTURES, REPO, SERVER, run_cli, run_json
from mcpwire.fuzz.runner import BUDGET_GRACE_S

HOSTILE = [sys.executable, str(FIXTURES / "fuzz_hostile_server.py")]


def _config(tmp_path: Path) -> Path:
    servers = {
        "buggy": {"command": SERVER[0], "args": SERVER[1:]},
        "fixed": {"command": FIXED[0], "args": FIXED[1:]},
        "hostile": {"command": HOSTILE[0], "args": HOSTILE[1:], "enabled": False},
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


@pytest.mark.slow
def test_config_all_fuzzes_every_enabled_server_with_a_shared_budget(tmp_path: Path) -> None:
    config = _config(tmp_path)
    started = time.monotonic()
    status, report = run_json(
        ["--config", str(config), "--all", "--time-budget", "24", "--seed", "2", "--deadline", "1", "--phase", "tools",
         "--out", str(tmp_path / "out")]
    )  # fmt: skip
    assert time.monotonic() - started <= 24 + 2 * BUDGET_GRACE_S
    assert [s["target"] for s in report["servers"]] == ["buggy", "fixed"]  # the disabled one is left out
    buggy, fixed = report["servers"]
    assert buggy["findings"] and fixed["findings"] == []
    assert all(s["time_budget_s"] <= 24 for s in report["servers"])
    assert status == 1
    assert all(Path(f["trace"]).parent == tmp_path / "out" / "buggy" for f in buggy["findings"])


def test_config_names_one_server(tmp_path: Path) -> None:
    config = _config(tmp_path)
    status, report = run_json(
        ["--config", str(config), "fixed", "--seed", "1", "--max-examples", "5", "--phase", "tools", "--out",
         str(tmp_path / "o")]
    )  # fmt: skip
    assert (status, report["target"], report["findings"]) == (0, "fixed", [])
    status, _, err = run_cli(["--config", str(config), "nope"])
    assert (status, err) == (2, f"mcpwire fuzz: {config}: no server named 'nope' (servers: buggy, fixed, hostile)\n")
    status, _, err = run_cli(["--config", str(config)])
    assert (status, err) == (2, "mcpwire fuzz: with --config, name one server or give --all\n")
    status, _, err = run_cli(["--all"])
    assert (status, err) == (2, "mcpwire fuzz: --all needs --config FILE\n")


def test_progress_on_a_terminal_shows_examples_findings_and_time_left(tmp_path: Path) -> None:
    """On a terminal the progress lines come without -v, with the counts and the time left."""
    pexpect = pytest.importorskip("pexpect")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPWIRE_FUZZ_")}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "mcpwire.fuzz", "--seed", "3", "--phase", "tools", "--allow", "greet", "--time-budget", "20",
         "--out", str(tmp_path), "--", *SERVER],
        cwd=str(REPO), env=env, encoding="utf-8", timeout=90,
    )  # fmt: skip
    child.expect(r"tools:greet: FOUND \[server-alive\] [^\r\n]*\[(\d+) examples, 1 findings, (\d+)s left\]")
    assert int(child.match.group(2)) <= 20
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1


@pytest.mark.parametrize(
    ("process_argv", "argv", "age", "counted"),
    [
        (["/venv/bin/mcpwire", "fuzz", "--time-budget", "9"], ["--time-budget", "9"], 3.0, 3.0),
        (["/src/fuzz/__main__.py", "--time-budget", "9"], ["--time-budget", "9"], 2.5, 2.5),
        (["/venv/bin/mcpwire", "fuzz"], [], 1.0, 1.0),
        # called in-process with other arguments (a test runner): the budget counts from the call
        (["/venv/bin/pytest", "tests/fuzz"], ["--time-budget", "9"], 3.0, 0.0),
        (["/venv/bin/pytest"], ["/venv/bin/pytest"], 3.0, 0.0),
        # a process that has been running for long was not started for this command
        (["/venv/bin/mcpwire", "fuzz"], [], 600.0, 0.0),
    ],
)
def test_the_budget_counts_from_the_start_of_the_command(
    monkeypatch: pytest.MonkeyPatch, process_argv: list[str], argv: list[str], age: float, counted: float
) -> None:
    """The interpreter's start-up and imports are inside the budget when the fuzzer is the command."""
    from mcpwire.fuzz import cli

    monkeypatch.setattr(sys, "argv", process_argv)
    monkeypatch.setattr(cli, "_process_age", lambda: age)
    monkeypatch.setattr(cli, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    assert cli._command_start(argv) == 1000.0 - counted


def test_the_process_age_is_read_from_proc() -> None:
    from mcpwire.fuzz import cli

    if not Path("/proc/self/stat").exists():
        pytest.skip("no /proc on this system")
    assert 0.0 < cli._process_age() < time.monotonic()
