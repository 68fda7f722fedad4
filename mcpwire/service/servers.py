"""The servers the service runs: the config file's, with what the API changed laid over them.

Theory of operation: the user's mcp.json is read, never written. What the API does is kept in the
store, one row per server name: the entry of a server added through the API, the fields of a
config server the API edited (a *patch*: enabled, timeout, allowed/blocked tools, era), or a
tombstone for a config server the API removed. At start-up the rows are laid over the file's
servers; at run time each change is stored first and then applied to the host, so what a caller
was told happened survives a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import msgspec
import trio

from ..errors import ConfigError, HostError
from ..host import Host, HostConfig, ServerConfig, parse_server
from ..protocol.types import JSONValue
from .problems import ProblemError, field_errors_from_problems
from .store import ServerRow, Store

__all__ = ["PATCH_KEYS", "ServerManager", "apply_patch", "effective_config"]

log = logging.getLogger("mcpwire.service.servers")

JSONObject = dict[str, JSONValue]
Source = Literal["config", "api"]
#: fields PATCH may change, as mcp.json spells them
PATCH_KEYS = ("enabled", "timeout_seconds", "allowed_tools", "disabled_tools", "era")


def apply_patch(config: ServerConfig, patch: Mapping[str, JSONValue]) -> ServerConfig:
    """``config`` with the patched fields changed."""
    changes: dict[str, object] = {}
    if "enabled" in patch and isinstance(patch["enabled"], bool):
        changes["enabled"] = patch["enabled"]
    if "allowed_tools" in patch:
        allowed = patch["allowed_tools"]
        changes["allowed_tools"] = None if allowed is None else tuple(str(t) for t in allowed)  # type: ignore[union-attr]
    if "disabled_tools" in patch and isinstance(patch["disabled_tools"], list):
        changes["disabled_tools"] = tuple(str(t) for t in patch["disabled_tools"])
    if patch.get("era") in ("auto", "legacy", "modern"):
        changes["era"] = None if patch["era"] == "auto" else patch["era"]
    if "timeout_seconds" in patch:
        timeout = patch["timeout_seconds"]
        if isinstance(timeout, int | float) and not isinstance(timeout, bool):
            changes["policy"] = msgspec.structs.replace(config.policy, timeout_seconds=float(timeout))
    return msgspec.structs.replace(config, **changes) if changes else config


def _parse(name: str, entry: JSONObject, base: Path | None) -> ServerConfig:
    return parse_server(name, entry, base_path=base)


def effective_config(file: HostConfig, rows: list[ServerRow]) -> tuple[HostConfig, dict[str, Source], list[str]]:
    """The servers to run: the file's, with the stored rows laid over them.

    Returns the config, where each server came from, and the problems of stored entries that no
    longer parse (those servers are left out and reported, never fatal).
    """
    base = Path(file.path).resolve().parent if file.path else None
    servers: dict[str, ServerConfig] = {s.name: s for s in file.servers}
    sources: dict[str, Source] = dict.fromkeys(servers, "config")
    problems: list[str] = []
    for row in rows:
        if row.removed:
            servers.pop(row.name, None)
            sources.pop(row.name, None)
        elif row.entry is not None:
            try:
                servers[row.name] = _parse(row.name, row.entry, base)
                sources[row.name] = "api"
            except ConfigError as exc:
                problems.append(f"stored server {row.name!r} is skipped: {exc}")
        elif row.patch is not None and row.name in servers:
            servers[row.name] = apply_patch(servers[row.name], row.patch)
    config = HostConfig(servers=tuple(servers.values()), path=file.path, problems=file.problems)
    return config, sources, problems


@dataclass(slots=True)
class ServerManager:
    """Adds, edits, removes and restarts servers, storing each change before applying it."""

    host: Host
    store: Store
    sources: dict[str, Source]
    base_path: Path | None = None
    #: the stored rows as last written (entries of API servers, patches of config servers)
    rows: dict[str, ServerRow] = field(default_factory=dict)
    #: the config file's servers (what the stored rows are laid over); None: nothing to follow
    file: HostConfig | None = None
    #: held by a change from start (stored) to end (applied), so that following the store
    #: never sees this process's own change half done
    lock: trio.Lock = field(default_factory=trio.Lock)

    def source(self, name: str) -> Source:
        return self.sources.get(name, "api")

    def validate(self, name: str, entry: JSONObject) -> ServerConfig:
        """The entry as a server config, or a 422 naming each bad field of the body."""
        try:
            return _parse(name, entry, self.base_path)
        except ConfigError as exc:
            errors = field_errors_from_problems(exc.problems or [str(exc)], f"$.{name}")
            raise ProblemError(422, f"the server entry for {name!r} is invalid", errors=errors) from None

    async def add(self, name: str, entry: JSONObject) -> ServerConfig:
        async with self.lock:
            return await self._add(name, entry)

    async def _add(self, name: str, entry: JSONObject) -> ServerConfig:
        if name in {info.name for info in self.host.list()}:
            raise ProblemError(409, f"a server named {name!r} already exists; PATCH or DELETE it first")
        config = self.validate(name, entry)
        self.rows[name] = await self.store.put_server(name, entry)
        self.sources[name] = "api"
        self.host.register(name, config)
        return config

    async def edit(self, name: str, patch: JSONObject) -> ServerConfig:
        async with self.lock:
            return await self._edit(name, patch)

    async def _edit(self, name: str, patch: JSONObject) -> ServerConfig:
        info = self.host.get(name)
        if self.source(name) == "api":
            row = self.rows.get(name)
            entry = dict(row.entry) if row is not None and row.entry is not None else None
            if entry is None:
                raise ProblemError(409, f"the stored entry of server {name!r} is missing; DELETE and POST it again")
            for key, value in patch.items():
                if value is None and key in ("timeout_seconds", "allowed_tools"):
                    entry.pop(key, None)
                else:
                    entry[key] = value
            if "enabled" in patch:
                entry.pop("disabled", None)
            config = self.validate(name, entry)
            self.rows[name] = await self.store.put_server(name, entry)
        else:
            stored = self.rows.get(name)
            merged = {**(stored.patch or {} if stored is not None else {}), **patch}
            config = apply_patch(info.config, merged)
            self.rows[name] = await self.store.put_server(name, patch=merged)
        await self._replace(name, config)
        return config

    async def remove(self, name: str) -> None:
        async with self.lock:
            await self._remove(name)

    async def _remove(self, name: str) -> None:
        self.host.get(name)
        if self.source(name) == "config":
            self.rows[name] = await self.store.remove_server(name)
        else:
            await self.store.forget_server(name)
            self.rows.pop(name, None)
        await self.host.remove(name)
        self.sources.pop(name, None)

    async def restart(self, name: str) -> None:
        info = self.host.get(name)
        restart = getattr(self.host, "restart", None)
        if restart is not None:
            await restart(name)
        else:  # a host without runtime restart: stop and start it again
            await self._replace(name, info.config)

    async def reconcile(self) -> None:
        """Brings the host into line with the store: what another process added, edited or
        removed through the API is added, changed or removed here (a server whose config is
        unchanged is left alone, so this process's own writes cost nothing when they come back)."""
        if self.file is None:
            return
        async with self.lock:
            await self._reconcile(self.file)

    async def _reconcile(self, file: HostConfig) -> None:
        rows = await self.store.servers()
        wanted, sources, problems = effective_config(file, rows)
        for problem in problems:
            log.warning("%s", problem)
        self.rows = {row.name: row for row in rows}
        running = {info.name: info.config for info in self.host.list()}
        desired = {config.name: config for config in wanted.servers}
        for name in running.keys() - desired.keys():
            log.info("server %r was removed on another replica; removing it here", name)
            await self.host.remove(name)
            self.sources.pop(name, None)
        for name, config in desired.items():
            self.sources[name] = sources.get(name, "api")
            if name not in running:
                log.info("server %r was added on another replica; starting it here", name)
                self.host.register(name, config)
            elif running[name] != config:
                log.info("server %r was changed on another replica; applying it here", name)
                await self._replace(name, config)

    async def _replace(self, name: str, config: ServerConfig) -> None:
        update = getattr(self.host, "update", None)
        if update is not None:
            await update(name, config)
            return
        await self.host.remove(name)
        try:
            self.host.register(name, config)
        except HostError as exc:  # pragma: no cover - the name was just freed
            raise ProblemError(409, str(exc)) from exc
