"""Presets: named agent profiles in ``mcp.json``, beside the servers.

Theory of operation: a preset names everything ``mcpwire chat --preset NAME`` needs - a provider
and model, the servers and tools the model may use, a system prompt, the approval policy and the
budgets - so a team can share one file. Presets hold no secrets: the key comes from an
environment variable the preset names (``api_key_env``); a field that looks like a key is refused
with that hint. Every problem names its JSON path and what was expected; a misspelt field gets a
"did you mean". The file's servers are the host's business (:mod:`mcpwire.host.config`); this
module reads only the top-level ``presets`` object::

    {
      "mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}},
      "presets": {
        "local": {
          "provider": "ollama", "model": "qwen2.5:7b",
          "servers": ["time"], "tools": ["time__*"],
          "system": "Answer briefly.",
          "approve": "ask", "ask_at": "medium",
          "rules": [{"server": "*", "tool": "delete_*", "decision": "deny"}],
          "max_steps": 10
        }
      }
    }
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, Literal

import msgspec

from ..redaction import is_secret_name
from .errors import PresetError
from .providers import PROVIDER_KINDS, HttpProvider, make_provider

__all__ = ["PRESET_FIELDS", "Preset", "load_presets", "parse_presets", "provider_for"]

log = logging.getLogger("mcpwire.agent.presets")

RISKS: Final = ("low", "medium", "high", "critical")
DECISIONS: Final = ("allow", "deny", "ask")


class Preset(msgspec.Struct, frozen=True, kw_only=True):
    """One agent profile (see the module docstring); ``None`` means "the default"."""

    name: str
    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    servers: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    system: str | None = None
    approve: Literal["ask", "all", "deny"] = "ask"
    ask_at: str | None = None
    rules: tuple[tuple[str, str, str], ...] = ()
    approval_timeout: float | None = None
    tool_mode: Literal["native", "react"] = "native"
    stream: bool = True
    max_steps: int | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    timeout: float | None = None
    deadline: float | None = None
    extra_body: dict[str, object] | None = None


def _string(path: str, value: object, problems: list[str]) -> str | None:
    if isinstance(value, str) and value:
        return value
    problems.append(f"{path}: expected a non-empty string, got {json.dumps(value)[:60]}")
    return None


def _strings(path: str, value: object, problems: list[str]) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    problems.append(f"{path}: expected a list of non-empty strings")
    return None


def _choice(choices: tuple[str, ...]) -> Callable[[str, object, list[str]], str | None]:
    def check(path: str, value: object, problems: list[str]) -> str | None:
        if isinstance(value, str) and value.lower() in choices:
            return value.lower()
        problems.append(f"{path}: expected one of {', '.join(choices)}, got {json.dumps(value)[:60]}")
        return None

    return check


def _approve(path: str, value: object, problems: list[str]) -> str | None:
    """``all``, ``ask`` or ``deny`` (``none``, the old word for ``deny``, is taken with a warning)."""
    if isinstance(value, str) and value.lower() == "none":
        log.warning("%s: 'none' is deprecated; it means deny: write \"deny\"", path)
        return "deny"
    return _choice(("all", "ask", "deny"))(path, value, problems)


def _positive_int(path: str, value: object, problems: list[str]) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    problems.append(f"{path}: expected a positive whole number, got {json.dumps(value)[:60]}")
    return None


def _positive(path: str, value: object, problems: list[str]) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    problems.append(f"{path}: expected a positive number, got {json.dumps(value)[:60]}")
    return None


def _temperature(path: str, value: object, problems: list[str]) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 2:
        return float(value)
    problems.append(f"{path}: expected a number from 0 to 2, got {json.dumps(value)[:60]}")
    return None


def _boolean(path: str, value: object, problems: list[str]) -> bool | None:
    if isinstance(value, bool):
        return value
    problems.append(f"{path}: expected true or false, got {json.dumps(value)[:60]}")
    return None


def _object(path: str, value: object, problems: list[str]) -> dict[str, object] | None:
    if isinstance(value, dict):
        return value
    problems.append(f"{path}: expected an object")
    return None


def _env_name(path: str, value: object, problems: list[str]) -> str | None:
    if isinstance(value, str) and value and value.replace("_", "a").isalnum() and not value[0].isdigit():
        return value
    problems.append(f"{path}: expected the name of an environment variable (like OPENAI_API_KEY)")
    return None


def _url(path: str, value: object, problems: list[str]) -> str | None:
    if isinstance(value, str) and value.startswith(("http://", "https://")):
        if "@" in value.split("//", 1)[1].split("/", 1)[0]:
            problems.append(f"{path}: credentials in the URL; name a key variable with api_key_env instead")
            return None
        return value
    problems.append(f"{path}: expected an http:// or https:// URL")
    return None


def _rules(path: str, value: object, problems: list[str]) -> tuple[tuple[str, str, str], ...] | None:
    if not isinstance(value, list):
        problems.append(f"{path}: expected a list of {{server, tool, decision}} objects")
        return None
    out: list[tuple[str, str, str]] = []
    for index, rule in enumerate(value):
        where = f"{path}[{index}]"
        if not isinstance(rule, dict) or set(rule) - {"server", "tool", "decision"} or "decision" not in rule:
            problems.append(f'{where}: expected {{"server": GLOB, "tool": GLOB, "decision": allow|deny|ask}}')
            continue
        decision = _choice(DECISIONS)(f"{where}.decision", rule["decision"], problems)
        server = _string(f"{where}.server", rule.get("server", "*"), problems)
        tool = _string(f"{where}.tool", rule.get("tool", "*"), problems)
        if decision and server and tool:
            out.append((server, tool, decision))
    return tuple(out)


_FIELDS: Final[dict[str, Callable[[str, object, list[str]], object]]] = {
    "provider": _choice(PROVIDER_KINDS),
    "model": _string,
    "base_url": _url,
    "api_key_env": _env_name,
    "servers": _strings,
    "tools": _strings,
    "system": _string,
    "approve": _approve,
    "ask_at": _choice(RISKS),
    "rules": _rules,
    "approval_timeout": _positive,
    "tool_mode": _choice(("native", "react")),
    "stream": _boolean,
    "max_steps": _positive_int,
    "max_tool_calls": _positive_int,
    "max_tokens": _positive_int,
    "max_output_tokens": _positive_int,
    "temperature": _temperature,
    "timeout": _positive,
    "deadline": _positive,
    "extra_body": _object,
}
#: the fields a preset may have
PRESET_FIELDS: Final = tuple(_FIELDS)


def _preset(name: str, entry: object, problems: list[str]) -> Preset | None:
    path = f"$.presets.{name}"
    if not isinstance(entry, dict):
        problems.append(f"{path}: expected an object with provider and model")
        return None
    before = len(problems)
    values: dict[str, object] = {}
    for key, value in entry.items():
        check = _FIELDS.get(key)
        if check is not None:
            checked = check(f"{path}.{key}", value, problems)
            if checked is not None:
                values[key] = checked
        elif is_secret_name(key):
            problems.append(
                f"{path}.{key}: presets hold no secrets; put the key in an environment variable and name it "
                "with api_key_env"
            )
        else:
            close = difflib.get_close_matches(key, PRESET_FIELDS, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f"; a preset has {', '.join(PRESET_FIELDS)}"
            problems.append(f"{path}.{key}: unknown field{hint}")
    for required in ("provider", "model"):
        if required not in entry:
            problems.append(f"{path}: {required} is missing")
    if len(problems) > before:
        return None
    return msgspec.convert({"name": name, **values}, Preset)


def parse_presets(data: object) -> dict[str, Preset]:
    """The presets of a decoded config file (none when it has no ``presets``).

    Raises:
        PresetError: listing every problem (``problems``).
    """
    if not isinstance(data, dict) or "presets" not in data:
        return {}
    raw = data["presets"]
    if not isinstance(raw, dict):
        raise PresetError("$.presets: expected an object mapping preset names to presets", ["$.presets"])
    problems: list[str] = []
    presets: dict[str, Preset] = {}
    for name, entry in raw.items():
        preset = _preset(name, entry, problems)
        if preset is not None:
            presets[name] = preset
    if problems:
        head = problems[0] if len(problems) == 1 else f"{len(problems)} problems in the presets: " + "; ".join(problems)
        raise PresetError(head, problems)
    return presets


def load_presets(path: str | os.PathLike[str]) -> dict[str, Preset]:
    """The presets of the config file at ``path``.

    Raises:
        PresetError: the file cannot be read, is not JSON (with line and column), or a preset is
            invalid.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PresetError(f"cannot read {os.fspath(path)!r}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PresetError(
            f"{os.fspath(path)} is not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    try:
        return parse_presets(data)
    except PresetError as exc:
        raise PresetError(f"{os.fspath(path)}: {exc}", exc.problems) from None


def preset_names(presets: Mapping[str, Preset]) -> str:
    return ", ".join(sorted(presets)) or "none"


def provider_for(preset: Preset) -> HttpProvider:
    """The provider a preset names (its key read from the variable it names, or the default).

    Raises:
        PresetError: the provider needs a key and its variable is not set.
        ValueError: a bad option.
    """
    options: dict[str, object] = {"stream": preset.stream}
    if preset.timeout is not None:
        options["timeout"] = preset.timeout
    if preset.extra_body:
        options["extra_body"] = preset.extra_body
    return make_provider(
        preset.provider, preset.model, base_url=preset.base_url, api_key_env=preset.api_key_env, **options
    )
