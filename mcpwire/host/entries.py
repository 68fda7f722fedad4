"""Checking one server entry of ``mcp.json`` by hand, so that each problem names its JSON path and
what was expected.

Theory of operation: an entry is a JSON object in one of the dialects found in the wild: Claude
Desktop and Cursor (``command``/``args``/``env``, or ``url``), VS Code (``type: "stdio"|"http"``),
and the SPEC-07 shapes (``type: "local"`` with ``command`` as a list and ``environment``;
``type: "remote"`` with ``url`` and ``headers``). Placeholders (``${env:NAME}``, ``${NAME}``,
``{BASE_PATH}``, and VS Code's ``${workspaceFolder}`` and ``${userHome}``) are expanded in every
string. Environment and header values that are JSON numbers or booleans become their JSON text
(``8080``, ``true``), as a shell would pass them. A key that is not known but is close to one that
is (``comand``) is a problem with a "did you mean"; other unknown keys (those of other tools) are
ignored, unless the entry is read ``strict``ly (an entry sent to the service's API, which has no
other tool's keys to tolerate): then every unknown key is a problem. Every problem found is
appended to ``problems``; the entry is usable only when there is none.
"""

from __future__ import annotations

import difflib
import logging
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Final, Literal

import msgspec

from ..protocol.http1 import parse_url
from ..protocol.versions import LEGACY_REVISIONS, MODERN_REVISIONS, is_known
from .settings import Decision, PolicyConfig, ServerConfig, ToolPolicy, Transport

__all__ = ["KNOWN_KEYS", "Expander", "kind", "parse_entry"]

log = logging.getLogger("mcpwire.host.config")

_PLACEHOLDER: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}|\{BASE_PATH\}")
_NAME_OK: Final = re.compile(r"^[A-Za-z0-9_.-]+\Z")
_URL_OK: Final = re.compile(r"^https?://[^/\s]+\S*\Z")

KNOWN_KEYS: Final = frozenset(
    {
        "type", "transport", "command", "args", "env", "environment", "cwd", "url", "headers", "auth",
        "enabled", "disabled", "timeout_seconds", "timeout", "connect_timeout_seconds",
        "startup_timeout_seconds", "description", "allowed_tools", "disabled_tools", "namespace", "policy",
        "health_interval_seconds", "envFile", "alwaysAllow", "autoApprove", "era", "protocol_version",
    }
)  # fmt: skip
_AUTH_KEYS: Final = ("type", "token", "header_name")
_STDIO_TYPES: Final = ("stdio", "local")
_HTTP_TYPES: Final = ("http", "streamable-http", "streamableHttp", "streamable_http", "remote")
#: how close an unknown key must be to a known one to be called a misspelling
_CLOSE: Final = 0.75


def kind(value: object) -> str:
    """``a string``, ``a list``... for messages."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _unusable_url(url: str) -> str | None:
    """Why the HTTP client cannot use ``url`` (a host name that is not valid IDNA, a bad port...),
    or ``None``: the checks of :func:`mcpwire.protocol.http1.parse_url`, which every request's URL
    goes through."""
    try:
        parse_url(url)
    except ValueError as exc:
        return str(exc)
    return None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _misspelt(
    path: str, keys: Iterable[str], known: Iterable[str], problems: list[str], *, strict: bool = False
) -> None:
    """A problem for each unknown key close to a known one; other unknown keys are logged, or,
    ``strict``, problems too."""
    known = sorted(known)
    for key in sorted(set(keys) - set(known)):
        close = difflib.get_close_matches(key, known, n=1, cutoff=_CLOSE)
        if close:
            problems.append(f"{path}.{key}: unknown key; did you mean {close[0]!r}?")
        elif strict:
            problems.append(f"{path}.{key}: unknown key")
        else:
            log.info("config: %s: ignoring unknown key %r", path, key)


class Expander:
    """Expands placeholders in strings, noting each one that cannot be expanded."""

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


class _Entry:
    """Typed reads of one entry's keys, each problem noted with its path."""

    def __init__(
        self, path: str, entry: dict[str, object], expand: Expander, problems: list[str], *, strict: bool = False
    ) -> None:
        self.path = path
        self.entry = entry
        self.expand = expand
        self.problems = problems
        self.strict = strict

    def string(self, key: str, *, required: bool = False) -> str | None:
        value = self.entry.get(key)
        if value is None:
            if required:
                self.problems.append(f"{self.path}.{key}: expected a string, but it is missing")
            return None
        if not isinstance(value, str):
            self.problems.append(f"{self.path}.{key}: expected a string, got {kind(value)}")
            return None
        return self.expand(f"{self.path}.{key}", value)

    def strings(self, key: str) -> tuple[str, ...] | None:
        value = self.entry.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problems.append(f"{self.path}.{key}: expected a list of strings, got {kind(value)}")
            return None
        return tuple(self.expand(f"{self.path}.{key}[{i}]", v) for i, v in enumerate(value))

    def mapping(self, key: str) -> dict[str, str]:
        """An object of strings; numbers and booleans become their JSON text."""
        value = self.entry.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problems.append(f"{self.path}.{key}: expected an object of strings, got {kind(value)}")
            return {}
        out: dict[str, str] = {}
        for name, item in value.items():
            where = f"{self.path}.{key}.{name}"
            if isinstance(item, str):
                out[name] = self.expand(where, item)
            elif isinstance(item, bool | int | float):
                out[name] = msgspec.json.encode(item).decode()
            else:
                self.problems.append(f"{where}: expected a string, a number or a boolean, got {kind(item)}")
        return out

    def positive(self, key: str) -> float | None:
        value = self.entry.get(key)
        if value is None:
            return None
        if not _number(value) or value <= 0:  # type: ignore[operator]
            self.problems.append(f"{self.path}.{key}: expected a positive number of seconds, got {value!r}")
            return None
        return float(value)  # type: ignore[arg-type]


