"""The service's files on this machine: its data folder, the admin token it makes on loopback, the
notes it leaves for the command line, and their permissions.

Theory of operation: the data folder (``$XDG_DATA_HOME/mcpwire``, ``~/.local/share/mcpwire`` by
default) holds the store, the audit log and the credentials of servers added through the API, so
only the service's user may read it: the folder is 0700 and every file in it 0600, and a folder
or file found more open is tightened at start, with a log line that says so.

On loopback without a token, the first start makes an admin token (:func:`local_token`) and
keeps it in ``token`` in that folder; every later start uses the same one. While it serves, the
service leaves ``run/serve-PORT.json`` there (:func:`announce`): the command line, given a
loopback URL of that port, sends the token without being told (:func:`token_for_url`). Nothing
but the local service's own address ever gets it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

__all__ = [
    "TOKEN_FILE",
    "announce",
    "data_folder",
    "local_token",
    "private_file",
    "private_folder",
    "token_for_url",
]

log = logging.getLogger("mcpwire.service")

TOKEN_FILE: Final = "token"
_RUN: Final = "run"
_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})
#: permission bits a private file or folder must not have
_OPEN_BITS: Final = stat.S_IRWXG | stat.S_IRWXO


def data_folder() -> Path:
    """``$XDG_DATA_HOME/mcpwire`` (``~/.local/share/mcpwire`` by default)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mcpwire"


def private_folder(path: Path) -> Path:
    """Makes ``path`` (and its parents) if need be; ``path`` itself ends up 0700.

    Raises:
        OSError: it cannot be made or its permissions cannot be set.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & _OPEN_BITS:
        os.chmod(path, 0o700)
        log.warning("%s was readable by other users (mode %o); it is now 0700", path, mode)
    return path


def private_file(path: Path) -> None:
    """Takes group and other permissions away from an existing file, saying so."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if mode & _OPEN_BITS:
        os.chmod(path, mode & ~_OPEN_BITS & 0o777)
        log.warning("%s was readable by other users (mode %o); it is now %o", path, mode, mode & ~_OPEN_BITS & 0o777)


def _write_private(path: Path, text: str) -> None:
    """Writes a new file readable by its owner only (never briefly more open)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    private_file(path)


def local_token(make: Callable[[], str], folder: Path | None = None) -> tuple[str, bool]:
    """The admin token of a loopback service: the one kept in the data folder, or a new one
    (``make()``) kept there now. Returns the token and whether it was just made.

    Raises:
        OSError: the folder or the file cannot be made or read.
        ValueError: the file holds no usable token.
    """
    from .settings import MIN_TOKEN_LENGTH

    folder = private_folder(folder or data_folder())
    path = folder / TOKEN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        private_file(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        token = lines[0].strip() if lines else ""
        if len(token) < MIN_TOKEN_LENGTH:
            raise ValueError(f"{path} holds no token (delete it and start again to make a new one)") from None
        return token, False
    token = make()
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    return token, True


@contextlib.contextmanager
def announce(port: int, folder: Path | None = None) -> Iterator[Path]:
    """While the block runs, ``run/serve-PORT.json`` says that the service on loopback port
    ``port`` takes the data folder's token."""
    run = private_folder((folder or data_folder()) / _RUN)
    path = run / f"serve-{port}.json"
    _write_private(path, json.dumps({"port": port, "pid": os.getpid(), "token": TOKEN_FILE}))
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def token_for_url(url: str, folder: Path | None = None) -> str | None:
    """The local service's token when ``url`` is a loopback URL of a port the local service
    announced; else None."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or (parsed.hostname or "") not in _LOOPBACK:
        return None
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return None
    base = folder or data_folder()
    try:
        note = json.loads((base / _RUN / f"serve-{port}.json").read_text(encoding="utf-8"))
        if not isinstance(note, dict) or note.get("port") != port:
            return None
        lines = (base / TOKEN_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        return None
    token = lines[0].strip() if lines else ""
    return token or None
