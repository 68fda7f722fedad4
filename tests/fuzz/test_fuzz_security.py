"""``mcpwire fuzz`` pointed at a hostile server: nothing the server says runs, reaches a terminal raw,
or gets the user's secrets; servers get a minimal environment; signals leave no server behind.

Each test has a hostile fake server of its own: ``fixtures/fuzz_hostile_server.py`` (stdio, faults behind
flags), the HTTP fixture, or a small SSE server in this module that points its POST endpoint at
another origin.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from _support import BUGGY, BUGGY_HTTP, FIXTURES, free_port, run_cli, run_json
from mcpwire.fuzz.exchange import Observation, Profile, request
from mcpwire.fuzz.oracles import Violation
from mcpwire.fuzz.runner import Finding
from mcpwire.fuzz.trace import load_trace, pytest_source, trace_lines
from mcpwire.fuzz.wire import Entry

HOSTILE = str(FIXTURES / "fuzz_hostile_server.py")
#: what a terminal must never get raw from a server: ESC, BEL, NUL, CR, backspace, bidi overrides
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

#: text a server may send that would break out of a Python literal or a docstring, or act on a terminal
HOSTILE_TEXTS = [
    'x""" ; __import__("os").system("touch /tmp/mcpwire-pwned") ; """',
    "x''' ; __import__('os').system('touch /tmp/mcpwire-pwned') ; '''",
    "\\",
    "\\\\'\\\"",
    "{__import__('os')}",
    "\n# -*- coding: rot13 -*-\nimport os\n",
    "\x1b[2J\x1b]0;title\x07\u202eevil\u202c\x00\r\x08",
    "\ud800 lone \udfff",
    "\u2028\u2029",
    "'''\"\"\"\n'''",
]


def _finding(message: str, tool: str | None) -> tuple[Finding, Profile]:
    profile = Profile({"transport": "stdio", "argv": ["server", message]}, "legacy", "2025-11-25")
    profile.tools = [{"name": tool or "t", "outputSchema": {"type": "object", "description": message}}]
    step = request(1, "tools/call", {"name": tool, "arguments": {"x": message}}, tool=tool)
    obs = Observation([step])
    obs.stderr_tail = message
    violation = Violation("server-alive", message, 0)
    entries = [
        Entry.of_bytes("send", 0.0, step.line),
        Entry("recv", 0.1, data=message),
        Entry("note", 0.2, data=message),
    ]
    return Finding(violation, "tools", tool, obs, entries, violations=[violation]), profile


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_generated_files_carry_no_server_text_and_always_compile(text: str) -> None:
    """A finding whose message, tool name, stderr tail and answers are hostile: the pytest file
    compiles, holds none of it (it reads the trace as JSON), and each trace line is JSON with no raw
    control character, bidi override or lone surrogate."""
    finding, profile = _finding(text, text)
    source = pytest_source("finding_01_server_alive_x.jsonl", finding, 0.5, ["Authorization", 'x"\n'])
    compile(source, "test_generated.py", "exec")
    assert text not in source and "__import__" not in source and "touch" not in source
    assert 'x"' not in source  # a header name that is not a token is not written either
    for line in trace_lines(finding, profile, 0.5):
        json.loads(line)
        assert not RAW_CONTROLS.search(line) and not re.search("[\ud800-\udfff\u2028\u2029]", line)
    with pytest.raises(ValueError, match=r"^not a trace file name the fuzzer writes: '\.\./x\.py'$"):
        pytest_source("../x.py", finding, 0.5)


def test_a_server_that_attacks_through_stderr_and_tool_names_runs_nothing(tmp_path: Path) -> None:
    """End to end: the server's stderr holds terminal escapes and a line that would
    close a docstring and run code, and one of its tools is named and described the same way. The
    generated test file holds none of it and runs nothing when collected; the report, the terminal
    output and the findings' messages have no raw control character."""
    marker = Path("/tmp/mcpwire-pwned")
    marker.unlink(missing_ok=True)
    out = tmp_path / "out"
    status, stdout, stderr = run_cli(
        ["-v", "--seed", "1", "--max-examples", "3", "--phase", "tools", "--tools", "crash", "--out", str(out),
         "--", sys.executable, HOSTILE, "--stderr-attack", "--hostile-names"]
    )  # fmt: skip
    assert status == 1, stderr[-2000:]
    assert "ERROR [server-alive] crash: the server exited (status 7)" in stdout
    assert "stderr: \\x1b[31mred\\x1b[0m \\x1b]0;title\\x07 \\u202eevil\\u202c \\x00" in stdout  # shown escaped
    assert not RAW_CONTROLS.search(stdout) and not RAW_CONTROLS.search(stderr)
    [test_file] = out.glob("test_*.py")
    source = test_file.read_text(encoding="utf-8")
    assert "import os" not in source and "pwned" not in source and '"""' not in source.split('"""', 2)[2]
    namespace: dict[str, Any] = {"__file__": str(test_file)}
    exec(compile(source, str(test_file), "exec"), namespace)  # collecting it runs nothing of the server's
    assert not marker.exists()
    [trace_file] = out.glob("finding_*.jsonl")
    for line in trace_file.read_text(encoding="utf-8").splitlines():
        assert not RAW_CONTROLS.search(line)
    header, _ = load_trace(trace_file.read_text(encoding="utf-8"))
    assert "\\x1b" in header["finding"]["message"] and "\x1b" not in header["finding"]["message"]


