"""Trusting a project-local mcp.json before its servers run.

Theory of operation: a ``./mcp.json`` found in the working directory may come from a cloned
repository nobody reviewed, and its entries run commands with ``${env:...}`` placeholders expanded
(the user's secrets in the arguments of someone else's program). Editors ask before they run a
workspace's MCP servers; so does mcpwire. :func:`decide` shows what the file would start or reach
(redacted, terminal-safe, placeholders unexpanded so that the variables it reads are visible) and
asks on a terminal; the answer is kept per file path and content hash (a changed file is asked about
again) in ``trusted-configs.json`` under the user's data directory, written atomically with mode
0600. Without a terminal nothing is asked: the servers do not run unless ``--yes`` trusts the file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, TextIO

import msgspec

from .redaction import REDACTED, clean_terminal, redact_argv, redact_url

__all__ = [
    "DATA_DIR_ENV_VAR",
    "confirm_project_config",
    "decide",
    "remember_trust",
    "shown_command",
    "trust_decision",
    "trust_file",
]

log = logging.getLogger("mcpwire.cli")

#: Where remembered trust decisions live instead of ``$XDG_DATA_HOME/mcpwire`` (tests, sandboxes).
DATA_DIR_ENV_VAR: Final = "MCPWIRE_DATA_DIR"
_PLACEHOLDER: Final = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}")


def shown_command(argv: Sequence[str]) -> str:
    """A command line to show: credentials redacted, quoted as a shell would need (``***`` left
    bare), not yet cleaned for a terminal."""
    return " ".join(word if word == REDACTED else shlex.quote(word) for word in redact_argv(argv))


def trust_file() -> Path:
    """Where decisions about project configs are kept (``$MCPWIRE_DATA_DIR`` or
    ``$XDG_DATA_HOME/mcpwire``, by default ``~/.local/share/mcpwire``)."""
    base = os.environ.get(DATA_DIR_ENV_VAR)
    if base:
        return Path(base) / "trusted-configs.json"
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "mcpwire" / "trusted-configs.json"


class _Decision(msgspec.Struct, kw_only=True):
    trusted: bool
    decided_at: float


_TRUST_DECODER: Final = msgspec.json.Decoder(dict[str, dict[str, _Decision]])
#: Decisions kept per file (older contents are forgotten first).
_MAX_DECISIONS_PER_FILE: Final = 20


def _load_trust(path: Path) -> dict[str, dict[str, _Decision]]:
    try:
        return _TRUST_DECODER.decode(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, msgspec.DecodeError) as exc:
        log.warning("ignoring unreadable trust file %s: %s", path, exc)
        return {}


def _save_trust(path: Path, table: Mapping[str, Mapping[str, _Decision]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(table), indent=2))
    os.replace(tmp, path)


def _remember(config: Path, digest: str, trusted: bool) -> None:
    store = trust_file()
    table = _load_trust(store)
    key = str(config.resolve())
    decisions = dict(table.get(key, {}))
    decisions[digest] = _Decision(trusted=trusted, decided_at=time.time())
    if len(decisions) > _MAX_DECISIONS_PER_FILE:
        newest = sorted(decisions.items(), key=lambda kv: kv[1].decided_at)[-_MAX_DECISIONS_PER_FILE:]
        decisions = dict(newest)
    table[key] = decisions
    try:
        _save_trust(store, table)
    except OSError as exc:
        log.warning("cannot remember the decision about %s in %s: %s", config, store, exc)


def trust_decision(path: str | os.PathLike[str], content: bytes) -> bool | None:
    """What was decided about a project config with this content: trusted, refused, or ``None``
    (never asked)."""
    digest = hashlib.sha256(content).hexdigest()
    decision = _load_trust(trust_file()).get(str(Path(path).resolve()), {}).get(digest)
    return None if decision is None else decision.trusted


def remember_trust(path: str | os.PathLike[str], content: bytes, trusted: bool = True) -> None:
    """Records a decision about a project config with this content (``mcpwire add`` keeps a file
    it edits trusted when it was trusted before)."""
    _remember(Path(path), hashlib.sha256(content).hexdigest(), trusted)


def _placeholders(value: object) -> set[str]:
    if isinstance(value, str):
        return set(_PLACEHOLDER.findall(value))
    if isinstance(value, list):
        return set().union(*(_placeholders(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_placeholders(v) for v in value.values())) if value else set()
    return set()


def _describe_entries(data: bytes) -> list[str]:
    """One line per server the file would start or reach, redacted and terminal-safe, from the
    raw file (placeholders are shown unexpanded: they say which variables it reads)."""
    try:
        decoded = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return []
    if not isinstance(decoded, dict):
        return []
    entries = decoded.get("mcpServers", decoded.get("servers"))
    if not isinstance(entries, dict):
        return []
    lines: list[str] = []
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            continue
        command = entry.get("command")
        raw_args = entry.get("args")
        head: list[object] = [command] if isinstance(command, str) else command if isinstance(command, list) else []
        tail: list[object] = raw_args if isinstance(raw_args, list) else []
        words = [w for w in [*head, *tail] if isinstance(w, str)]
        url = entry.get("url")
        if words:
            where = shown_command(words)
        elif isinstance(url, str):
            where = redact_url(url)
        else:
            where = "(no command or url)"
        reads = sorted(_placeholders(entry))
        note = f"  [reads {', '.join('$' + r for r in reads)}]" if reads else ""
        lines.append(clean_terminal(f"{name}: {where}{note}", newlines=False))
    return lines


def decide(path: Path, *, assume_yes: bool, stdin: TextIO, stderr: TextIO) -> tuple[bool, str]:
    """Whether the servers of a project-local config may run, and the one-line refusal if not
    (asking on ``stdin`` when it is a terminal and nothing was decided for this content)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return False, f"cannot read {path}: {exc.strerror}"
    digest = hashlib.sha256(data).hexdigest()
    lines = _describe_entries(data)
    if not lines:
        return True, ""  # nothing would start: the loader reports what is wrong with the file
    shown = clean_terminal(str(path), newlines=False)
    if assume_yes:
        _remember(path, digest, True)
        return True, ""
    earlier = _load_trust(trust_file()).get(str(path.resolve()), {}).get(digest)
    if earlier is not None:
        if earlier.trusted:
            return True, ""
        return False, f"the servers of {shown} were refused earlier; pass --yes to trust this file"
    interactive = False
    try:
        interactive = stdin.isatty()
    except (AttributeError, ValueError):
        interactive = False
    if not interactive:
        return False, (
            f"{shown} is a project config not trusted yet (it would start {len(lines)} server(s)): "
            "review it and pass --yes to trust it, or run once in a terminal to be asked"
        )
    stderr.write(f"{shown} is a project-local config that has not been trusted yet. It would start or reach:\n")
    for line in lines:
        stderr.write(f"  {line}\n")
    stderr.write("Trust this file and run its servers? [y/N] ")
    stderr.flush()
    answer = stdin.readline().strip().lower()
    trusted = answer in ("y", "yes")
    _remember(path, digest, trusted)
    if trusted:
        return True, ""
    return False, f"not trusted: the servers of {shown} were not started (pass --yes to trust it later)"


def confirm_project_config(path: str | os.PathLike[str], *, assume_yes: bool, stdin: TextIO, stderr: TextIO) -> bool:
    """Asks once before the servers of a project-local mcp.json run.

    The first time a file (by path and content hash) would start servers, shows their commands and
    URLs (redacted) and the variables they read, and asks on ``stdin``; the decision is remembered
    (:func:`trust_file`). With ``assume_yes`` the file is trusted without asking. Without a
    terminal and without ``assume_yes``, it refuses with a one-line hint on ``stderr``.

    Returns:
        Whether the servers may run.
    """
    trusted, refusal = decide(Path(path), assume_yes=assume_yes, stdin=stdin, stderr=stderr)
    if not trusted:
        stderr.write(f"mcpwire: {refusal}\n")
    return trusted
