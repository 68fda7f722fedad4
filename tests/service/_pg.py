"""A real PostgreSQL server for tests: Debian's binaries, a temporary cluster on a loopback port.

``initdb`` refuses to run as root, so under root the cluster belongs to the ``postgres`` user (the
Debian package creates it) and the commands run through ``runuser``. Tests skip, with the reason,
only when the binaries are missing.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), reverse=True)
    return candidates[0].parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    port: int
    data: Path
    bin_dir: Path
    user: str | None  # the OS user the server runs as (None: ourselves)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://mcpwire@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _cmd(self, *argv: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else list(argv)

    def stop(self) -> None:
        subprocess.run(
            self._cmd(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"),
            capture_output=True,
            timeout=60,
        )


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (no pg_ctl on PATH or in /usr/lib/postgresql/*/bin)")
    user: str | None = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL as")
        user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="mcpwire-pg-"))
    data = root / "data"
    if user:
        shutil.chown(root, user)
    server = PostgresServer(port=_free_port(), data=data, bin_dir=bin_dir, user=user)
    try:
        init = subprocess.run(
            server._cmd(str(bin_dir / "initdb"), "-D", str(data), "-U", "mcpwire", "--auth=trust", "-E", "UTF8",
                        "--no-sync"),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert init.returncode == 0, init.stderr
        options = f"-c listen_addresses=127.0.0.1 -c port={server.port} -c unix_socket_directories='' -c fsync=on"
        start = subprocess.run(
            server._cmd(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w",
                        "-t", "60", "start"),
            capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        if start.returncode != 0:
            log = (root / "log").read_text(errors="replace") if (root / "log").exists() else ""
            raise AssertionError(f"pg_ctl start failed: {start.stderr}\n{log}")
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
