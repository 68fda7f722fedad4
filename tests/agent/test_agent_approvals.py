"""Approvals end to end: the model asks server-memory to delete what it created, the run pauses
in ``awaiting_approval`` (no further request reaches the model), and a decision resumes it:
``approve()`` on the event, ``approve()`` with edited arguments, a denial that goes back to the
model as the call's result, a decision taken on the host's approval queue, and an approval that
expires. Every call and decision is in the audit log with the run's id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from _agent_fake_llm import FakeLLM
from _agent_servers import config, memory_server
from _agent_wire import anthropic_request, anthropic_stream, openai_request, openai_stream

from mcpwire.agent import (
    Agent,
    AgentPolicy,
    AnthropicProvider,
    ApprovalRequired,
    ApprovalResolved,
    Final,
    OpenAIProvider,
    RunState,
    StateChanged,
    ToolResult,
)
from mcpwire.agent.events import RunEvent
from mcpwire.host import ApprovalNotPending, ApprovalQueue, ApprovalState, Host

pytestmark = pytest.mark.real

ADA = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["writes programs"]}]}
BOB = {"entities": [{"name": "Bob", "entityType": "person", "observations": ["reads them"]}]}


def _openai(llm: FakeLLM) -> OpenAIProvider:
    return OpenAIProvider("fake-model", base_url=llm.base_url + "/v1", api_key="sk-test")


def _script_delete(llm: FakeLLM, answer: str) -> None:
    """Create Ada and Bob (allowed by a rule), delete Ada (CRITICAL: asked), then answer."""
    llm.add(
        openai_stream(
            "",
            [("c1", "memory__create_entities", json.dumps({"entities": ADA["entities"] + BOB["entities"]}))],
        ),
        openai_stream("", [("c3", "memory__delete_entities", '{"entityNames": ["Ada"]}')]),
        openai_stream(answer),
    )


def _host(tmp_path: Path, **options: object) -> Host:
    """server-memory, whose creations are allowed by a rule; deletions are CRITICAL (asked)."""
    rules = [("memory", "create_*", "allow")]
    return Host(config(memory=memory_server(tmp_path)), approval_rules=rules, **options)  # type: ignore[arg-type]


def _names(folder: Path) -> set[str]:
    """The entities server-memory keeps in its file in ``folder`` (read there: the host caches
    the results of read-only tools)."""
    path = folder / "memory.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {r["name"] for r in map(json.loads, lines) if r.get("type") == "entity"}


def _audit(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_destructive_call_pauses_the_run_until_approve(llm: FakeLLM, tmp_path: Path) -> None:
    _script_delete(llm, "Ada is gone.")
    audit = tmp_path / "audit.jsonl"
    events: list[RunEvent] = []
    async with _host(tmp_path, audit=audit) as host, _openai(llm) as p:
        async with Agent(host, p).run("Remember Ada and Bob, then forget Ada") as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ApprovalRequired):
                    assert run.state is RunState.AWAITING_APPROVAL
                    # paused: the model has not been asked again, and the entity is still there
                    await trio.sleep(0.5)
                    assert len(llm.requests) == 2
                    assert _names(tmp_path) == {"Ada", "Bob"}
                    assert [t.id for t in run.pending_approvals()] == [event.approval_id]
                    event.approve(by="tester")
        assert _names(tmp_path) == {"Bob"}
    # a CRITICAL call is confirmed twice
    asked = [e for e in events if isinstance(e, ApprovalRequired)]
    assert [(e.confirmation, e.confirmations_needed) for e in asked] == [(1, 2), (2, 2)]
    first = asked[0]
    assert (first.server, first.tool, first.name, first.risk) == (
        "memory",
        "delete_entities",
        "memory__delete_entities",
        "critical",
    )
    assert (first.call_id, first.arguments, first.kind) == ("c3", {"entityNames": ["Ada"]}, "tool")
    resolved = [e for e in events if isinstance(e, ApprovalResolved)]
    assert [(e.approved, e.by, e.edited) for e in resolved] == [(True, "tester", False)] * 2
    results = {e.call_id: e for e in events if isinstance(e, ToolResult)}
    assert results["c3"].outcome == "ok" and results["c3"].approval == "approved"
    # the call's time is the call's: the half second a person took is its wait, apart
    assert results["c3"].wait_ms >= 500 > results["c3"].latency_ms
    assert results["c1"].approval == "allow" and results["c1"].risk == "high"
    states = [e.state for e in events if isinstance(e, StateChanged)]
    assert states == [
        RunState.REASONING,
        RunState.CALLING_TOOLS,
        RunState.REASONING,
        RunState.CALLING_TOOLS,
        RunState.AWAITING_APPROVAL,
        RunState.CALLING_TOOLS,
        RunState.AWAITING_APPROVAL,
        RunState.CALLING_TOOLS,
        RunState.REASONING,
        RunState.FINISHED,
    ]
    final = events[-1]
    assert isinstance(final, Final) and final.text == "Ada is gone."
    calls = [r for r in _audit(audit) if r["kind"] == "tool" and r["tool"] != "read_graph"]
    assert [(r["tool"], r["run_id"], r["decision"]) for r in calls] == [
        ("create_entities", final.run_id, "allow"),
        ("delete_entities", final.run_id, "approved"),
    ]
    assert calls[1]["approval_wait_ms"] >= 500 > calls[1]["latency_ms"]  # type: ignore[operator]
    assert "approval_wait_ms" not in calls[0]  # it needed no decision


async def test_a_denial_goes_back_to_the_model_and_the_run_goes_on(llm: FakeLLM, tmp_path: Path) -> None:
    _script_delete(llm, "I was not allowed to forget Ada, so she stays.")
    async with _host(tmp_path) as host, _openai(llm) as p:
        async with Agent(host, p).run("Remember Ada and Bob, then forget Ada") as run:
            async for event in run:
                if isinstance(event, ApprovalRequired):
                    event.deny("Ada stays", by="tester")
        assert _names(tmp_path) == {"Ada", "Bob"}
    assert isinstance(run.outcome, Final) and run.outcome.text == "I was not allowed to forget Ada, so she stays."
    sent = openai_request(llm.requests[2].json)["messages"]
    assert sent[-1] == {
        "role": "tool",
        "tool_call_id": "c3",
        "content": "not run: the call was denied by tester: Ada stays",
    }


async def test_approval_with_edited_arguments_runs_the_edit(llm: FakeLLM, tmp_path: Path) -> None:
    _script_delete(llm, "Done.")
    events: list[RunEvent] = []
    async with _host(tmp_path, critical_confirmations=1) as host, _openai(llm) as p:
        async with Agent(host, p).run("Remember Ada and Bob, then forget Ada") as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ApprovalRequired):
                    event.approve({"entityNames": ["Bob"]})
        assert _names(tmp_path) == {"Ada"}
    (resolved,) = [e for e in events if isinstance(e, ApprovalResolved)]
    assert resolved.approved and resolved.edited
    (result,) = [e for e in events if isinstance(e, ToolResult) and e.call_id == "c3"]
    assert result.approval == "approved_modified"


async def test_a_decision_on_the_hosts_queue_resumes_the_run(llm: FakeLLM, tmp_path: Path) -> None:
    """As a console or the service would: the run's approval is in the host's queue, with the
    run's id, and deciding it there releases the call."""
    llm.add(
        anthropic_stream("", [("toolu_1", "memory__create_entities", json.dumps(ADA))]),
        anthropic_stream("", [("toolu_2", "memory__delete_entities", '{"entityNames": ["Ada"]}')]),
        anthropic_stream("Forgotten."),
    )
    queue = ApprovalQueue()
    events: list[RunEvent] = []
    provider = AnthropicProvider("fake-claude", base_url=llm.base_url, api_key="k")
    async with _host(tmp_path, approvals=queue, critical_confirmations=1) as host, provider:
        async with Agent(host, provider, caller="console-user").run("Remember Ada, then forget her") as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ApprovalRequired):
                    (pending,) = await queue.pending()
                    assert pending.id == event.approval_id
                    assert (pending.context["run_id"], pending.context["caller"]) == (run.id, "console-user")
                    await queue.decide(pending.id, approve=True, by="reviewer")
        assert _names(tmp_path) == set()
        assert (await queue.get(events_of(events, ApprovalRequired)[0].approval_id)).state is ApprovalState.APPROVED
    (resolved,) = events_of(events, ApprovalResolved)
    assert resolved.approved and resolved.by is None  # decided elsewhere
    assert isinstance(events[-1], Final) and events[-1].text == "Forgotten."
    anthropic_request(llm.requests[2].json)
    assert not run.pending_approvals()


