"""Precision of the checks: each situation that made a check report a false failure, a duplicate,
a wrong level or a quote of another revision or transport, reproduced by a fixture server, and
what the check says about it now (docs/check-findings.md has the real servers' verdicts)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import trio
from _targets import fixture_argv, fixture_target, http_server
from mcpwire.conformance.context import Target
from mcpwire.conformance.registry import CATALOGUE
from mcpwire.conformance.runner import Result, Run, run
from mcpwire.conformance.schema import schema_dir

CHECKS = Path(__file__).resolve().parents[2] / "conformance" / "checks"
BAD = ("fail", "warning", "error", "not_observed")

#: name -> (fixture, transport, revision, checks run)
CASES: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "batch over Streamable HTTP": ("batch_split", "http", "2025-03-26", ("SV-07b",)),
    "batch over stdio": ("batch_split", "stdio", "2025-03-26", ("SV-07b",)),
    "templates -32601": ("templates_unimplemented", "http", "2025-11-25", ("SV-06", "RS-03")),
    "templates -32601 modern": ("templates_unimplemented", "http", "2026-07-28", ("SV-06", "CA-01")),
    "empty unadvertised list": ("unadvertised_empty", "http", "2025-11-25", ("SV-05b",)),
    "unadvertised prompts offered": ("unadvertised", "stdio", "2025-11-25", ("SV-05b",)),
    "session optional": ("session_optional", "http", "2025-11-25", ("SV-24b",)),
    "session required, 404": ("session_missing_404", "http", "2025-11-25", ("SV-24b",)),
    "unknown method, text body": ("unknown_method_text", "http", "2025-11-25", ("SV-01", "SV-03", "SV-05")),
    "unknown method, string error": ("unknown_method_bad_error", "stdio", "2025-11-25", ("SV-01", "SV-03", "SV-05")),
    "origin 2024-11-05 Streamable HTTP": ("no_origin_check", "http", "2024-11-05", ("SV-22", "HS-08")),
    "origin over HTTP+SSE": ("no_origin_check", "sse", "2025-06-18", ("SV-22", "HS-08")),
    "host advice": ("no_host_check", "http", "2025-11-25", ("SV-22b", "HS-08b")),
    "host advice over HTTP+SSE": ("no_host_check", "sse", "2024-11-05", ("SV-22b", "HS-08b")),
    "cursor 2024-11-05": ("ignores_cursor", "http", "2024-11-05", ("SV-33",)),
    "era parity": ("modern_no_tools", "http", "2026-07-28", ("ERA-01",)),
    "era parity stdio": ("modern_no_tools", "stdio", "2026-07-28", ("ERA-01",)),
}


async def _check(case: tuple[str, str, str, tuple[str, ...]], *, strict: bool = False) -> Run:
    fixture, transport, revision, only = case
    options: dict[str, Any] = {"revisions": [revision], "only": only, "jobs": 4, "timeout": 10.0, "strict": strict}
    if transport == "stdio":
        return await run(fixture_target(fixture), **options)
    async with http_server(fixture_argv(fixture)) as url:
        if transport == "sse":
            url = url.removesuffix("/mcp") + "/sse"
        return await run(Target(url=url, transport=transport, name=fixture), **options)


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    """Every case checked once, a few at a time (independent servers)."""
    out: dict[str, Run] = {}

    async def main() -> None:
        limiter = trio.CapacityLimiter(4)

        async def one(name: str) -> None:
            async with limiter:
                out[name] = await _check(CASES[name])

        async with trio.open_nursery() as nursery:
            for name in CASES:
                nursery.start_soon(one, name)

    trio.run(main)
    return out


def _result(outcome: Run, check_id: str) -> Result:
    return next(r for r in outcome.results if r.id == check_id)


def _flagged(outcome: Run) -> set[tuple[str, str]]:
    return {(r.id, r.status) for r in outcome.results if r.status in BAD}


# -- 1. SV-07b: "These responses MAY be batched" over Streamable HTTP ----------------------------


def test_a_batch_answered_one_sse_event_per_response_passes_over_streamable_http(runs: dict[str, Run]) -> None:
    sv07b = _result(runs["batch over Streamable HTTP"], "SV-07b")
    assert (sv07b.status, sv07b.message) == ("pass", "")


def test_a_batch_answered_one_response_at_a_time_fails_over_stdio(runs: dict[str, Run]) -> None:
    sv07b = _result(runs["batch over stdio"], "SV-07b")
    assert (sv07b.status, sv07b.level) == ("fail", "MUST")
    assert sv07b.message == "a batch of two pings was answered with separate responses (b0, b1), not one array"


# -- 2. SV-06 (and CA-01): -32601 for resources/templates/list is no schema violation -------------


def test_templates_list_answered_method_not_found_is_no_schema_failure(runs: dict[str, Run]) -> None:
    if schema_dir() is None:
        pytest.skip("SV-06 needs the official schema.json files ($MCPWIRE_SCHEMA_DIR)")
    assert _result(runs["templates -32601"], "SV-06").status == "pass"
    assert _result(runs["templates -32601 modern"], "SV-06").status == "pass"
    rs03 = _result(runs["templates -32601"], "RS-03")
    assert rs03.status == "not_observed"
    assert rs03.message.startswith("resources/templates/list answered an error: {'code': -32601")


def test_caching_hints_are_judged_on_results_not_on_an_error(runs: dict[str, Run]) -> None:
    assert _result(runs["templates -32601 modern"], "CA-01").status == "pass"


# -- 3. SV-05b: the rule binds the server's declaration, not the client's question ----------------


def test_an_empty_list_of_an_undeclared_feature_is_no_finding(runs: dict[str, Run]) -> None:
    assert _result(runs["empty unadvertised list"], "SV-05b").status == "pass"


def test_prompts_offered_without_the_capability_break_the_declaration_rule(runs: dict[str, Run]) -> None:
    sv05b = _result(runs["unadvertised prompts offered"], "SV-05b")
    assert (sv05b.status, sv05b.level) == ("fail", "MUST")
    assert sv05b.message.startswith("prompts/list offers ")
    assert sv05b.message.endswith("but the 'prompts' capability is not declared")
    assert sv05b.quote.startswith("Servers that support prompts MUST declare the prompts capability")
    assert sv05b.spec_url == "https://modelcontextprotocol.io/specification/2025-11-25/server/prompts#capabilities"


# -- 4. SV-24b: judged only on servers that show they require the session id ----------------------


def test_a_server_serving_requests_without_the_session_header_is_not_judged(runs: dict[str, Run]) -> None:
    sv24b = _result(runs["session optional"], "SV-24b")
    assert sv24b.status == "skipped"
    assert sv24b.message == ("a ping without Mcp-Session-Id was served (HTTP 200): the server does not require one")


def test_a_server_requiring_the_session_header_with_another_status_is_a_should_violation(
    runs: dict[str, Run],
) -> None:
    sv24b = _result(runs["session required, 404"], "SV-24b")
    assert (sv24b.status, sv24b.level) == ("warning", "SHOULD")
    assert sv24b.message.startswith("a ping without Mcp-Session-Id was refused with HTTP 404")


# -- 5. one defect, one failure: SV-03 and SV-05 ----------------------------------------------------


def test_an_unknown_method_answered_with_a_text_body_fails_sv05_only(runs: dict[str, Run]) -> None:
    outcome = runs["unknown method, text body"]
    assert _flagged(outcome) == {("SV-05", "fail")}
    message = _result(outcome, "SV-05").message
    assert message.startswith("an unknown method got no JSON-RPC response (error -32601 expected): HTTP 400")
    assert "When a rpc call is made, the Server MUST reply with a Response" in _result(outcome, "SV-05").quote


def test_an_unknown_method_answered_with_a_malformed_error_fails_sv03_only(runs: dict[str, Run]) -> None:
    outcome = runs["unknown method, string error"]
    assert _flagged(outcome) == {("SV-03", "fail")}
    assert _result(outcome, "SV-03").message.startswith("error of response id ")
    sv05 = _result(outcome, "SV-05")
    assert (sv05.status, sv05.message) == (
        "skipped",
        "the answer is not a well-formed JSON-RPC response: SV-03 judges its shape",
    )


# -- 6. SV-22 per transport; SV-22b is advice --------------------------------------------------------


def test_origin_at_2024_11_05_over_streamable_http_cites_the_streamable_http_page(runs: dict[str, Run]) -> None:
    outcome = runs["origin 2024-11-05 Streamable HTTP"]
    sv22 = _result(outcome, "SV-22")
    assert (sv22.status, sv22.transport) == ("fail", "http")
    assert sv22.spec_url == "https://modelcontextprotocol.io/specification/2025-03-26/basic/transports#security-warning"
    assert sv22.quote.startswith("When implementing Streamable HTTP transport: Servers MUST validate the Origin")
    assert _result(outcome, "HS-08").status == "skipped"


def test_origin_over_http_sse_cites_that_transport_in_every_revision(runs: dict[str, Run]) -> None:
    outcome = runs["origin over HTTP+SSE"]
    assert _flagged(outcome) == {("HS-08", "fail")}
    hs08 = _result(outcome, "HS-08")
    assert hs08.spec_url == "https://modelcontextprotocol.io/specification/2024-11-05/basic/transports#security-warning"
    assert hs08.quote.startswith("When implementing HTTP with SSE transport: Servers MUST validate the Origin")
    assert _result(outcome, "SV-22").status == "skipped"
    for revision in ("2024-11-05", "2025-06-18", "2025-11-25"):
        spec, quote = CATALOGUE["HS-08"].reference(revision)
        assert spec.startswith("2024-11-05/") and "HTTP with SSE" in quote


@pytest.mark.parametrize("case, check_id", [("host advice", "SV-22b"), ("host advice over HTTP+SSE", "HS-08b")])
def test_the_host_header_is_hardening_advice_not_a_should(runs: dict[str, Run], case: str, check_id: str) -> None:
    outcome = runs[case]
    assert _flagged(outcome) == {(check_id, "warning")}
    advice = _result(outcome, check_id)
    assert advice.level == "MAY"
    assert "hardening advice (no spec keyword)" in advice.title
    assert advice.message.startswith("hardening advice (no spec keyword): a request to this loopback server with Host")


async def test_the_host_advice_stays_a_warning_with_strict() -> None:
    strict = await _check(CASES["host advice"], strict=True)
    assert _flagged(strict) == {("SV-22b", "warning")}
    assert strict.exit_code == 0


# -- 7. SV-33 runs in 2024-11-05 ---------------------------------------------------------------------


def test_an_ignored_cursor_is_flagged_in_2024_11_05(runs: dict[str, Run]) -> None:
    sv33 = _result(runs["cursor 2024-11-05"], "SV-33")
    assert (sv33.status, sv33.level) == ("warning", "SHOULD")
    assert sv33.spec_url == (
        "https://modelcontextprotocol.io/specification/2024-11-05/server/utilities/pagination#error-handling"
    )


# -- 8. era parity ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["era parity", "era parity stdio"])
def test_era_parity_names_what_2026_07_28_lacks(runs: dict[str, Run], case: str) -> None:
    era01 = _result(runs[case], "ERA-01")
    # the text quoted says a server "MAY implement both behaviors": labelled MAY, as the text is
    assert (era01.status, era01.level) == ("warning", "MAY")
    assert era01.message.startswith("2026-07-28 lacks what 2025-11-25 offers: ")
    assert "tools: 'add', " in era01.message
    # what only 2026-07-28 offers is named too, but is no finding alone (test_check: random_tools)
    assert era01.message.endswith("(only in 2026-07-28: 1 prompts: 'modern_only_prompt')")
    # the evidence holds both eras' exchanges
    text = "\n".join(entry.text for entry in era01.exchanges)
    assert '"method":"initialize"' in text and '"method":"server/discover"' in text


# -- 9. no private names across check modules ------------------------------------------------------------


def test_check_modules_import_no_private_names_from_each_other() -> None:
    crossing = []
    for path in sorted(CHECKS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                crossing += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert crossing == []


def test_the_fixture_list_names_real_fixtures() -> None:
    for fixture, transport, _, only in CASES.values():
        assert (Path(__file__).parent / "fixtures" / f"{fixture}.py").is_file()
        assert transport in ("stdio", "http", "sse")
        assert set(only) <= set(CATALOGUE)
    assert dataclasses.is_dataclass(Result)