def _transport(e: _Entry) -> Transport | None:
    declared = e.entry.get("type", e.entry.get("transport"))
    shadowed = e.entry.get("transport") if "type" in e.entry else None
    if shadowed is not None and not (shadowed in _STDIO_TYPES or shadowed in _HTTP_TYPES or shadowed == "sse"):
        e.problems.append(f"{e.path}.transport: expected a transport such as 'stdio' or 'http', got {shadowed!r}")
    if declared is not None:
        if declared in _STDIO_TYPES:
            return "stdio"
        if declared in _HTTP_TYPES:
            return "http"
        if declared == "sse":
            return "sse"
        e.problems.append(
            f"{e.path}.type: expected 'stdio', 'http', 'streamable-http', 'sse', 'local' or 'remote', got {declared!r}"
        )
        return None
    if "command" in e.entry:
        return "stdio"
    if "url" in e.entry:
        return "http"
    e.problems.append(f"{e.path}: expected a 'command' (stdio server) or a 'url' (HTTP server); it has neither")
    return None


def _command(e: _Entry) -> tuple[str | None, tuple[str, ...]]:
    path, raw = e.path, e.entry.get("command")
    command: str | None = None
    args: tuple[str, ...] = ()
    if raw is None:
        e.problems.append(f"{path}.command: expected a string or a list of strings, but it is missing")
    elif isinstance(raw, str):
        text = e.expand(f"{path}.command", raw)
        if not text.strip():
            e.problems.append(f"{path}.command: expected a program, got an empty string")
        # a bare program name may contain spaces in its path: split only with no args given
        elif "args" not in e.entry and " " in text.strip():
            try:
                command, *rest = shlex.split(text)
                args = tuple(rest)
            except ValueError as exc:
                e.problems.append(f"{path}.command: cannot split {text!r} into words: {exc}")
        else:
            command = text
    elif isinstance(raw, list) and raw and all(isinstance(v, str) for v in raw):
        argv = [e.expand(f"{path}.command[{i}]", v) for i, v in enumerate(raw)]
        command, args = argv[0], tuple(argv[1:])
        if not command.strip():
            e.problems.append(f"{path}.command[0]: expected a program, got an empty string")
    else:
        e.problems.append(f"{path}.command: expected a string or a non-empty list of strings, got {kind(raw)}")
    extra = e.strings("args")
    if extra is not None:
        args = (*args, *extra)
    return command, args


def _auth(e: _Entry) -> tuple[Literal["bearer", "api_key"] | None, str | None, str]:
    auth = e.entry.get("auth")
    if auth is None:
        return None, None, "Authorization"
    path = f"{e.path}.auth"
    if not isinstance(auth, dict):
        e.problems.append(f"{path}: expected an object with 'type' and 'token', got {kind(auth)}")
        return None, None, "Authorization"
    _misspelt(path, auth, _AUTH_KEYS, e.problems, strict=e.strict)
    a_type = auth.get("type")
    token = auth.get("token")
    if a_type not in ("bearer", "api_key"):
        e.problems.append(f"{path}.type: expected 'bearer' or 'api_key', got {a_type!r}")
        return None, None, "Authorization"
    if not isinstance(token, str):
        e.problems.append(f"{path}.token: expected a string, got {kind(token)}")
        return None, None, "Authorization"
    header = auth.get("header_name", "Authorization")
    if not isinstance(header, str) or not header:
        e.problems.append(f"{path}.header_name: expected a header name, got {kind(header)}")
        header = "Authorization"
    return a_type, e.expand(f"{path}.token", token), header


