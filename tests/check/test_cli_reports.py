"""The checker's command line (exit codes 0/1/2, baseline) and its report formats."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from _targets import fixture_argv

from conformance.cli import main


def test_reference_server_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "--only", "SV-12,SV-02", "--revision", "2025-11-25"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "result: PASS"
    assert "2 pass" in out


def test_must_failure_exits_1_with_a_line_per_failed_check(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-q", "--only", "lifecycle", "--revision", "2025-06-18", "--", *fixture_argv("ping_result")])
    assert code == 1
    out = capsys.readouterr().out
    fail_lines = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert fail_lines == ["FAIL  SV-12 [2025-06-18] MUST: ping is answered promptly with an empty result"]
    assert 'spec: basic/utilities/ping.mdx: "The receiver MUST respond promptly with an empty response."' in out


def test_progress_lines_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--only", "SV-12", "--revision", "2025-11-25"]) == 0
    assert capsys.readouterr().err.splitlines() == ["[2025-11-25] ok    SV-12"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["https://example.com/mcp"], "mcpwire check: HTTP targets: not yet supported"),
        (
            ["--revision", "1999-01-01"],
            "mcpwire check: unknown revision(s) 1999-01-01; known: "
            "2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05",
        ),
        (["--"], "mcpwire check: '--' must be followed by a command"),
        (["--no-such-option"], None),
        (["--", "/nonexistent/mcpwire-check-server"], None),
    ],
)
def test_usage_and_connection_errors_exit_2(
    argv: list[str], message: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    if message is not None:
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
    assert f"{config} has no stdio server named 'nobody'" in capsys.readouterr().err


def test_baseline_turns_known_failures_green_and_fails_on_stale_entries(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.txt"
    baseline.write_text("# known\nSV-12@2025-06-18\n")
    argv = ["-q", "--only", "SV-12", "--revision", "2025-06-18", "--baseline", str(baseline)]
    assert main([*argv, "--", *fixture_argv("ping_result")]) == 0
    # the reference server passes SV-12: the entry is stale
    assert main(argv) == 1


def test_json_report_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
    assert set(report) == {"target", "revisions", "probes", "summary", "stale_baseline", "exit_code", "results"}
    assert report["exit_code"] == 1
    assert report["revisions"] == ["2026-07-28", "2025-11-25"]
    by_key = {(r["id"], r["revision"]): r for r in report["results"]}
    assert {k: r["status"] for k, r in by_key.items()} == {
        ("SV-12", "2026-07-28"): "skipped",
        ("SV-13", "2026-07-28"): "pass",
        ("SV-12", "2025-11-25"): "fail",
        ("SV-13", "2025-11-25"): "skipped",
    }
    failure = by_key[("SV-12", "2025-11-25")]
    assert failure["level"] == "MUST"
    assert failure["spec"] == "basic/utilities/ping.mdx"
    assert any('"method":"ping"' in line for line in failure["exchanges"])
    assert report["summary"]["fail"] == 1


def test_junit_and_html_reports(tmp_path: Path) -> None:
    junit, page = tmp_path / "report.xml", tmp_path / "report.html"
    argv = ["-q", "--junit", str(junit), "--html", str(page), "--only", "SV-12,SV-01", "--revision", "2025-11-25"]
    assert main([*argv, "--", *fixture_argv("ping_result")]) == 1
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("mcp 2025-11-25", "2", "1")
    failures = [case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None]
    assert failures == ["SV-12 ping is answered promptly with an empty result"]
    html = page.read_text()
    assert html.startswith("<!doctype html>")
    assert "FAIL SV-12 [2025-11-25]" in html
    assert "&quot;method&quot;:&quot;ping&quot;" in html
