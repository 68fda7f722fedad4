"""Well-known MCP servers, and MCP registry ``server.json`` files, as mcp.json entries.

Theory of operation: ``mcpwire add NAME`` looks NAME up in :data:`PRESETS` (or reads a registry
``server.json``) and builds one entry in the shape :mod:`mcpwire.host.config` reads: a stdio
``command`` and ``args`` (with ``env``), or an HTTP ``url`` (with ``headers``). Values the user
gives on the command line fill the preset's parameters (the folders the filesystem server may
touch, a repository, a database file). Credentials are never written into the file: an entry refers
to them as ``${env:NAME}`` placeholders, which the host expands from the environment when it starts
the server. Everything in a ``server.json`` is untrusted input; it only ever becomes argv words,
environment values and headers, never a shell command line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "PRESETS",
    "CatalogError",
    "Param",
    "Preset",
    "entry_from_preset",
    "entry_from_server_json",
    "environment_names",
]


class CatalogError(Exception):
    """A preset or server.json that cannot become an entry; the message says what to give."""


@dataclass(frozen=True, slots=True)
class Param:
    """A value the user gives after the preset's name (``mcpwire add filesystem ~/notes``)."""

    name: str
    description: str
    flag: str | None = None  #: written as ``FLAG VALUE``; else as a bare argument
    required: bool = True
    repeated: bool = False
    path: bool = False  #: a file or folder: ``~`` expanded and made absolute
    folder: bool = False  #: a folder that must exist already (the server would fail on start)


