"""The servers ``mcpwire check`` knows by itself: the bundled reference server, and every server of
a config (``--config FILE`` without a name, or ``--all``).

Theory of operation: the command line names one server with :mod:`mcpwire.cliargs` (a URL,
``-- CMD ARGS...``, a config entry, or nothing); this module adds what the checker needs beyond it.
The reference server is run with the minimal environment plus the path of this mcpwire; its
read-only tools are allowed by name (:func:`reference_tool_policy`). A config entry may pin the era
checked with ``"era": "legacy"`` or ``"modern"`` (read from the file itself: the host ignores the
key). Every server of a config becomes a :class:`~.context.Target` whose header values and
environment values are masked in every report.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpwire.cliargs import UsageError
from mcpwire.redaction import SecretValues
from mcpwire.transports import DEFAULT_INHERITED_ENV, HttpServer, StdioServer

from .context import Target, ToolPolicy

if TYPE_CHECKING:
    from mcpwire.host.config import HostConfig, ServerConfig

__all__ = ["config_targets", "entry_era", "reference_target", "reference_tool_policy", "spec_target"]

_PROBLEM_OF = re.compile(r"^\$\.(?:mcpServers|servers)\.([^.\[:]+)")


def reference_target() -> Target:
    """The bundled reference server (the default target), with the minimal environment plus the
    path of this mcpwire (so that it runs from a source checkout too)."""
    import mcpwire

    env = {k: v for k in DEFAULT_INHERITED_ENV if (v := os.environ.get(k)) is not None}
    home = str(Path(mcpwire.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (home, os.environ.get("PYTHONPATH", "")) if p)
    module = "mcpwire.testing.everything"
    # the module serves through mcpwire.testing.reference, which it imports only once it runs
    preload = ("mcpwire.testing.reference",)
    argv = (sys.executable, "-u", "-m", module)
    return Target(argv, env=env, name="mcpwire reference server", fork_module=module, fork_preload=preload)


def reference_tool_policy() -> ToolPolicy:
    """``read-only`` plus, by name, every tool the reference server annotates read-only (its own
    word, read in-process from a 2025-11-25 ``tools/list``): 2024-11-05 lists the same tools without
    annotations."""
    from mcpwire.testing.everything import EverythingServer

    answers: list[Any] = []
    server = EverythingServer(answers.append, name="mcpwire reference server")
    try:
        params: Any = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "mcpwire", "version": "0"},
        }
        server.handle_message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        server.handle_message({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.handle_message({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    finally:
        server.close()
    listed = next((a["result"].get("tools") for a in answers if isinstance(a, dict) and a.get("id") == 2), None)
    policy = ToolPolicy("read-only")
    safe = tuple(str(t.get("name")) for t in listed or () if isinstance(t, dict) and policy.refuses(t) is None)
    return ToolPolicy("read-only", safe)


def entry_era(path: Path | None, name: str) -> str | None:
    """The ``"era"`` pin of the config entry ``name`` (``"legacy"``, ``"modern"`` or None).

    Raises:
        UsageError: the entry pins something else.
    """
    if path is None:
        return None
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entries = (data.get("mcpServers") or data.get("servers") or {}) if isinstance(data, dict) else {}
    entry = entries.get(name) if isinstance(entries, dict) else None
    era = entry.get("era") if isinstance(entry, dict) else None
    if era not in (None, "legacy", "modern"):
        raise UsageError(f'{path}: server {name!r} has "era": {era!r}; expected "legacy" or "modern"')
    return era if isinstance(era, str) else None


def spec_target(spec: StdioServer | HttpServer, *, name: str = "", era: str | None = None) -> Target:
    """A transport spec (from the command line or a config) as the checker's target."""
    if isinstance(spec, HttpServer):
        transport = {"auto": "auto", "streamable-http": "http", "sse": "sse"}[spec.transport]
        return Target(url=spec.url, transport=transport, headers=spec.auth_headers(), name=name, era=era)
    return Target(tuple(spec.argv), env=spec.environment(), name=name, era=era, cwd=spec.cwd)


def _server_target(path: Path | None, server: ServerConfig) -> Target:
    spec = server.to_spec()
    target = spec_target(spec, name=server.name, era=entry_era(path, server.name))
    if isinstance(spec, StdioServer):
        return Target(
            target.argv,
            env=target.env,
            name=target.name,
            era=target.era,
            cwd=target.cwd,
            masked=SecretValues(spec.env.values()),
        )
    return target


def config_targets(config: HostConfig) -> list[tuple[str, Target | str]]:
    """Every server of ``config`` that is enabled, in file order: its target, or the problem that
    keeps it from being checked (an invalid entry is listed with its problems).

    Raises:
        UsageError: the config holds no server at all.
    """
    path = Path(config.path) if config.path else None
    out: list[tuple[str, Target | str]] = []
    for server in config.servers:
        if not server.enabled:
            continue
        try:
            out.append((server.name, _server_target(path, server)))
        except UsageError as exc:
            out.append((server.name, str(exc)))
    invalid: dict[str, list[str]] = {}
    for problem in config.problems:
        match = _PROBLEM_OF.match(problem)
        if match is not None and match.group(1) not in {s.name for s in config.servers}:
            invalid.setdefault(match.group(1), []).append(problem)
    out += [(name, "; ".join(problems)) for name, problems in invalid.items()]
    if not out:
        raise UsageError(f"{config.path or 'the config'} has no enabled server to check")
    return out