def _url(e: _Entry) -> str | None:
    url = e.string("url", required=True)
    if url is not None and not _URL_OK.match(url):
        e.problems.append(f"{e.path}.url: expected an http:// or https:// URL, got {url!r}")
    elif url is not None and (why := _unusable_url(url)) is not None:
        e.problems.append(f"{e.path}.url: {why}, got {url!r}")
    return url


def _enabled(e: _Entry) -> bool:
    enabled = e.entry.get("enabled", True)
    if "disabled" in e.entry and "enabled" not in e.entry:
        disabled = e.entry["disabled"]
        enabled = not disabled if isinstance(disabled, bool) else disabled
    elif "disabled" in e.entry and not isinstance(e.entry["disabled"], bool):  # overridden, still checked
        e.problems.append(f"{e.path}.disabled: expected true or false, got {kind(e.entry['disabled'])}")
    if not isinstance(enabled, bool):
        e.problems.append(f"{e.path}.enabled: expected true or false, got {kind(enabled)}")
        return True
    return enabled


def _call_timeout(e: _Entry, policy: PolicyConfig) -> PolicyConfig:
    """``timeout_seconds``, or ``timeout`` in milliseconds (Cline, Roo), sets the call timeout."""
    timeout = e.entry.get("timeout_seconds")
    key = "timeout_seconds"
    if timeout is None and e.entry.get("timeout") is not None:
        ms = e.entry["timeout"]
        timeout = ms / 1000 if _number(ms) else ms  # type: ignore[operator]
        key = "timeout"
    elif e.entry.get("timeout") is not None and not (_number(e.entry["timeout"]) and e.entry["timeout"] > 0):  # type: ignore[operator]
        e.problems.append(f"{e.path}.timeout: expected a positive number, got {e.entry['timeout']!r}")
    if timeout is None:
        return policy
    if not _number(timeout) or timeout <= 0:  # type: ignore[operator]
        e.problems.append(f"{e.path}.{key}: expected a positive number, got {e.entry[key]!r}")
        return policy
    return msgspec.structs.replace(policy, timeout_seconds=float(timeout))  # type: ignore[arg-type]


