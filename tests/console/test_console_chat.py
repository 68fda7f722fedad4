"""The chat page end to end, in headless Chromium: a real ``mcpwire serve`` with server-memory and
a preset on the scripted OpenAI-compatible provider (its model name hostile). A message streams
the tool call, waits for its approval (decided on the approvals page, which the chat links to) and
shows the answer as text; the stored conversation reopens from the list and continues."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _console import NPM_BIN, Serve, require, screenshot, signed_in, start_serve
from test_console_browser import WATCH

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


def test_chat_streams_waits_for_approval_and_continues(context: Any, llm: FakeLLM) -> None:
    ada = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["<b>x</b>"]}]}
    llm.add(
        openai_stream("Let me note that. ", [("c1", "memory__create_entities", json.dumps(ada))]),
        openai_stream("Noted <script>window.__xss=1</script> Ada."),
        openai_stream("You told me about Ada."),
    )
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto("/chat")
    option = page.locator("#chat-preset option").first
    assert option.inner_text() == f"mem (openai {HOSTILE_MODEL}; memory)"
    assert page.locator("#chat-preset script").count() == 0
    page.get_by_label("Message").fill("Remember Ada <i>please</i>")
    page.get_by_role("button", name="Send").click()

    log = page.locator("#chat-log")
    log.locator(".from-approval a[href='/approvals']").wait_for()
    assert "call memory · create_entities" in log.locator(".msg-call").inner_text()
    assert "waiting for approval: memory · create_entities" in log.locator(".msg-approval").first.inner_text()
    screenshot(page, "chat-waiting")

    approvals = context.new_page()
    approvals.goto("/approvals")
    card = approvals.locator("article.approval", has_text="create_entities").first
    card.get_by_role("button", name="Approve").click()
    approvals.close()

    page.locator("#chat-status", has_text="done").wait_for()
    texts = log.locator(".msg-text").all_inner_texts()
    assert texts == ["Remember Ada <i>please</i>", "Let me note that. ", "Noted <script>window.__xss=1</script> Ada."]
    assert "result of memory__create_entities (ok)" in log.locator(".msg-result").inner_text()
    assert log.locator("script, i, b").count() == 0
    screenshot(page, "chat")
    conversation = page.url.split("conversation=", 1)[1]
    assert conversation.startswith("conv_")

    # the list reopens the stored conversation, and the next message continues it
    page.goto("/chat")
    page.locator("#chat-conversations a", has_text="Remember Ada <i>please</i>").click()
    page.wait_for_url(f"**/chat?conversation={conversation}")
    assert page.locator("#chat-log .msg-text").all_inner_texts()[-1] == "Noted <script>window.__xss=1</script> Ada."
    page.get_by_label("Message").fill("What do you know?")
    page.get_by_role("button", name="Send").click()
    page.locator("#chat-status", has_text="done").wait_for()
    assert page.locator("#chat-log .msg-text").last.inner_text() == "You told me about Ada."
    sent = [m for m in llm.requests[-1].json["messages"] if m["role"] == "user"]
    assert [m["content"] for m in sent] == ["Remember Ada <i>please</i>", "What do you know?"]
    assert page.url.endswith(f"/chat?conversation={conversation}")

    assert page.evaluate("document.documentElement.getAttribute('data-xss')") is None
    assert dialogs == []


def test_without_presets_the_page_says_how_to_add_one(context: Any, serve: Serve) -> None:
    """No presets in mcp.json: the page says what a preset is and where it goes, and the form is
    disabled, instead of an empty list; the page has no live stream, so it shows no live badge."""
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
        assert page.locator("#live").count() == 0
        screenshot(page, "chat-no-presets")
    finally:
        config.write_text(kept)
    page.goto("/")
    assert page.locator("#live").count() == 1  # the live pages keep it
