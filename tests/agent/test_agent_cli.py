"""``mcpwire chat`` as users run it: the installed command against a scripted provider on loopback
and real MCP servers. One-shot prompts (the answer on stdout, tool lines on stderr, hostile text
escaped, exit 1 with the run's reason), usage errors, ``--json``, and the interactive session under
a pseudo-terminal: streamed answers, ``/tools``, ``/servers``, ``/reset``, and approvals of a
destructive tool answered at the terminal (approved twice as CRITICAL, denied with a reason,
approved with edited arguments)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from _agent_fake_llm import FakeLLM, Reply
from _agent_servers import everything_server, memory_server, time_server
from _agent_wire import openai_request, openai_stream

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from _cli_run import MCPWIRE, environment, mcpwire

from mcpwire.agent import Final, decode_event

pytestmark = [pytest.mark.real, pytest.mark.slow]
TIMEOUT_S = 90


@pytest.fixture
def llm() -> Iterator[FakeLLM]:  # a thread of its own: the command runs in a subprocess
    fake = FakeLLM()
    with fake.in_thread():
        yield fake


def _config(tmp_path: Path, llm: FakeLLM, **servers: dict[str, object]) -> Path:
    preset = {
        "provider": "openai",
        "model": "fake-model",
        "base_url": llm.base_url + "/v1",
        "system": "Be brief.",
        "rules": [{"server": "memory", "tool": "create_*", "decision": "allow"}],
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers, "presets": {"fake": preset}}))
    return path


def _chat(config: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    done = mcpwire("chat", "--config", str(config), "--preset", "fake", *args, home=config.parent, stdin=stdin)
    return done.returncode, done.stdout, done.stderr


def test_one_prompt_prints_the_answer_and_escapes_what_the_model_wrote(tmp_path: Path, llm: FakeLLM) -> None:
    llm.add(
        openai_stream("", [("c1", "time__get_current_time", '{"timezone": "Asia/Tokyo"}')]),
        openai_stream("It is \x1b[2J\x1b[31mevening\x1b[0m in Tokyo."),
    )
    code, out, err = _chat(_config(tmp_path, llm, time=time_server()), "What time is it in Tokyo?")
    assert code == 0, err
    assert out == "It is \\x1b[2J\\x1b[31mevening\\x1b[0m in Tokyo.\n"
    lines = err.splitlines()
    assert lines[0] == '  -> time/get_current_time {"timezone": "Asia/Tokyo"}'
    assert lines[1].startswith("  <- time/get_current_time ok (")
    body = openai_request(llm.requests[0].json)
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}


def test_a_failed_run_exits_1_with_its_reason(tmp_path: Path, llm: FakeLLM) -> None:
    llm.add(Reply(status=404, json={"error": {"message": "model 'fake-model' not found"}}))
    code, out, err = _chat(_config(tmp_path, llm, time=time_server()), "hi")
    assert (code, out) == (1, "")
    assert err == (
        f"mcpwire chat: provider openai model 'fake-model' at 127.0.0.1:{llm.port}: HTTP 404 Not Found: "
        "model 'fake-model' not found\n"
    )


def test_usage_errors_are_one_line(tmp_path: Path, llm: FakeLLM) -> None:
    config = _config(tmp_path, llm, time=time_server())
    done = mcpwire("chat", "--config", str(config), "hi", home=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "mcpwire chat: name a model: --preset NAME (from mcp.json's presets), or --provider openai|anthropic|ollama "
        "and --model M\n"
    )
    code, _, err = _chat(config, "--server", "nope", "hi")
    assert (code, err) == (2, "mcpwire chat: no server 'nope' in the config; the servers are: time\n")
    done = mcpwire("chat", "--config", str(config), "--preset", "other", "hi", home=tmp_path)
    assert done.stderr == "mcpwire chat: no preset 'other' in the config; the presets are: fake\n"
    assert not llm.requests


def test_json_prints_the_events_and_no_terminal_denies_approvals(tmp_path: Path, llm: FakeLLM) -> None:
    llm.add(
        openai_stream("", [("c1", "memory__delete_entities", '{"entityNames": ["Ada"]}')]),
        openai_stream("I may not delete Ada."),
    )
    code, out, err = _chat(_config(tmp_path, llm, memory=memory_server(tmp_path)), "--json", "Forget Ada")
    assert code == 0, err
    events = [decode_event(line) for line in out.splitlines()]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    final = events[-1]
    assert isinstance(final, Final) and final.text == "I may not delete Ada."
    assert "  denied: no terminal to ask (pass --approve all to allow such calls)" in err.splitlines()
    sent = openai_request(llm.requests[1].json)["messages"][-1]
    assert sent["content"] == "not run: the call was denied by mcpwire chat: no terminal to ask for approval"


# -- the interactive session, under a pseudo-terminal ------------------------------------------------


def _spawn(config: Path, *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        MCPWIRE,
        ["chat", "--config", str(config), "--preset", "fake", *args],
        cwd=str(config.parent),
        env=environment(config.parent, EDITOR="", VISUAL=""),
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 200),
    )


def _entities(folder: Path) -> set[str]:
    path = folder / "memory.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {r["name"] for r in map(json.loads, lines) if r.get("type") == "entity"}


def test_a_session_approves_a_destructive_tool_at_the_terminal(tmp_path: Path, llm: FakeLLM) -> None:
    ada = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["x"]}]}
    llm.add(
        openai_stream("Noted.", [("c1", "memory__create_entities", json.dumps(ada))]),
        openai_stream("Ada is remembered."),
        openai_stream("", [("c2", "memory__delete_entities", '{"entityNames": ["Ada"]}')]),
        openai_stream("Ada is forgotten."),
    )
    child = _spawn(_config(tmp_path, llm, memory=memory_server(tmp_path)))
    child.expect(r"mcpwire chat with openai model 'fake-model' at 127\.0\.0\.1:\d+: 9 tools from memory\.")
    child.expect_exact("you> ")
    child.sendline("/tools")
    child.expect(r"memory__delete_entities\s+critical\s+Delete")
    child.expect_exact("you> ")
    child.sendline("/servers")
    child.expect(r"memory  connected  9 tools")
    child.expect_exact("you> ")
    child.sendline("Remember Ada")
    child.expect_exact("-> memory/create_entities")
    child.expect_exact("Ada is remembered.")
    child.expect_exact("you> ")
    assert _entities(tmp_path) == {"Ada"}
    child.sendline("Now forget her")
    child.expect_exact("approval needed: memory/delete_entities (risk critical, confirmation 1 of 2)")
    child.expect_exact('arguments: {"entityNames": ["Ada"]}')
    child.expect_exact("approve? [y/n/e/JSON] ")
    assert _entities(tmp_path) == {"Ada"} and len(llm.requests) == 3  # the run waits
    child.sendline("maybe")
    child.expect_exact("answer y (approve), n [REASON] (deny), e (edit in $EDITOR), or a JSON object")
    time.sleep(1.5)  # a person thinks: the call's time does not include it
    child.sendline("y")
    child.expect_exact("confirmation 2 of 2")
    child.expect_exact("approve? [y/n/e/JSON] ")
    child.sendline("yes")
    child.expect(r"<- memory/delete_entities ok \((\d+) ms; (\d+\.\d) s waiting for approval\)")
    took, waited = int(child.match.group(1)), float(child.match.group(2))
    assert waited >= 1.5 > took / 1000, (took, waited)
    child.expect_exact("Ada is forgotten.")
    child.expect_exact("you> ")
    assert _entities(tmp_path) == set()
    # the conversation went on: the last request carried the whole of it
    sent = openai_request(llm.requests[3].json)["messages"]
    assert [m["role"] for m in sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_session_denies_with_a_reason_edits_arguments_and_resets(tmp_path: Path, llm: FakeLLM) -> None:
    folder = tmp_path
    (folder / "memory.jsonl").write_text(
        "\n".join(json.dumps({"type": "entity", "name": n, "entityType": "t", "observations": []}) for n in "AB") + "\n"
    )
    llm.add(
        openai_stream("", [("c1", "memory__delete_entities", '{"entityNames": ["A"]}')]),
        openai_stream("Understood, A stays."),
        openai_stream("", [("c2", "memory__delete_entities", '{"entityNames": ["A"]}')]),
        openai_stream("Deleted."),
        openai_stream("Hello again."),
    )
    child = _spawn(_config(tmp_path, llm, memory=memory_server(folder)), "--ask-at", "high")
    child.expect_exact("you> ")
    child.sendline("Forget A")
    child.expect_exact("approve? [y/n/e/JSON] ")
    child.sendline("n A is still needed")
    child.expect_exact("<- memory/delete_entities denied: not run: the call was denied by terminal: A is still needed")
    child.expect_exact("Understood, A stays.")
    child.expect_exact("you> ")
    child.sendline("Forget A anyway")
    child.expect_exact("approve? [y/n/e/JSON] ")
    child.sendline("e")  # no $EDITOR: asked again
    child.expect_exact("no $EDITOR is set: type the arguments as a JSON object instead")
    child.sendline('{"entityNames": ["B"]}')
    child.expect_exact("approve? [y/n/e/JSON] ")  # the second confirmation, with the edited arguments
    child.sendline("y")
    child.expect_exact("Deleted.")
    child.expect_exact("you> ")
    assert _entities(folder) == {"A"}
    child.sendline("/reset")
    child.expect_exact("the conversation is forgotten")
    child.sendline("Hello")
    child.expect_exact("Hello again.")
    child.expect_exact("you> ")
    assert [m["role"] for m in openai_request(llm.requests[4].json)["messages"]] == ["system", "user"]
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_an_approval_left_unanswered_expires_and_the_next_line_is_the_next_prompt(tmp_path: Path, llm: FakeLLM) -> None:
    llm.add(
        openai_stream("", [("c1", "memory__delete_entities", '{"entityNames": ["Ada"]}')]),
        openai_stream("Nobody answered, so Ada stays."),
        openai_stream("Bye."),
    )
    config = _config(tmp_path, llm, memory=memory_server(tmp_path))
    data = json.loads(config.read_text())
    data["presets"]["fake"]["approval_timeout"] = 1
    config.write_text(json.dumps(data))
    child = _spawn(config)
    child.expect_exact("you> ")
    child.sendline("Forget Ada")
    child.expect_exact("approve? [y/n/e/JSON] ")
    child.expect_exact("the approval was decided elsewhere or expired: denied: not run: ")
    child.expect_exact("Nobody answered, so Ada stays.")
    child.expect_exact("you> ")
    child.sendline("Goodbye")  # read as a prompt, not as the expired question's answer
    child.expect_exact("Bye.")
    child.expect_exact("you> ")
    assert openai_request(llm.requests[2].json)["messages"][-1] == {"role": "user", "content": "Goodbye"}
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ctrl_c_interrupts_the_answer_and_the_session_goes_on(tmp_path: Path, llm: FakeLLM) -> None:
    slow = openai_stream("One, two, three, four, five, six", pieces=6)
    slow.pause = 10.0
    llm.add(slow, openai_stream("Hello again."))
    child = _spawn(_config(tmp_path, llm, time=time_server()))
    child.expect_exact("you> ")
    child.sendline("Count slowly")
    child.expect_exact("One, ")
    child.sendintr()
    child.expect_exact("interrupted (this prompt is not kept)")
    child.expect_exact("you> ")
    child.sendline("Hello")
    child.expect_exact("Hello again.")
    child.expect_exact("you> ")
    sent = openai_request(llm.requests[1].json)["messages"]
    assert sent == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    child.sendintr()  # at the prompt, Ctrl-C ends the session
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130


def test_approve_takes_the_words_of_mcpwire_call(tmp_path: Path, llm: FakeLLM) -> None:
    for word in ("deny", "none"):
        llm.add(
            openai_stream("", [("c1", "memory__delete_entities", '{"entityNames": ["Ada"]}')]),
            openai_stream("Not deleted."),
        )
        code, out, err = _chat(_config(tmp_path, llm, memory=memory_server(tmp_path)), "--approve", word, "Forget Ada")
        assert (code, out) == (0, "Not deleted.\n"), err
        assert "  denied by --approve" in err.splitlines()
        warning = "mcpwire chat: warning: --approve none is deprecated; it means deny: use --approve deny"
        assert (warning in err.splitlines()) is (word == "none")
    code, _, err = _chat(_config(tmp_path, llm), "--approve", "never", "x")
    assert code == 2 and "{all,ask,deny}" in err


def test_a_server_shows_one_tool_count_in_servers_chat_and_serve(tmp_path: Path, llm: FakeLLM) -> None:
    """server-everything lists three more tools to a client that declares sampling, elicitation and
    roots: every command declares what ``mcpwire serve`` declares, so each sees the same tools."""
    import trio

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
    from _harness import running_service

    from_everything = {"everything": everything_server()}
    config = _config(tmp_path, llm, **from_everything)
    listed = mcpwire("servers", "--json", "--config", str(config), home=tmp_path, timeout=TIMEOUT_S)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    tools = mcpwire("tools", "--json", "--config", str(config), home=tmp_path, timeout=TIMEOUT_S)
    names = sorted(t["name"] for t in json.loads(tools.stdout))
    assert len(names) == row["tools"] == 16
    assert {"everything__get-roots-list", "everything__trigger-sampling-request",
            "everything__trigger-elicitation-request"} <= set(names)  # fmt: skip
    llm.add(openai_stream("Hello."))
    code, _, err = _chat(config, "hi")
    assert code == 0, err
    offered = sorted(t["function"]["name"] for t in llm.requests[0].json["tools"])
    assert offered == names

    async def served() -> list[str]:
        async with running_service(f"sqlite:///{tmp_path / 's.db'}", config) as svc:
            (server,) = (await svc.client.get("/api/v1/servers")).json()["items"]
            assert server["tools"] == row["tools"]
            return sorted(t["name"] for t in (await svc.client.get("/api/v1/tools")).json()["items"])

    assert trio.run(served) == names
    # a command that cannot answer a sampling request says so (its server reports it)
    called = mcpwire("call", "everything__trigger-sampling-request", '{"prompt": "hi"}', "--approve",
                     "--config", str(config), home=tmp_path, timeout=TIMEOUT_S)  # fmt: skip
    assert "mcpwire call cannot answer a sampling request (mcpwire serve passes it on to its clients" in (
        called.stdout + called.stderr
    )