def parse_entry(
    path: str, name: str, entry: object, expand: Expander, problems: list[str], *, strict: bool = False
) -> ServerConfig | None:
    """One server entry, or ``None`` (and ``problems`` say why); ``strict``: every unknown key
    (of the entry, its ``auth`` and its ``policy``) is a problem, not only a misspelt one."""
    if not isinstance(entry, dict):
        problems.append(f"{path}: expected an object, got {kind(entry)}")
        return None
    if not _NAME_OK.match(name):
        problems.append(f"{path}: server names may use only letters, digits, '_', '-' and '.'")
    _misspelt(path, entry, KNOWN_KEYS, problems, strict=strict)
    e = _Entry(path, entry, expand, problems, strict=strict)
    transport = _transport(e)
    if transport is None:
        return None
    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    # what the other transport would use is unused, but still checked for what it holds
    if transport == "stdio":
        command, args = _command(e)
        if "url" in entry:
            _url(e)
    else:
        if "command" in entry:
            _command(e)
        else:
            e.strings("args")
        url = _url(e)
    auth_type, auth_token, auth_header = _auth(e)
    enabled = _enabled(e)
    policy = _call_timeout(e, parse_policy(f"{path}.policy", entry.get("policy"), problems, strict=strict))
    health = entry.get("health_interval_seconds")
    if health is not None and (not _number(health) or health < 0):
        problems.append(f"{path}.health_interval_seconds: expected a non-negative number, got {health!r}")
        health = None
    connect_key = "connect_timeout_seconds" if "connect_timeout_seconds" in entry else "startup_timeout_seconds"
    connect = e.positive(connect_key)
    if connect_key == "connect_timeout_seconds":
        e.positive("startup_timeout_seconds")  # overridden, but still checked for what it holds
    era = entry.get("era")
    if era is not None and era not in ("auto", "legacy", "modern"):
        problems.append(f"{path}.era: expected 'auto', 'legacy' or 'modern', got {era!r}")
    revision = e.string("protocol_version")
    if revision is not None and not is_known(revision):
        known = ", ".join((*MODERN_REVISIONS, *LEGACY_REVISIONS))
        problems.append(f"{path}.protocol_version: expected one of {known}, got {revision!r}")
    allowed = e.strings("allowed_tools")
    disabled = e.strings("disabled_tools") or ()
    cwd = e.string("cwd")
    namespace = e.string("namespace")
    if namespace is not None and not _NAME_OK.match(namespace):
        problems.append(f"{path}.namespace: expected letters, digits, '_', '-' or '.', got {namespace!r}")
    description = e.string("description")
    env = e.mapping("env")
    env.update(e.mapping("environment"))  # SPEC-07's name for it
    headers = e.mapping("headers")
    if problems:
        return None
    return ServerConfig(
        name=name,
        type=transport,
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
        connect_timeout_seconds=connect,
        era=None if era in (None, "auto") else era,
        protocol_version=revision,
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
_POLICY_KEYS: Final = (
    *_POLICY_NUMBERS,
    "retryable_tools",
    "cacheable_tools",
    "trust_annotations",
    "approval",
    "tools",
    "ask_at",
    "invalidates",
)
_TOOL_NUMBERS: Final = ("timeout_seconds", "retries", "cache_ttl_seconds")
_TOOL_KEYS: Final = (*_TOOL_NUMBERS, "retryable", "cacheable", "approval", "risk", "ask_at", "invalidates")
_DECISIONS: Final = ("allow", "deny", "ask", "ask-caller")
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


def _boolean(path: str, value: object, problems: list[str]) -> bool | None:
    if not isinstance(value, bool):
        problems.append(f"{path}: expected true or false, got {kind(value)}")
        return None
    return value


def _risk(path: str, value: object, problems: list[str]) -> str | None:
    if not isinstance(value, str) or value.lower() not in _RISKS:
        problems.append(f"{path}: expected 'low', 'medium', 'high' or 'critical', got {value!r}")
        return None
    return value.lower()


def _decision(path: str, value: object, problems: list[str]) -> Decision | None:
    if value not in _DECISIONS:
        problems.append(f"{path}: expected 'allow', 'deny', 'ask' or 'ask-caller', got {value!r}")
        return None
    return value


def _invalidates(path: str, value: object, problems: list[str]) -> str | tuple[str, ...] | None:
    if value in ("server", "none"):
        return value
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    problems.append(f"{path}: expected 'server', 'none' or a list of tool names, URIs or globs, got {value!r}")
    return None


def _approval_rules(path: str, value: object, problems: list[str]) -> tuple[tuple[str, Decision], ...] | None:
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object mapping tool globs to allow/deny/ask/ask-caller")
        return None
    rules: list[tuple[str, Decision]] = []
    for glob, given in value.items():
        decision = _decision(f"{path}.{glob}", given, problems)
        if decision is not None:
            rules.append((glob, decision))
    return tuple(rules)


def _settings(
    path: str,
    raw: object,
    known: Iterable[str],
    problems: list[str],
    parse: Callable[[str, object], object],
    *,
    strict: bool = False,
) -> dict[str, object]:
    """The settings of an object (a policy, a tool's policy), each value parsed by
    ``parse(key, value)``, which notes a problem and returns ``None`` for a bad one."""
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected an object, got {kind(raw)}")
        return {}
    _misspelt(path, raw, known, problems, strict=strict)
    parsed = {key: parse(key, value) for key, value in raw.items()}
    return {key: value for key, value in parsed.items() if value is not None}


def parse_policy(path: str, raw: object, problems: list[str], *, strict: bool = False) -> PolicyConfig:
    """An entry's ``policy`` object (``strict``: every unknown key is a problem)."""

    def parse(key: str, value: object) -> object:
        if key in _POLICY_NUMBERS:
            return _check_number(path, key, value, problems)
        if key in ("retryable_tools", "cacheable_tools"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append(f"{path}.{key}: expected a list of tool names or globs, got {kind(value)}")
                return None
            return tuple(value)
        if key == "trust_annotations":
            return _boolean(f"{path}.{key}", value, problems)
        if key == "approval":
            return _approval_rules(f"{path}.approval", value, problems)
        if key == "ask_at":
            return _risk(f"{path}.ask_at", value, problems)
        if key == "invalidates":
            return _invalidates(f"{path}.invalidates", value, problems)
        if key == "tools":
            if not isinstance(value, dict):
                problems.append(f"{path}.tools: expected an object mapping tool globs to settings, got {kind(value)}")
                return None
            return tuple(
                (glob, _parse_tool_policy(f"{path}.tools.{glob}", sub, problems, strict=strict))
                for glob, sub in value.items()
            )
        return None

    if raw is None:
        return PolicyConfig()
    return msgspec.convert(_settings(path, raw, _POLICY_KEYS, problems, parse, strict=strict), PolicyConfig)


def _parse_tool_policy(path: str, raw: object, problems: list[str], *, strict: bool = False) -> ToolPolicy:
    def parse(key: str, value: object) -> object:
        if key in _TOOL_NUMBERS:
            return _check_number(path, key, value, problems)
        if key in ("retryable", "cacheable"):
            return _boolean(f"{path}.{key}", value, problems)
        if key == "approval":
            return _decision(f"{path}.approval", value, problems)
        if key in ("risk", "ask_at"):
            return _risk(f"{path}.{key}", value, problems)
        if key == "invalidates":
            return _invalidates(f"{path}.invalidates", value, problems)
        return None

    return msgspec.convert(_settings(path, raw, _TOOL_KEYS, problems, parse, strict=strict), ToolPolicy)