async def test_an_undecided_approval_expires_as_a_denial(llm: FakeLLM, tmp_path: Path) -> None:
    _script_delete(llm, "No answer came, so Ada stays.")
    async with (
        _host(tmp_path, approvals=ApprovalQueue(), approval_timeout=0.5) as host,
        _openai(llm) as p,
    ):
        with trio.fail_after(30):
            events = await _events(Agent(host, p), "Remember Ada and Bob, then forget Ada")
        assert _names(tmp_path) == {"Ada", "Bob"}
    (resolved,) = events_of(events, ApprovalResolved)
    assert not resolved.approved and resolved.reason is not None
    (result,) = [e for e in events if isinstance(e, ToolResult) and e.call_id == "c3"]
    assert result.outcome == "denied" and result.text.startswith("not run: ")
    assert isinstance(events[-1], Final)


async def test_approve_all_and_deny_decide_without_asking(llm: FakeLLM, tmp_path: Path) -> None:
    _script_delete(llm, "Done.")
    _script_delete(llm, "Not done.")
    async with _host(tmp_path) as host, _openai(llm) as p:
        everything = await _events(Agent(host, p, policy=AgentPolicy(approve="all")), "x")
        assert _names(tmp_path) == {"Bob"}
        nothing = await _events(Agent(host, p, policy=AgentPolicy(approve="deny")), "x")
        assert _names(tmp_path) == {"Ada", "Bob"}  # created again, and not deleted
    assert not events_of(everything + nothing, ApprovalRequired)
    resolved = [(e.approved, e.by) for e in events_of(everything, ApprovalResolved)]
    assert resolved == [(True, "policy"), (True, "policy")]  # both confirmations of a CRITICAL call
    assert [(e.approved, e.by) for e in events_of(nothing, ApprovalResolved)] == [(False, "policy")]
    (denied,) = [e for e in nothing if isinstance(e, ToolResult) and e.call_id == "c3"]
    assert (denied.outcome, denied.text) == ("denied", "not run: the call was denied by policy: approve=deny")
    assert isinstance(everything[-1], Final) and isinstance(nothing[-1], Final)


