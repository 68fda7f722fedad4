"""The servers the service runs: the config file's, with what the API changed laid over them.

Theory of operation: the user's mcp.json is read, never written. What the API does is kept in the
store, one row per server name: the entry of a server added through the API, the edits of a
config server (a JSON merge patch, RFC 7396, over the file's own entry: the least patch that
turns the file's entry into the edited one), or a tombstone for a config server the API removed.
At start-up the rows are laid over the file's servers; at run time each change is stored first
and then applied to the host, so what a caller was told happened survives a restart.

Every entry the API is given (a new one, or one an edit made) is checked by the config loader
(:func:`mcpwire.host.parse_server`), strictly: each problem at its JSON path, in the loader's
words, and every unknown key refused (not only a misspelt one). A config server's own keys that
the loader ignores (another tool's) are left alone; only the keys an edit brings in must be known.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import msgspec
import trio

from ..errors import ConfigError, HostError
from ..host import Host, HostConfig, PolicyConfig, ServerConfig, parse_server
from ..host.entries import KNOWN_KEYS
from ..protocol.types import JSONValue
from .problems import FieldError, ProblemError, field_errors_from_problems
from .store import ServerRow, Store

__all__ = ["ServerManager", "config_entry", "effective_config", "merge_patch", "patch_between"]

log = logging.getLogger("mcpwire.service.servers")

JSONObject = dict[str, JSONValue]
Source = Literal["config", "api"]
_UNKNOWN = ": unknown key"


def merge_patch(target: JSONValue, patch: JSONValue) -> JSONValue:
    """``patch`` applied to ``target`` as RFC 7396 says: an object patch changes ``target`` key
    by key (``null`` removes a key, an object merges into the object there), anything else
    replaces it."""
    if not isinstance(patch, dict):
        return patch
    out: JSONObject = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def patch_between(source: Mapping[str, JSONValue], target: Mapping[str, JSONValue]) -> JSONObject:
    """The least merge patch that turns ``source`` into ``target``."""
    patch: JSONObject = {key: None for key in source if key not in target}
    for key, value in target.items():
        if key in source and source[key] == value:
            continue
        old = source.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            patch[key] = patch_between(old, value)
        else:
            patch[key] = value
    return patch


def _policy_entry(policy: PolicyConfig) -> JSONObject:
    default = PolicyConfig()
    out: JSONObject = {}
    for name in policy.__struct_fields__:
        value = getattr(policy, name)
        if value == getattr(default, name):
            continue
        if name == "approval":
            out[name] = {glob: decision for glob, decision in value}
        elif name == "tools":
            out[name] = {
                glob: {k: v for k, v in msgspec.to_builtins(settings).items() if v is not None}
                for glob, settings in value
            }
        else:
            out[name] = msgspec.to_builtins(value)
    return out


def config_entry(config: ServerConfig) -> JSONObject:
    """An mcp.json entry for ``config`` (placeholders already expanded), for a server whose
    file entry is not at hand."""
    entry: JSONObject = {}
    if config.type == "stdio":
        entry.update(command=config.command, args=list(config.args))
    else:
        entry["url"] = config.url
        if config.type == "sse":
            entry["type"] = "sse"
    if config.auth_type is not None:
        auth: JSONObject = {"type": config.auth_type, "token": config.auth_token}
        if config.auth_header != "Authorization":
            auth["header_name"] = config.auth_header
        entry["auth"] = auth
    optional: dict[str, JSONValue] = {
        "env": dict(config.env) or None,
        "headers": dict(config.headers) or None,
        "cwd": config.cwd,
        "enabled": None if config.enabled else False,
        "description": config.description,
        "allowed_tools": None if config.allowed_tools is None else list(config.allowed_tools),
        "disabled_tools": list(config.disabled_tools) or None,
        "namespace": config.namespace,
        "health_interval_seconds": config.health_interval_seconds,
        "connect_timeout_seconds": config.connect_timeout_seconds,
        "era": config.era,
        "protocol_version": config.protocol_version,
        "policy": _policy_entry(config.policy) or None,
    }
    entry.update({key: value for key, value in optional.items() if value is not None})
    return entry


def _parse(name: str, entry: Mapping[str, JSONValue], base: Path | None) -> ServerConfig:
    return parse_server(name, entry, base_path=base)


def effective_config(file: HostConfig, rows: list[ServerRow]) -> tuple[HostConfig, dict[str, Source], list[str]]:
    """The servers to run: the file's, with the stored rows laid over them.

    Returns the config, where each server came from, and the problems of stored entries and
    edits that no longer parse (those servers are left out, or run as the file has them, and
    reported, never fatal).
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
            raw = file.entries.get(row.name)
            entry = dict(raw) if raw is not None else config_entry(servers[row.name])
            try:
                servers[row.name] = _parse(row.name, merge_patch(entry, row.patch), base)  # type: ignore[arg-type]
            except ConfigError as exc:
                problems.append(
                    f"the stored edits of server {row.name!r} are skipped (it runs as the file says): {exc}"
                )
    config = HostConfig(servers=tuple(servers.values()), path=file.path, problems=file.problems, entries=file.entries)
    return config, sources, problems


