"""The checker's own security and honesty, each against a hostile server of its own (``hostile/``):
credentials never leave for another origin or reach a report, the server gets a minimal
environment, hostile text and depth cannot break an output, handshake violations are findings,
signals end a run cleanly, and what the harness keeps is bounded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import trio
from _targets import fixture_argv, http_server
from mcpwire.conformance.cli import main
from mcpwire.conformance.harness import KEEP_FRAMES, MAX_QUEUED_FRAMES, open_wire
from mcpwire.conformance.report import JSON_SCHEMA

from mcpwire.transports import DEFAULT_INHERITED_ENV

HOSTILE = Path(__file__).parent / "hostile"
sys.path.insert(0, str(HOSTILE))

from sse_elsewhere import serving  # noqa: E402


def hostile_argv(name: str, *args: str) -> list[str]:
    return [sys.executable, "-u", str(HOSTILE / f"{name}.py"), *args]


def _outputs(tmp_path: Path) -> list[str]:
    return ["--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"), "--html", str(tmp_path / "r.html")]


def _written(tmp_path: Path) -> str:
    return "".join((tmp_path / name).read_text(encoding="utf-8") for name in ("r.json", "r.xml", "r.html"))


# -- HS-02: an HTTP+SSE endpoint on another origin ------------------------------------------------


def test_an_sse_endpoint_on_another_origin_gets_nothing_and_fails_hs02(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving() as (url, collected):
        argv = ["-q", "--header", "Authorization: Bearer hs02-topsecret", *_outputs(tmp_path), url]
        assert main(argv) == 1
    assert collected == []  # not one request reached the other origin, credentials or not
    out = capsys.readouterr().out
    head = r"^FAIL  HS-02 +MUST +HTTP +the HTTP\+SSE endpoint event names a URI on the stream's own"
    assert re.search(head, out, re.M)
    assert "named a POST endpoint on another origin (http://127.0.0.1:" in out
    report = json.loads((tmp_path / "r.json").read_text())
    jsonschema.Draft202012Validator(JSON_SCHEMA).validate(report)
    failed = [r for r in report["results"] if r["outcome"] == "fail"]
    assert {r["id"] for r in failed} == {"HS-02"}
    assert {r["revision"] for r in failed} == {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
    assert failed[0]["spec"]["url"] == (
        "https://modelcontextprotocol.io/specification/2024-11-05/basic/transports#http-with-sse"
    )
    others = {r["outcome"] for r in report["results"] if r["id"] != "HS-02"}
    assert others == {"skipped"}
    assert "hs02-topsecret" not in _written(tmp_path) + out


def test_an_sse_endpoint_with_userinfo_on_the_same_origin_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # the collector is another origin; userinfo on the stream's own origin is refused the same way
    with serving("http://user:pw@127.0.0.1:{collector}/messages") as (url, collected):
        port = url.split(":")[2].split("/")[0]
        with serving(f"http://user:pw@127.0.0.1:{port}/messages") as (same_origin, _):
            assert main(["-q", "--only", "HS-02", "--revision", "2025-11-25", same_origin]) == 1
    assert collected == []
    out = capsys.readouterr().out
    assert "user:pw" not in out


# -- a minimal environment for stdio servers ------------------------------------------------------


def test_a_stdio_server_gets_the_minimal_environment_plus_what_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI_DEPLOY_TOKEN", "ci-secret-value")
    monkeypatch.setenv("MCPWIRE_PASSED", "passed-value")
    dump = tmp_path / "env.json"
    argv = ["-q", "--only", "SV-12", "--revision", "2025-11-25", "--env", "EXTRA=1", "--env-pass", "MCPWIRE_PASSED"]
    assert main([*argv, "--", *hostile_argv("env_dump", str(dump))]) == 0
    env = json.loads(dump.read_text())
    assert "CI_DEPLOY_TOKEN" not in env
    assert (env["EXTRA"], env["MCPWIRE_PASSED"]) == ("1", "passed-value")
    assert set(env) <= {*DEFAULT_INHERITED_ENV, "EXTRA", "MCPWIRE_PASSED"}


def test_env_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--env", "NO_EQUALS", "--", sys.executable, "-c", "pass"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "mcpwire check: --env takes KEY=VALUE, not 'NO_EQUALS'"
    assert main(["--env-pass", "MCPWIRE_SURELY_UNSET", "--", sys.executable, "-c", "pass"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "mcpwire check: --env-pass MCPWIRE_SURELY_UNSET: that variable is not set"
    )


# -- credentials given by the user appear in no output ----------------------------------------------


async def test_header_values_are_masked_in_every_output_whatever_their_name(tmp_path: Path) -> None:
    secret = "plain-header-value-42"
    async with http_server(fixture_argv("no_host_check")) as url:
        argv = ["--header", f"X-Tenant: {secret}", "--only", "SV-22b", "--revision", "2025-11-25", url]

        def check() -> tuple[int, str]:
            import contextlib
            import io

            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = main(["-v", *argv, *_outputs(tmp_path)])
            return code, out.getvalue()

        code, terminal = await trio.to_thread.run_sync(check)
    assert code == 0  # SV-22b is a SHOULD: a warning with its evidence
    report = json.loads((tmp_path / "r.json").read_text())
    (result,) = report["results"]
    assert result["outcome"] == "warning" and result["http"]
    assert result["http"][0]["request_headers"]["X-Tenant"] == "***"
    assert secret not in _written(tmp_path) + terminal


async def test_config_headers_are_masked_too(tmp_path: Path) -> None:
    secret = "config-header-value-77"
    async with http_server(fixture_argv("no_host_check")) as url:
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"h": {"type": "http", "url": url, "headers": {"X-K": secret}}}}))
        argv = ["-q", "--config", str(config), "--only", "SV-22b", "--revision", "2025-11-25", *_outputs(tmp_path), "h"]
        assert await trio.to_thread.run_sync(main, argv) == 0
    assert secret not in _written(tmp_path)
    assert "***" in (tmp_path / "r.json").read_text()


async def test_credentials_in_the_url_are_redacted_everywhere(tmp_path: Path) -> None:
    async with http_server(fixture_argv("no_host_check")) as url:
        secret_url = url.replace("http://", "http://alice:url-pass-99@") + "?api_key=query-key-99&x=1"
        argv = ["-v", "--only", "SV-22b", "--revision", "2025-11-25", *_outputs(tmp_path), secret_url]
        code = await trio.to_thread.run_sync(main, argv)
    assert code == 0
    written = _written(tmp_path)
    assert "url-pass-99" not in written and "query-key-99" not in written
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["target"].startswith("http://***@127.0.0.1:") and report["target"].endswith("?api_key=***&x=1")


def test_credentials_in_the_command_line_are_redacted_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "env.json"
    command = [*hostile_argv("env_dump", str(dump)), "--api-key", "argv-key-1234", "--token=argv-token-5678"]
    argv = ["--only", "SV-12,SV-02", "--revision", "2025-11-25", *_outputs(tmp_path), "--", *command]
    assert main(argv) == 0
    out = capsys.readouterr()
    written = _written(tmp_path) + out.out + out.err
    assert "argv-key-1234" not in written and "argv-token-5678" not in written
    target = json.loads((tmp_path / "r.json").read_text())["target"]
    assert target.endswith("--api-key *** --token=***")


# -- hostile text and depth --------------------------------------------------------------------------


def test_the_terminal_uses_the_shared_sanitiser(capsys: pytest.CaptureFixture[str]) -> None:
    from mcpwire.conformance.report import terminal

    from mcpwire import redaction

    assert terminal.clean_terminal is redaction.clean_terminal
    assert main(["-v", "--only", "SV-12", "--revision", "2025-11-25", "--", *hostile_argv("hostile_text")]) == 1
    out = capsys.readouterr().out
    # no escape sequence, bell, carriage return or bidi mark reaches the terminal; each is shown
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e]", out)
    assert "\\u200fRLM\\u061cALM" in out


@pytest.mark.slow
def test_every_output_survives_an_answer_nested_200000_levels_deep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["-v", "--only", "SV-12", "--revision", "2025-11-25", *_outputs(tmp_path), "--", *hostile_argv("deep")]
    assert main(argv) == 1
    assert "FAIL  SV-12" in capsys.readouterr().out
    report = json.loads((tmp_path / "r.json").read_text())
    (result,) = report["results"]
    received = [e["text"] for e in result["exchange"] if e["direction"] == "received"]
    assert received[-1].startswith('{"jsonrpc":"2.0","id":') and received[-1].endswith("more characters)")
    ET.parse(tmp_path / "r.xml")
    page = (tmp_path / "r.html").read_text()
    assert page.rstrip().endswith("</html>") and 'data-id="SV-12"' in page


# -- handshake violations are findings ------------------------------------------------------------------

HANDSHAKE = [
    ("no-version", "SV-09", "the initialize result has no protocolVersion"),
    ("id-type", "SV-02", 'initialize was sent with id 1 (int) and answered with id "1" (str)'),
    ("array", "SV-07", "initialize (id 1) was sent alone and answered with a JSON array (a batch response)"),
]


@pytest.mark.parametrize(("mode", "check_id", "message"), HANDSHAKE)
def test_a_broken_handshake_is_a_failed_check_and_the_other_revisions_are_checked(
    mode: str, check_id: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["-q", "--only", "SV-12,SV-13", "--json", str(tmp_path / "r.json")]
    assert main([*argv, "--", *hostile_argv("handshake", mode, "2025-06-18")]) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    jsonschema.Draft202012Validator(JSON_SCHEMA).validate(report)
    by_key = {(r["id"], r["revision"]): r for r in report["results"]}
    broken = by_key[(check_id, "2025-06-18")]
    assert broken["outcome"] == "fail" and broken["reason"].startswith(message)
    assert broken["spec"]["url"].startswith("https://modelcontextprotocol.io/specification/2025-06-18/")
    assert [e["direction"] for e in broken["exchange"]][:2] == ["sent", "received"]  # the probe's exchange
    assert by_key[("SV-12", "2025-06-18")]["outcome"] == "skipped"
    # the other revisions are checked as usual
    assert by_key[("SV-12", "2025-11-25")]["outcome"] == "pass"
    assert by_key[("SV-13", "2026-07-28")]["outcome"] == "pass"
    probe = next(p for p in report["probes"] if p["revision"] == "2025-06-18")
    assert probe["violation"]["check_id"] == check_id
    out = capsys.readouterr().out
    assert f"handshake broken in 2025-06-18: {check_id} (see below)" in out


def test_an_unknown_counter_offer_is_judged_by_sv09_not_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["-q", "--only", "SV-09", "--revision", "2025-06-18", "--json", str(tmp_path / "r.json")]
    assert main([*argv, "--", *hostile_argv("handshake", "bad-version", "2025-06-18")]) == 1
    (result,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert (result["id"], result["outcome"]) == ("SV-09", "fail")
    assert "'1999-01-01'" in result["reason"]


def test_a_server_that_answers_nothing_still_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-q", "--timeout", "0.5", "--", sys.executable, "-c", "import sys; sys.stdin.read()"])
    assert code == 2
    assert "accepted no protocol revision" in capsys.readouterr().err


# -- signals ------------------------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_the_run_cleanly_and_stops_the_server(sig: int, code: int, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    command = [sys.executable, "-m", "mcpwire", "check", "--timeout", "60", "--", *hostile_argv("silent", str(pidfile))]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the server never started"
            assert process.poll() is None
            time.sleep(0.05)
        server = int(pidfile.read_text())
        process.send_signal(sig)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == code, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "mcpwire check: interrupted; every server process was shut down"
    assert not _alive(server)


# -- bounded memory -------------------------------------------------------------------------------------------


async def test_a_flood_is_bounded_in_the_queue_and_in_the_records() -> None:
    count = 3 * KEEP_FRAMES
    async with open_wire(hostile_argv("flood", str(count))) as wire:
        answer = await wire.request("ping", {}, timeout=30)
        assert answer["result"] == {}
        assert len(wire.frames) == count + 1  # every frame counted
        assert wire.frames.dropped == count + 1 - 2 * KEEP_FRAMES  # the first and last kept
        assert wire.frames[-1].value == answer
        assert len(list(wire.frames)) == 2 * KEEP_FRAMES
        assert len(wire.exchanges) == count + 2 and wire.exchanges.dropped > 0
        queue = wire._receive.statistics() if wire._receive is not None else None
        assert queue is not None and queue.current_buffer_used <= MAX_QUEUED_FRAMES
