"""Host configuration: ``mcp.json`` files in the Claude Desktop / Cursor or VS Code shape.

Theory of operation: the file is decoded as plain JSON, then every server entry is checked by
hand so that each problem names its JSON path and what was expected. A bad entry is logged and
skipped; ``strict=True`` raises one :class:`~mcpwire.errors.ConfigError` listing every problem.
Placeholders (``${env:NAME}``, ``${NAME}``, ``{BASE_PATH}``, and VS Code's ``${workspaceFolder}``
and ``${userHome}``) are expanded in every string.

Policy settings live in an entry's ``policy`` object; ``policy.tools`` maps tool-name globs to
per-tool overrides. :meth:`PolicyConfig.for_tool` resolves what applies to one tool: for each
setting, the first matching glob that sets it wins, then the server's value.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Literal

import msgspec

from ..errors import ConfigError
from ..transports import HttpServer, StdioServer

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
DEFAULT_TIMEOUT_SECONDS: Final = 30.0

Transport = Literal["stdio", "http", "sse"]
Decision = Literal["allow", "deny", "ask"]
RiskName = Literal["low", "medium", "high", "critical"]

_PLACEHOLDER: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}|\{BASE_PATH\}")
_NAME_OK: Final = re.compile(r"^[A-Za-z0-9_.-]+$")
_URL_OK: Final = re.compile(r"^https?://[^/\s]+\S*$")


class ToolPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Per-tool overrides (``policy.tools.<glob>``); ``None`` means "as the server says"."""

    timeout_seconds: float | None = None
    retries: int | None = None
    #: retry on transient failures even without an idempotent annotation (or never, if false)
    retryable: bool | None = None
    #: cache results even without a read-only or idempotent annotation (or never, if false)
    cacheable: bool | None = None
    cache_ttl_seconds: float | None = None
    approval: Decision | None = None
    #: the risk level, instead of the one inferred from annotations and the name
    risk: RiskName | None = None


class ToolSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What applies to one tool of one server (see :meth:`PolicyConfig.for_tool`)."""

    timeout_seconds: float
    retries: int
    retryable: bool | None
    cacheable: bool | None
    cache_ttl_seconds: float
    approval: Decision | None
    risk: RiskName | None


class PolicyConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Per-server policy settings (the ``policy`` object of an entry)."""

    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    retries: int = 2
    retryable_tools: tuple[str, ...] = ()
    cacheable_tools: tuple[str, ...] = ()
    cache_ttl_seconds: float = 60.0
    cache_size: int = 256
    #: consecutive failures that open the breaker; 0 disables it
    breaker_failures: int = 5
    breaker_cooldown_seconds: float = 30.0
    #: tool glob -> decision; the first matching glob wins
    approval: tuple[tuple[str, Decision], ...] = ()
    #: believe the server's annotations even when they lower a tool's risk below its name's
    trust_annotations: bool = False
    #: tool glob -> overrides, first match wins per setting
    tools: tuple[tuple[str, ToolPolicy], ...] = ()

    def for_tool(self, tool: str) -> ToolSettings:
        """The settings for ``tool``: per-tool overrides first, then this server's values."""
        matching = [p for glob, p in self.tools if fnmatch.fnmatchcase(tool, glob)]
        timeout = next((p.timeout_seconds for p in matching if p.timeout_seconds is not None), self.timeout_seconds)
        retries = next((p.retries for p in matching if p.retries is not None), self.retries)
        ttl = next((p.cache_ttl_seconds for p in matching if p.cache_ttl_seconds is not None), self.cache_ttl_seconds)
        retryable = next((p.retryable for p in matching if p.retryable is not None), None)
        if retryable is None and any(fnmatch.fnmatchcase(tool, g) for g in self.retryable_tools):
            retryable = True
        cacheable = next((p.cacheable for p in matching if p.cacheable is not None), None)
        if cacheable is None and any(fnmatch.fnmatchcase(tool, g) for g in self.cacheable_tools):
            cacheable = True
        approval = next((p.approval for p in matching if p.approval is not None), None)
        if approval is None:
            approval = next((d for glob, d in self.approval if fnmatch.fnmatchcase(tool, glob)), None)
        return ToolSettings(
            timeout_seconds=timeout,
            retries=retries,
            retryable=retryable,
            cacheable=cacheable,
            cache_ttl_seconds=ttl,
            approval=approval,
            risk=next((p.risk for p in matching if p.risk is not None), None),
        )


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One server entry, validated and with placeholders expanded.

    Secrets (``env`` values, ``headers``, ``auth_token``) are never shown by ``repr``.
    """

    name: str
    type: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    auth_type: Literal["bearer", "api_key"] | None = None
    auth_token: str | None = None
    auth_header: str = "Authorization"
    enabled: bool = True
    description: str | None = None
    allowed_tools: tuple[str, ...] | None = None
    disabled_tools: tuple[str, ...] = ()
    namespace: str | None = None
    #: seconds between health checks; ``None``: the host's default; 0: none
    health_interval_seconds: float | None = None
    policy: PolicyConfig = msgspec.field(default_factory=PolicyConfig)

    @property
    def prefix(self) -> str:
        """The namespace used in tool names (``namespace`` or the server's name)."""
        return self.namespace or self.name

    @property
    def target(self) -> str:
        """The command line or URL, for display (no secrets: env and headers are not part of it)."""
        if self.type == "stdio":
            return shlex.join([self.command or "", *self.args])
        return self.url or ""

    def to_spec(self) -> StdioServer | HttpServer:
        """The transport spec :func:`mcpwire.open_client` connects to."""
        if self.type == "stdio":
            if self.command is None:  # pragma: no cover - parse_config never builds one
                raise ConfigError(f"server {self.name!r}: a stdio server needs a command")
            return StdioServer(command=self.command, args=self.args, env=dict(self.env), cwd=self.cwd, name=self.name)
        if self.url is None:  # pragma: no cover - parse_config never builds one
            raise ConfigError(f"server {self.name!r}: an HTTP server needs a url")
        bearer = self.auth_token if self.auth_type == "bearer" else None
        api_key = self.auth_token if self.auth_type == "api_key" else None
        return HttpServer(
            url=self.url,
            transport="sse" if self.type == "sse" else "auto",
            headers=dict(self.headers),
            bearer_token=bearer,
            api_key=api_key,
            api_key_header=self.auth_header,
            name=self.name,
        )

    def __repr__(self) -> str:
        return (
            f"ServerConfig({self.name!r}, type={self.type!r}, target={self.target!r}, env keys={sorted(self.env)}, "
            f"header keys={sorted(self.headers)}, auth={self.auth_type!r}, enabled={self.enabled})"
        )

    __str__ = __repr__


class HostConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Every valid server entry of a file, plus the problems found in the others."""

    servers: tuple[ServerConfig, ...] = ()
    path: str | None = None
    problems: tuple[str, ...] = ()


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
        ConfigError: the file is missing (when named), unreadable or not JSON; its top level is
            not a config; or, with ``strict``, any entry has a problem.
    """
    found = find_config(path)
    if found is None:
        log.debug("no config file found; the host starts empty")
        return HostConfig()
    try:
        data = msgspec.json.decode(found.read_bytes())
    except (OSError, msgspec.DecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(found)!r}: {exc}") from exc
    try:
        config = parse_config(data, base_path=found.resolve().parent, strict=strict, environ=environ)
    except ConfigError as exc:
        raise ConfigError(f"{found}: {exc}", exc.problems) from None
    return HostConfig(servers=config.servers, path=str(found), problems=config.problems)


def parse_config(
    data: object,
    *,
    base_path: str | os.PathLike[str] | None = None,
    strict: bool = False,
    environ: Mapping[str, str] | None = None,
) -> HostConfig:
    """Validates decoded JSON. Bad entries are logged and skipped, or raised all at once.

    Raises:
        ConfigError: the top level is not an object with ``mcpServers`` or ``servers``; or,
            in strict mode, any problem (``problems`` lists all of them).
    """
    env = os.environ if environ is None else environ
    base = str(Path(base_path)) if base_path is not None else os.getcwd()
    if not isinstance(data, dict):
        raise ConfigError(f"$: expected a JSON object with 'mcpServers' or 'servers', got {_kind(data)}")
    key = "mcpServers" if "mcpServers" in data else "servers" if "servers" in data else None
    if key is None:
        if not data:
            return HostConfig()
        raise ConfigError("$: expected a key 'mcpServers' (Claude Desktop, Cursor) or 'servers' (VS Code)")
    entries = data[key]
    problems: list[str] = []
    servers: list[ServerConfig] = []
    if not isinstance(entries, dict):
        problems.append(f"$.{key}: expected an object mapping server names to entries, got {_kind(entries)}")
        entries = {}
    for name, entry in entries.items():
        entry_problems: list[str] = []
        server = _parse_entry(f"$.{key}.{name}", name, entry, _Expander(env, base, entry_problems), entry_problems)
        if entry_problems or server is None:
            for problem in entry_problems:
                log.warning("config: skipping server %r: %s", name, problem)
            problems.extend(entry_problems)
            continue
        servers.append(server)
    if strict and problems:
        raise ConfigError(f"{len(problems)} problem(s) in the configuration:\n  " + "\n  ".join(problems), problems)
    return HostConfig(servers=tuple(servers), problems=tuple(problems))


def parse_server(
    name: str,
    entry: Mapping[str, object],
    *,
    base_path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServerConfig:
    """One entry, as in a file's ``mcpServers`` (used by ``Host.register`` with a dict).

    Raises:
        ConfigError: listing every problem of the entry.
    """
    env = os.environ if environ is None else environ
    base = str(Path(base_path)) if base_path is not None else os.getcwd()
    problems: list[str] = []
    server = _parse_entry(f"$.{name}", name, dict(entry), _Expander(env, base, problems), problems)
    if problems or server is None:
        raise ConfigError(f"server {name!r}: " + "; ".join(problems), problems)
    return server


def _kind(value: object) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


class _Expander:
    def __init__(self, env: Mapping[str, str], base: str, problems: list[str]) -> None:
        self.env = env
        self.base = base
        self.problems = problems

    def __call__(self, path: str, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            whole = match.group(0)
            if whole == "{BASE_PATH}":
                return self.base
            head, arg = match.group(1), match.group(2)
            if arg is None:
                if head == "workspaceFolder":
                    # VS Code keeps mcp.json in <workspace>/.vscode/
                    return str(Path(self.base).parent) if Path(self.base).name == ".vscode" else self.base
                if head == "userHome":
                    return str(Path.home())
                var = head
            elif head == "env":
                var = arg
            else:
                self.problems.append(
                    f"{path}: the placeholder {whole} is not supported; use ${{env:NAME}}, ${{NAME}} or {{BASE_PATH}}"
                )
                return ""
            value = self.env.get(var)
            if value is None:
                self.problems.append(f"{path}: environment variable {var!r} is not set (used as {whole})")
                return ""
            return value

        return _PLACEHOLDER.sub(replace, text)


_KNOWN_KEYS: Final = frozenset(
    {
        "type", "transport", "command", "args", "env", "cwd", "url", "headers", "auth", "enabled", "disabled",
        "timeout_seconds", "timeout", "description", "allowed_tools", "disabled_tools", "namespace", "policy",
        "health_interval_seconds", "envFile", "alwaysAllow", "autoApprove",
    }
)  # fmt: skip


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _parse_entry(path: str, name: str, entry: object, expand: _Expander, problems: list[str]) -> ServerConfig | None:
    if not isinstance(entry, dict):
        problems.append(f"{path}: expected an object, got {_kind(entry)}")
        return None
    if not _NAME_OK.match(name):
        problems.append(f"{path}: server names may use only letters, digits, '_', '-' and '.'")
    for unknown in sorted(set(entry) - _KNOWN_KEYS):
        log.info("config: %s: ignoring unknown key %r", path, unknown)

    def string(key: str, *, required: bool = False) -> str | None:
        value = entry.get(key)
        if value is None:
            if required:
                problems.append(f"{path}.{key}: expected a string, but it is missing")
            return None
        if not isinstance(value, str):
            problems.append(f"{path}.{key}: expected a string, got {_kind(value)}")
            return None
        return expand(f"{path}.{key}", value)

    def strings(key: str) -> tuple[str, ...] | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            problems.append(f"{path}.{key}: expected a list of strings, got {_kind(value)}")
            return None
        return tuple(expand(f"{path}.{key}[{i}]", v) for i, v in enumerate(value))

    def mapping(key: str) -> dict[str, str]:
        value = entry.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            problems.append(f"{path}.{key}: expected an object of strings, got {_kind(value)}")
            return {}
        return {k: expand(f"{path}.{key}.{k}", v) for k, v in value.items()}

    # transport: explicit, or inferred from command / url
    declared = entry.get("type", entry.get("transport"))
    kind: Transport | None = None
    if declared is not None:
        if declared == "stdio":
            kind = "stdio"
        elif declared in ("http", "streamable-http", "streamableHttp", "streamable_http"):
            kind = "http"
        elif declared == "sse":
            kind = "sse"
        else:
            problems.append(f"{path}.type: expected 'stdio', 'http', 'streamable-http' or 'sse', got {declared!r}")
            return None
    elif "command" in entry:
        kind = "stdio"
    elif "url" in entry:
        kind = "http"
    else:
        problems.append(f"{path}: expected a 'command' (stdio server) or a 'url' (HTTP server); it has neither")
        return None

    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    if kind == "stdio":
        raw = entry.get("command")
        if raw is None:
            problems.append(f"{path}.command: expected a string or a list of strings, but it is missing")
        elif isinstance(raw, str):
            text = expand(f"{path}.command", raw)
            if not text.strip():
                problems.append(f"{path}.command: expected a program, got an empty string")
            # a bare program name may contain spaces in its path: split only with no args given
            elif "args" not in entry and " " in text.strip():
                try:
                    command, *rest = shlex.split(text)
                    args = tuple(rest)
                except ValueError as exc:
                    problems.append(f"{path}.command: cannot split {text!r} into words: {exc}")
            else:
                command = text
        elif isinstance(raw, list) and raw and all(isinstance(v, str) for v in raw):
            argv = [expand(f"{path}.command[{i}]", v) for i, v in enumerate(raw)]
            command, args = argv[0], tuple(argv[1:])
            if not command.strip():
                problems.append(f"{path}.command[0]: expected a program, got an empty string")
        else:
            problems.append(f"{path}.command: expected a string or a non-empty list of strings, got {_kind(raw)}")
        extra = strings("args")
        if extra is not None:
            args = (*args, *extra)
    else:
        url = string("url", required=True)
        if url is not None and not _URL_OK.match(url):
            problems.append(f"{path}.url: expected an http:// or https:// URL, got {url!r}")

    auth_type: Literal["bearer", "api_key"] | None = None
    auth_token: str | None = None
    auth_header = "Authorization"
    auth = entry.get("auth")
    if auth is not None:
        if not isinstance(auth, dict):
            problems.append(f"{path}.auth: expected an object with 'type' and 'token', got {_kind(auth)}")
        else:
            a_type = auth.get("type")
            token = auth.get("token")
            if a_type not in ("bearer", "api_key"):
                problems.append(f"{path}.auth.type: expected 'bearer' or 'api_key', got {a_type!r}")
            elif not isinstance(token, str):
                problems.append(f"{path}.auth.token: expected a string, got {_kind(token)}")
            else:
                auth_type = a_type
                auth_token = expand(f"{path}.auth.token", token)
                header = auth.get("header_name", "Authorization")
                if not isinstance(header, str) or not header:
                    problems.append(f"{path}.auth.header_name: expected a header name, got {_kind(header)}")
                else:
                    auth_header = header

    enabled = entry.get("enabled", True)
    if "disabled" in entry and "enabled" not in entry:
        enabled = not entry["disabled"] if isinstance(entry["disabled"], bool) else entry["disabled"]
    if not isinstance(enabled, bool):
        problems.append(f"{path}.enabled: expected true or false, got {_kind(enabled)}")
        enabled = True

    policy = _parse_policy(f"{path}.policy", entry.get("policy"), problems)
    timeout = entry.get("timeout_seconds")
    if timeout is None and entry.get("timeout") is not None:
        ms = entry["timeout"]
        timeout = ms / 1000 if _number(ms) else ms
        tkey = "timeout"
    else:
        tkey = "timeout_seconds"
    if timeout is not None:
        if not _number(timeout) or timeout <= 0:
            shown = entry[tkey]
            problems.append(f"{path}.{tkey}: expected a positive number, got {shown!r}")
        else:
            policy = msgspec.structs.replace(policy, timeout_seconds=float(timeout))

    health = entry.get("health_interval_seconds")
    if health is not None and (not _number(health) or health < 0):
        problems.append(f"{path}.health_interval_seconds: expected a non-negative number, got {health!r}")
        health = None

    allowed = strings("allowed_tools")
    disabled = strings("disabled_tools") or ()
    cwd = string("cwd")
    namespace = string("namespace")
    if namespace is not None and not _NAME_OK.match(namespace):
        problems.append(f"{path}.namespace: expected letters, digits, '_', '-' or '.', got {namespace!r}")
    description = string("description")
    env = mapping("env")
    headers = mapping("headers")
    if problems or kind is None:
        return None
    return ServerConfig(
        name=name,
        type=kind,
        command=command,
        args=args,
        env=env,
        cwd=cwd,
        url=url,
        headers=headers,
        auth_type=auth_type,
        auth_token=auth_token,
        auth_header=auth_header,
        enabled=enabled,
        description=description,
        allowed_tools=allowed,
        disabled_tools=disabled,
        namespace=namespace,
        health_interval_seconds=None if health is None else float(health),
        policy=policy,
    )


_POLICY_NUMBERS: Final[dict[str, type]] = {
    "timeout_seconds": float,
    "retries": int,
    "cache_ttl_seconds": float,
    "cache_size": int,
    "breaker_failures": int,
    "breaker_cooldown_seconds": float,
}
_TOOL_NUMBERS: Final = ("timeout_seconds", "retries", "cache_ttl_seconds")
_DECISIONS: Final = ("allow", "deny", "ask")
_RISKS: Final = ("low", "medium", "high", "critical")


def _check_number(path: str, key: str, value: object, problems: list[str]) -> float | int | None:
    want = _POLICY_NUMBERS[key]
    ok = _number(value) and value >= 0  # type: ignore[operator]
    if want is int:
        ok = ok and isinstance(value, int)
    if key == "timeout_seconds":
        ok = ok and value > 0  # type: ignore[operator]
    if not ok:
        noun = (
            "a positive number"
            if key == "timeout_seconds"
            else "a non-negative integer"
            if want is int
            else "a non-negative number"
        )
        problems.append(f"{path}.{key}: expected {noun}, got {value!r}")
        return None
    result: float | int = want(value)
    return result


def _parse_policy(path: str, raw: object, problems: list[str]) -> PolicyConfig:
    if raw is None:
        return PolicyConfig()
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected an object, got {_kind(raw)}")
        return PolicyConfig()
    values: dict[str, object] = {}
    for key, value in raw.items():
        if key in _POLICY_NUMBERS:
            number = _check_number(path, key, value, problems)
            if number is not None:
                values[key] = number
        elif key in ("retryable_tools", "cacheable_tools"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append(f"{path}.{key}: expected a list of tool names or globs, got {_kind(value)}")
            else:
                values[key] = tuple(value)
        elif key == "trust_annotations":
            if not isinstance(value, bool):
                problems.append(f"{path}.{key}: expected true or false, got {_kind(value)}")
            else:
                values[key] = value
        elif key == "approval":
            if not isinstance(value, dict):
                problems.append(f"{path}.approval: expected an object mapping tool globs to allow/deny/ask")
                continue
            rules: list[tuple[str, Decision]] = []
            for glob, decision in value.items():
                if decision not in _DECISIONS:
                    problems.append(f"{path}.approval.{glob}: expected 'allow', 'deny' or 'ask', got {decision!r}")
                else:
                    rules.append((glob, decision))
            values[key] = tuple(rules)
        elif key == "tools":
            if not isinstance(value, dict):
                problems.append(f"{path}.tools: expected an object mapping tool globs to settings, got {_kind(value)}")
                continue
            values[key] = tuple(
                (glob, _parse_tool_policy(f"{path}.tools.{glob}", sub, problems)) for glob, sub in value.items()
            )
        else:
            log.info("config: %s: ignoring unknown key %r", path, key)
    return msgspec.convert(values, PolicyConfig)


def _parse_tool_policy(path: str, raw: object, problems: list[str]) -> ToolPolicy:
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected an object, got {_kind(raw)}")
        return ToolPolicy()
    values: dict[str, object] = {}
    for key, value in raw.items():
        if key in _TOOL_NUMBERS:
            number = _check_number(path, key, value, problems)
            if number is not None:
                values[key] = number
        elif key in ("retryable", "cacheable"):
            if not isinstance(value, bool):
                problems.append(f"{path}.{key}: expected true or false, got {_kind(value)}")
            else:
                values[key] = value
        elif key == "approval":
            if value not in _DECISIONS:
                problems.append(f"{path}.approval: expected 'allow', 'deny' or 'ask', got {value!r}")
            else:
                values[key] = value
        elif key == "risk":
            if not isinstance(value, str) or value.lower() not in _RISKS:
                problems.append(f"{path}.risk: expected 'low', 'medium', 'high' or 'critical', got {value!r}")
            else:
                values[key] = value.lower()
        else:
            log.info("config: %s: ignoring unknown key %r", path, key)
    return msgspec.convert(values, ToolPolicy)
