"""The audit log: append-only JSON Lines, one record per call, rotated by size.

Each record holds the time, server, tool (and namespaced name), the arguments (redacted by key
patterns, hashed, or in full), the risk and approval decision, the latency, the outcome and the
error. Records are written synchronously to a file kept open without buffering: an append to a
local file costs microseconds, and a record is in the file before the call returns, so none is
lost when the process dies.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final, Literal

from .context import CallContext

__all__ = ["DEFAULT_SECRET_KEYS", "AuditLog", "hash_arguments", "redact"]

log = logging.getLogger("mcpwire.host.policies.audit")

#: Argument keys whose values are replaced by ``REDACTED`` (case-insensitive regular expressions).
DEFAULT_SECRET_KEYS: Final = (
    r"token",
    r"secret",
    r"passw(or)?d",
    r"api[_-]?key",
    r"^key$",
    r"private[_-]?key",
    r"auth",
    r"credential",
    r"cookie",
    r"session",
    r"ssn",
    r"card[_-]?number|cvv|iban",
)
REDACTED: Final = "[REDACTED]"


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def hash_arguments(arguments: Mapping[str, object]) -> str:
    """A stable digest of the arguments (equal arguments, equal digest)."""
    return "sha256:" + hashlib.sha256(_canonical(arguments)).hexdigest()


def redact(value: object, patterns: Sequence[re.Pattern[str]] | None = None) -> object:
    """``value`` with every value under a secret-looking key replaced, at any depth."""
    pats = _compiled(DEFAULT_SECRET_KEYS) if patterns is None else patterns
    if isinstance(value, Mapping):
        return {str(k): REDACTED if any(p.search(str(k)) for p in pats) else redact(v, pats) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, pats) for v in value]
    return value


def _compiled(patterns: Sequence[str]) -> list[re.Pattern[str]]:
    return [re.compile(p, re.IGNORECASE) for p in patterns]


@dataclass(slots=True)
class AuditLog:
    """Append-only JSONL, rotated to ``.1`` ... ``.N`` when a record would pass ``max_bytes``.

    Args:
        path: the log file (its folder is created).
        max_bytes: size at which the file is rotated.
        backups: rotated files kept (``path.1`` is the newest).
        arguments: ``"redact"`` (values under secret keys replaced), ``"hash"`` (only a
            digest of all arguments) or ``"full"``.
        secret_keys: regular expressions matched against argument keys, for ``"redact"``.
    """

    path: Path
    max_bytes: int = 10_000_000
    backups: int = 3
    arguments: Literal["redact", "hash", "full"] = "redact"
    secret_keys: Sequence[str] = DEFAULT_SECRET_KEYS
    records: int = 0
    _patterns: list[re.Pattern[str]] = field(default_factory=list)
    _fh: BinaryIO | None = None
    _size: int = 0

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if self.arguments not in ("redact", "hash", "full"):
            raise ValueError(f"arguments must be 'redact', 'hash' or 'full', not {self.arguments!r}")
        self._patterns = _compiled(self.secret_keys)

    def _arguments(self, arguments: Mapping[str, object]) -> object:
        if self.arguments == "hash":
            return hash_arguments(arguments)
        if self.arguments == "full":
            return dict(arguments)
        return redact(arguments, self._patterns)

    def record(self, ctx: CallContext, *, latency: float, error: str | None = None) -> None:
        """Appends one record. Raises OSError when the file cannot be written."""
        now = time.time()
        line = json.dumps(
            {
                "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z",
                "server": ctx.server,
                "kind": ctx.kind,
                "tool": ctx.tool,
                "name": ctx.name or None,
                "arguments": self._arguments(ctx.arguments),
                "risk": ctx.risk.name if ctx.risk is not None else None,
                "decision": ctx.approval or None,
                "latency_ms": round(latency * 1000, 3),
                "outcome": ctx.outcome,
                "error": error,
            },
            default=str,
            ensure_ascii=False,
        )
        data = (line + "\n").encode()
        fh = self._open()
        if self._size and self._size + len(data) > self.max_bytes:
            self._rotate()
            fh = self._open()
        # unbuffered: the record is in the file when this returns
        fh.write(data)
        self._size += len(data)
        self.records += 1

    def _open(self) -> BinaryIO:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "ab", buffering=0)  # noqa: SIM115 - kept open across records
            self._size = self._fh.seek(0, os.SEEK_END)
        return self._fh

    def _rotate(self) -> None:
        self.close()
        if self.backups <= 0:
            self.path.unlink(missing_ok=True)
        else:
            for i in range(self.backups - 1, 0, -1):
                src = self.path.with_name(f"{self.path.name}.{i}")
                if src.exists():
                    os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        log.info("audit log %s rotated", self.path)

    def close(self) -> None:
        """Closes the file (the next record opens it again)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
            self._size = 0