def _paths(prefix: str, patch: Mapping[str, JSONValue]) -> Iterator[str]:
    """The JSON path of every key ``patch`` sets, nested ones too."""
    for key, value in patch.items():
        yield f"{prefix}.{key}"
        if isinstance(value, dict):
            yield from _paths(f"{prefix}.{key}", value)


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

    def validate(self, name: str, entry: Mapping[str, JSONValue], *, new_keys: set[str] | None = None) -> ServerConfig:
        """The entry as a server config, or a 422 naming each problem at its path in the body.

        ``new_keys``: the JSON paths (``$.NAME.policy.x``) an edit set; an unknown key elsewhere
        (a config file's key of another tool) is left alone. ``None``: every key is new.
        """
        try:
            return parse_server(name, entry, base_path=self.base_path, strict=True)
        except ConfigError as exc:
            problems = exc.problems or [str(exc)]
        if new_keys is not None:
            problems = [p for p in problems if not (p.endswith(_UNKNOWN) and p[: -len(_UNKNOWN)] not in new_keys)]
            if not problems:
                return _parse(name, entry, self.base_path)
        raise invalid_entry(name, field_errors_from_problems(problems, f"$.{name}"))

    def entry(self, name: str) -> JSONObject:
        """The server's entry as it runs now: as stored (API), or the file's with its edits."""
        row = self.rows.get(name)
        if self.source(name) == "api":
            if row is None or row.entry is None:
                raise ProblemError(409, f"the stored entry of server {name!r} is missing; DELETE and POST it again")
            return dict(row.entry)
        edited = merge_patch(self.file_entry(name), row.patch if row is not None and row.patch is not None else {})
        assert isinstance(edited, dict)
        return edited

    def file_entry(self, name: str) -> JSONObject:
        """A config server's entry as its file has it (as its config says, when the file's raw
        entry is not at hand)."""
        for entries in (self.file.entries if self.file is not None else {}, self.host.config.entries):
            if name in entries:
                return dict(entries[name])  # type: ignore[arg-type]
        return config_entry(self.host.get(name).config)

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
        """Lays the merge patch ``patch`` over the server's entry, checks the result, stores it
        and restarts the server with it (unless its config did not change)."""
        async with self.lock:
            return await self._edit(name, patch)

    async def _edit(self, name: str, patch: JSONObject) -> ServerConfig:
        info = self.host.get(name)
        edited = merge_patch(self.entry(name), patch)
        assert isinstance(edited, dict)
        # a key no entry may have is refused even as null, which the merge would drop unseen
        edited.update({key: None for key, value in patch.items() if value is None and key not in KNOWN_KEYS})
        if self.source(name) == "api":
            config = self.validate(name, edited)
            self.rows[name] = await self.store.put_server(name, edited)
        else:
            config = self.validate(name, edited, new_keys=set(_paths(f"$.{name}", patch)))
            change = patch_between(self.file_entry(name), edited)
            if change:
                self.rows[name] = await self.store.put_server(name, patch=change)
            else:  # back to what the file says
                await self.store.forget_server(name)
                self.rows.pop(name, None)
        if config != info.config:
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


def invalid_entry(name: str, errors: list[FieldError]) -> ProblemError:
    """The 422 for an entry with ``errors``: its detail lists every one, in the loader's words."""
    listed = "; ".join(f"{e.path}: {e.message}" for e in errors)
    count = f"{len(errors)} problems" if len(errors) != 1 else "a problem"
    return ProblemError(422, f"the server entry {name!r} has {count}: {listed}", errors=errors)
