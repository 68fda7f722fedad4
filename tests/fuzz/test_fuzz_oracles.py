"""Each oracle on observations built by hand: it fires on a bad one and stays quiet on a good one.

No server runs here; the end-to-end side (the planted bugs of the fixture servers) is in
``test_fuzz_runner.py`` and ``test_fuzz_http.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from mcpwire.fuzz.exchange import Answer, Observation, Profile, Step, notification, request
from mcpwire.fuzz.oracles import ORACLES, Violation, check, list_stability, slow_answer
from mcpwire.fuzz.runner import Finding, Report

LIST_TOOLS = request(1, "tools/list", None)


def _profile(revision: str = "2025-11-25") -> Profile:
    era: Any = "modern" if revision >= "2026-07-28" else "legacy"
    profile = Profile({"transport": "stdio", "argv": ["server"]}, era, revision)
    profile.tools = [{"name": "echo", "inputSchema": {"type": "object"}}]
    profile.prompts = [{"name": "hello"}]
    profile.resources = [{"uri": "file:///a.txt", "name": "a"}]
    return profile


def _obs(
    steps: list[Step], answers: dict[int, Any] | None = None, strays: Sequence[tuple[int, Any]] = ()
) -> Observation:
    obs = Observation(steps)
    obs.answers = {i: Answer(i, m, 0.0) for i, m in (answers or {}).items()}
    obs.strays = [Answer(i, m, 0.0) for i, m in strays]
    return obs


def _oracles(obs: Observation, revision: str = "2025-11-25") -> list[str]:
    return [v.oracle for v in check(obs, _profile(revision))]


def _result(rid: int | str, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: int | str | None, code: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": "no"}}


# -- one-answer ------------------------------------------------------------------------------------


def test_one_answer_fires_on_a_second_answer_and_on_an_unknown_id() -> None:
    ping = request(1, "ping", None)
    assert _oracles(_obs([ping], {0: _result(1, {})})) == []
    assert _oracles(_obs([ping], {0: _result(1, {})}, [(0, _result(1, {}))])) == ["one-answer"]
    assert _oracles(_obs([ping], {0: _result(1, {})}, [(0, _error(77, -32601))])) == ["one-answer"]
    # an id-less error (the server could not read something) is not an answer to a request
    assert _oracles(_obs([ping], {0: _result(1, {})}, [(0, _error(None, -32700))])) == []


# -- list-stable (SV-34) ------------------------------------------------------------------------------


def _listed(method: str, result: dict[str, Any]) -> list[str]:
    obs = _obs([request(1, method, None)], {0: _result(1, result)})
    return [v.message for v in list_stability(obs, _profile())]


def test_list_stable_fires_when_a_tools_prompts_or_resources_list_changes() -> None:
    assert _listed("tools/list", {"tools": [{"name": "echo"}]}) == []
    assert _listed("tools/list", {"tools": [{"name": "echo"}, {"name": "ghost"}]}) == [
        'tools/list answer #1 differs from the first list: added ["ghost"], removed []'
    ]
    assert _listed("prompts/list", {"prompts": [{"name": "hello"}]}) == []
    assert _listed("prompts/list", {"prompts": []}) == [
        'prompts/list answer #1 differs from the first list: added [], removed ["hello"]'
    ]
    # resources are named by their URI: the same name at another URI is another resource
    assert _listed("resources/list", {"resources": [{"uri": "file:///a.txt", "name": "x"}]}) == []
    assert _listed("resources/list", {"resources": [{"uri": "file:///b.txt", "name": "a"}]}) == [
        'resources/list answer #1 differs from the first list: added ["file:///b.txt"], removed ["file:///a.txt"]'
    ]


def test_list_stable_ignores_order_pages_and_other_methods() -> None:
    profile = _profile()
    profile.tools = [{"name": "a"}, {"name": "b"}]
    obs = _obs([LIST_TOOLS], {0: _result(1, {"tools": [{"name": "b"}, {"name": "a"}]})})
    assert list_stability(obs, profile) == []
    page = _obs([LIST_TOOLS], {0: _result(1, {"tools": [{"name": "a"}], "nextCursor": "2"})})
    assert list_stability(page, profile) == []  # one page of a longer list
    call = request(2, "tools/call", {"name": "a"}, tool="a")
    assert list_stability(_obs([call], {0: _result(2, {"tools": []})}), profile) == []


def test_list_stable_counts_the_answers_of_each_list() -> None:
    second = request(2, "tools/list", None)
    obs = _obs([LIST_TOOLS, second], {0: _result(1, {"tools": [{"name": "echo"}]}), 1: _result(2, {"tools": []})})
    [violation] = list_stability(obs, _profile())
    assert (violation.oracle, violation.step) == ("list-stable", 1)
    assert violation.message.startswith("tools/list answer #2 differs")


# -- stdout-clean, http-status ------------------------------------------------------------------------


def test_stdout_clean_fires_on_a_line_that_is_not_json_rpc() -> None:
    obs = _obs([request(1, "ping", None)], {0: _result(1, {})})
    assert _oracles(obs) == []
    obs.noise = [b"Server started on stdio", b"debug: x"]
    [violation] = check(obs, _profile())
    assert violation.oracle == "stdout-clean"
    assert violation.message == "2 non-JSON-RPC stdout line(s): b'Server started on stdio'"


def test_http_status_fires_on_a_5xx() -> None:
    obs = _obs([request(1, "ping", None)], {0: _result(1, {})})
    assert _oracles(obs) == []
    obs.http_failures = [(502, "Bad Gateway")]
    assert _oracles(obs) == ["http-status"]
    assert "HTTP 502" in check(obs, _profile())[0].message


# -- tool arguments and schemas ----------------------------------------------------------------------


def _call(valid: bool) -> Step:
    return request(1, "tools/call", {"name": "echo", "arguments": {"text": 5}}, tool="echo", valid=valid)


def test_invalid_args_refused_fires_when_invalid_arguments_get_a_result() -> None:
    content = {"content": [{"type": "text", "text": "5"}]}
    assert _oracles(_obs([_call(False)], {0: _result(1, content)})) == ["invalid-args-refused"]
    assert ORACLES["invalid-args-refused"].severity == "warning"
    assert _oracles(_obs([_call(False)], {0: _result(1, {**content, "isError": True})})) == []
    assert _oracles(_obs([_call(False)], {0: _error(1, -32602)})) == []
    assert _oracles(_obs([_call(True)], {0: _result(1, content)})) == []


def test_tool_schema_fires_on_an_input_schema_that_is_no_json_schema() -> None:
    good = {"name": "a", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}
    bad = {"name": "b", "inputSchema": {"type": "object", "properties": {"x": {"type": "strin"}}}}
    assert _oracles(_obs([LIST_TOOLS], {0: _result(1, {"tools": [good]})})) == []
    obs = _obs([LIST_TOOLS], {0: _result(1, {"tools": [good, bad]})})
    [violation] = check(obs, _profile())
    assert violation.oracle == "tool-schema" and violation.message.startswith("tool 'b': inputSchema at /properties/x")


# -- subscriptions -----------------------------------------------------------------------------------


def test_subscription_ack_fires_when_a_listen_stream_is_not_acknowledged() -> None:
    listen = request(5, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    listen.answer, listen.expect = "optional", "notifications/subscriptions/acknowledged"
    assert _oracles(_obs([listen]), "2026-07-28") == []
    unacknowledged = _obs([listen])
    unacknowledged.missing_expected = [0]
    assert _oracles(unacknowledged, "2026-07-28") == ["subscription-ack"]
    refused = _obs([listen], {0: _error(5, -32601)})  # the stream was refused: nothing to acknowledge
    refused.missing_expected = [0]
    assert _oracles(refused, "2026-07-28") == []


# -- error codes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "revision", "expected"),
    [
        (-32601, "2025-11-25", []),
        (-32000, "2025-11-25", []),
        # JSON-RPC 2.0 §5.1: -32000..-32099 are implementation-defined server errors until 2026-07-28
        (-32050, "2025-11-25", []),
        (-32020, "2025-11-25", []),
        (-32050, "2026-07-28", ["error-code"]),  # 2026-07-28 reserves -32020..-32099 for MCP
        (-32100, "2025-11-25", ["error-code"]),
        (-32020, "2026-07-28", []),
        (-32042, "2026-07-28", ["error-code"]),  # 2025-11-25 only
        (42, "2026-07-28", []),
    ],
)
def test_error_code_fires_on_reserved_codes_nothing_defines(code: int, revision: str, expected: list[str]) -> None:
    ping = request(1, "tools/list", None)
    assert _oracles(_obs([ping], {0: _error(1, code)}), revision) == expected


# -- malformed lines -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "answer", "expected"),
    [
        (b"{", _error(None, -32700), []),
        (b'{"jsonrpc":"2.0","id":1,"method":5}', _error(1, -32600), []),
        (b"{", _result(1, {}), ["malformed-input"]),
        (b"{", _error(None, -32603), ["malformed-code"]),
        (b"{", _error(None, -32602), ["malformed-code"]),  # not a request: its params are not the fault
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":5}', _error(1, -32602), []),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping","params":5}', _error(None, -32602), ["malformed-code"]),
        (b"{", _error(None, -32100), ["error-code"]),
        # invalid UTF-8 inside a request, read leniently: any error a request may get
        (b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}', _error(1, -32601), []),
        (b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}', _result(1, {}), ["malformed-input"]),
        (b'{"jsonrpc":"1.0","id":1,"method":"p\xffing"}', _error(1, -32601), ["malformed-code"]),
    ],
)
def test_malformed_lines_get_parse_or_invalid_request_errors(line: bytes, answer: Any, expected: list[str]) -> None:
    assert _oracles(_obs([Step(line, "malformed")], {}, [(0, answer)])) == expected


def test_another_code_for_a_malformed_line_is_only_a_warning() -> None:
    [violation] = check(_obs([Step(b"{", "malformed")], {}, [(0, _error(None, -32000))]), _profile())
    assert violation.info.severity == "warning"
    assert violation.message.startswith("a malformed line was answered with code -32000, not -32700 or -32600")


def test_errors_come_before_warnings() -> None:
    """The first violation names the example's failure: a warning never hides an error."""
    obs = _obs([_call(False)], {0: _result(1, {"content": []})})
    obs.noise = [b"oops"]
    assert _oracles(obs) == ["stdout-clean", "invalid-args-refused"]


