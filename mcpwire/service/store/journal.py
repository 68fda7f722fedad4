"""Audit journals: a record made durable by one append to a file, moved into the database later.

Theory of operation: a process that writes audit records to a SQLite file keeps a journal of its
own in a folder next to the database (``<database>-audit/``). Appending a batch of records is one
``write`` to that file (a line of JSON), which the operating system keeps when the process dies,
as it keeps a SQLite write-ahead log committed with ``synchronous=NORMAL``: the same durability, at
a fraction of a transaction's cost. The process then moves what it journaled into the database in
batches, and each batch's transaction also records how far into the journal it reached (the
``audit_journals`` table), so a batch is in the database exactly once whether or not it was moved
before a crash.

The owner holds an exclusive ``flock`` on its journal for as long as it is open. Another process
that can take that lock knows the owner is gone and adopts the journal: it moves what the owner
had not, then deletes the file (and then its row). A journal closed by its owner after its last
batch was moved is deleted by the owner. A line cut short (the process died within its write, or
the machine lost power) was never acknowledged and is ignored; a line that cannot be read is
skipped with an error logged.

The first line of a journal names its format; a journal of another format is left alone.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from ..localfiles import private_folder

if sys.platform != "win32":
    import fcntl

__all__ = ["FORMAT_LINE", "AuditValues", "JOURNAL_SUFFIX", "Journal", "claim_orphans", "journal_folder", "read_batches"]

log = logging.getLogger("mcpwire.service.store")

#: the folder of a database's journals: the database's path and this
JOURNAL_SUFFIX: Final = "-audit"
#: the first line of every journal
FORMAT_LINE: Final = b'{"format":"mcpwire-audit-journal","version":1}\n'
#: journals need ``flock``
JOURNALS_WORK: Final = sys.platform != "win32"
#: a journal this large is replaced by a new one once everything in it is in the database
RENEW_BYTES: Final = 16 << 20
#: bytes read from a journal at a time when adopting it
_READ_CHUNK: Final = 1 << 20

#: one audit row as journaled: the audit table's columns (time, server, kind, tool, name, outcome,
#: trace_id, run_id, caller, record), so that a row read back is one the table takes
AuditValues = tuple[float, str, str, str, str | None, str, str | None, str | None, str | None, str]

_encode = msgspec.json.Encoder().encode
_decode_batch = msgspec.json.Decoder(list[AuditValues]).decode


def journal_folder(database: str | Path) -> Path:
    """The folder holding the journals of the SQLite database at ``database``."""
    return Path(f"{database}{JOURNAL_SUFFIX}")


class Journal:
    """This process's journal (see the module's theory of operation); one thread uses it.

    Raises:
        OSError: (from :meth:`create` and :meth:`append`) the file cannot be made or written.
    """

    __slots__ = ("_fd", "broken", "name", "path", "size")

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self.name = path.name
        self._fd = fd
        #: a batch failed to go in whole: nothing more is appended
        self.broken = False
        #: bytes in the file: the offset after the last batch appended
        self.size = size

    @classmethod
    def create(cls, folder: Path) -> Journal:
        """A new, empty journal in ``folder`` (made, 0700, if need be), locked by this process."""
        private_folder(folder)
        path = folder / f"{os.getpid()}-{secrets.token_hex(6)}.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (new: nobody else can hold it)
            _write_all(fd, FORMAT_LINE)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        return cls(path, fd, len(FORMAT_LINE))

    def append(self, rows: Sequence[Sequence[object]]) -> int:
        """Appends one batch (one line); returns the journal's size after it. A batch cut short
        by an error is never read back (it has no end of line), and the journal must not be used
        again."""
        line = _encode(rows) + b"\n"
        _write_all(self._fd, line)
        self.size += len(line)
        return self.size

    def close(self) -> None:
        """Closes the file, which releases the lock: another process may adopt it from now on."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def claim_orphans(folder: Path, own: str | None = None) -> list[tuple[Path, int]]:
    """The journals in ``folder`` whose owners are gone, each opened and locked by the caller
    (who closes each descriptor when done): those whose lock could be taken. ``own``: this
    process's journal, never an orphan."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    claimed: list[tuple[Path, int]] = []
    for name in names:
        if name == own or not name.endswith(".jsonl"):
            continue
        path = folder / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # adopted or closed by its owner meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                log.error("cannot lock the audit journal %s: %s", path, exc)
            continue  # its owner is alive (or another process adopts it)
        if not path.exists():  # deleted between the open and the lock: nothing left to adopt
            os.close(fd)
            continue
        claimed.append((path, fd))
    return claimed


def read_batches(fd: int, start: int) -> tuple[list[AuditValues], int]:
    """The rows of every whole batch in the journal open as ``fd`` from offset ``start`` (0: the
    beginning, whose format line is checked), and the offset after the last whole line.

    Raises:
        ValueError: the journal is not in this format.
        OSError: it cannot be read.
    """
    data = bytearray()
    offset = start
    while chunk := os.pread(fd, _READ_CHUNK, offset):
        data += chunk
        offset += len(chunk)
    position = 0
    if start == 0:
        if len(data) < len(FORMAT_LINE) and FORMAT_LINE.startswith(data):
            return [], 0  # its process died as it made it: nothing was ever journaled
        if not data.startswith(FORMAT_LINE):
            raise ValueError("not an audit journal of this format")
        position = len(FORMAT_LINE)
    rows: list[AuditValues] = []
    while (end := data.find(b"\n", position)) >= 0:
        line = bytes(data[position:end])
        try:
            rows += _decode_batch(line)
        except msgspec.DecodeError as exc:
            log.error("skipping an unreadable batch at offset %d of an audit journal: %s", start + position, exc)
        position = end + 1
    return rows, start + position