def test_servers_get_a_minimal_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our environment (a CI secret in it) does not reach the server; --env and --env-pass do."""
    monkeypatch.setenv("CI_SECRET_TOKEN", "very-secret-value")
    monkeypatch.setenv("PASSED_ON", "1")
    dump = tmp_path / "env.json"
    status, _, stderr = run_cli(
        ["-q", "--phase", "lists", "--env", "GIVEN=yes", "--env-pass", "PASSED_ON", "--out", str(tmp_path / "o"),
         "--", sys.executable, HOSTILE, "--env-dump", str(dump)]
    )  # fmt: skip
    assert status == 0, stderr
    names = set(json.loads(dump.read_text()))
    assert "CI_SECRET_TOKEN" not in names
    assert {"GIVEN", "PASSED_ON", "PATH", "MCPWIRE_FUZZ_CANARY_TOKEN"} <= names
    assert names <= {"GIVEN", "PASSED_ON", "MCPWIRE_FUZZ_CANARY_TOKEN", "HOME", "LOGNAME", "PATH", "SHELL", "TERM",
                     "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"}  # fmt: skip
    status, _, err = run_cli(["--env-pass", "NOT_SET_ANYWHERE", "--", sys.executable, HOSTILE])
    assert (status, err) == (
        2,
        "mcpwire fuzz: --env-pass NOT_SET_ANYWHERE: NOT_SET_ANYWHERE is not set in this environment\n",
    )


def test_an_http_server_the_fuzzer_starts_gets_a_minimal_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI_SECRET_TOKEN", "very-secret-value")
    port = free_port()
    dump = tmp_path / "env.json"
    wrapper = (
        "import json, os, sys; json.dump(sorted(os.environ), open(sys.argv[1], 'w')); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
    )
    status, _, stderr = run_cli(
        ["-q", "--phase", "lists", "--out", str(tmp_path / "o"), f"http://127.0.0.1:{port}/mcp",
         "--", sys.executable, "-c", wrapper, str(dump), BUGGY_HTTP, str(port)]
    )  # fmt: skip
    assert status == 0, stderr
    names = set(json.loads(dump.read_text()))
    assert "CI_SECRET_TOKEN" not in names and "PATH" in names


# -- HTTP+SSE: an endpoint on another origin --------------------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """The other origin: records every request it gets (it must get none)."""

    seen: ClassVar[list[dict[str, str]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        _Recorder.seen.append(dict(self.headers))
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _sse_handler(elsewhere: str) -> type[BaseHTTPRequestHandler]:
    class Sse(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            port = self.server.server_address[1]
            self.wfile.write(f"event: endpoint\ndata: {elsewhere.format(port=port)}\n\n".encode())
            self.wfile.flush()
            time.sleep(3)

    return Sse


@contextlib.contextmanager
def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("how", ["another port", "userinfo"])
def test_an_sse_endpoint_on_another_origin_is_refused_as_a_finding(tmp_path: Path, how: str) -> None:
    """The SSE stream announces a POST endpoint on another origin (or with userinfo): the
    fuzzer POSTs nothing there (the Authorization header never leaves), reports it as a finding and
    stops (exit 1)."""
    _Recorder.seen = []
    with _serve(_Recorder) as other:
        elsewhere = f"http://127.0.0.1:{other}/steal" if how == "another port" else "http://me:pw@127.0.0.1:{port}/x"
        with _serve(_sse_handler(elsewhere)) as port:
            status, report = run_json(
                ["--header", "Authorization: Bearer tok-123456", "--connect-timeout", "3", "--out", str(tmp_path),
                 f"http://127.0.0.1:{port}/sse"]
            )  # fmt: skip
    assert _Recorder.seen == []
    assert status == 1
    [finding] = report["findings"]
    assert (finding["oracle"], finding["severity"], finding["phase"]) == ("sse-endpoint", "error", "connect")
    expected = "another origin" if how == "another port" else "userinfo or a fragment"
    assert expected in finding["message"] and "refusing it" in finding["message"]
    assert finding["spec"].startswith('2024-11-05 basic/transports §HTTP with SSE: "When a client connects')
    assert report["error"] == "the server's SSE endpoint was refused (nothing was sent to it); the run stopped"
    assert "tok-123456" not in Path(finding["trace"]).read_text(encoding="utf-8")


# -- credentials in the target ------------------------------------------------------------------------


@pytest.mark.slow
def test_credentials_in_a_command_or_url_are_redacted_everywhere(tmp_path: Path) -> None:
    """``--api-key X`` in the command, ``user:pass@`` and ``?api_key=`` in a URL: none of it is
    in the report, the terminal output, the traces or the generated tests; a replay of such a trace
    asks for the command (or URL) instead of running ``***``."""
    secrets = ["s3cr3t-value-1", "pa55word-2", "k3y-value-3"]
    out = tmp_path / "stdio"
    command = [sys.executable, BUGGY, "--api-key", secrets[0]]
    status, stdout, stderr = run_cli(
        ["-v", "--json", "--seed", "3", "--phase", "tools", "--allow", "greet", "--out", str(out), "--", *command]
    )  # fmt: skip
    assert status == 1
    report = json.loads(stdout)
    assert report["server"]["argv"] == [sys.executable, BUGGY, "--api-key", "***"]
    port = free_port()
    url = f"http://user:{secrets[1]}@127.0.0.1:{port}/mcp?api_key={secrets[2]}"
    http_out = tmp_path / "http"
    status, http_stdout, http_stderr = run_cli(
        ["-v", "--json", "--seed", "3", "--phase", "tools", "--allow", "greet", "--max-examples", "20",
         "--out", str(http_out), url, "--", sys.executable, BUGGY_HTTP, str(port)]
    )  # fmt: skip
    assert status == 1, http_stderr[-2000:]
    assert json.loads(http_stdout)["server"]["url"] == f"http://***@127.0.0.1:{port}/mcp?api_key=***"
    written = [p.read_text(encoding="utf-8") for d in (out, http_out) for p in d.iterdir()]
    for text in [stdout, stderr, http_stdout, http_stderr, *written]:
        assert not any(secret in text for secret in secrets)
    trace = next(str(p) for p in out.glob("finding_*.jsonl"))
    status, _, err = run_cli(["--replay", trace, "--yes"])
    assert (status, err.splitlines()[-1]) == (
        2,
        f"mcpwire fuzz: cannot replay {trace}: the recorded command holds redacted credentials: give the command "
        "after --",
    )
    assert run_cli(["--replay", trace, "--", *command])[0] == 1


@pytest.mark.slow
def test_headers_are_never_written_and_are_masked_in_output(tmp_path: Path) -> None:
    """Header values never reach a file, and a server echoing one back does not show it."""
    port = free_port()
    secret = "Bearer hdr-secret-98765"
    status, stdout, stderr = run_cli(
        ["-v", "--seed", "3", "--phase", "tools", "--allow", "greet", "--max-examples", "10", "--header",
         f"Authorization: {secret}", "--out", str(tmp_path), f"http://127.0.0.1:{port}/mcp",
         "--", sys.executable, BUGGY_HTTP, str(port)]
    )  # fmt: skip
    assert status == 1
    assert all(secret.split()[1] not in p.read_text(encoding="utf-8") for p in tmp_path.iterdir())
    assert secret.split()[1] not in stdout + stderr


# -- replay asks before running a recorded command ----------------------------------------------------------


def test_replay_shows_the_recorded_command_and_needs_yes(tmp_path: Path) -> None:
    """A trace names a command to start; off a terminal, --replay refuses without --yes and
    shows the command it would run (redacted); with --yes, or a command given after --, it runs."""
    status, report = run_json(
        ["--seed", "3", "--phase", "tools", "--allow", "greet", "--out", str(tmp_path), "--", sys.executable,
         BUGGY, "--token", "tok-hidden-1"]
    )  # fmt: skip
    trace = report["findings"][0]["trace"]
    status, stdout, stderr = run_cli(["--replay", trace])
    assert status == 2 and stdout == ""
    assert stderr.splitlines() == [
        f"mcpwire fuzz: the trace starts this command: {sys.executable} {BUGGY} --token ***",
        "mcpwire fuzz: --replay starts the command recorded in the trace; give --yes to allow it",
    ]
    assert run_cli(["--replay", trace, "--", sys.executable, BUGGY])[0] == 1


# -- signals ----------------------------------------------------------------------------------------------------


def _children(pid: int, marker: str) -> list[int]:
    """Processes (any depth) started by ``pid`` whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            if marker.encode() in (entry / "cmdline").read_bytes() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to find the server processes")
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_every_server_and_prints_no_traceback(tmp_path: Path, sig: int, status: int) -> None:
    """SIGTERM or SIGINT while a slow tool is being fuzzed: the fuzzer exits 143 / 130 with
    one line, no traceback, and the server it started is gone."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpwire.fuzz", "--tools", "sluggish", "--phase", "tools", "--deadline", "60",
         "--out", str(tmp_path), "--", sys.executable, HOSTILE, "--sluggish", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        until = time.monotonic() + 60
        servers: list[int] = []
        while time.monotonic() < until and not servers:
            servers = [p for p in _children(proc.pid, "fuzz_hostile_server.py") if _alive(p)]
            time.sleep(0.2)
        assert servers, "the fuzzer never started the server"
        time.sleep(1.0)  # the tool call is in flight
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == status, stderr
    assert "Traceback" not in stderr
    name = signal.Signals(sig).name
    assert re.search(
        rf"^mcpwire fuzz: interrupted \({name}\); stopped \d+ server process\(es\) still running$", stderr, re.M
    )
    assert not any(_alive(pid) for pid in servers)
