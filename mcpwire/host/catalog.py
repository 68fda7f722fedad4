"""Prompts, resources and resource templates of every server, namespaced like tools.

Theory of operation: each connected server's lists are kept per server and replaced whole when
the server's list changes. A prompt is called by name, so its name is namespaced with the host's
format and made legal under MCP's own name rules (letters, digits, ``_``, ``-``, ``.``; 128
characters), with the same stable hash suffix as tools when a name is too long or taken. A
resource is read by URI on its server, so URIs stay as the server gave them; its ``name`` is
namespaced for display and for a gateway that must tell two servers' resources apart. Every entry
maps back to its server and original item.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from ..errors import HostError
from ..protocol.types import Prompt, Resource, ResourceTemplate
from .registry import DEFAULT_NAME_FORMAT, NAME_RULES, did_you_mean, legal_name

__all__ = ["Catalog", "RegisteredPrompt", "RegisteredResource", "RegisteredTemplate", "UnknownPrompt"]

log = logging.getLogger("mcpwire.host.catalog")

#: known names listed in an error message
SHOWN: Final = 10


class UnknownPrompt(HostError):
    """No server provides a prompt of that name."""


@dataclass(frozen=True, slots=True)
class RegisteredPrompt:
    name: str  #: the namespaced name
    server: str
    prompt: Prompt

    @property
    def original(self) -> tuple[str, str]:
        """``(server, prompt name on that server)``."""
        return self.server, self.prompt.name


@dataclass(frozen=True, slots=True)
class RegisteredResource:
    name: str  #: the namespaced name (the URI stands in for a missing name)
    server: str
    resource: Resource

    @property
    def uri(self) -> str:
        return self.resource.uri


@dataclass(frozen=True, slots=True)
class RegisteredTemplate:
    name: str  #: the namespaced name (the URI template stands in for a missing name)
    server: str
    template: ResourceTemplate

    @property
    def uri_template(self) -> str:
        return self.template.uri_template


@dataclass(slots=True)
class Catalog:
    """Per-server prompts, resources and templates, with namespaced names."""

    name_format: str = DEFAULT_NAME_FORMAT
    _prompts: dict[str, dict[str, RegisteredPrompt]] = field(default_factory=dict)
    _prompt_names: dict[str, RegisteredPrompt] = field(default_factory=dict)
    _resources: dict[str, list[RegisteredResource]] = field(default_factory=dict)
    _templates: dict[str, list[RegisteredTemplate]] = field(default_factory=dict)

    def _namespaced(self, prefix: str, name: str) -> str:
        return self.name_format.format(server=prefix, tool=name)

    def set_prompts(self, server: str, prompts: Iterable[Prompt], *, prefix: str | None = None) -> list[str]:
        """Replaces ``server``'s prompts; returns (and logs) a warning for each skipped one."""
        self._remove_prompts(server)
        rules = NAME_RULES["mcp"]
        mine: dict[str, RegisteredPrompt] = {}
        warnings: list[str] = []
        for prompt in sorted(prompts, key=lambda p: p.name):
            if any(r.prompt.name == prompt.name for r in mine.values()):
                warnings.append(f"server {server!r}: skipping prompt {prompt.name!r}: the server lists the name twice")
                continue
            wanted = self._namespaced(prefix or server, prompt.name)
            name = legal_name(wanted, rules)
            if name in self._prompt_names or name in mine:
                name = legal_name(wanted, rules, force_hash=True)
                if name in self._prompt_names or name in mine:  # pragma: no cover - a 24-bit hash collision
                    warnings.append(f"server {server!r}: skipping prompt {prompt.name!r}: no free name for {wanted!r}")
                    continue
            mine[name] = RegisteredPrompt(name=name, server=server, prompt=prompt)
        for warning in warnings:
            log.warning("%s", warning)
        self._prompts[server] = mine
        self._prompt_names.update(mine)
        return warnings

    def set_resources(self, server: str, resources: Iterable[Resource], *, prefix: str | None = None) -> None:
        """Replaces ``server``'s resources."""
        self._resources[server] = sorted(
            (RegisteredResource(self._namespaced(prefix or server, r.name or r.uri), server, r) for r in resources),
            key=lambda r: (r.name, r.uri),
        )

    def set_templates(self, server: str, templates: Iterable[ResourceTemplate], *, prefix: str | None = None) -> None:
        """Replaces ``server``'s resource templates."""
        self._templates[server] = sorted(
            (
                RegisteredTemplate(self._namespaced(prefix or server, t.name or t.uri_template), server, t)
                for t in templates
            ),
            key=lambda t: (t.name, t.uri_template),
        )

    def _remove_prompts(self, server: str) -> None:
        for reg in self._prompts.pop(server, {}).values():
            self._prompt_names.pop(reg.name, None)

    def remove_server(self, server: str) -> None:
        self._remove_prompts(server)
        self._resources.pop(server, None)
        self._templates.pop(server, None)

    def prompts(self, server: str | None = None) -> list[RegisteredPrompt]:
        """Prompts sorted by namespaced name, of every server or of one."""
        if server is not None:
            return sorted(self._prompts.get(server, {}).values(), key=lambda r: r.name)
        return sorted(self._prompt_names.values(), key=lambda r: r.name)

    def resources(self, server: str | None = None) -> list[RegisteredResource]:
        """Resources sorted by server, then namespaced name."""
        servers = [server] if server is not None else sorted(self._resources)
        return [r for s in servers for r in self._resources.get(s, [])]

    def templates(self, server: str | None = None) -> list[RegisteredTemplate]:
        """Resource templates sorted by server, then namespaced name."""
        servers = [server] if server is not None else sorted(self._templates)
        return [t for s in servers for t in self._templates.get(s, [])]

    def counts(self, server: str) -> tuple[int, int, int]:
        """``(prompts, resources, templates)`` of one server."""
        return (
            len(self._prompts.get(server, {})),
            len(self._resources.get(server, [])),
            len(self._templates.get(server, [])),
        )

    def resolve_prompt(self, name: str) -> RegisteredPrompt:
        """The prompt behind a namespaced name.

        Raises:
            UnknownPrompt: naming the closest known names, or all of them when few.
        """
        reg = self._prompt_names.get(name)
        if reg is not None:
            return reg
        known = sorted(self._prompt_names)
        close = difflib.get_close_matches(name, known, n=3)
        if close:
            hint = did_you_mean(close)
        elif known:
            hint = (
                "known prompts: "
                + ", ".join(known[:SHOWN])
                + (f" (and {len(known) - SHOWN} more)" if len(known) > SHOWN else "")
            )
        else:
            hint = "no server has prompts"
        raise UnknownPrompt(f"no prompt named {name!r}; {hint}")
