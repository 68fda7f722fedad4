"""CI runs the README's test command as it is written, and the README's install lines are the
ones CI tries in a clean venv."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from readme_install import install_lines  # noqa: E402


def _readme_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    block = readme.split("```sh\n", 1)[1].split("```", 1)[0]
    return block.strip().splitlines()


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    commands = _readme_commands()
    assert len(commands) == 2 and "pytest" in commands[1], commands
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert any(line.strip() == commands[1] for line in ci), f"{commands[1]!r} is not a line of .ci/run"


def test_the_install_lines_tried_are_the_readmes_and_work_from_a_clone() -> None:
    lines = install_lines((REPO / "README.md").read_text())
    assert lines[0] == _readme_commands()[0]
    # from a clone: editable installs of this checkout, never a name that PyPI would resolve
    assert lines and all(line.startswith("pip install -e '.[") for line in lines), lines
    assert not any("pytest" in line for line in lines)
