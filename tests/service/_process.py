"""``mcpwire serve`` as a real process: started, read until it serves, signalled, and checked for
leftover server processes."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

READY_LINE = "Ctrl+C stops."
_API = re.compile(r"^API\s+(https?://\S+)/api/v1\b")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A small environment: no user config found, data under ``home``."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "PYTHONUNBUFFERED": "1",
        "LANG": "C.UTF-8",
    }
    env.update(extra)
    return env


@dataclass
class ServeProcess:
    proc: subprocess.Popen[bytes]
    lines: list[str] = field(default_factory=list)
    url: str = ""
    _partial: bytes = b""

    def read_until(self, predicate: str, timeout: float = 60.0) -> list[str]:
        """Reads stdout lines until one contains ``predicate``; fails after ``timeout``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        seen = len(self.lines)
        while True:
            for line in self.lines[seen:]:
                seen += 1
                if predicate in line:
                    return self.lines
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line with {predicate!r} within {timeout}s; got {self.lines}")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise AssertionError(f"serve exited ({self.proc.wait()}) before {predicate!r}: {self.lines}\n{err}")
            *complete, self._partial = (self._partial + chunk).split(b"\n")
            for raw in complete:
                line = raw.decode(errors="replace")
                self.lines.append(line)
                match = _API.match(line)
                if match:
                    self.url = match.group(1)

    def rest(self) -> str:
        """Everything on stdout after what was read (once the process ended)."""
        assert self.proc.stdout is not None
        return (self._partial + self.proc.stdout.read()).decode(errors="replace")

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def start_serve(args: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> ServeProcess:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpwire", "serve", *args],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return ServeProcess(proc)


def processes_with(marker: str) -> list[int]:
    """Pids of processes whose environment holds ``marker`` (servers we started)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found
