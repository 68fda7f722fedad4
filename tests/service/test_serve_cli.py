"""``mcpwire serve`` as a user runs it: start-up lines, refusals, draining and a clean exit."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from _harness import demo_entry, write_config
from _process import READY_LINE, clean_env, processes_with, start_serve


def run_serve(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpwire", "serve", *args],
        cwd=tmp_path,
        env=clean_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_refusals_are_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = run_serve(["--host", "0.0.0.0"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "mcpwire serve: refusing to listen on 0.0.0.0: a non-loopback address needs a token (set $MCPWIRE_TOKEN "
        "or pass --token-file FILE), or listen on 127.0.0.1\n"
    )
    proc = run_serve(["--host", "0.0.0.0"], tmp_path, MCPWIRE_TOKEN="short")
    assert proc.stderr == "mcpwire serve: $MCPWIRE_TOKEN: the token must be at least 16 characters\n"
    proc = run_serve(["--db", "mysql://u:pw@h/d", "--port", "0"], tmp_path)
    assert proc.returncode == 2
    assert (
        proc.stderr == "mcpwire serve: --db 'mysql://***@h/d': expected sqlite:///PATH or postgresql://USER@HOST/DB\n"
    )
    proc = run_serve(["--config", str(tmp_path / "missing.json"), "--port", "0"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"mcpwire serve: config file '{tmp_path / 'missing.json'}' does not exist\n"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_serve(["--port", str(port)], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == f"mcpwire serve: cannot listen on 127.0.0.1:{port}: Address already in use"


@pytest.mark.slow
def test_start_up_lines_serve_and_stop_on_sigterm(tmp_path: Path) -> None:
    marker = f"MCPWIRE_TEST_MARKER={uuid.uuid4().hex}"
    key, value = marker.split("=")
    config = write_config(
        tmp_path / "mcp.json",
        {
            "demo": {**demo_entry(), "env": {key: value}},
            "broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"], "env": {key: value}},
            "off": {**demo_entry(), "enabled": False},
        },
    )
    serve = start_serve(
        ["--config", str(config), "--port", "0", "--db", f"sqlite:///{tmp_path / 's.db'}"],
        cwd=tmp_path,
        env=clean_env(tmp_path),
    )
    try:
        lines = serve.read_until(READY_LINE)
        assert lines[0] == "mcpwire serve 0.1.0"
        assert lines[1] == "  demo             stdio  modern 2026-07-28  11 tools"
        assert lines[2].startswith("  broken           stdio  error: ") and lines[2].endswith(" (retrying)")
        assert lines[3] == "  off              stdio  disabled"
        assert serve.url.startswith("http://127.0.0.1:")
        token = (tmp_path / "data" / "mcpwire" / "token").read_text().strip()
        assert lines[-4:] == [
            f"database  sqlite:///{tmp_path / 's.db'}",
            f"sign in   {serve.url}/login?token={token}",
            f"token     {tmp_path / 'data' / 'mcpwire' / 'token'} (the mcpwire command line finds it)",
            READY_LINE,
        ]
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=serve.url, timeout=30, headers=auth) as client:
            assert client.get("/healthz").status_code == 200
            assert [s["name"] for s in client.get("/api/v1/servers").json()["items"]] == ["demo", "broken", "off"]
            assert processes_with(marker)
            # a call in flight when SIGTERM arrives completes
            outcome: dict[str, httpx.Response] = {}

            def slow_call() -> None:
                outcome["reply"] = client.post("/api/v1/tools/demo__slow/call", json={"arguments": {"seconds": 2}})

            caller = threading.Thread(target=slow_call)
            caller.start()
            time.sleep(0.5)  # the call is on its way (it takes 2 s)
            assert serve.stop(signal.SIGTERM) == 0
            caller.join(30)
        assert outcome["reply"].status_code == 200, outcome["reply"].text
        assert outcome["reply"].json()["text"] == "done after 5 steps"
        assert serve.rest().strip() == "mcpwire serve: stopped"
        assert processes_with(marker) == []
    finally:
        serve.kill()


@pytest.mark.slow
def test_no_config_anywhere_serves_the_demo_server_and_sigint_exits_0(tmp_path: Path) -> None:
    serve = start_serve(["--port", "0"], cwd=tmp_path, env=clean_env(tmp_path))
    try:
        lines = serve.read_until(READY_LINE)
        assert "  demo             stdio  modern 2026-07-28  11 tools" in lines
        assert f"database  sqlite:///{tmp_path / 'data' / 'mcpwire' / 'service.db'}" in lines
        token = (tmp_path / "data" / "mcpwire" / "token").read_text().strip()
        with httpx.Client(base_url=serve.url, timeout=30, headers={"Authorization": f"Bearer {token}"}) as client:
            reply = client.post("/api/v1/tools/demo__echo/call", json={"arguments": {"text": "hi"}})
            assert reply.json()["text"] == "hi"
        assert serve.stop(signal.SIGINT) == 0
        assert serve.proc.stderr is not None
        assert b"Traceback" not in serve.proc.stderr.read()
    finally:
        serve.kill()


def test_help_names_every_option(tmp_path: Path) -> None:
    proc = run_serve(["--help"], tmp_path)
    assert proc.returncode == 0
    for option in ("--config", "--host", "--port", "--db", "--stdio", "--namespacing", "--token-file", "--no-auth",
                   "--allowed-host", "--cors-origin", "--rate-limit", "--max-body", "--drain-timeout", "--certfile",
                   "--keyfile", "--forwarded-allow-ips", "--max-connections-per-client"):  # fmt: skip
        assert option in proc.stdout
    assert "mcpwire serve --stdio --namespacing off" in proc.stdout


def test_a_project_local_config_is_not_run_without_trust(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "mcp.json").write_text(
        json.dumps({"mcpServers": {"p": {"command": "sh", "args": ["-c", f"touch {marker}"]}}})
    )
    proc = run_serve(["--port", "0"], tmp_path)
    assert proc.returncode == 2
    assert "mcp.json" in proc.stderr and "--yes" in proc.stderr
    assert not marker.exists()
