"""The command line beyond one server: every server of a config at once, options that take a file
never swallowing a target, and the progress bar on a real terminal."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from _targets import fixture_argv, reference_argv
from mcpwire.conformance.cli import main
from mcpwire.conformance.report import JSON_SCHEMA

REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path) -> Path:
    command, *args = reference_argv()
    broken, *broken_args = fixture_argv("ping_result")
    servers = {
        "reference": {"command": command, "args": args},
        "pinger": {"command": broken, "args": broken_args},
        "off": {"command": command, "args": args, "enabled": False},
        "missing": {"command": "/nonexistent/mcpwire-no-such-server"},
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_every_enabled_server_of_a_config_in_one_matrix_and_one_report_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "out" / "index.html"
    html.parent.mkdir()
    argv = ["--config", str(_config(tmp_path)), "--only", "SV-12,SV-02", "--revision", "2025-11-25"]
    outputs = ["--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"), "--html", str(html)]
    assert main([*argv, *outputs]) == 2  # a server could not be started at all
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["server", "result", "framing", "lifecycle"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:4]}
    assert rows == {
        "reference": ["PASS", "1/0/0", "1/0/0"],
        "pinger": ["FAIL", "1/0/0", "0/1/0"],
        "missing": ["ERROR", "not", "checked:", *rows["missing"][3:]],
    }
    assert "off" not in " ".join(lines)  # disabled: not checked
    doc = json.loads((tmp_path / "r.json").read_text())
    jsonschema.Draft202012Validator(JSON_SCHEMA).validate(doc)
    assert (doc["format"], doc["exit_code"]) == ("mcpwire-check-multi-report", 2)
    assert [(s["name"], s["outcome"]) for s in doc["servers"]] == [
        ("reference", "pass"),
        ("pinger", "fail"),
        ("missing", "not checked"),
    ]
    assert doc["servers"][1]["report"]["counts"]["fail"] == 1
    suites = ET.parse(tmp_path / "r.xml").getroot().findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures"), s.get("errors")) for s in suites] == [
        ("reference", "2", "0", "0"),
        ("pinger", "2", "1", "0"),
        ("missing", "1", "0", "1"),
    ]
    index = html.read_text()
    pages = sorted(p.name for p in html.parent.iterdir())
    assert pages == ["index-1-reference.html", "index-2-pinger.html", "index.html"]
    assert 'href="index-1-reference.html"' in index and 'href="index-2-pinger.html"' in index
    assert 'data-id="SV-12"' in (html.parent / "index-2-pinger.html").read_text()


def test_all_without_a_config_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("MCPWIRE_CONFIG", raising=False)
    assert main(["--all"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "mcpwire check: --all: no mcp.json found (give --config FILE)"


def test_an_option_that_takes_a_file_never_swallows_a_url(capsys: pytest.CaptureFixture[str]) -> None:
    # `--json URL` is refused (the report file comes first), never taken as a file while the
    # bundled server is checked instead
    for option in ("--json", "--junit", "--html"):
        assert main(["-q", option, "http://127.0.0.1:9/mcp"]) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"mcpwire check: error: argument {option}: expected a file name, not the URL "
            "'http://127.0.0.1:9/mcp' (put the target last)"
        )
    assert not Path("http:").exists()
    # after the file, the URL is the target
    assert main(["-q", "--json", "-", "http://127.0.0.1:9/mcp"]) == 2
    assert capsys.readouterr().err.startswith("mcpwire check: cannot reach http://127.0.0.1:9/mcp: ")


@pytest.mark.slow
def test_the_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    argv = ["-m", "mcpwire", "check", "--only", "SV-12,SV-02,PR-01", "--revision", "2025-11-25,2025-06-18"]
    child = pexpect.spawn(sys.executable, argv, cwd=str(tmp_path), encoding="utf-8", timeout=120, dimensions=(40, 120))
    try:
        # the bar: the current revision and area, done/total and counts per outcome
        child.expect(r"\d+/6")
        bar = child.before + child.after
        child.expect(pexpect.EOF)
        rest = child.before
    finally:
        child.close()
    assert child.exitstatus == 0
    assert "\x1b[" in bar + rest  # drawn and coloured for a terminal
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", bar + rest)
    assert re.search(r"mcpwire reference server 2025-\d\d-\d\d (framing|lifecycle|prompts) ", plain)
    assert re.search(r"\d pass", plain)
    assert plain.rstrip().endswith("result: PASS")
