"""The host's tool registry: namespaced names, a reverse map, and provider exports.

Theory of operation: each server's tools get a name built from a format (``{server}__{tool}``
by default; ``mcp_{server}_{tool}`` and ``{server}:{tool}`` are common; TL-04: "Clients or
proxies that aggregate tools from multiple servers ... SHOULD implement a disambiguation strategy
such as prefixing tool names with a server identifier"), then made legal for the
model provider (OpenAI and Anthropic: ``^[a-zA-Z0-9_-]{1,64}$``; MCP itself allows 128
characters and dots, TL-03). Illegal characters become ``_``; a name that is too long, or that now
collides with another tool's legal name, gets a short stable hash of its namespaced form, so
the same tool always gets the same name. Two tools whose namespaced names are identical (say
server ``a``'s ``b__c`` and server ``a__b``'s ``c``) are ambiguous: the later one is skipped with
a warning naming both, as are tools whose ``inputSchema`` is not a valid object schema. Within a
server, names that needed no change are placed first, so listing order never decides which tool
keeps the plain name. Every name maps back to its (server, tool).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import fnmatch
import hashlib
import logging
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..errors import UnknownTool
from ..protocol.types import Tool
from .schema import check_input_schema, describe_parameters, strict_schema

__all__ = [
    "DEFAULT_NAME_FORMAT",
    "NAME_RULES",
    "NameRules",
    "RegisteredTool",
    "ToolRegistry",
    "did_you_mean",
    "legal_name",
]

log = logging.getLogger("mcpwire.host.registry")

DEFAULT_NAME_FORMAT: Final = "{server}__{tool}"
HASH_LENGTH: Final = 6
#: known names listed in an error message
SHOWN: Final = 10


@dataclass(frozen=True, slots=True)
class NameRules:
    """What a provider accepts as a tool name."""

    illegal: re.Pattern[str]
    max_length: int


#: ``openai`` and ``anthropic``: ``^[a-zA-Z0-9_-]{1,64}$``; ``mcp``: 128 characters, dots allowed.
NAME_RULES: Final[dict[str, NameRules]] = {
    "openai": NameRules(re.compile(r"[^a-zA-Z0-9_-]"), 64),
    "anthropic": NameRules(re.compile(r"[^a-zA-Z0-9_-]"), 64),
    "mcp": NameRules(re.compile(r"[^a-zA-Z0-9_.-]"), 128),
}
Provider = Literal["openai", "anthropic", "mcp"]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def legal_name(wanted: str, rules: NameRules = NAME_RULES["openai"], *, force_hash: bool = False) -> str:
    """``wanted`` with illegal characters replaced; cut to the maximum length with a stable
    hash suffix when too long (or when ``force_hash``)."""
    cleaned = rules.illegal.sub("_", wanted) or "tool"
    if len(cleaned) <= rules.max_length and not force_hash:
        return cleaned
    suffix = "_" + _hash(wanted)
    return cleaned[: rules.max_length - len(suffix)] + suffix


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    """A tool as the host exposes it."""

    name: str  #: the namespaced, provider-legal name
    server: str
    tool: Tool
    namespaced: str = ""  #: the name the format gave, before it was made legal
    #: its definition changed since it was pinned: hidden from lists and refused by calls
    quarantined: bool = False

    @property
    def original(self) -> tuple[str, str]:
        """``(server, tool name on that server)``."""
        return self.server, self.tool.name

    @property
    def read_only(self) -> bool | None:
        ann = self.tool.annotations
        return None if ann is None else ann.read_only_hint

    @property
    def idempotent(self) -> bool | None:
        ann = self.tool.annotations
        if ann is None:
            return None
        if ann.read_only_hint:
            return True
        return ann.idempotent_hint

    @property
    def destructive(self) -> bool | None:
        ann = self.tool.annotations
        return None if ann is None else ann.destructive_hint

    @property
    def open_world(self) -> bool | None:
        ann = self.tool.annotations
        return None if ann is None else ann.open_world_hint


@dataclass(slots=True)
class ToolRegistry:
    """Namespaced tools of every server; rebuilt per server when its tool list changes.

    Args:
        name_format: ``{server}`` and ``{tool}`` placeholders.
        provider: whose name rules apply (``openai``, ``anthropic`` or ``mcp``).
        describe_server: exported descriptions start with ``[server]``.
    """

    name_format: str = DEFAULT_NAME_FORMAT
    provider: Provider = "openai"
    describe_server: bool = False
    _by_server: dict[str, dict[str, RegisteredTool]] = field(default_factory=dict)
    _by_name: dict[str, RegisteredTool] = field(default_factory=dict)
    _by_namespaced: dict[str, RegisteredTool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.provider not in NAME_RULES:
            raise ValueError(f"provider must be one of {', '.join(NAME_RULES)}, not {self.provider!r}")
        if "{tool}" not in self.name_format:
            raise ValueError(f"name_format must contain '{{tool}}', got {self.name_format!r}")
        try:
            self.name_format.format(server="s", tool="t")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"name_format may use only {{server}} and {{tool}}: {exc}") from None

    def set_tools(
        self,
        server: str,
        tools: Iterable[Tool],
        *,
        prefix: str | None = None,
        allowed: Sequence[str] | None = None,
        disabled: Sequence[str] = (),
        quarantined: Collection[str] = (),
    ) -> list[str]:
        """Replaces ``server``'s tools; returns (and logs) a warning for each skipped one.
        Tools named in ``quarantined`` are registered but hidden (see :meth:`tools`)."""
        self.remove_server(server)
        rules = NAME_RULES[self.provider]
        warnings: list[str] = []
        seen: set[str] = set()
        candidates: list[tuple[str, str, Tool]] = []
        for tool in tools:
            if tool.name in seen:
                warnings.append(f"server {server!r}: skipping tool {tool.name!r}: the server lists the name twice")
                continue
            seen.add(tool.name)
            if allowed is not None and not any(fnmatch.fnmatchcase(tool.name, g) for g in allowed):
                continue
            if any(fnmatch.fnmatchcase(tool.name, g) for g in disabled):
                continue
            problem = check_input_schema(tool.input_schema)
            if problem is not None:
                warnings.append(f"server {server!r}: skipping tool {tool.name!r}: {problem}")
                continue
            wanted = self.name_format.format(server=prefix or server, tool=tool.name)
            candidates.append((wanted, legal_name(wanted, rules), tool))
        # names that needed no change first, then by name: the result does not depend on order
        candidates.sort(key=lambda c: (c[0] != c[1], c[0]))
        mine: dict[str, RegisteredTool] = {}
        mine_namespaced: dict[str, RegisteredTool] = {}
        for wanted, name, tool in candidates:
            other = self._by_namespaced.get(wanted) or mine_namespaced.get(wanted)
            if other is not None:
                warnings.append(
                    f"server {server!r}: skipping tool {tool.name!r}: its name {wanted!r} collides with "
                    f"tool {other.tool.name!r} of server {other.server!r}"
                )
                continue
            if name in self._by_name or name in mine:
                name = legal_name(wanted, rules, force_hash=True)
                if name in self._by_name or name in mine:  # pragma: no cover - a 24-bit hash collision
                    warnings.append(f"server {server!r}: skipping tool {tool.name!r}: no free name for {wanted!r}")
                    continue
            reg = RegisteredTool(
                name=name, server=server, tool=tool, namespaced=wanted, quarantined=tool.name in quarantined
            )
            mine[name] = reg
            mine_namespaced[wanted] = reg
        for warning in warnings:
            log.warning("%s", warning)
        self._by_server[server] = {r.tool.name: r for r in mine.values()}
        self._by_name.update(mine)
        self._by_namespaced.update(mine_namespaced)
        return warnings

    def remove_server(self, server: str) -> None:
        for reg in self._by_server.pop(server, {}).values():
            self._by_name.pop(reg.name, None)
            self._by_namespaced.pop(reg.namespaced, None)

    def clear(self) -> None:
        self._by_server.clear()
        self._by_name.clear()
        self._by_namespaced.clear()

    def set_quarantined(self, server: str, tool: str, quarantined: bool) -> bool:
        """Hides or shows one registered tool; False when it is not registered."""
        reg = self._by_server.get(server, {}).get(tool)
        if reg is None:
            return False
        new = dataclasses.replace(reg, quarantined=quarantined)
        self._by_server[server][tool] = new
        self._by_name[new.name] = new
        self._by_namespaced[new.namespaced] = new
        return True

    def resolve(self, name: str) -> RegisteredTool:
        """The tool behind a name (the legal one, or the namespaced form before it was made
        legal), quarantined or not.

        Raises:
            UnknownTool: naming the closest known names ("did you mean ...?"), or some of them.
        """
        reg = self._by_name.get(name) or self._by_namespaced.get(name)
        if reg is not None:
            return reg
        known = [r.name for r in self.tools()]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        if close:
            hint = did_you_mean(close)
        elif known:
            hint = f"{len(known)} known tools: " + ", ".join(known[:SHOWN])
            hint += f" (and {len(known) - SHOWN} more)" if len(known) > SHOWN else ""
        else:
            hint = "no tools are registered"
        raise UnknownTool(f"no tool named {name!r}; {hint}")

    def name_for(self, server: str, tool: str) -> str:
        """The namespaced name of ``server``'s ``tool`` (the reverse of :meth:`resolve`)."""
        try:
            return self._by_server[server][tool].name
        except KeyError:
            raise UnknownTool(f"server {server!r} has no tool {tool!r} in the registry") from None

    def tools(self, server: str | None = None, *, include_quarantined: bool = False) -> list[RegisteredTool]:
        """Registered tools sorted by name, of every server or of one (quarantined ones only
        when asked)."""
        pool = self._by_server.get(server, {}).values() if server is not None else self._by_name.values()
        return sorted((r for r in pool if include_quarantined or not r.quarantined), key=lambda r: r.name)

    def count(self, server: str) -> int:
        """Visible (not quarantined) tools of one server."""
        return sum(not r.quarantined for r in self._by_server.get(server, {}).values())

    def __len__(self) -> int:
        return sum(not r.quarantined for r in self._by_name.values())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    # -- exports ------------------------------------------------------------------------------

    def to_openai(self, *, strict: bool = False, api: Literal["chat", "responses"] = "chat") -> list[dict[str, Any]]:
        """OpenAI function tools: Chat Completions (``{"type": "function", "function": {...}}``)
        or the Responses API (flat). ``strict`` rewrites every schema for strict mode."""
        out: list[dict[str, Any]] = []
        for reg in self.tools():
            params: dict[str, Any] = copy.deepcopy(reg.tool.input_schema)
            params.setdefault("properties", {})
            function: dict[str, Any] = {
                "name": reg.name,
                "description": self.description(reg),
                "parameters": strict_schema(params) if strict else params,
            }
            if strict:
                function["strict"] = True
            out.append(
                {"type": "function", **function} if api == "responses" else {"type": "function", "function": function}
            )
        return out

    def to_anthropic(self) -> list[dict[str, Any]]:
        """Messages API ``tools`` entries."""
        return [
            {"name": r.name, "description": self.description(r), "input_schema": copy.deepcopy(r.tool.input_schema)}
            for r in self.tools()
        ]

    def to_markdown(self, *, title: str = "Tools") -> str:
        """A description of every tool for a system prompt: name, server, description and
        parameters."""
        lines = [f"## {title}", ""]
        visible = self.tools()
        if not visible:
            lines.append("No tools are available.")
        for r in visible:
            lines.append(f"### `{r.name}`")
            lines.append("")
            desc = self.description(r)
            if desc:
                lines += [desc, ""]
            lines.append(f"Server: `{r.server}`, tool `{r.tool.name}`.")
            params = describe_parameters(r.tool.input_schema)
            lines += ["", "Parameters:", *params] if params else ["", "No parameters."]
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"

    def description(self, reg: RegisteredTool) -> str:
        """The description exported for ``reg`` (with its title, and ``[server]`` when asked)."""
        text = _description(reg)
        return f"[{reg.server}] {text}".rstrip() if self.describe_server else text


def did_you_mean(names: Sequence[str]) -> str:
    """``did you mean 'a'?``, ``did you mean 'a' or 'b'?``, ``did you mean 'a', 'b' or 'c'?``"""
    quoted = [repr(n) for n in names]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"did you mean {listed}?"


def _description(reg: RegisteredTool) -> str:
    text = (reg.tool.description or "").strip()
    title = reg.tool.display_name
    if title != reg.tool.name and title not in text:
        text = f"{title}. {text}" if text else title
    return text
