"""The host's tool registry: namespaced names, a reverse map, and provider exports.

Theory of operation: each server's tools get a name built from a format (``{server}__{tool}``
by default), made legal for the provider (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``). A name that had
to be changed (illegal characters, truncation, collision) gets a short stable hash suffix, so
the same tool always maps to the same name. Tools with an invalid ``inputSchema`` or a name
that still collides are skipped with a warning.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import UnknownTool
from ..protocol.types import Tool

__all__ = ["DEFAULT_NAME_FORMAT", "MAX_NAME_LENGTH", "RegisteredTool", "ToolRegistry", "legal_name"]

log = logging.getLogger("mcpwire.host.registry")

DEFAULT_NAME_FORMAT: Final = "{server}__{tool}"
MAX_NAME_LENGTH: Final = 64
_ILLEGAL = re.compile(r"[^a-zA-Z0-9_-]")
_LEGAL = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def legal_name(wanted: str, *, max_length: int = MAX_NAME_LENGTH) -> str:
    """``wanted`` if legal for OpenAI; else cleaned and truncated with a stable hash suffix."""
    if _LEGAL.match(wanted) and len(wanted) <= max_length:
        return wanted
    cleaned = _ILLEGAL.sub("_", wanted)
    suffix = "_" + _hash(wanted)
    return cleaned[: max_length - len(suffix)] + suffix


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    """A tool as the host exposes it."""

    name: str  #: the namespaced, provider-legal name
    server: str
    tool: Tool

    @property
    def read_only(self) -> bool:
        ann = self.tool.annotations
        return bool(ann is not None and ann.read_only_hint)

    @property
    def idempotent(self) -> bool:
        ann = self.tool.annotations
        return bool(ann is not None and (ann.read_only_hint or ann.idempotent_hint))


def _schema_ok(schema: object) -> bool:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return False
    props = schema.get("properties", {})
    return isinstance(props, dict)


@dataclass(slots=True)
class ToolRegistry:
    """Namespaced tools of every server; rebuilt per server when its tool list changes."""

    name_format: str = DEFAULT_NAME_FORMAT
    _by_server: dict[str, dict[str, RegisteredTool]] = field(default_factory=dict)
    _by_name: dict[str, RegisteredTool] = field(default_factory=dict)

    def set_tools(
        self,
        server: str,
        tools: Iterable[Tool],
        *,
        prefix: str | None = None,
        allowed: Sequence[str] | None = None,
        disabled: Sequence[str] = (),
    ) -> list[str]:
        """Replaces ``server``'s tools; returns warnings for the skipped ones."""
        self.remove_server(server)
        warnings: list[str] = []
        mine: dict[str, RegisteredTool] = {}
        for tool in tools:
            if allowed is not None and not any(fnmatch.fnmatchcase(tool.name, g) for g in allowed):
                continue
            if any(fnmatch.fnmatchcase(tool.name, g) for g in disabled):
                continue
            if not _schema_ok(tool.input_schema):
                warnings.append(f"server {server!r}: skipping tool {tool.name!r}: inputSchema is not an object schema")
                continue
            wanted = self.name_format.format(server=prefix or server, tool=tool.name)
            name = legal_name(wanted)
            if name in self._by_name or name in mine:
                other = self._by_name.get(name) or mine[name]
                alt = legal_name(wanted[: MAX_NAME_LENGTH - 7] + "_" + _hash(f"{server}\0{tool.name}"))
                if alt in self._by_name or alt in mine:
                    warnings.append(
                        f"server {server!r}: skipping tool {tool.name!r}: its name {name!r} collides with "
                        f"tool {other.tool.name!r} of server {other.server!r}"
                    )
                    continue
                name = alt
            mine[name] = RegisteredTool(name=name, server=server, tool=tool)
        for warning in warnings:
            log.warning("%s", warning)
        self._by_server[server] = {r.tool.name: r for r in mine.values()}
        self._by_name.update(mine)
        return warnings

    def remove_server(self, server: str) -> None:
        for reg in self._by_server.pop(server, {}).values():
            self._by_name.pop(reg.name, None)

    def clear(self) -> None:
        self._by_server.clear()
        self._by_name.clear()

    def resolve(self, name: str) -> RegisteredTool:
        """The tool behind a namespaced name. Raises UnknownTool."""
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(sorted(self._by_name)[:10]) or "none"
            raise UnknownTool(f"no tool named {name!r}; known tools: {known}") from None

    def name_for(self, server: str, tool: str) -> str:
        """The namespaced name of ``server``'s ``tool`` (the reverse of :meth:`resolve`)."""
        try:
            return self._by_server[server][tool].name
        except KeyError:
            raise UnknownTool(f"server {server!r} has no tool {tool!r}") from None

    def tools(self, server: str | None = None) -> list[RegisteredTool]:
        if server is not None:
            return list(self._by_server.get(server, {}).values())
        return list(self._by_name.values())

    def count(self, server: str) -> int:
        return len(self._by_server.get(server, {}))

    # -- exports ------------------------------------------------------------------------------

    def to_openai(self, *, strict: bool = False) -> list[dict[str, Any]]:
        """Chat Completions ``tools`` entries; ``strict`` rewrites schemas for strict mode."""
        out: list[dict[str, Any]] = []
        for reg in self.tools():
            params: dict[str, Any] = copy.deepcopy(reg.tool.input_schema)
            params.setdefault("properties", {})
            function: dict[str, Any] = {
                "name": reg.name,
                "description": reg.tool.description or "",
                "parameters": strict_schema(params) if strict else params,
            }
            if strict:
                function["strict"] = True
            out.append({"type": "function", "function": function})
        return out

    def to_anthropic(self) -> list[dict[str, Any]]:
        """Messages API ``tools`` entries."""
        return [
            {"name": r.name, "description": r.tool.description or "", "input_schema": dict(r.tool.input_schema)}
            for r in self.tools()
        ]

    def to_markdown(self) -> str:
        lines = ["| Tool | Server | Description |", "| --- | --- | --- |"]
        for r in sorted(self.tools(), key=lambda r: r.name):
            desc = (r.tool.description or "").replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{r.name}` | {r.server} | {desc} |")
        return "\n".join(lines) + "\n"


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI strict mode: ``additionalProperties: false``, every property required, and
    optional properties made nullable (a union with ``null``), recursively."""
    out = dict(schema)
    if out.get("type") == "object" or "properties" in out:
        props: dict[str, Any] = dict(out.get("properties") or {})
        required = set(out.get("required") or [])
        new_props: dict[str, Any] = {}
        for key, sub in props.items():
            sub = strict_schema(sub) if isinstance(sub, dict) else sub
            if key not in required and isinstance(sub, dict):
                sub = _nullable(sub)
            new_props[key] = sub
        out["properties"] = new_props
        out["required"] = list(props)
        out["additionalProperties"] = False
    if isinstance(out.get("items"), dict):
        out["items"] = strict_schema(out["items"])
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]} if kind != "null" else schema
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}