@dataclass(frozen=True, slots=True)
class Preset:
    """A well-known server."""

    name: str
    description: str
    command: tuple[str, ...] = ()
    url: str | None = None
    params: tuple[Param, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    needs: str = ""  #: what must be installed to run it
    homepage: str = ""


# the values presets ask for (each at the top level, where the console's message extraction finds
# its description: Param's second argument)
_FOLDER: Final = Param("folder", "a folder the server may use", repeated=True, path=True, folder=True)
_REPOSITORY: Final = Param(
    "repository", "the repository's folder", flag="--repository", required=False, path=True, folder=True
)
_DATABASE: Final = Param("database", "the database file", flag="--db-path", path=True)

_NPX: Final = "Node.js (npx)"
_UVX: Final = "uv (uvx)"
_SERVERS_REPO: Final = "https://github.com/modelcontextprotocol/servers"

#: The catalogue, by name.
PRESETS: Final[Mapping[str, Preset]] = {
    p.name: p
    for p in (
        Preset(
            "everything",
            "the reference server: every MCP feature, for trying clients",
            ("npx", "-y", "@modelcontextprotocol/server-everything"),
            needs=_NPX,
            homepage=_SERVERS_REPO,
        ),
        Preset(
            "filesystem",
            "read, write and search files inside the folders you name",
            ("npx", "-y", "@modelcontextprotocol/server-filesystem"),
            params=(_FOLDER,),
            needs=_NPX,
            homepage=_SERVERS_REPO,
        ),
        Preset(
            "memory",
            "a knowledge graph kept between conversations",
            ("npx", "-y", "@modelcontextprotocol/server-memory"),
            needs=_NPX,
            homepage=_SERVERS_REPO,
        ),
        Preset(
            "time",
            "the current time and time-zone conversions",
            ("uvx", "mcp-server-time"),
            needs=_UVX,
            homepage=_SERVERS_REPO,
        ),
        Preset(
            "fetch",
            "fetch web pages as Markdown",
            ("uvx", "mcp-server-fetch"),
            needs=_UVX,
            homepage=_SERVERS_REPO,
        ),
        Preset(
            "git",
            "read and search a Git repository",
            ("uvx", "mcp-server-git"),
            params=(_REPOSITORY,),
            needs=_UVX,
            homepage=_SERVERS_REPO,
        ),
        Preset(
            "sequential-thinking",
            "structured step-by-step problem solving",
            ("npx", "-y", "@modelcontextprotocol/server-sequential-thinking"),
            needs=_NPX,
            homepage=_SERVERS_REPO,
        ),
        Preset(
            "sqlite",
            "query and change a SQLite database",
            ("uvx", "mcp-server-sqlite"),
            params=(_DATABASE,),
            needs=_UVX,
            homepage="https://pypi.org/project/mcp-server-sqlite/",
        ),
        Preset(
            "playwright",
            "drive a web browser (Playwright)",
            ("npx", "-y", "@playwright/mcp"),
            needs=_NPX,
            homepage="https://github.com/microsoft/playwright-mcp",
        ),
        Preset(
            "context7",
            "up-to-date library documentation for prompts",
            ("npx", "-y", "@upstash/context7-mcp"),
            needs=_NPX,
            homepage="https://github.com/upstash/context7",
        ),
        # seed 004's weather servers, each a published package (PyPI) that speaks MCP over stdio
        Preset(
            "wttr",
            "today's weather of a city from wttr.in (no key needed)",
            ("uvx", "mcp-weather-crj6666"),
            needs=_UVX,
            homepage="https://pypi.org/project/mcp-weather-crj6666/",
        ),
        Preset(
            "hefeng",
            "QWeather (hefeng) forecasts, warnings and air quality; reads $HEFENG_API_HOST and $HEFENG_API_KEY",
            # its 1.2.0 imports mcp.server.fastmcp, which mcp 2 renamed: it runs only with mcp 1
            ("uvx", "--with", "mcp<2", "hefeng-qweather-mcp", "stdio"),
            env={"HEFENG_API_HOST": "${env:HEFENG_API_HOST}", "HEFENG_API_KEY": "${env:HEFENG_API_KEY}"},
            needs=_UVX,
            homepage="https://github.com/fengyucn/hefeng-qweather-mcp",
        ),
        Preset(
            "github",
            "GitHub's own remote server (issues, pull requests, code); reads $GITHUB_TOKEN",
            url="https://api.githubcopilot.com/mcp/",
            headers={"Authorization": "Bearer ${env:GITHUB_TOKEN}"},
            homepage="https://github.com/github/github-mcp-server",
        ),
    )
}


_ENV_PLACEHOLDER: Final = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def environment_names(preset: Preset) -> list[str]:
    """The environment variables the preset's entry reads (its ``${env:NAME}`` placeholders),
    which must be set where the server is started."""
    values = [*preset.env.values(), *preset.headers.values()]
    return sorted({m.group(1) for v in values for m in _ENV_PLACEHOLDER.finditer(v)})


def _path(value: str) -> str:
    return str(Path(os.path.expanduser(value)).resolve())


def _fill(params: Sequence[Param], values: Sequence[str], what: str) -> list[str]:
    """The argv words for ``params`` from the user's ``values``, in order."""
    words: list[str] = []
    rest = list(values)
    for param in params:
        if not rest:
            if param.required:
                raise CatalogError(f"{what} needs {param.name.upper()}: {param.description}")
            continue
        taken, rest = (rest, []) if param.repeated else (rest[:1], rest[1:])
        for value in taken:
            word = _path(value) if param.path else value
            if param.folder and not Path(word).is_dir():
                missing = "is not a folder" if Path(word).exists() else "does not exist"
                raise CatalogError(f"{what}: {word} {missing} (from {value!r}); give a folder that exists")
            words += [param.flag, word] if param.flag else [word]
    if rest:
        raise CatalogError(f"{what} takes no more values: unexpected {rest[0]!r}")
    return words


def entry_from_preset(preset: Preset, values: Sequence[str]) -> dict[str, object]:
    """The mcp.json entry of a preset, with the user's values filled in.

    Raises:
        CatalogError: a required value is missing, there are too many, or a folder does not exist.
    """
    entry: dict[str, object] = {}
    if preset.url:
        if values:
            raise CatalogError(f"{preset.name} takes no values: unexpected {values[0]!r}")
        entry["url"] = preset.url
        if preset.headers:
            entry["headers"] = dict(preset.headers)
    else:
        entry["command"] = preset.command[0]
        entry["args"] = [*preset.command[1:], *_fill(preset.params, values, preset.name)]
        if preset.env:
            entry["env"] = dict(preset.env)
    entry["description"] = preset.description
    return entry


# -- server.json ----------------------------------------------------------------------------------

#: How each registry's packages run when the file gives no runtimeHint.
_RUNTIMES: Final = {"npm": "npx", "pypi": "uvx", "nuget": "dnx", "oci": "docker"}
_PLACEHOLDER_NAME: Final = re.compile(r"[^A-Za-z0-9]+")


def _env_name(name: str) -> str:
    return _PLACEHOLDER_NAME.sub("_", name).strip("_").upper() or "VALUE"


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise CatalogError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _items(value: object, where: str) -> list[Mapping[str, object]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise CatalogError(f"{where}: expected a list of objects")
    return value


def _substitute(text: str, variables: object, given: Mapping[str, str], where: str) -> str:
    """``{name}`` in a value replaced by what the user gave (``--set name=VALUE``) or its default."""
    if not isinstance(variables, dict):
        return text
    for name, spec in variables.items():
        if f"{{{name}}}" not in text:
            continue
        value = given.get(name)
        if value is None and isinstance(spec, dict) and isinstance(spec.get("default"), str):
            value = spec["default"]
        if value is None:
            raise CatalogError(f"{where} needs {{{name}}}: pass --set {name}=VALUE")
        text = text.replace(f"{{{name}}}", value)
    return text


def _arguments(items: list[Mapping[str, object]], values: list[str], given: Mapping[str, str], where: str) -> list[str]:
    words: list[str] = []
    for index, arg in enumerate(items):
        at = f"{where}[{index}]"
        kind = arg.get("type")
        value = arg.get("value")
        if kind == "named":
            name = _text(arg.get("name"), f"{at}.name")
            chosen = given.get(name.lstrip("-"), value if isinstance(value, str) else None)
            if chosen is None and isinstance(arg.get("default"), str) and arg.get("isRequired"):
                chosen = str(arg["default"])
            if chosen is None:
                if arg.get("isRequired"):
                    raise CatalogError(f"{at}: {name} is required: pass --set {name.lstrip('-')}=VALUE")
                continue
            words += [name, _substitute(chosen, arg.get("variables"), given, at)]
        elif kind == "positional":
            hint = arg.get("valueHint")
            if isinstance(value, str):
                words.append(_substitute(value, arg.get("variables"), given, at))
            elif isinstance(hint, str) and hint in given:
                words.append(given[hint])
            elif values:
                taken, values[:] = (values[:], []) if arg.get("isRepeated") else (values[:1], values[1:])
                words += taken
            elif isinstance(arg.get("default"), str):
                words.append(str(arg["default"]))
            elif arg.get("isRequired", True):
                label = hint if isinstance(hint, str) else f"argument {index}"
                raise CatalogError(f"{at}: give {label.upper()} after the file name (or --set {label}=VALUE)")
        else:
            raise CatalogError(f"{at}.type: expected 'positional' or 'named', got {kind!r}")
    return words


def _key_values(items: list[Mapping[str, object]], given: Mapping[str, str], where: str) -> dict[str, str]:
    """Environment variables or headers: a fixed value, the user's, or a ``${env:NAME}`` placeholder
    for anything secret or required (never a secret's value in the file)."""
    out: dict[str, str] = {}
    for index, item in enumerate(items):
        name = _text(item.get("name"), f"{where}[{index}].name")
        value = given.get(name, item.get("value"))
        if isinstance(value, str) and not item.get("isSecret"):
            out[name] = _substitute(value, item.get("variables"), given, f"{where}[{index}]")
        elif item.get("isSecret") or item.get("isRequired"):
            out[name] = f"${{env:{_env_name(name)}}}"
    return out


def _package_command(package: Mapping[str, object], where: str) -> list[str]:
    registry = package.get("registryType")
    identifier = _text(package.get("identifier"), f"{where}.identifier")
    version = package.get("version")
    hint = package.get("runtimeHint") or _RUNTIMES.get(str(registry))
    if hint is None:
        raise CatalogError(f"{where}.registryType: cannot run a {registry!r} package")
    runtime = _text(hint, f"{where}.runtimeHint")
    pinned = isinstance(version, str) and version and version != "latest"
    if runtime == "npx":
        return ["npx", "-y", f"{identifier}@{version}" if pinned else identifier]
    if runtime == "uvx":
        return ["uvx", f"{identifier}=={version}" if pinned else identifier]
    if runtime == "dnx":
        return ["dnx", f"{identifier}@{version}" if pinned else identifier, "--yes"]
    if runtime == "docker":
        return ["docker", "run", "-i", "--rm"]  # runtime arguments, then the image
    return [runtime, identifier]


def _is_stdio(package: Mapping[str, object]) -> bool:
    transport = package.get("transport")
    return transport is None or (isinstance(transport, dict) and transport.get("type", "stdio") == "stdio")


def _url(template: str, given: Mapping[str, str]) -> str:
    """A remote's URL with its ``{variables}`` filled from ``--set``."""
    for name, value in given.items():
        template = template.replace(f"{{{name}}}", value)
    missing = re.search(r"\{([^{}]+)\}", template)
    if missing:
        raise CatalogError(f"$.remotes[0].url needs {{{missing.group(1)}}}: pass --set {missing.group(1)}=VALUE")
    return template


def entry_from_server_json(
    document: object, values: Sequence[str], given: Mapping[str, str]
) -> tuple[str, dict[str, object]]:
    """The entry name and mcp.json entry of an MCP registry ``server.json``.

    A stdio package (npm, PyPI, NuGet or OCI) is preferred; otherwise the first remote.

    Args:
        document: the decoded file.
        values: positional values for the package's positional arguments without a value.
        given: ``--set NAME=VALUE`` values for named arguments, variables, environment
            variables and headers.

    Raises:
        CatalogError: the file is not a server.json, or a required value is missing.
    """
    if not isinstance(document, dict):
        raise CatalogError("$: expected a server.json object")
    full_name = _text(document.get("name"), "$.name")
    short = full_name.rsplit("/", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", short).strip("-") or "server"
    packages = _items(document.get("packages"), "$.packages")
    remotes = _items(document.get("remotes"), "$.remotes")
    entry: dict[str, object] = {}
    stdio = [(i, p) for i, p in enumerate(packages) if _is_stdio(p)]
    rest = list(values)
    if stdio:
        index, package = stdio[0]
        where = f"$.packages[{index}]"
        argv = _package_command(package, where)
        argv += _arguments(_items(package.get("runtimeArguments"), f"{where}.runtimeArguments"), rest, given, where)
        if argv[0] == "docker":
            argv.append(_text(package.get("identifier"), f"{where}.identifier"))
        argv += _arguments(_items(package.get("packageArguments"), f"{where}.packageArguments"), rest, given, where)
        entry["command"], entry["args"] = argv[0], argv[1:]
        env = _key_values(_items(package.get("environmentVariables"), f"{where}.environmentVariables"), given, where)
        if env:
            entry["env"] = env
    elif remotes:
        remote = remotes[0]
        kind = remote.get("type")
        if kind not in ("streamable-http", "sse"):
            raise CatalogError(f"$.remotes[0].type: expected 'streamable-http' or 'sse', got {kind!r}")
        entry["type"] = "sse" if kind == "sse" else "http"
        entry["url"] = _url(_text(remote.get("url"), "$.remotes[0].url"), given)
        headers = _key_values(_items(remote.get("headers"), "$.remotes[0].headers"), given, "$.remotes[0].headers")
        if headers:
            entry["headers"] = headers
    else:
        raise CatalogError("$: no stdio package and no remote: nothing mcpwire can start or reach")
    if rest:
        raise CatalogError(f"unexpected {rest[0]!r}: the server takes no more values")
    description = document.get("description")
    if isinstance(description, str) and description:
        entry["description"] = description
    return name, entry
