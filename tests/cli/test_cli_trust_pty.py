"""The project-config question on a real pseudo-terminal: asked once, answered, remembered."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect
import pytest
from _cli_run import MCPWIRE, environment, mcpwire

pytestmark = pytest.mark.slow

TIMEOUT_S = 60


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder as a cloned repository leaves it: an mcp.json nobody has reviewed."""
    work = tmp_path / "repo"
    work.mkdir()
    # the demo server, started with a secret on its command line (which it ignores)
    start = "import runpy, sys; sys.argv[1:] = []; runpy.run_module('mcpwire.testing.demo_server', run_name='__main__')"
    demo = {"command": sys.executable, "args": ["-c", start, "--api-key", "k-0123456789"]}
    (work / "mcp.json").write_text(json.dumps({"mcpServers": {"demo": demo}}))
    return work


def _spawn(project: Path, *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        MCPWIRE,
        list(args),
        cwd=str(project),
        env=environment(project.parent),
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 200),
    )


def test_yes_runs_the_servers_and_is_remembered(project: Path) -> None:
    child = _spawn(project, "tools")
    child.expect_exact(f"{project / 'mcp.json'} is a project-local config that has not been trusted yet.")
    child.expect_exact("run_name='\"'\"'__main__'\"'\"')' --api-key ***")
    child.expect_exact("Trust this file and run its servers? [y/N] ")
    child.sendline("y")
    child.expect(r"demo__echo +[A-Z]+ +Return the text unchanged\.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "k-0123456789" not in (child.before or "")
    # remembered: no question, even without a terminal
    proc = mcpwire("tools", "--json", cwd=project, home=project.parent)
    assert proc.returncode == 0, proc.stderr
    assert "demo__echo" in {row["name"] for row in json.loads(proc.stdout)}


def test_no_starts_nothing_and_is_remembered(project: Path) -> None:
    child = _spawn(project, "servers")
    child.expect_exact("Trust this file and run its servers? [y/N] ")
    child.sendline("n")
    child.expect_exact(f"mcpwire servers: not trusted: the servers of {project / 'mcp.json'} were not started")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    proc = mcpwire("servers", cwd=project, home=project.parent)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"mcpwire servers: the servers of {project / 'mcp.json'} were refused earlier; pass --yes to trust this file\n"
    )
    assert mcpwire("servers", "--yes", cwd=project, home=project.parent).returncode == 0


def test_a_changed_file_is_asked_about_again(project: Path) -> None:
    assert mcpwire("tools", "--trust", cwd=project, home=project.parent).returncode == 0
    config = project / "mcp.json"
    config.write_text(config.read_text().replace("k-0123456789", "k-changed-99"))  # same length, new hash
    proc = mcpwire("tools", cwd=project, home=project.parent)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"mcpwire tools: {config} is a project config not trusted yet (it would start 1 server(s)): "
        "review it and pass --yes to trust it, or run once in a terminal to be asked\n"
    )
