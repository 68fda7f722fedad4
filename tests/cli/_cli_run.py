"""Running the installed ``mcpwire`` entry point, as users do, with no user config leaking in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: The console script pip installed next to this interpreter.
MCPWIRE = str(Path(sys.executable).with_name("mcpwire"))
TIMEOUT = 60
DEMO_COMMAND = (sys.executable, "-m", "mcpwire.testing.demo_server")


def environment(home: Path | None = None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MCPWIRE_CONFIG", None)
    env.pop("XDG_DATA_HOME", None)
    env.pop("XDG_CONFIG_HOME", None)
    if home is not None:  # no user config or trust file leaks in from the machine running the tests
        env["HOME"] = str(home)
    env.update(extra)
    return env


def mcpwire(
    *args: str,
    cwd: Path | None = None,
    home: Path | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """Runs ``mcpwire ARGS...`` and returns what it printed (stdin is empty unless given)."""
    return subprocess.run(
        [MCPWIRE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=environment(home) | (env or {}),
        input=stdin if stdin is not None else "",
    )
