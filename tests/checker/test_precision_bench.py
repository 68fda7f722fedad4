"""bench/check_findings.py: the tables of docs/check-findings.md are built from ``mcpwire check``
JSON reports and the verdicts kept in the script; a finding without a verdict is never counted as
a true one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from mcpwire.conformance import checks  # noqa: F401  (registers the catalogue)
from mcpwire.conformance.registry import CATALOGUE

REPO = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_findings", REPO / "bench" / "check_findings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_findings"] = module
    spec.loader.exec_module(module)
    return module


bench = _bench()


def _result(check_id: str, outcome: str, level: str = "MUST", revision: str = "2025-11-25", reason: str = "") -> Any:
    return {"id": check_id, "outcome": outcome, "level": level, "revision": revision, "reason": reason}


def _report(*results: Any, exit_code: int = 1) -> dict[str, Any]:
    probes = [{"revision": "2025-11-25", "accepted": True}, {"revision": "2026-07-28", "accepted": False}]
    return {"results": list(results), "probes": probes, "exit_code": exit_code, "bench": {"wall_s": 12.5}}


def test_every_verdict_names_a_check_and_a_known_target() -> None:
    targets = {s.name for s in bench.TARGETS}
    for key, verdict in bench.VERDICTS.items():
        check_id, _, target = key.partition("@")
        assert check_id in CATALOGUE, key
        assert not target or target in targets, key
        assert verdict.who in ("server", "check", "neither"), key
        assert verdict.text.strip(), key


def test_a_must_failure_without_a_verdict_counts_as_false_and_is_listed() -> None:
    reports = {
        "time": _report(
            _result("SV-07b", "fail", revision="2025-03-26", reason="no array answer"),
            _result("SV-13", "fail", reason="resultType is None, not 'complete'"),
            _result("SV-29", "fail", reason="no answer to tools/list (id 1) within 15 s"),
            _result("SV-33", "warning", level="SHOULD"),
            _result("SV-02", "pass"),
            _result("SV-20", "skipped"),
        )
    }
    text, unjudged, false_must = bench.tables(reports)
    # SV-07b has a verdict (the server's); SV-13 has none here; SV-29 timed out (the check's)
    assert false_must == {"time": 2}
    assert unjudged == ["SV-13@time fail 2025-11-25: resultType is None, not 'complete'"]
    summary = text.splitlines()[4]
    assert summary == (
        "| mcp-server-time | stdio | 2025-11-25 | 1 | 3 (SV-07b, SV-13, SV-29) | 1 (SV-33) | 0 | 0 | 1 | 1 "
        "| 1 / 2 | 1 / 0 | 12.5 s |"
    )
    assert "| SV-13 | MUST | fail | mcp-server-time | 2025-11-25 |" in text
    assert "**Unjudged**" in text
    assert "**Check.** A deadline, not a rule" in text


def test_timeouts_are_told_apart_from_rules() -> None:
    assert bench.verdict_for("SV-29", "time", "no answer to tools/list (id 1) within 15 s") is bench.TIMED_OUT
    assert bench.verdict_for("SV-29", "time", "the check did not finish within 30 s") is bench.TIMED_OUT
    # a message that only mentions a deadline inside is not one
    assert bench.verdict_for("SV-07b", "time", "the server stopped answering after a batch").who == "server"


def test_a_verdict_for_one_target_wins_over_the_checks_own() -> None:
    bench.VERDICTS["SV-33@cron"] = bench.Verdict("check", "a cron-only judgement")
    try:
        assert bench.verdict_for("SV-33", "cron").text == "a cron-only judgement"
        assert bench.verdict_for("SV-33", "time").who == "server"
        _, _, false_must = bench.tables({"cron": _report(_result("SV-33", "fail"))})
        assert false_must == {"cron": 1}
    finally:
        del bench.VERDICTS["SV-33@cron"]


def test_server_text_in_a_cell_cannot_break_the_table() -> None:
    cell = bench._cell("a | b\x1b[31m `x`\nnext")
    assert "|" not in cell.replace("\\|", "")
    assert "\x1b" not in cell and "\n" not in cell and "`" not in cell


def test_only_the_text_between_the_markers_is_rewritten(tmp_path: Path) -> None:
    doc = tmp_path / "findings.md"
    doc.write_text(f"intro\n{bench.BEGIN}\nold tables\n{bench.END}\nkept by hand\n", encoding="utf-8")
    bench.rewrite(doc, "## Summary\n\nnew\n")
    assert (
        doc.read_text(encoding="utf-8") == f"intro\n{bench.BEGIN}\n\n## Summary\n\nnew\n\n{bench.END}\nkept by hand\n"
    )
    (tmp_path / "plain.md").write_text("no markers\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"has no .* markers$"):
        bench.rewrite(tmp_path / "plain.md", "x")


def test_the_document_has_the_markers() -> None:
    text = (REPO / "docs" / "check-findings.md").read_text(encoding="utf-8")
    assert text.count(bench.BEGIN) == 1 and text.count(bench.END) == 1
