"""``mcpwire add``: a well-known server, or an MCP registry ``server.json``, into mcp.json.

The entry is built by :mod:`mcpwire.catalog`, checked by the host's own validator, and written
with :mod:`mcpwire.jsonedit` so that the rest of the file (its order, unknown keys, comments) stays
as it was. An existing entry of the same name is kept unless ``--force``; the previous file is
kept next to it as ``<file>.bak``; the write is atomic and refused if the file changed meanwhile.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from .catalog import PRESETS, CatalogError, entry_from_preset, entry_from_server_json
from .cliargs import UsageError, key_values, output_file, remember_trust, shown_command, trust_decision
from .errors import ConfigError
from .jsonedit import JSONEditError, decode, set_member
from .redaction import clean_terminal, redact_url
from .transports import split_header

__all__ = ["main"]

_PLACEHOLDER = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}")

_EPILOG = """\
examples:
  mcpwire add time                          uvx mcp-server-time
  mcpwire add filesystem ~/notes ~/code     the folders it may use
  mcpwire add sqlite ./data.db --as db      under another name
  mcpwire add ./server.json --set port=8080 from an MCP registry server.json
  mcpwire add --list                        the catalogue

The entry goes into the mcp.json mcpwire reads ($MCPWIRE_CONFIG, ./mcp.json, else
~/.config/mcpwire/mcp.json), or --config FILE. Credentials are written as ${env:NAME}
placeholders, read from the environment when the server starts.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see mcpwire add --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mcpwire add",
        usage="mcpwire add [OPTIONS] (NAME | FILE.json) [VALUE...]",
        description="Add a well-known server, or one described by an MCP registry server.json, to mcp.json.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("what", nargs="?", metavar="NAME | FILE.json", help="a catalogue name, or a server.json file")
    parser.add_argument("values", nargs="*", metavar="VALUE", help="what the server needs (folders, files...)")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument("--config", metavar="FILE", type=output_file, help="the mcp.json to write")
    parser.add_argument("--as", dest="entry_name", metavar="NAME", help="the entry's name (default: the server's)")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the server, stored in the file as given (use '${env:VAR}' for a secret)",
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header for a remote server, stored as given (use '${env:VAR}' for a secret)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server.json argument, variable, environment variable or header",
    )
    parser.add_argument("--force", action="store_true", help="replace an entry of the same name")
    parser.add_argument("--dry-run", action="store_true", help="show the entry; write nothing")
    parser.add_argument("--json", action="store_true", help="print the entry (and where it went) as JSON")
    return parser


def _catalogue(out: TextIO) -> None:
    width = max(len(name) for name in PRESETS)
    for preset in PRESETS.values():
        needs = f" [{preset.needs}]" if preset.needs else ""
        args = " ".join(f"{p.name.upper()}{'...' if p.repeated else ''}" for p in preset.params)
        out.write(f"{(preset.name + ' ' + args).strip():<{width + 14}}  {preset.description}{needs}\n")


