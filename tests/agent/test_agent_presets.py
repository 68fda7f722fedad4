"""Presets in mcp.json: what a valid one gives, and a precise message for every kind of mistake
(unknown field with a suggestion, wrong type, a secret in the file, credentials in a URL)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mcpwire.agent import Preset, PresetError, load_presets
from mcpwire.agent.presets import parse_presets
from mcpwire.cliargs import UsageError


def test_a_preset_with_every_kind_of_field() -> None:
    presets = parse_presets(
        {
            "mcpServers": {},
            "presets": {
                "local": {
                    "provider": "ollama",
                    "model": "qwen2.5:7b",
                    "servers": ["time"],
                    "tools": ["time__*"],
                    "system": "Answer briefly.",
                    "approve": "ASK",
                    "ask_at": "medium",
                    "rules": [{"tool": "delete_*", "decision": "deny"}],
                    "max_steps": 10,
                    "temperature": 0,
                    "api_key_env": "MY_KEY",
                }
            },
        }
    )
    assert presets == {
        "local": Preset(
            name="local",
            provider="ollama",
            model="qwen2.5:7b",
            servers=("time",),
            tools=("time__*",),
            system="Answer briefly.",
            approve="ask",
            ask_at="medium",
            rules=(("*", "delete_*", "deny"),),
            max_steps=10,
            temperature=0.0,
            api_key_env="MY_KEY",
        )
    }


def test_a_file_without_presets_has_none() -> None:
    assert parse_presets({"mcpServers": {}}) == {}


def test_one_mistake_is_named_with_its_path_and_a_suggestion() -> None:
    with pytest.raises(PresetError, match=r"^\$\.presets\.p\.modle: unknown field; did you mean 'model'\?$"):
        parse_presets({"presets": {"p": {"provider": "openai", "model": "m", "modle": "x"}}})


def test_every_mistake_is_listed() -> None:
    with pytest.raises(PresetError) as caught:
        parse_presets(
            {
                "presets": {
                    "p": {"provider": "gemini", "max_steps": 0, "api_key": "sk-123"},
                    "q": {"provider": "openai", "model": "m", "base_url": "https://u:p@example.com/v1"},
                }
            }
        )
    assert list(caught.value.problems) == [
        '$.presets.p.provider: expected one of openai, anthropic, ollama, got "gemini"',
        "$.presets.p.max_steps: expected a positive whole number, got 0",
        "$.presets.p.api_key: presets hold no secrets; put the key in an environment variable and name it with "
        "api_key_env",
        "$.presets.p: model is missing",
        "$.presets.q.base_url: credentials in the URL; name a key variable with api_key_env instead",
    ]
    assert str(caught.value).startswith("5 problems in the presets: $.presets.p.provider: ")
    assert "sk-123" not in str(caught.value)


def test_load_presets_names_the_file_and_the_json_position(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    text = '{"presets": {"p": {"provider": "openai",}}}'
    path.write_text(text)
    with pytest.raises(json.JSONDecodeError) as parsed:  # Python 3.13 words a trailing comma its own way
        json.loads(text)
    assert parsed.value.colno in (40, 41)
    expected = f"{path} is not valid JSON: line 1, column {parsed.value.colno}: {parsed.value.msg}"
    with pytest.raises(PresetError, match="^" + re.escape(expected) + "$"):
        load_presets(path)
    path.write_text(json.dumps({"presets": {"p": {"provider": "openai", "model": "gpt-4o-mini"}}}))
    assert load_presets(path)["p"].model == "gpt-4o-mini"
    with pytest.raises(PresetError, match=r"^cannot read '.*missing\.json': "):
        load_presets(tmp_path / "missing.json")


def test_command_line_options_are_laid_over_a_preset() -> None:
    from mcpwire.agent.cli import host_options, parser, settings_from
    from mcpwire.cliargs import era_options
    from mcpwire.client import ClientOptions
    from mcpwire.host import Risk

    base = parse_presets({"presets": {"p": {"provider": "ollama", "model": "a", "approve": "deny", "max_steps": 3}}})
    old = parse_presets({"presets": {"p": {"provider": "ollama", "model": "a", "approve": "none"}}})
    assert old["p"].approve == "deny"  # the old word, with a warning in the log
    args = parser().parse_args(
        [
            "--preset",
            "p",
            "--model",
            "b",
            "--server",
            "time",
            "--approve",
            "ask",
            "--ask-at",
            "medium",
            "--era",
            "legacy",
        ]
    )
    settings = settings_from(args, base)
    assert (settings.preset.provider, settings.preset.model, settings.preset.servers) == ("ollama", "b", ("time",))
    assert (settings.preset.approve, settings.preset.max_steps, settings.prompt) == ("ask", 3, None)
    assert host_options(settings.preset, args)["ask_at"] is Risk.MEDIUM
    assert era_options(args) == ClientOptions(era="legacy")
    with pytest.raises(UsageError, match=r"^no preset 'q' in the config; the presets are: p$"):
        settings_from(parser().parse_args(["--preset", "q"]), base)
    with pytest.raises(UsageError, match=r"^--max-steps must be at least 1, not 0$"):
        settings_from(parser().parse_args(["--preset", "p", "--max-steps", "0"]), base)
