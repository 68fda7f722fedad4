"""``mcpwire fuzz`` over HTTP: Streamable HTTP in both eras and the legacy HTTP+SSE transport.

The fixture server has the planted bugs of the stdio one; the fuzzer starts it itself (the
command after ``--``) and restarts it after each planted crash, so the crash still shrinks to
its minimal input. Small runs (one tool, one protocol kind) keep this module cheap.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import BUGGY_HTTP, by_key, call_arguments, free_port, our_children, run_cli, run_json
from mcpwire.fuzz.trace import load_trace, replay

DEADLINE = "0.3"


def _command(port: int, *flags: str) -> list[str]:
    return [sys.executable, BUGGY_HTTP, str(port), *flags]


def _small_run(tmp_path: Path, url: str, command: list[str]) -> tuple[int, dict[str, object]]:
    return run_json(
        ["--seed", "7", "--deadline", DEADLINE, "--max-examples", "40", "--out", str(tmp_path), "--allow", "greet",
         "--phase", "tools", "--phase", "protocol", "--protocol-kind", "notifications", url, "--", *command]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("path", "flags", "transport", "era"),
    [
        ("/mcp", (), "streamable-http", "legacy"),
        ("/mcp", ("--modern",), "streamable-http", "modern"),
        ("/sse", (), "sse", "legacy"),
    ],
)
def test_planted_bugs_are_found_and_shrunk_over_http(
    tmp_path: Path, path: str, flags: tuple[str, ...], transport: str, era: str
) -> None:
    """The crash on "" shrinks to exactly "" (the server restarted after each crash) and the
    answered notification is found; 2026-07-28 requests carry the headers the fixture checks."""
    port = free_port()
    url = f"http://127.0.0.1:{port}{path}"
    status, report = _small_run(tmp_path, url, _command(port, *flags))
    server = report["server"]
    assert isinstance(server, dict) and (server["transport"], server["era"], server["url"]) == (transport, era, url)
    assert status == 1
    found = by_key(report)  # type: ignore[arg-type]
    expected = {("server-alive", "greet")}
    if era == "legacy":  # 2026-07-28 has no client notifications but cancellation, which it gets right
        expected.add(("notification-silence", None))
    assert set(found) == expected
    assert call_arguments(found[("server-alive", "greet")]) == {"name": ""}
    text = Path(found[("server-alive", "greet")]["trace"]).read_text(encoding="utf-8")
    header, _ = load_trace(text)
    assert header["target"]["url"] == url and header["target"]["transport"] == transport
    assert replay(text).reproduced  # the recorded command is started again on the same port
    assert our_children(BUGGY_HTTP) == []


def test_headers_go_with_the_replays_but_never_into_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server behind a bearer token (401 without it): the run, ``--replay`` and the generated
    pytest file all send the ``--header`` given to them (the file reads it from
    MCPWIRE_FUZZ_HEADERS); no trace, report or file holds the token, only the header's name."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    secret = "s3cret-token-1f2e"
    auth = ["--header", f"Authorization: Bearer {secret}", "--env", f"BUGGY_TOKEN={secret}"]
    out = tmp_path / "out"
    status, report = run_json(
        ["--seed", "7", "--deadline", DEADLINE, "--max-examples", "20", "--allow", "greet", "--phase", "tools",
         *auth, "--out", str(out), url, "--", *_command(port)]
    )  # fmt: skip
    assert status == 1
    server = report["server"]
    assert isinstance(server, dict) and server["headers"] == ["Authorization"] and server["env"] == ["BUGGY_TOKEN"]
    finding = by_key(report)[("server-alive", "greet")]  # type: ignore[arg-type]
    assert call_arguments(finding) == {"name": ""}
    written = sorted(out.iterdir())
    assert [p.suffix for p in written] == [".jsonl", ".py"]
    assert all(secret not in p.read_text(encoding="utf-8") for p in written)
    trace = finding["trace"]

    assert run_cli(["--replay", trace, "--yes", *auth])[0] == 1
    monkeypatch.setenv("FUZZ_TEST_TOKEN", secret)  # the same header, from the environment
    assert run_cli(["--replay", trace, "--yes", "--bearer-env", "FUZZ_TEST_TOKEN", *auth[2:]])[0] == 1
    monkeypatch.delenv("FUZZ_TEST_TOKEN")
    status, _, err = run_cli(["--replay", trace, "--yes", "--bearer-env", "FUZZ_TEST_TOKEN", *auth[2:]])
    assert status == 2
    assert err == "mcpwire fuzz: --bearer-env FUZZ_TEST_TOKEN: that environment variable is not set or empty\n"
    status, _, err = run_cli(["--replay", trace, "--yes", "--env", f"BUGGY_TOKEN={secret}"])
    assert status == 0  # refused with 401: the planted crash is never reached
    assert "recorded with the HTTP header(s) Authorization; give their values with --header" in err

    test_file = Path(finding["test"])
    source = test_file.read_text(encoding="utf-8")
    assert "The server was fuzzed with the HTTP header(s) Authorization: set MCPWIRE_FUZZ_HEADERS" in source
    namespace: dict[str, Any] = {"__file__": str(test_file)}
    exec(compile(source, str(test_file), "exec"), namespace)
    [generated] = [f for name, f in namespace.items() if name.startswith("test_")]
    monkeypatch.setenv("BUGGY_TOKEN", secret)  # the trace names it: the generated test passes it on
    monkeypatch.setenv("MCPWIRE_FUZZ_HEADERS", json.dumps({"Authorization": f"Bearer {secret}"}))
    with pytest.raises(AssertionError, match=r"\[server-alive\]"):
        generated()  # the bug is there: the generated test fails
    monkeypatch.delenv("MCPWIRE_FUZZ_HEADERS")
    generated()  # without the header the server refuses everything: nothing reproduces
    assert our_children(BUGGY_HTTP) == []


@pytest.fixture
def fixed_server() -> Iterator[str]:
    """A server the fuzzer does not start: a URL only."""
    port = free_port()
    proc = subprocess.Popen(_command(port, "--fixed"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def _wait_listening(port: int) -> None:
    import socket

    until = time.monotonic() + 20
    while time.monotonic() < until:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise AssertionError(f"nothing listens on {port}")


def test_a_url_alone_is_fuzzed_in_every_phase(tmp_path: Path, fixed_server: str) -> None:
    status, report = run_json(
        ["--seed", "1", "--max-examples", "8", "--machine-runs", "2", "--deadline", "5", "--out", str(tmp_path),
         "--deny", "launch", fixed_server]
    )  # fmt: skip
    assert (status, report["findings"], report["error"]) == (0, [], None)
    units = [u["unit"] for u in report["units"]]  # type: ignore[index]
    assert "protocol-malformed" in units and "stateful" in units and "lists" in units
    assert "protocol-framing" not in units  # a body is a message: no framing over HTTP


def test_unreachable_url_exits_two() -> None:
    status, _, err = run_cli(["--connect-timeout", "2", f"http://127.0.0.1:{free_port()}/mcp"])
    assert status == 2 and "answered neither" in err


def test_port_in_use_is_refused_before_starting_the_server(fixed_server: str) -> None:
    port = int(fixed_server.rsplit(":", 1)[1].split("/")[0])
    status, _, err = run_cli([fixed_server, "--", *_command(port)])
    assert status == 2 and f"something already listens on 127.0.0.1:{port}" in err