# -- answer-slow -------------------------------------------------------------------------------------------


def test_answer_slow_when_a_missed_deadline_is_met_on_the_longer_replay() -> None:
    ping = request(1, "ping", None)
    hung = _obs([ping])
    hung.timed_out = [0]
    [missed] = check(hung, _profile())
    assert missed.oracle == "answer-deadline"
    answered = check(_obs([ping], {0: _result(1, {})}), _profile())
    slow = slow_answer(missed, answered, 15.0)
    assert slow is not None and slow.oracle == "answer-slow" and slow.info.severity == "warning"
    assert slow.message == "no answer to ping within the deadline, but answered within 15s on a replay: slow, not hung"
    assert slow_answer(missed, check(hung, _profile()), 15.0) is None  # hung on the replay too
    assert slow_answer(Violation("server-alive", "gone"), answered, 15.0) is None


# -- notification-silence stays as it was -----------------------------------------------------------------


def test_an_answered_notification_is_not_one_answer() -> None:
    note = notification("notifications/initialized")
    assert _oracles(_obs([note], {}, [(0, _error(None, -32601))])) == ["notification-silence"]


# -- exit status -------------------------------------------------------------------------------------------


def _report(*oracles: str) -> Report:
    report = Report(_profile())
    report.findings = [Finding(Violation(o, "x"), "tools", "echo", Observation([]), []) for o in oracles]
    return report


def test_any_finding_fails_a_run_unless_only_errors_should() -> None:
    assert not _report().failed() and not _report().failed("error")
    assert _report("answer-slow").failed() and not _report("answer-slow").failed("error")
    assert _report("answer-slow", "server-alive").failed("error")
    failed_to_go_on = _report()
    failed_to_go_on.error = "the server went away"
    assert failed_to_go_on.failed("error")
    with pytest.raises(ValueError, match=r"^fail_on must be one of error, warning, not 'info'$"):
        _report().failed("info")
