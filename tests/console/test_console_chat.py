"""The chat page end to end, in headless Chromium: a real ``mcpwire serve`` with server-memory and
a preset on the scripted OpenAI-compatible provider (its model name hostile). A message streams
the tool call, waits for its approval (decided in the conversation by an approver; a caller sees
that it waits) and shows the answer as text; the stored conversation reopens from the list and
continues; and the page reads the same in Chinese."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _console import NPM_BIN, WIDTHS, Serve, require, screenshot, signed_in, start_serve
from test_console_browser import WATCH
from test_console_pages import OVERFLOW, VISIBLE_TEXT, english_words

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from _agent_fake_llm import FakeLLM
from _agent_wire import openai_stream

pytestmark = [pytest.mark.slow, pytest.mark.real]

HOSTILE_MODEL = "fake<script>window.__xss=1</script>"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    with fake.in_thread():
        yield fake


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[Serve]:
    folder = tmp_path_factory.mktemp("chat")
    servers = {
        "memory": {
            "command": require(NPM_BIN / "mcp-server-memory"),
            "env": {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")},
        }
    }
    running = start_serve(folder, servers)
    # presets are read when a run is asked for, so they can come after the start
    preset = {"provider": "openai", "model": HOSTILE_MODEL, "base_url": llm.base_url + "/v1", "servers": ["memory"]}
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers, "presets": {"mem": preset}}))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def context(browser: Any, serve: Serve) -> Iterator[Any]:
    made = signed_in(browser, serve, viewport={"width": 1280, "height": 900})
    made.add_init_script(WATCH)
    made.set_default_timeout(30_000)
    try:
        yield made
    finally:
        made.close()


def test_chat_streams_waits_for_approval_and_continues(context: Any, serve: Serve, llm: FakeLLM) -> None:
    ada = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["<b>x</b>"]}]}
    llm.add(
        openai_stream("Let me note that. ", [("c1", "memory__create_entities", json.dumps(ada))]),
        openai_stream("Noted <script>window.__xss=1</script> Ada."),
        openai_stream("You told me about Ada."),
    )
    page = context.new_page()
    dialogs: list[str] = []
    errors: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.goto("/chat")
    page.evaluate("window.__notReloaded = true")
    option = page.locator("#chat-preset option").first
    assert option.inner_text() == f"mem (openai {HOSTILE_MODEL}; memory)"
    assert page.locator("#chat-preset script").count() == 0
    prompt = page.get_by_label("Message")
    prompt.fill("Remember Ada <i>please</i>")
    prompt.press("Enter")  # Enter sends

    log = page.locator("#chat-log")
    # the approval is asked for in the conversation, where the call waits
    waiting = log.locator(".chat-approval .chat-decide")
    waiting.wait_for()
    assert log.locator(".tool-name").first.inner_text() == "memory · create_entities"
    assert "This call waits for a decision." in log.locator(".chat-approval").inner_text()
    assert page.locator("#chat-working").is_visible()
    assert "Waiting for a decision" in page.locator("#chat-working").inner_text()
    # the message box was emptied, and is not drawn as a mistake
    assert prompt.input_value() == ""
    assert prompt.evaluate("e => e.matches(':invalid') || e.getAttribute('aria-invalid') === 'true'") is False
    # the conversations list has the new conversation, without a reload
    page.locator("#chat-conversations a", has_text="Remember Ada <i>please</i>").wait_for()
    screenshot(page, "chat-waiting")

    log.locator(".chat-approval").get_by_role("button", name="Approve").click()
    page.locator("#chat-status", has_text="Done.").wait_for()
    assert page.locator("#chat-working").is_hidden()
    log.locator(".chat-approval .state-approved").wait_for()
    texts = log.locator(".msg-text").all_inner_texts()
    assert texts == ["Remember Ada <i>please</i>", "Let me note that. ", "Noted <script>window.__xss=1</script> Ada."]
    # the call and its result fold away, with the call's own time and its wait for the decision
    tool = log.locator(".from-tool").first
    assert tool.locator(".tool-state").inner_text() == "ok"
    timing = tool.locator(".timing").inner_text()
    assert re.fullmatch(r"[0-9.]+ (ms|s) · waited [0-9.]+ (ms|s) for a decision", timing), timing
    assert tool.locator("details").get_attribute("open") is None
    assert tool.locator("pre.msg-result").is_hidden()
    tool.locator("summary").click()
    assert '"Ada"' in tool.locator("pre.msg-call").inner_text()
    assert "Ada" in tool.locator("pre.msg-result").inner_text()
    assert log.locator("script, i, b").count() == 0
    page.locator("#chat-conversations .badge", has_text="answered").first.wait_for()
    assert page.evaluate("window.__notReloaded") is True
    screenshot(page, "chat")
    conversation = page.url.split("conversation=", 1)[1]
    assert conversation.startswith("conv_")

    # the list reopens the stored conversation, and the next message continues it
    page.goto("/chat")
    page.locator("#chat-conversations a", has_text="Remember Ada <i>please</i>").click()
    page.wait_for_url(f"**/chat?conversation={conversation}")
    assert page.locator("#chat-log .msg-text").all_inner_texts()[-1] == "Noted <script>window.__xss=1</script> Ada."
    stored = page.locator("#chat-log .from-tool").first
    assert stored.locator(".tool-name").inner_text() == "memory__create_entities"
    assert stored.locator(".tool-state").inner_text() == "ok"
    page.get_by_label("Message").fill("What do you know?")
    page.get_by_role("button", name="Send").click()
    page.locator("#chat-status", has_text="Done.").wait_for()
    assert page.locator("#chat-log .msg-text").last.inner_text() == "You told me about Ada."
    sent = [m for m in llm.requests[-1].json["messages"] if m["role"] == "user"]
    assert [m["content"] for m in sent] == ["Remember Ada <i>please</i>", "What do you know?"]
    assert page.url.endswith(f"/chat?conversation={conversation}")

    assert page.evaluate("document.documentElement.getAttribute('data-xss')") is None
    assert dialogs == [] and errors == []

    # the same conversation in Chinese: every word the console's own, at both widths
    chinese = signed_in(context.browser, serve, viewport={"width": 1280, "height": 900}, locale="zh-CN")
    try:
        zh = chinese.new_page()
        zh.goto(f"/chat?conversation={conversation}")
        assert zh.locator("h1").inner_text() == "对话"
        shown = zh.evaluate(VISIBLE_TEXT)
        assert english_words(shown) == []
        for label, (width, height) in WIDTHS.items():
            zh.set_viewport_size({"width": width, "height": height})
            assert zh.evaluate(OVERFLOW) <= 0, label
        screenshot(zh, "zh-Hans-chat-conversation")
    finally:
        chinese.close()


def test_a_caller_sees_the_approval_wait_for_an_approver(browser: Any, serve: Serve, llm: FakeLLM) -> None:
    """Someone who may call but not approve sees that the call waits, and why; the decision
    taken elsewhere lets the run go on, in their page too."""
    with httpx.Client(base_url=serve.url, headers=serve.headers, timeout=30) as api:
        made = api.post("/api/v1/tokens", json={"name": "chatter", "role": "caller"})
        assert made.status_code == 201, made.text
        token = made.json()["token"]
    ada = {"entities": [{"name": "Bob", "entityType": "person", "observations": ["y"]}]}
    llm.add(
        openai_stream("", [("c2", "memory__create_entities", json.dumps(ada))]),
        openai_stream("Noted Bob."),
    )
    caller = browser.new_context(base_url=serve.url, viewport={"width": 390, "height": 844})
    try:
        page = caller.new_page()
        page.goto(f"/login?token={token}")
        page.goto("/chat")
        page.get_by_label("Message").fill("Remember Bob")
        page.get_by_role("button", name="Send").click()
        card = page.locator("#chat-log .chat-approval[data-approval]")
        card.locator(".sub", has_text="A person with the approver role decides it").wait_for()
        assert card.get_by_role("button").count() == 0
        assert page.evaluate(OVERFLOW) <= 0
        screenshot(page, "chat-caller-waiting")
        approval = card.get_attribute("data-approval")
        with httpx.Client(base_url=serve.url, headers=serve.headers, timeout=30) as api:
            assert api.post(f"/api/v1/approvals/{approval}", json={"decision": "approve"}).status_code == 200
        page.locator("#chat-status", has_text="Done.").wait_for()
        card.locator(".state-approved").wait_for()
        assert page.locator("#chat-log .msg-text").last.inner_text() == "Noted Bob."
    finally:
        caller.close()


def test_without_presets_the_page_says_how_to_add_one(context: Any, serve: Serve) -> None:
    """No presets in mcp.json: the page says what a preset is and where it goes, and the form is
    disabled, instead of an empty list; the navigation stays live (its badge too)."""
    config = serve.folder / "mcp.json"
    kept = config.read_text()
    config.write_text(json.dumps({"mcpServers": json.loads(kept)["mcpServers"]}))
    try:
        page = context.new_page()
        page.goto("/chat")
        notice = page.locator("#chat-no-presets")
        assert notice.inner_text().startswith("No presets yet: a chat runs with a preset")
        assert str(config) in notice.inner_text()
        assert page.locator("#chat-preset option").count() == 0
        assert page.locator("#chat-form fieldset").get_attribute("disabled") == ""
        assert page.get_by_role("button", name="Send").is_disabled()
        page.locator("#live[data-state=on]").wait_for()
        screenshot(page, "chat-no-presets")
    finally:
        config.write_text(kept)
