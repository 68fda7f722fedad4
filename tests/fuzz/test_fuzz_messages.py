"""The protocol strategies: schema-valid requests of every revision, mutations, framing, and the oracles
that judge what comes back (no server: observations are built by hand)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcpwire.fuzz import mcp_schema
from mcpwire.fuzz.exchange import Answer, Observation, Profile, Step, notification, request
from mcpwire.fuzz.messages import (
    NOT_SENT,
    PROTOCOL_KINDS,
    framing_steps,
    mutated_requests,
    notifications,
    protocol_steps,
    schema_request,
)
from mcpwire.fuzz.oracles import ORACLES, check
from mcpwire.fuzz.schemas import is_valid

SETTINGS = settings(
    max_examples=40, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)
REVISIONS = [("2024-11-05", "legacy"), ("2025-03-26", "legacy"), ("2025-06-18", "legacy"),
             ("2025-11-25", "legacy"), ("2026-07-28", "modern")]  # fmt: skip

pytestmark = pytest.mark.skipif(
    mcp_schema.schema_dir() is None, reason="the MCP schemas are not there (set MCPWIRE_SCHEMA_DIR)"
)


def _profile(revision: str, era: str) -> Profile:
    profile = Profile({"transport": "stdio", "argv": ["server"]}, era, revision)  # type: ignore[arg-type]
    profile.tools = [{"name": "echo", "inputSchema": {"type": "object"}}]
    profile.resources = [{"uri": "file:///a"}]
    return profile


@pytest.mark.parametrize(("revision", "era"), REVISIONS)
def test_requests_are_valid_against_the_revisions_schema(revision: str, era: str) -> None:
    """Every ClientRequest of the revision (but initialize and subscriptions/listen) has a strategy,
    and what it draws validates against the method's definition and the JSON-RPC envelope."""
    profile = _profile(revision, era)
    envelope = mcp_schema.validator(revision, "JSONRPCRequest")
    kinds = [k for k in mcp_schema.client_requests(revision) if k.method not in NOT_SENT]
    if era == "modern":
        kinds = [k for k in kinds if k.method != "ping"]
    assert len(kinds) >= 8
    for kind in kinds:
        strategy = schema_request(profile, kind)
        assert strategy is not None, kind.method
        _check_requests(strategy, kind.method, envelope, mcp_schema.validator(revision, kind.definition), profile)


def _check_requests(strategy: Any, method: str, envelope: Any, definition: Any, profile: Profile) -> None:
    @settings(SETTINGS, max_examples=8)
    @given(strategy)
    def check_one(step: Step) -> None:
        message = json.loads(step.line)
        assert (step.kind, step.method, message["method"]) == ("request", method, method)
        assert is_valid(envelope, message) and is_valid(definition, message), message
        if profile.era == "modern":
            assert message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == profile.revision

    check_one()


@pytest.mark.parametrize(("revision", "era"), REVISIONS)
def test_notifications_are_never_requests(revision: str, era: str) -> None:
    @SETTINGS
    @given(notifications(_profile(revision, era)))
    def check_one(step: Step) -> None:
        message = json.loads(step.line)
        assert step.kind == "notification" and "id" not in message and message["jsonrpc"] == "2.0"

    check_one()


@settings(SETTINGS, max_examples=15)
@given(st.data())
def test_mutations_are_one_thing_wrong(data: st.DataObject) -> None:
    profile = _profile("2025-11-25", "legacy")
    step = data.draw(mutated_requests(profile))
    if step.kind == "malformed":
        try:
            message = json.loads(step.line)
        except (ValueError, RecursionError):
            return  # truncated, trailing garbage, nested too deep for json
        assert not (isinstance(message, dict) and message.get("jsonrpc") == "2.0" and "method" in message)
        return
    assert step.kind == "request"
    if step.answer == "required":
        head = step.line[: step.line.find(b',"method"')] + b"}"  # the envelope up to the id (params may nest deep)
        assert json.loads(head)["id"] == step.request_id


@settings(SETTINGS, max_examples=15)
@given(st.data())
def test_framing_keeps_the_bytes_and_cuts_only_where_told(data: st.DataObject) -> None:
    step = data.draw(framing_steps(_profile("2025-06-18", "legacy")))
    if step.split:
        assert b"".join(step.chunks()) == step.line + b"\n" and len(step.chunks()) == len(set(step.split)) + 1
    if step.kind == "request" and step.raw:
        assert step.answer == "optional"  # CRLF or a BOM: a server may read it or not


@pytest.mark.filterwarnings("ignore:Generating overly large repr")  # huge strings are the point here
@pytest.mark.parametrize("kind", PROTOCOL_KINDS)
def test_every_protocol_kind_draws_one_to_three_steps_with_unique_ids(kind: str) -> None:
    @settings(SETTINGS, max_examples=15)
    @given(protocol_steps(_profile("2026-07-28", "modern"), kind))
    def check_one(steps: list[Step]) -> None:
        assert 1 <= len(steps) <= 3
        ids = [(type(s.request_id), s.request_id) for s in steps if s.kind == "request"]
        assert len(ids) == len(set(ids))

    check_one()


# -- the oracles, on observations built by hand ---------------------------------------------------------


def _observe(steps: list[Step], answers: dict[int, Any], strays: list[tuple[int, Any]] = ()) -> list[str]:  # type: ignore[assignment]
    obs = Observation(steps)
    obs.answers = {i: Answer(i, m, 0.0) for i, m in answers.items()}
    obs.strays = [Answer(i, m, 0.0) for i, m in strays]
    return [v.oracle for v in check(obs, _profile("2025-11-25", "legacy"))]


def test_results_are_validated_against_the_methods_result_type() -> None:
    step = request(1, "tools/list", None)
    assert _observe([step], {0: {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}}) == []
    assert _observe([step], {0: {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": 1}]}}}) == ["answer-shape"]
    ping = request(2, "ping", None)
    assert _observe([ping], {0: {"jsonrpc": "2.0", "id": 2, "result": {}}}) == []


def test_notifications_from_the_server_are_validated() -> None:
    obs = Observation([request(1, "ping", None)])
    obs.answers = {0: Answer(0, {"jsonrpc": "2.0", "id": 1, "result": {}}, 0.0)}
    obs.notifications = [{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": "x"}}]
    assert [v.oracle for v in check(obs, _profile("2025-11-25", "legacy"))] == ["answer-shape"]
    obs.notifications = [{"jsonrpc": "2.0", "method": "notifications/x-vendor", "params": {"any": 1}}]
    assert check(obs, _profile("2025-11-25", "legacy")) == []


def test_answers_to_notifications_and_malformed_lines() -> None:
    note = notification("notifications/cancelled", {"requestId": 9})
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}}
    assert _observe([note], {}, [(0, error)]) == ["notification-silence"]
    bad = Step(b"{", "malformed")
    assert _observe([bad], {}, [(0, {**error, "error": {"code": -32700, "message": "parse"}})]) == []
    assert _observe([bad], {}, [(0, {"jsonrpc": "2.0", "id": None, "result": {}})]) == ["malformed-input"]


def test_every_oracle_has_an_id_a_title_and_a_spec_reference() -> None:
    for oracle_id, oracle in ORACLES.items():
        assert oracle.id == oracle_id and oracle.title and oracle.spec
        assert oracle.severity in ("error", "warning")
    assert {"server-alive", "answer-deadline", "one-answer", "notification-silence", "malformed-input",
            "answer-shape", "error-code", "output-schema", "list-stable", "http-status"} <= set(ORACLES)  # fmt: skip