def _strings(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _build(args: argparse.Namespace) -> tuple[str, dict[str, object]]:
    what: str = args.what
    given = key_values(args.set, "--set")
    if what.endswith(".json") or (what not in PRESETS and Path(what).is_file()):
        try:
            document = json.loads(Path(what).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"cannot read {what}: {exc}") from None
        name, entry = entry_from_server_json(document, args.values, given)
    elif what in PRESETS:
        if given:
            raise UsageError("--set is for server.json files; a catalogue server takes VALUEs")
        name, entry = what, entry_from_preset(PRESETS[what], args.values)
    else:
        close = difflib.get_close_matches(what, list(PRESETS), n=3)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise UsageError(f"no server named {what!r} in the catalogue; {hint}(mcpwire add --list shows it)")
    env = key_values(args.env, "--env")
    if env:
        if "command" not in entry:
            raise UsageError("--env is for servers mcpwire starts; this one is reached by URL (use --header)")
        entry["env"] = {**_strings(entry.get("env")), **env}
    if args.header:
        if "url" not in entry:
            raise UsageError("--header is for servers reached by URL; this one is started (use --env)")
        headers = _strings(entry.get("headers"))
        for item in args.header:
            try:
                key, value = split_header(item)
            except ValueError as exc:
                raise UsageError(f"--header: {exc}") from None
            headers[key] = value
        entry["headers"] = headers
    return args.entry_name or name, entry


def _validate(name: str, entry: dict[str, object], base: Path) -> None:
    """The host's own check of the entry; placeholders count as set (they are read at start)."""
    from .host.config import parse_server

    text = json.dumps(entry)
    environ = {**os.environ, **{var: "set" for var in _PLACEHOLDER.findall(text)}}
    try:
        parse_server(name, entry, base_path=base, environ=environ)
    except ConfigError as exc:
        raise UsageError(f"the entry would not load: {exc}") from None


def _target(args: argparse.Namespace) -> Path:
    from .host.config import CONFIG_ENV_VAR, search_paths

    if args.config:
        return Path(args.config)
    if os.environ.get(CONFIG_ENV_VAR):
        return Path(os.environ[CONFIG_ENV_VAR])
    local, user = search_paths()
    return local if local.is_file() else user


def _servers_key(text: str) -> str:
    if not text.strip():
        return "mcpServers"
    document = decode(text)
    if isinstance(document, dict) and "servers" in document and "mcpServers" not in document:
        return "servers"  # VS Code's shape
    return "mcpServers"


def _write(path: Path, name: str, entry: dict[str, object], force: bool) -> Path | None:
    """Writes the entry; returns the backup's path (``None`` for a new file)."""
    existed = path.is_file()
    before = path.read_text(encoding="utf-8") if existed else ""
    try:
        key = _servers_key(before)
        after = set_member(before, (key,), name, entry, replace=force)
        document = decode(after)
    except JSONEditError as exc:
        if "exists" in str(exc):
            raise UsageError(f"{path} already has a server named {name!r}: pass --force to replace it") from None
        raise UsageError(f"cannot edit {path}: {exc}") from None
    if not isinstance(document, dict) or document.get(key, {}).get(name) != entry:  # pragma: no cover - a bug
        raise UsageError(f"editing {path} did not give the expected entry; the file is left as it was")
    backup = None
    path.parent.mkdir(parents=True, exist_ok=True)
    if existed:
        backup = path.with_name(path.name + ".bak")
        backup.write_text(before, encoding="utf-8")
        mode = path.stat().st_mode & 0o777
    else:
        mode = 0o600
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(after if after.endswith("\n") else after + "\n")
    now = path.read_text(encoding="utf-8") if path.is_file() else ""
    if now != before:
        tmp.unlink()
        raise UsageError(f"{path} changed while it was being edited; nothing was written")
    os.replace(tmp, path)
    return backup


def _runs_anything(content: bytes) -> bool:
    """Whether a config file has any server entry (one without entries was safe to trust)."""
    try:
        document = decode(content.decode("utf-8")) if content.strip() else {}
    except (JSONEditError, UnicodeDecodeError):
        return True
    if not isinstance(document, dict):
        return True
    return any(isinstance(document.get(key), dict) and document[key] for key in ("mcpServers", "servers"))


def _shown(entry: dict[str, object]) -> str:
    if "url" in entry:
        return clean_terminal(redact_url(str(entry["url"])), newlines=False)
    args = entry.get("args")
    argv = [str(entry.get("command")), *(str(a) for a in args)] if isinstance(args, list) else [str(entry["command"])]
    return clean_terminal(shown_command(argv), newlines=False)


def _run(argv: Sequence[str], out: TextIO, err: TextIO) -> int:
    args = _parser().parse_intermixed_args(list(argv))
    if args.list or not args.what:
        _catalogue(out)
        if not args.list:
            err.write("mcpwire add: name one: mcpwire add NAME [VALUE...] (or a server.json file)\n")
            return 2
        return 0
    try:
        name, entry = _build(args)
    except CatalogError as exc:
        raise UsageError(str(exc)) from None
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise UsageError(f"--as: entry names use letters, digits, '_', '-' and '.', not {name!r}")
    path = _target(args).absolute()
    _validate(name, entry, path.resolve().parent)
    variables = sorted(set(_PLACEHOLDER.findall(json.dumps(entry))))
    written, backup = False, None
    if not args.dry_run:
        # a file changed only by the user's own command stays trusted if it was (or is new)
        from .host.config import search_paths

        before = path.read_bytes() if path.is_file() else b""
        project_local = path.resolve() == search_paths()[0].resolve()
        keep_trust = project_local and (not _runs_anything(before) or trust_decision(path, before) is True)
        backup = _write(path, name, entry, args.force)
        written = True
        if keep_trust:
            remember_trust(path, path.read_bytes())
    if args.json:
        out.write(json.dumps({"name": name, "entry": entry, "config": str(path), "written": written}, indent=2) + "\n")
        return 0
    verb = "would add" if args.dry_run else "added"
    out.write(f"{verb} {name!r} to {path}: {_shown(entry)}\n")
    if backup is not None:
        out.write(f"the previous file is kept as {backup}\n")
    preset = PRESETS.get(args.what)
    if preset is not None and preset.needs:
        out.write(f"it needs {preset.needs}\n")
    if variables:
        out.write(f"set {', '.join('$' + v for v in variables)} in the environment before it starts\n")
    if written and _user_wide(path):
        out.write(
            f"{path} is the user-wide config: every mcpwire command (tools, call, chat, serve...) now starts "
            f"{name!r}, in any folder without its own mcp.json (--config or $MCPWIRE_CONFIG names another)\n"
        )
    if written:
        out.write(f"try: mcpwire tools {name}" + (f" --config {path}" if args.config else "") + "\n")
    return 0


def _user_wide(path: Path) -> bool:
    """Whether ``path`` is the user-wide config (the last place the config search looks)."""
    from .host.config import search_paths

    return path.resolve() == search_paths()[1].resolve()


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``mcpwire add``; returns the exit status (0 added, 2 usage or file errors)."""
    out, err = sys.stdout, sys.stderr
    try:
        return _run(list(sys.argv[1:] if argv is None else argv), out, err)
    except UsageError as exc:
        err.write(f"mcpwire add: {clean_terminal(str(exc), newlines=False)}\n")
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
