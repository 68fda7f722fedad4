"""The checker's command line (exit codes 0/1/2, baseline) and its terminal, JSON and JUnit reports."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from _targets import fixture_argv
from mcpwire.conformance.cli import main
from mcpwire.conformance.evidence import ExchangeEntry, Redactor, WireRecord, collect
from mcpwire.conformance.model import SkipKind
from mcpwire.conformance.report import (
    JSON_SCHEMA,
    SCHEMA_VERSION,
    area_of,
    progress_line,
    to_dict,
    to_json,
    to_junit,
    to_terminal,
)
from mcpwire.conformance.runner import STATUSES, Probe, Result, Run

# -- the command line, against the reference server and broken fixtures -----------------------


def test_reference_server_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "--only", "SV-12,SV-02", "--revision", "2025-11-25"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "result: PASS"
    assert "totals: 0 fail, 0 error, 0 warning, 0 not observed, 0 expected failure, 2 pass, 0 skipped" in out
    assert "\x1b" not in out  # not a TTY, not asked: plain text


def test_must_failure_exits_1_with_a_line_per_failed_check(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-q", "--only", "lifecycle", "--revision", "2025-06-18", "--", *fixture_argv("ping_result")])
    assert code == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    fail_lines = [line for line in lines if line.startswith("FAIL")]
    assert fail_lines == [
        "FAIL  SV-12  MUST   lifecycle    ping is answered promptly with an empty result  "
        "[basic/utilities/ping.mdx §Behavior Requirements]"
    ]
    at = lines.index(fail_lines[0])
    assert lines[at + 1].startswith("      2025-06-18: ping answered ")
    assert lines[at + 2] == '      spec: "The receiver MUST respond promptly with an empty response"'
    assert "failures (1 in 1 check): MUST rules broken; each fails the run" in lines
    assert out.splitlines()[-1] == "result: FAIL (1 failure)"


def test_off_a_terminal_progress_lines_only_with_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--only", "SV-12", "--revision", "2025-11-25"]) == 0
    assert capsys.readouterr().err == ""  # CI logs get the summary only
    assert main(["-v", "--only", "SV-12", "--revision", "2025-11-25"]) == 0
    assert capsys.readouterr().err.splitlines() == ["[2025-11-25] ok    SV-12"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["http://127.0.0.1:9/mcp"], "mcpwire check: cannot reach http://127.0.0.1:9/mcp: "),
        (
            ["--revision", "1999-01-01"],
            "mcpwire check: unknown revision(s) 1999-01-01; known: "
            "2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05",
        ),
        (
            ["--"],
            "mcpwire check: nothing after '--': give the server's command, e.g. -- npx -y "
            "@modelcontextprotocol/server-everything",
        ),
        (["--no-such-option"], None),
        (["--", "/nonexistent/mcpwire-check-server"], None),
    ],
)
def test_usage_and_connection_errors_exit_2(
    argv: list[str], message: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    if message is not None and message.endswith(": "):  # a connection error: the cause follows
        assert err.splitlines()[-1].startswith(message), err
    elif message is not None:
        assert err.splitlines()[-1] == message
    else:
        assert err.strip()


def test_server_accepting_no_revision_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-q", "--timeout", "0.5", "--", sys.executable, "-c", "import sys; sys.stdin.read()"])
    assert code == 2
    assert "accepted no protocol revision" in capsys.readouterr().err


def test_server_name_from_mcp_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "mcp.json"
    command, *args = fixture_argv("ping_result")
    config.write_text(json.dumps({"mcpServers": {"pinger": {"command": command, "args": args}}}))
    assert main(["-q", "--config", str(config), "--only", "SV-12", "--revision", "2025-11-25", "pinger"]) == 1
    assert main(["-q", "--config", str(config), "nobody"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"mcpwire check: no server named 'nobody' in {config}; its servers: pinger"
    )


def test_baseline_turns_known_failures_green_and_fails_on_stale_entries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = tmp_path / "baseline.txt"
    baseline.write_text("# known\nSV-12@2025-06-18\n")
    argv = ["-q", "--only", "SV-12", "--revision", "2025-06-18", "--baseline", str(baseline)]
    assert main([*argv, "--", *fixture_argv("ping_result")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "result: PASS (1 expected failure)"
    # the reference server passes SV-12: the entry is stale
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "STALE SV-12@2025-06-18: remove it from the baseline" in out
    assert out.splitlines()[-1] == "result: FAIL (1 stale baseline entry)"


def test_skip_leaves_out_checks_by_id_and_by_tag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    argv = ["-q", "--json", str(report), "--only", "lifecycle", "--revision", "2025-06-18"]
    fixture = ["--", *fixture_argv("ping_result")]  # breaks SV-12 only

    def checked() -> set[str]:
        return {r["id"] for r in json.loads(report.read_text())["results"]}

    assert main([*argv, *fixture]) == 1
    everything = checked()
    assert "SV-12" in everything
    assert main([*argv, "--skip", "SV-12", *fixture]) == 0
    assert checked() == everything - {"SV-12"}
    assert main([*argv, "--skip", "ping", *fixture]) == 0  # SV-12's tag
    assert checked() == everything - {"SV-12"}
    assert main([*argv, "--skip", "sv-12,SV-11", "--skip", "SV-10", *fixture]) == 0  # case-insensitive, repeatable
    assert checked() == everything - {"SV-10", "SV-11", "SV-12"}
    assert main([*argv, "--skip", "lifecycle", *fixture]) == 0  # nothing left to run
    assert checked() == set()
    capsys.readouterr()


def test_strict_fails_the_run_on_should_violations_only(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["-q", "--only", "PR-03", "--revision", "2025-11-25", "--", *fixture_argv("unknown_prompt_ok")]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "result: PASS (1 warning)"
    assert main(["--strict", *argv]) == 1
    out = capsys.readouterr().out
    assert [line.split()[:4] for line in out.splitlines() if line.startswith("FAIL")] == [
        ["FAIL", "PR-03", "SHOULD", "prompts"]
    ]
    assert "      2025-11-25: " in out
    assert out.splitlines()[-1] == "result: FAIL (1 failure)"


def test_strict_keeps_a_heuristic_warning(capsys: pytest.CaptureFixture[str]) -> None:
    # SV-40 (a MUST) guesses from field names that a form asks for a secret: never a failure
    argv = ["-q", "--strict", "--call-tools", "read-only", "--only", "SV-40", "--revision", "2025-11-25"]
    assert main([*argv, "--", *fixture_argv("asks_password")]) == 0
    out = capsys.readouterr().out
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("warn ")] == [["warn", "SV-40", "MUST"]]
    assert out.splitlines()[-1] == "result: PASS (1 warning)"


def test_help_states_what_strict_fails_on(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--strict SHOULD-level violations fail the run too; warnings that prove no violation" in text
    assert "stay warnings" in text


def test_json_report_from_a_real_run(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "-q",
            "--json",
            "--only",
            "SV-12,SV-13",
            "--revision",
            "2025-11-25,2026-07-28",
            "--",
            *fixture_argv("ping_result"),
        ]
    )
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(JSON_SCHEMA).validate(report)
    assert (report["verdict"], report["exit_code"]) == ("fail", 1)
    assert report["revisions"] == ["2026-07-28", "2025-11-25"]
    by_key = {(r["id"], r["revision"]): r for r in report["results"]}
    assert {k: r["outcome"] for k, r in by_key.items()} == {
        ("SV-12", "2026-07-28"): "skipped",
        ("SV-13", "2026-07-28"): "pass",
        ("SV-12", "2025-11-25"): "fail",
        ("SV-13", "2025-11-25"): "skipped",
    }
    failure = by_key[("SV-12", "2025-11-25")]
    assert (failure["level"], failure["area"]) == ("MUST", "lifecycle")
    assert failure["spec"] == {
        "ref": "basic/utilities/ping.mdx §Behavior Requirements",
        "quote": "The receiver MUST respond promptly with an empty response",
        "url": "https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/ping#behavior-requirements",
    }
    sent = [json.loads(e["text"]) for e in failure["exchange"] if e["direction"] == "sent"]
    received = [e["text"] for e in failure["exchange"] if e["direction"] == "received"]
    assert [m.get("method") for m in sent] == ["initialize", "notifications/initialized", "ping"]
    assert len(received) == 2
    assert json.loads(received[0])["result"]["protocolVersion"] == "2025-11-25"  # recorded whole
    ping = next(m for m in sent if m.get("method") == "ping")
    assert json.loads(received[1]) == {"jsonrpc": "2.0", "id": ping["id"], "result": {"pong": True}}
    assert {e["process"] for e in failure["exchange"]} == {1}
    assert report["counts"]["fail"] == 1
    assert report["total"] == 4


def test_junit_report_from_a_real_run(tmp_path: Path) -> None:
    junit = tmp_path / "report.xml"
    argv = ["-q", "--junit", str(junit), "--only", "SV-12,SV-01", "--revision", "2025-11-25"]
    assert main([*argv, "--", *fixture_argv("ping_result")]) == 1
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in root.findall("testsuite")] == [
        ("2025-11-25 framing", "1", "0"),
        ("2025-11-25 lifecycle", "1", "1"),
    ]
    failures = [case.get("name") for case in root.iter("testcase") if case.find("failure") is not None]
    assert failures == ["SV-12 ping is answered promptly with an empty result"]


# -- the report formats, from runs built here ---------------------------------------------------

HOSTILE = "answer\x1b[2J\x1b]0;pwned\x07 with\r\x00 \ud800 \u202e and <tag>"


def _result(check_id: str, revision: str, status: str, **kw: object) -> Result:
    fields: dict[str, object] = {
        "title": f"rule {check_id}",
        "level": "MUST",
        "spec": "basic/index.mdx §Responses",
        "quote": f"The rule {check_id} MUST hold.",
        "message": "",
        "tags": ["framing"],
    }
    fields.update(kw)
    return Result(check_id, revision=revision, status=status, **fields)  # type: ignore[arg-type]


EXCHANGE = [
    ExchangeEntry(1, 0.0, "sent", '{"jsonrpc":"2.0","id":1,"method":"ping"}'),
    ExchangeEntry(1, 0.004, "received", '{"jsonrpc":"2.0","id":1,"result":{"pong":true}}'),
    ExchangeEntry(1, 0.005, "event", "stdin closed"),
    ExchangeEntry(1, None, "stderr", "Traceback (most recent call last)"),
    ExchangeEntry(2, None, "omitted", "3 entries left out"),
    ExchangeEntry(2, 0.1, "received", "not json at all"),
]


def sample_run() -> Run:
    results = [
        _result("SV-01", "2025-11-25", "pass", duration_s=0.25),
        _result("SV-02", "2025-11-25", "fail", message="id 1 came back as '1'", exchanges=EXCHANGE),
        _result("SV-12", "2025-11-25", "error", tags=["lifecycle"], message="cannot run the server: ENOENT"),
        _result(
            "SV-08",
            "2025-11-25",
            "warning",
            level="SHOULD",
            tags=["lifecycle", "stdio"],
            message="SIGTERM was needed",
            exchanges=EXCHANGE[:3],
        ),
        _result("SV-32b", "2025-11-25", "not_observed", tags=["resources"], message="the server lists no resources"),
        _result("SV-29", "2025-11-25", "expected_fail", tags=["tools"], message="tool 'x' has no inputSchema"),
        _result("SV-13", "2025-11-25", "skipped", tags=["modern", "lifecycle"], message="modern era only"),
        _result("SV-13", "2026-07-28", "pass", tags=["modern", "lifecycle"]),
        _result(
            "SV-02",
            "2026-07-28",
            "fail",
            title=f"hostile {HOSTILE}",
            message=HOSTILE,
            exchanges=[ExchangeEntry(None, None, "note", HOSTILE)],
        ),
    ]
    probes = [
        Probe("2026-07-28", True, {"tools": {}}),
        Probe("2025-11-25", True, {"tools": {}, "logging": {}}),
        Probe("2025-06-18", False, detail="initialize answered an error"),
    ]
    return Run("demo server", probes, ["2026-07-28", "2025-11-25"], results, stale_baseline=["SV-99"])


def test_terminal_lists_failures_errors_warnings_and_not_observed_separately() -> None:
    run = sample_run()
    text = to_terminal(run)
    lines = text.splitlines()
    assert lines[:3] == [
        "mcpwire check: demo server",
        "revisions checked: 2026-07-28, 2025-11-25",
        "not accepted: 2025-06-18",
    ]
    heads = [line for line in lines if re.match(r"^[a-z ]+ \(\d+( in \d+ checks?)?\): ", line)]
    assert [h.split(" (")[0] for h in heads] == [
        "failures",
        "errors",
        "warnings",
        "not observed",
        "expected failures",
        "stale baseline entries",
    ]
    assert "failures (2 in 1 check): MUST rules broken; each fails the run" in lines
    assert "errors (1 in 1 check): the check itself could not run; each fails the run" in lines
    listed = [line.split()[:4] for line in lines if re.match(r"^(FAIL|ERROR|warn|n/o|xfail) ", line)]
    assert listed == [
        ["FAIL", "SV-02", "MUST", "framing"],  # one entry for both revisions it failed in
        ["ERROR", "SV-12", "MUST", "lifecycle"],
        ["warn", "SV-08", "SHOULD", "lifecycle"],
        ["n/o", "SV-32b", "MUST", "resources"],
        ["xfail", "SV-29", "MUST", "tools"],
    ]
    # each listed line ends with the spec reference; the reason per revision and the quote follow
    first = lines.index(next(line for line in lines if line.startswith("FAIL")))
    assert lines[first].endswith("rule SV-02  [basic/index.mdx §Responses]")
    assert lines[first + 1] == "      2025-11-25: id 1 came back as '1'"
    assert lines[first + 2].startswith("      2026-07-28: answer\\x1b[2J")
    assert lines[first + 3] == '      spec: "The rule SV-02 MUST hold."'
    assert "STALE SV-99: remove it from the baseline" in lines
    assert lines[-2] == (
        "totals: 2 fail, 1 error, 1 warning, 1 not observed, 1 expected failure, 2 pass, 1 skipped (9 results)"
    )
    assert lines[-1] == (
        "result: FAIL (2 failures, 1 error, 1 warning, 1 rule not observed, 1 expected failure, 1 stale baseline entry)"
    )


def test_terminal_groups_by_check_sorted_by_area_and_id_with_reasons_shared_across_revisions() -> None:
    same = "the server answered late"
    results = [
        _result(check_id, revision, "fail", tags=[tag], message=same)
        for check_id, tag in (("SV-31", "tools"), ("SV-10", "lifecycle"), ("SV-9", "lifecycle"), ("SV-02", "framing"))
        for revision in ("2025-11-25", "2025-06-18")
    ]
    run = Run("s", [Probe("2025-11-25", True), Probe("2025-06-18", True)], ["2025-11-25", "2025-06-18"], results)
    lines = to_terminal(run).splitlines()
    listed = [line.split()[1] for line in lines if line.startswith("FAIL ")]
    assert listed == ["SV-02", "SV-9", "SV-10", "SV-31"]  # framing, lifecycle (ids in natural order), tools
    at = lines.index(next(line for line in lines if line.startswith("FAIL  SV-31")))
    assert lines[at + 1] == f"      2025-11-25, 2025-06-18: {same}"


def test_skipped_checks_are_counted_by_reason_with_the_option_that_runs_them() -> None:
    off = "tool calls are off (enable with --call-tools read-only|all or --call-tool NAME)"
    results = [
        *(_result(f"SV-3{i}", "2025-11-25", "skipped", message=off, skipped_for=SkipKind.TOOLS_OFF) for i in range(3)),
        _result(
            "SV-13", "2025-11-25", "skipped", message="applies to the modern era only", skipped_for=SkipKind.REVISION
        ),
        _result(
            "SV-12", "2026-07-28", "skipped", message="applies to the legacy era only", skipped_for=SkipKind.REVISION
        ),
        _result(
            "LG-01",
            "2025-11-25",
            "skipped",
            message="the server does not advertise logging",
            skipped_for=SkipKind.CAPABILITY,
            skip_detail=("logging",),
        ),
        # a skip the runner gave no kind is counted by its own message, whatever it says
        _result("SV-40", "2025-11-25", "skipped", message="applies to revisions 2025-06-18..2025-11-25 only"),
        _result("SV-01", "2025-11-25", "pass"),
    ]
    lines = to_terminal(Run("s", [Probe("2025-11-25", True)], ["2025-11-25"], results)).splitlines()
    at = lines.index("skipped: 7 (--json says why for each)")
    assert lines[at + 1 : at + 5] == [
        "     3  tool calls are off: run with --call-tools read-only (tools annotated readOnlyHint), "
        "--call-tools all, or --call-tool NAME to run them",
        "     2  not defined in the revision",
        "     1  the server does not advertise what they test (logging)",
        "     1  applies to revisions 2025-06-18..2025-11-25 only",
    ]


def test_terminal_is_plain_unless_asked_and_server_text_cannot_drive_the_terminal() -> None:
    run = sample_run()
    plain = to_terminal(run)
    # nothing the server sent reaches the terminal as a control character
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e\ud800-\udfff]", plain)
    assert "answer\\x1b[2J\\x1b]0;pwned\\x07 with\\x0d\\x00 \\ud800 \\u202e and <tag>" in plain
    plain.encode("utf-8")  # printable: no lone surrogate left
    colored = to_terminal(run, color=True)
    assert re.search(r"\x1b\[[0-9;]*31m(\x1b\[[0-9;]*m)*FAIL \x1b\[0m SV-02", colored)  # red
    assert re.search(r"^result: \x1b\[[0-9;]*m(\x1b\[[0-9;]*m)*FAIL\x1b\[0m", colored.splitlines()[-1])
    # the only escape sequences are ours: stripping them gives the plain text back
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == plain


def test_progress_line() -> None:
    fail = _result("SV-02", "2025-11-25", "fail")
    assert progress_line(fail) == "[2025-11-25] FAIL  SV-02"
    assert progress_line(fail, color=True) == "[2025-11-25] \x1b[1;31mFAIL \x1b[0m SV-02"
    assert progress_line(_result("SV-32b", "2024-11-05", "not_observed")) == "[2024-11-05] n/o   SV-32b"


def test_json_document_follows_its_schema_and_keeps_every_field() -> None:
    jsonschema.Draft202012Validator.check_schema(JSON_SCHEMA)
    run = sample_run()
    text = to_json(run)
    text.encode("utf-8")  # valid UTF-8 even with a lone surrogate in the server's text
    doc = json.loads(text)
    jsonschema.Draft202012Validator(JSON_SCHEMA).validate(doc)
    assert doc == json.loads(json.dumps(to_dict(run), default=str))
    assert (doc["format"], doc["schema_version"]) == ("mcpwire-check-report", SCHEMA_VERSION)
    assert (doc["target"], doc["verdict"], doc["exit_code"]) == ("demo server", "fail", 1)
    assert doc["counts"] == run.counts() and set(doc["counts"]) == set(STATUSES)
    assert doc["total"] == len(run.results) == sum(doc["counts"].values())
    assert [a["area"] for a in doc["areas"]] == ["framing", "lifecycle", "tools", "resources", "2026-07-28"]
    for area in doc["areas"]:
        expected = Counter(r.status for r in run.results if area_of(r) == area["area"])
        assert {k: v for k, v in area["counts"].items() if v} == dict(expected)
    assert doc["stale_baseline"] == ["SV-99"]
    assert [(p["revision"], p["accepted"]) for p in doc["probes"]] == [
        ("2026-07-28", True),
        ("2025-11-25", True),
        ("2025-06-18", False),
    ]
    # every result, in order, with what the issue asks for
    assert [(r["id"], r["revision"], r["outcome"]) for r in doc["results"]] == [
        (r.id, r.revision, r.status) for r in run.results
    ]
    failure = doc["results"][1]
    assert failure["reason"] == "id 1 came back as '1'"
    assert failure["spec"] == {"ref": "basic/index.mdx §Responses", "quote": "The rule SV-02 MUST hold.", "url": None}
    assert failure["exchange"] == [
        {"process": 1, "at_s": 0.0, "direction": "sent", "text": '{"jsonrpc":"2.0","id":1,"method":"ping"}'},
        {
            "process": 1,
            "at_s": 0.004,
            "direction": "received",
            "text": '{"jsonrpc":"2.0","id":1,"result":{"pong":true}}',
        },
        {"process": 1, "at_s": 0.005, "direction": "event", "text": "stdin closed"},
        {"process": 1, "at_s": None, "direction": "stderr", "text": "Traceback (most recent call last)"},
        {"process": 2, "at_s": None, "direction": "omitted", "text": "3 entries left out"},
        {"process": 2, "at_s": 0.1, "direction": "received", "text": "not json at all"},
    ]
    # lossless: the server's text comes back exactly, lone surrogate and control characters included
    hostile = doc["results"][-1]
    assert hostile["reason"] == HOSTILE
    assert hostile["exchange"] == [{"process": None, "at_s": None, "direction": "note", "text": HOSTILE}]


HTTP_EXCHANGES: list[dict[str, object]] = [
    {
        "method": "POST",
        "url": "http://127.0.0.1:8000/mcp?access_token=s3cret-query&x=1",
        "request_headers": {"Authorization": "Bearer s3cret", "Origin": "http://evil.example.com", "X-Api-Token": "t"},
        "request_body": '{"jsonrpc":"2.0","id":1,"method":"ping"}',
        "status": 200,
        "response_headers": {"content-type": "application/json", "set-cookie": "sid=s3cret-cookie"},
        "content_type": "application/json",
        "body": '{"jsonrpc":"2.0","id":1,"result":{}}',
        "events": [],
        "complete": True,
        "error": None,
    },
    {
        "method": "GET",
        "url": "http://user:pw@127.0.0.1:8000/mcp",
        "request_headers": {"Accept": "text/event-stream", "Last-Event-ID": "1.0"},
        "request_body": "",
        "status": None,
        "response_headers": {},
        "content_type": "",
        "body": "",
        "events": [{"event": "message", "id": "1.0", "retry": 500, "data": ""}],
        "complete": False,
        "error": "ConnectError: refused",
    },
]


def test_json_report_carries_the_http_exchanges_with_credentials_redacted() -> None:
    # as the runner collects it: redacted once (by name, and the URL's credentials), then reported as it is
    _, collected = collect([WireRecord([], http=HTTP_EXCHANGES)], Redactor(url="http://user:pw@127.0.0.1:8000/mcp"))
    result = _result("SV-22", "2025-11-25", "fail", tags=["http"], http_exchanges=collected, transport="http")
    run = Run("http server", [Probe("2025-11-25", True)], ["2025-11-25"], [result])
    text = to_json(run)
    doc = json.loads(text)
    jsonschema.Draft202012Validator(JSON_SCHEMA).validate(doc)
    post, get = doc["results"][0]["http"]
    assert (post["method"], post["status"], get["method"], get["status"]) == ("POST", 200, "GET", None)
    assert post["url"] == "http://127.0.0.1:8000/mcp?access_token=***&x=1"
    assert post["request_headers"] == {
        "Authorization": "***",
        "Origin": "http://evil.example.com",
        "X-Api-Token": "***",
    }
    assert post["response_headers"] == {"content-type": "application/json", "set-cookie": "***"}
    assert post["request_body"] == '{"jsonrpc":"2.0","id":1,"method":"ping"}'
    assert get["url"] == "http://***@127.0.0.1:8000/mcp"
    assert get["events"] == [{"event": "message", "id": "1.0", "retry": 500, "data": ""}]
    assert get["error"] == "ConnectError: refused"
    assert "s3cret" not in text and "user:pw" not in text
    # stdio results carry none
    assert to_dict(sample_run())["results"][0]["http"] == []


def test_junit_is_valid_xml_and_its_counts_match_the_run() -> None:
    run = sample_run()
    text = to_junit(run)
    assert text.startswith("<?xml version='1.0' encoding='utf-8'?>\n")
    # XML 1.0 forbids these even as character references: none may be written
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]", text)
    assert not re.search(r"&#(?:x0*(?:[0-8bcef]|1[0-9a-f])|0*(?:[0-8]|1[124-9]|2[0-9]|3[01]));", text, re.IGNORECASE)
    root = ET.fromstring(text.encode("utf-8"))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "2026-07-28 framing",
        "2026-07-28 2026-07-28",
        "2025-11-25 framing",
        "2025-11-25 lifecycle",
        "2025-11-25 tools",
        "2025-11-25 resources",
        "2025-11-25 2026-07-28",
        "baseline",
    ]
    for suite in suites:
        cases = suite.findall("testcase")
        assert suite.get("tests") == str(len(cases))
        assert suite.get("failures") == str(sum(c.find("failure") is not None for c in cases))
        assert suite.get("errors") == str(sum(c.find("error") is not None for c in cases))
        assert suite.get("skipped") == str(sum(c.find("skipped") is not None for c in cases))
    counts = run.counts()
    assert root.get("tests") == str(len(run.results) + 1)  # + the stale baseline entry
    assert root.get("failures") == str(counts["fail"] + 1)
    assert root.get("errors") == str(counts["error"])
    assert root.get("skipped") == str(counts["skipped"] + counts["not_observed"] + counts["expected_fail"])

    def case(name: str, revision: str) -> ET.Element:
        (found,) = [
            c
            for c in root.iter("testcase")
            if c.get("name", "").startswith(name) and revision in c.get("classname", "")
        ]
        return found

    def props(c: ET.Element) -> dict[str, str]:
        return {p.get("name", ""): p.get("value", "") for p in c.iter("property")}

    failure = case("SV-02 ", "2025-11-25").find("failure")
    assert failure is not None and failure.get("message") == "id 1 came back as '1'" and failure.get("type") == "MUST"
    assert 'spec: basic/index.mdx §Responses: "The rule SV-02 MUST hold."' in (failure.text or "")
    assert '  0.000 > {"jsonrpc":"2.0","id":1,"method":"ping"}' in (failure.text or "")
    warning = case("SV-08 ", "2025-11-25")
    assert props(warning) == {
        "id": "SV-08",
        "level": "SHOULD",
        "outcome": "warning",
        "spec": "basic/index.mdx §Responses",
    }
    assert (warning.findtext("system-out") or "").startswith("warning (SHOULD rule broken): SIGTERM was needed")
    assert [c.tag for c in warning if c.tag != "properties"] == ["system-out"]
    skipped = case("SV-32b ", "2025-11-25").find("skipped")
    assert skipped is not None and skipped.get("message") == "not observed: the server lists no resources"
    hostile = case("SV-02 ", "2026-07-28")
    expected = "answer\\x1b[2J\\x1b]0;pwned\\x07 with\r\\x00 \\ud800 \\u202e and <tag>"
    assert hostile.get("name") == f"SV-02 hostile {expected}"
    hostile_failure = hostile.find("failure")
    assert hostile_failure is not None and hostile_failure.get("message") == expected
    stale = case("stale entry SV-99", "baseline").find("failure")
    assert stale is not None and "no longer fails" in (stale.get("message") or "")
