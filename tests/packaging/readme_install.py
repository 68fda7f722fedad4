"""Run the README's install lines verbatim, as a new user would: a copy of the checkout, a clean
venv, a fresh HOME, nothing else on PATH.

    python tests/packaging/readme_install.py [--python PYTHON] [--work DIR] [--keep]

Every ``pip install`` line of README.md (in a shell block, or quoted inline) is run as it is
written, with whatever follows it on the line (``&& mcpwire check``), in one venv created from
nothing and activated the way ``. venv/bin/activate`` does; after each, ``mcpwire --version`` must
name this project's distribution. The test command (the line that runs pytest) is left to CI, which
runs it on its own. The copy holds the checkout's files as they are (tracked, and untracked but not
ignored), so uncommitted changes are tried too. Standard library only.

Exits 0 when every line worked; otherwise 1, naming the line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from wheel_smoke import REPO, SmokeError, run, say, script, user_env

#: a line or an inline code span that starts with ``pip install``
_INLINE = re.compile(r"`(pip install [^`]+)`")


def install_lines(readme: str) -> list[str]:
    """The README's install commands, in order, once each (the test command left out)."""
    found: list[str] = []
    in_shell = False
    for line in readme.splitlines():
        if line.startswith("```"):
            in_shell = line.strip() in ("```sh", "```bash", "```console", "```shell")
            continue
        if in_shell:
            if line.startswith("pip install"):
                found.append(line.strip())
        else:
            found.extend(_INLINE.findall(line))
    unique = list(dict.fromkeys(found))
    return [line for line in unique if "pytest" not in line]


def copy_checkout(target: Path) -> None:
    """The checkout's files as they are now (ignored ones, such as .venv and .cache, left out)."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        source = REPO / os.fsdecode(raw)
        if not source.is_file() or (source.is_symlink() and not source.resolve().is_relative_to(REPO)):
            continue  # folders, and links out of the checkout (.cache)
        destination = target / os.fsdecode(raw)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)


def try_lines(python: str, work: Path) -> str:
    distribution = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]
    lines = install_lines((REPO / "README.md").read_text())
    if not lines:
        raise SmokeError("README.md has no install line")
    clone, venv, home = work / "mcpwire", work / "venv", work / "home"
    say(f"copying the checkout to {clone}; a clean venv in {venv}; HOME={home}")
    copy_checkout(clone)
    run([python, "-m", "venv", venv], timeout=120)
    env = user_env(venv, home)
    for line in lines:
        say(f"$ {line}")
        proc = run(["bash", "-c", line], cwd=clone, env=env, timeout=900)
        version = run(["mcpwire", "--version"], cwd=home, env=env, timeout=60)
        if f"the {distribution} distribution" not in version.stdout or version.stderr:
            raise SmokeError(f"after {line!r}, mcpwire --version said {version.stdout!r} {version.stderr!r}")
        tail = [text for text in proc.stdout.splitlines() if text.strip()][-1:]
        say(f"  ok{': ' + tail[0] if tail else ''}")
    return f"the {len(lines)} install lines of README.md worked"


def main(argv: list[str] | None = None) -> int:
    return script(__doc__, argv, "mcpwire-readme-", try_lines)


if __name__ == "__main__":
    sys.exit(main())
