"""Which server ``mcpwire check`` checks, built from its command line or an ``mcp.json``.

Theory of operation: a target is a URL (Streamable HTTP or HTTP+SSE), ``-- CMD ARGS...`` (stdio),
a server named in a config, or nothing (the bundled reference server). A stdio server never gets
our whole environment: it starts with the minimal one (:data:`mcpwire.transports.DEFAULT_INHERITED_ENV`),
plus ``--env NAME=VALUE`` and ``--env-pass NAME`` (copied from ours), or a config entry's ``env``.
Every credential the user gives (every header value, the ``--bearer-env`` token, secret-named
``--env`` values) is listed in :attr:`Target.secrets` or :attr:`Target.headers`, which the run's
redactor masks in every report.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mcpwire.redaction import is_secret_name
from mcpwire.transports import DEFAULT_INHERITED_ENV, HttpServer, split_header

from .context import Target, ToolPolicy

__all__ = [
    "UsageError",
    "config_target",
    "config_targets",
    "env_additions",
    "headers_from",
    "minimal_env",
    "reference_target",
    "reference_tool_policy",
    "url_target",
]


class UsageError(Exception):
    """Bad command line; its message is the one line printed (exit status 2)."""


def env_additions(
    env: Sequence[str] = (), env_pass: Sequence[str] = (), *, base: Mapping[str, str] | None = None
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The variables ``--env NAME=VALUE`` and ``--env-pass NAME`` (copied from ``base``, default
    ours) give a stdio server, and the values among them to mask (those with secret-looking names).

    Raises:
        UsageError: a pair without ``=`` (never echoed: it may be a secret), or an unset variable.
    """
    source = os.environ if base is None else base
    out: dict[str, str] = {}
    secrets: list[str] = []
    for name in env_pass:
        if name not in source:
            raise UsageError(f"--env-pass {name}: the variable is not set")
        out[name] = source[name]
        if is_secret_name(name):
            secrets.append(source[name])
    for pair in env:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError("--env expects NAME=VALUE; one of the values given has no NAME= part")
        out[name] = value
        if is_secret_name(name):
            secrets.append(value)
    return out, tuple(secrets)


def minimal_env(
    env: Sequence[str] = (), env_pass: Sequence[str] = (), *, base: Mapping[str, str] | None = None
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The whole environment of a stdio server started from the command line: the minimal
    inherited set, plus :func:`env_additions`; and the values in it to mask."""
    source = os.environ if base is None else base
    out = {k: v for k in DEFAULT_INHERITED_ENV if (v := source.get(k)) is not None}
    added, secrets = env_additions(env, env_pass, base=source)
    out.update(added)
    return out, secrets


def reference_target() -> Target:
    """The bundled reference server (the default target), with the minimal environment plus the
    path of this mcpwire (so that it runs from a source checkout too)."""
    import mcpwire

    env, _ = minimal_env()
    home = str(Path(mcpwire.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (home, os.environ.get("PYTHONPATH", "")) if p)
    return Target((sys.executable, "-u", "-m", "mcpwire.testing.everything"), env=env, name="mcpwire reference server")


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


def headers_from(values: Sequence[str], bearer_env: str | None) -> dict[str, str]:
    """``--header`` values and the ``--bearer-env`` token as headers.

    Raises:
        UsageError: a malformed header (its value is never echoed), or an unset variable.
    """
    headers: dict[str, str] = {}
    for header in values:
        try:
            name, value = split_header(header)
        except ValueError as exc:
            raise UsageError(f"--header: {exc}") from None
        headers[name] = value
    if bearer_env is not None:
        token = os.environ.get(bearer_env)
        if not token:
            raise UsageError(f"--bearer-env {bearer_env}: the variable is not set or empty")
        headers["Authorization"] = f"Bearer {token}"
    return headers


def url_target(url: str, transport: str) -> Target:
    """A URL positional as a target.

    Raises:
        UsageError: it is not an http(s) URL with a host.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{url!r} is not an http(s) URL with a host")
    return Target(url=url, transport=transport)


def _config_data(path: Path) -> tuple[Any, Any]:
    from mcpwire.errors import ConfigError
    from mcpwire.host.config import parse_config

    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None
    try:
        config = parse_config(data, base_path=path.resolve().parent)
    except ConfigError as exc:
        raise UsageError(f"{path}: {exc}") from None
    return data, config


def _entry_target(path: Path, data: Any, server: Any) -> Target:
    name = server.name
    entries = (data.get("mcpServers") or data.get("servers") or {}) if isinstance(data, dict) else {}
    entry = entries.get(name) if isinstance(entries, dict) else None
    era = entry.get("era") if isinstance(entry, dict) else None
    if era not in (None, "legacy", "modern"):
        raise UsageError(f'{path}: server {name!r} has "era": {era!r}; expected "legacy" or "modern"')
    spec = server.to_spec()
    if isinstance(spec, HttpServer):
        transport = {"auto": "auto", "streamable-http": "http", "sse": "sse"}[spec.transport]
        if server.type == "sse":
            transport = "sse"
        return Target(url=spec.url, transport=transport, headers=spec.auth_headers(), name=name, era=era)
    secrets = tuple(v for k, v in server.env.items() if is_secret_name(k))
    return Target(tuple(spec.argv), env=spec.environment(), name=name, era=era, cwd=spec.cwd, secrets=secrets)


def config_target(path: Path, name: str) -> Target:
    """The server ``name`` of the config at ``path``.

    Raises:
        UsageError: the file cannot be read, or has no usable server of that name.
    """
    data, config = _config_data(path)
    server = next((s for s in config.servers if s.name == name), None)
    if server is None:
        problems = [p for p in config.problems if f".{name}" in p]
        detail = f": {'; '.join(problems)}" if problems else ""
        raise UsageError(f"{path} has no usable server named {name!r}{detail}")
    return _entry_target(path, data, server)


def config_targets(path: Path) -> list[tuple[str, Target | str]]:
    """Every server of the config at ``path`` that is enabled, in file order: its target, or the
    problem that keeps it from being checked (an invalid entry is listed with its problems).

    Raises:
        UsageError: the file cannot be read, or holds no server at all.
    """
    data, config = _config_data(path)
    out: list[tuple[str, Target | str]] = []
    for server in config.servers:
        if not server.enabled:
            continue
        try:
            out.append((server.name, _entry_target(path, data, server)))
        except UsageError as exc:
            out.append((server.name, str(exc)))
    valid = {s.name for s in config.servers}
    entries = (data.get("mcpServers") or data.get("servers") or {}) if isinstance(data, dict) else {}
    for name in entries if isinstance(entries, dict) else ():
        if name not in valid:
            problems = [p for p in config.problems if f".{name}" in p]
            out.append((str(name), "; ".join(problems) or "invalid entry"))
    if not out:
        raise UsageError(f"{path} has no enabled server to check")
    return out