def events_of(events: list[RunEvent], kind: type) -> list:  # type: ignore[type-arg]
    return [e for e in events if isinstance(e, kind)]


async def _events(agent: Agent, prompt: str) -> list[RunEvent]:
    async with agent.run(prompt) as run:
        return [event async for event in run]


async def test_a_run_left_while_its_call_waits_leaves_an_abandoned_approval(llm: FakeLLM, tmp_path: Path) -> None:
    """An approval lives as long as its caller: leaving the run cancels its call, the approval ends
    abandoned, and approving it afterwards is refused (the entity stays)."""
    _script_delete(llm, "unused")
    queue = ApprovalQueue()
    async with _host(tmp_path, approvals=queue) as host, _openai(llm) as p:
        async with Agent(host, p).run("Remember Ada and Bob, then forget Ada") as run:
            async for event in run:
                if isinstance(event, ApprovalRequired):
                    approval_id = event.approval_id
                    break  # the person walks away: leaving the block cancels the run
        left = await queue.get(approval_id)
        assert (left.state, left.decided_by) == (ApprovalState.ABANDONED, None)
        with pytest.raises(ApprovalNotPending, match=r"was abandoned at \S+: its caller went away"):
            await queue.decide(approval_id, approve=True, by="too late")
        assert _names(tmp_path) == {"Ada", "Bob"}


def test_none_is_the_old_word_for_deny() -> None:
    with pytest.warns(DeprecationWarning, match=r"^AgentPolicy\(approve='none'\): 'none' is deprecated; it means deny"):
        assert AgentPolicy(approve="none").approve == "deny"
    with pytest.raises(ValueError, match=r"^approve must be 'all', 'ask' or 'deny', not 'never'$"):
        AgentPolicy(approve="never")  # type: ignore[arg-type]
