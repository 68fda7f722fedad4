"""Host configuration: ``mcp.json`` files in the Claude Desktop / Cursor, VS Code or SPEC-07 shape.

Theory of operation: the file is decoded as plain JSON (a file that is not JSON is refused with
the line and column of the first error), then every server entry is checked by hand
(:mod:`mcpwire.host.entries`) so that each problem names its JSON path and what was expected. A
bad entry is logged and skipped; a file in which every entry is bad is refused; ``strict=True``
raises one :class:`~mcpwire.errors.ConfigError` listing every problem. The values themselves
(:class:`ServerConfig`, :class:`PolicyConfig`...) live in :mod:`mcpwire.host.settings`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec

from ..errors import ConfigError
from .entries import Expander, kind, parse_entry
from .settings import (
    DEFAULT_TIMEOUT_SECONDS,
    HostConfig,
    PolicyConfig,
    ServerConfig,
    ToolPolicy,
    ToolSettings,
)

__all__ = [
    "CONFIG_ENV_VAR",
    "DEFAULT_TIMEOUT_SECONDS",
    "HostConfig",
    "PolicyConfig",
    "ServerConfig",
    "ToolPolicy",
    "ToolSettings",
    "find_config",
    "load_config",
    "parse_config",
    "parse_server",
    "search_paths",
]

log = logging.getLogger("mcpwire.host.config")

#: Environment variable naming the config file (second in the search order).
CONFIG_ENV_VAR: Final = "MCPWIRE_CONFIG"


def search_paths() -> list[Path]:
    """The default candidates, in order: ``./mcp.json``, then ``~/.config/mcpwire/mcp.json``."""
    return [Path.cwd() / "mcp.json", Path.home() / ".config" / "mcpwire" / "mcp.json"]


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file to use: ``explicit``; ``$MCPWIRE_CONFIG``; ``./mcp.json``;
    ``~/.config/mcpwire/mcp.json``. ``None`` when no candidate exists (an explicit path or
    ``$MCPWIRE_CONFIG`` that does not exist is a :class:`ConfigError`)."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        return path
    env = os.environ.get(CONFIG_ENV_VAR)
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConfigError(f"config file {env!r} (from ${CONFIG_ENV_VAR}) does not exist")
        return path
    for candidate in search_paths():
        if candidate.is_file():
            return candidate
    return None


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    strict: bool = False,
    environ: Mapping[str, str] | None = None,
) -> HostConfig:
    """Finds (see :func:`find_config`) and parses a config file; no file gives an empty config.

    Raises:
        ConfigError: the file is missing (when named), unreadable or not JSON (naming the line
            and column); its top level is not a config; every entry in it is invalid; or, with
            ``strict``, any entry has a problem.
    """
    found = find_config(path)
    if found is None:
        log.debug("no config file found; the host starts empty")
        return HostConfig()
    try:
        raw = found.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(found)!r}: {exc}") from exc
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ConfigError(f"config file {str(found)!r} is not valid JSON: {_json_error(raw, exc)}") from exc
    try:
        config = parse_config(data, base_path=found.resolve().parent, strict=strict, environ=environ)
    except ConfigError as exc:
        raise ConfigError(f"{found}: {exc}", exc.problems) from None
    return msgspec.structs.replace(config, path=str(found))


def parse_config(
    data: object,
    *,
    base_path: str | os.PathLike[str] | None = None,
    strict: bool = False,
    environ: Mapping[str, str] | None = None,
) -> HostConfig:
    """Validates decoded JSON. Bad entries are logged and skipped, or raised all at once.

    Raises:
        ConfigError: the top level is not an object with ``mcpServers`` or ``servers``; every
            entry is invalid; or, in strict mode, any problem (``problems`` lists all of them).
    """
    env = os.environ if environ is None else environ
    base = str(Path(base_path)) if base_path is not None else os.getcwd()
    if not isinstance(data, dict):
        raise ConfigError(f"$: expected a JSON object with 'mcpServers' or 'servers', got {kind(data)}")
    key = "mcpServers" if "mcpServers" in data else "servers" if "servers" in data else None
    if key is None:
        if not data:
            return HostConfig()
        raise ConfigError("$: expected a key 'mcpServers' (Claude Desktop, Cursor) or 'servers' (VS Code)")
    entries = data[key]
    problems: list[str] = []
    servers: list[ServerConfig] = []
    raw: dict[str, Mapping[str, object]] = {}
    if not isinstance(entries, dict):
        problems.append(f"$.{key}: expected an object mapping server names to entries, got {kind(entries)}")
        entries = {}
    for name, entry in entries.items():
        entry_problems: list[str] = []
        server = parse_entry(f"$.{key}.{name}", name, entry, Expander(env, base, entry_problems), entry_problems)
        if entry_problems or server is None:
            for problem in entry_problems:
                log.warning("config: skipping server %r: %s", name, problem)
            problems.extend(entry_problems)
            continue
        servers.append(server)
        raw[name] = entry
    if strict and problems:
        raise ConfigError(f"{len(problems)} problem(s) in the configuration:\n  " + "\n  ".join(problems), problems)
    if problems and not servers:
        count = len(entries)
        what = f"every server entry ({count}) is invalid" if count else "the server list is invalid"
        raise ConfigError(f"{what}:\n  " + "\n  ".join(problems), problems)
    return HostConfig(servers=tuple(servers), problems=tuple(problems), entries=raw)


def parse_server(
    name: str,
    entry: Mapping[str, object],
    *,
    base_path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    strict: bool = False,
) -> ServerConfig:
    """One entry, as in a file's ``mcpServers`` (used by ``Host.register`` with a dict, and by
    the service's API, ``strict``: every unknown key is a problem, not only a misspelt one).

    Raises:
        ConfigError: listing every problem of the entry, each at its JSON path (``$.NAME.url``).
    """
    env = os.environ if environ is None else environ
    base = str(Path(base_path)) if base_path is not None else os.getcwd()
    problems: list[str] = []
    server = parse_entry(f"$.{name}", name, dict(entry), Expander(env, base, problems), problems, strict=strict)
    if problems or server is None:
        raise ConfigError(f"server {name!r}: " + "; ".join(problems), problems)
    return server


def _json_error(raw: bytes, exc: msgspec.DecodeError) -> str:
    """Where the JSON breaks, as ``line L, column C: what`` (``json`` knows the position)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        where = f"line {err.lineno}, column {err.colno}: {err.msg}"
        if err.pos >= len(text.rstrip()):
            where += " (the file ends early; is it truncated?)"
        return where
    return str(exc)  # pragma: no cover - json accepts what msgspec refused
