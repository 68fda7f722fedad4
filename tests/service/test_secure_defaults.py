"""``mcpwire serve`` as shipped: a token on loopback too, files only its user can read, and
authentication off only when asked for, on loopback, with a warning. Real processes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from _process import READY_LINE, clean_env, start_serve

pytestmark = pytest.mark.slow


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def private(folder: Path) -> dict[str, int]:
    """The permission bits of the data folder and of every file in it."""
    found = {".": mode(folder)}
    for path in folder.rglob("*"):
        found[str(path.relative_to(folder))] = mode(path)
    return found


def test_a_fresh_loopback_start_makes_a_token_and_keeps_everything_private(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    data = tmp_path / "data" / "mcpwire"
    serve = start_serve(["--port", "0"], cwd=tmp_path, env=env)
    try:
        lines = serve.read_until(READY_LINE, timeout=90)
        [link] = [line.split(None, 2)[2] for line in lines if line.startswith("sign in ")]
        token = link.rsplit("token=", 1)[1]
        assert (data / "token").read_text().strip() == token
        # every endpoint but the probes needs it, loopback or not: no command runs for a stranger
        entry = {"name": "sh", "command": "sh", "args": ["-c", "touch pwned"]}
        refused = httpx.post(f"{serve.url}/api/v1/servers", json=entry)
        assert refused.status_code == 401
        assert not (tmp_path / "pwned").exists()
        assert httpx.get(f"{serve.url}/healthz").status_code == 200
        # the command line finds the token of the service on that port by itself
        tools = subprocess.run(
            [sys.executable, "-m", "mcpwire", "tools", serve.url.replace("/api/v1", "") + "/mcp"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert tools.returncode == 0, tools.stderr
        assert "demo__echo" in tools.stdout
        modes = private(data)
        folders = (".", "run", "service.db-audit")  # (the last: the audit journals)
        assert {name: modes[name] for name in folders} == dict.fromkeys(folders, 0o700)
        assert {name: bits for name, bits in modes.items() if name not in folders} == {
            name: 0o600 for name in modes if name not in folders
        }
        assert {"token", "service.db", "service.db-wal", "service.db-shm"} <= set(modes)
        # a write (a token made through the API) leaves them so
        made = httpx.post(
            f"{serve.url}/api/v1/tokens",
            json={"name": "ci", "role": "caller"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert made.status_code == 201
        assert set(private(data).values()) <= {0o700, 0o600}
        assert serve.stop() == 0
    finally:
        serve.kill()
    assert not list((data / "run").iterdir())  # the note for the command line is gone with it
    # the next start keeps the same token
    again = start_serve(["--port", "0"], cwd=tmp_path, env=env)
    try:
        lines = again.read_until(READY_LINE, timeout=90)
        assert any(line.endswith(f"token={token}") for line in lines)
    finally:
        again.kill()


def test_a_store_readable_by_others_is_tightened_and_said_so(tmp_path: Path) -> None:
    data = tmp_path / "data" / "mcpwire"
    data.mkdir(parents=True)
    os.chmod(data, 0o755)
    database = data / "service.db"
    database.touch()
    os.chmod(database, 0o644)
    serve = start_serve(["--port", "0", "-v"], cwd=tmp_path, env=clean_env(tmp_path))
    try:
        serve.read_until(READY_LINE, timeout=90)
        assert mode(data) == 0o700 and mode(database) == 0o600
        serve.stop()
        err = serve.proc.stderr.read().decode() if serve.proc.stderr else ""
    finally:
        serve.kill()
    assert f"{data} was readable by other users (mode 755); it is now 0700" in err
    assert f"{database} was readable by other users (mode 644); it is now 600" in err


def test_authentication_is_off_only_when_asked_on_loopback_and_with_a_warning(tmp_path: Path) -> None:
    serve = start_serve(["--port", "0", "--no-auth"], cwd=tmp_path, env=clean_env(tmp_path))
    try:
        lines = serve.read_until(READY_LINE, timeout=90)
        assert "token     none: authentication is off (--no-auth)" in lines
        assert httpx.get(f"{serve.url}/api/v1/servers").status_code == 200
        serve.stop()
        err = serve.proc.stderr.read().decode() if serve.proc.stderr else ""
    finally:
        serve.kill()
    assert "WARNING: authentication is off (--no-auth)" in err
    assert not (tmp_path / "data" / "mcpwire" / "token").exists()
    for args, env, message in [
        (["--no-auth", "--host", "0.0.0.0"], {}, "--no-auth: only on a loopback address, not 0.0.0.0"),
        (["--no-auth"], {"MCPWIRE_TOKEN": "t" * 20}, "--no-auth and a token: choose one"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "mcpwire", "serve", "--port", "0", *args],
            cwd=tmp_path,
            env=clean_env(tmp_path, **env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stderr) == (2, f"mcpwire serve: {message}\n")
