"""Audit: one :class:`AuditRecord` per call (and per approval decision and tool-definition
change), written to any :class:`AuditSink`; :class:`AuditLog` is the JSON Lines file sink.

Each call record holds the time, server, tool (and namespaced name), the arguments (redacted by
key patterns, hashed, or in full: :func:`audit_arguments`), the risk and approval decision, the
latency, the outcome and the error, and where the call came from (``trace_id``, ``run_id``,
``caller``). A sink's ``write`` is synchronous and must be fast (a service queues the record); the
JSONL log writes to a file kept open without buffering: an append to a local file costs
microseconds, and a record is in the file before the call returns, so none is lost when the
process dies. The file is rotated by size.
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
from typing import BinaryIO, Final, Literal, Protocol, cast, runtime_checkable

import msgspec

from ...protocol.types import JSONValue
from ...redaction import REDACTED as MASK
from ...redaction import clean_terminal, is_secret_name
from .context import CallContext

__all__ = [
    "DEFAULT_SECRET_KEYS",
    "ArgumentsMode",
    "AuditLog",
    "AuditRecord",
    "AuditSink",
    "audit_arguments",
    "hash_arguments",
    "redact",
    "summarize_arguments",
]

#: how arguments appear in records: secret-looking keys' values replaced, one digest, or as given
ArgumentsMode = Literal["redact", "hash", "full"]

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


def _compiled(patterns: Sequence[str]) -> list[re.Pattern[str]]:
    """One case-insensitive alternation of ``patterns`` (one search per key, not one per pattern)."""
    if not patterns:
        return []
    return [re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)]


_DEFAULT_PATTERNS: Final = _compiled(DEFAULT_SECRET_KEYS)


#: what the default patterns say of the (short) keys seen so far: a call's keys repeat call after call
_DEFAULT_VERDICTS: dict[str, bool] = {}
_MAX_VERDICTS: Final = 4096


def _secret_key(key: str, pats: Sequence[re.Pattern[str]]) -> bool:
    """Whether ``key`` matches one of ``pats`` (answers for the default patterns are kept)."""
    if pats is not _DEFAULT_PATTERNS or len(key) > 128:
        return any(p.search(key) for p in pats)
    verdict = _DEFAULT_VERDICTS.get(key)
    if verdict is None:
        verdict = any(p.search(key) for p in pats)
        if len(_DEFAULT_VERDICTS) >= _MAX_VERDICTS:
            _DEFAULT_VERDICTS.clear()
        _DEFAULT_VERDICTS[key] = verdict
    return verdict


def redact(value: object, patterns: Sequence[re.Pattern[str]] | None = None) -> object:
    """``value`` with every value under a secret-looking key replaced, at any depth."""
    pats = _DEFAULT_PATTERNS if patterns is None else patterns
    if type(value) in _SCALARS:  # (the common case, decided without the Mapping ABC's check)
        return value
    if type(value) is dict or isinstance(value, Mapping):
        return {str(k): REDACTED if _secret_key(str(k), pats) else redact(v, pats) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, pats) for v in value]
    return value


#: the types of JSON's scalars, which redaction leaves as they are
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


#: a value that looks like a credential whatever its key (API keys, tokens, JWTs)
_SECRET_VALUE: Final = re.compile(
    r"^(sk-|sk_|pk_|rk_|ghp_|gho_|ghs_|github_pat_|xox[abprs]-|AKIA|ASIA|AIza|glpat-|eyJ)|^[A-Za-z0-9_\-+/=]{32,}$"
)
#: characters of a string value shown in a summary
SUMMARY_CHARS: Final = 40


def summarize_arguments(arguments: Mapping[str, object], patterns: Sequence[re.Pattern[str]] | None = None) -> str:
    """One line describing arguments for a debug log: short scalar values, the size of long
    strings, lists and objects; values under secret-looking keys, and values that look like
    credentials, are shown as ``***``."""
    pats = _DEFAULT_PATTERNS if patterns is None else patterns
    parts: list[str] = []
    for key, value in arguments.items():
        name = clean_terminal(str(key), newlines=False)
        if any(p.search(str(key)) for p in pats) or is_secret_name(str(key)):
            shown = MASK
        elif isinstance(value, str):
            if _SECRET_VALUE.search(value):
                shown = MASK
            elif len(value) > SUMMARY_CHARS:
                shown = f"str({len(value)})"
            else:
                shown = repr(clean_terminal(value, newlines=False))
        elif isinstance(value, bool) or value is None or isinstance(value, int | float):
            shown = json.dumps(value)
        elif isinstance(value, Mapping):
            shown = f"object({len(value)})"
        elif isinstance(value, list | tuple):
            shown = f"list({len(value)})"
        else:
            shown = type(value).__name__
        parts.append(f"{name}={shown}")
    return ", ".join(parts) or "no arguments"


def audit_arguments(
    arguments: Mapping[str, object], mode: ArgumentsMode = "redact", patterns: Sequence[re.Pattern[str]] | None = None
) -> JSONValue:
    """``arguments`` as a record shows them (see :data:`ArgumentsMode`)."""
    if mode == "hash":
        return hash_arguments(arguments)
    shown = dict(arguments) if mode == "full" else redact(arguments, patterns)
    return cast("JSONValue", shown)


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One audited event.

    ``kind`` is ``tool``, ``resource`` or ``prompt`` for calls through the policies, ``approval``
    for a decision on a queued approval, and ``pin`` for a tool definition first seen, changed
    (with ``diff``) or approved. ``tool`` is the tool's name on its server (the URI for a read,
    the prompt's name). ``time`` is epoch seconds.
    """

    time: float
    kind: str
    server: str
    tool: str
    name: str | None = None
    arguments: JSONValue = None
    risk: str | None = None
    decision: str | None = None
    #: the call's own time (without its wait for a decision)
    latency_ms: float | None = None
    #: milliseconds the call waited for a decision (calls that needed one)
    approval_wait_ms: float | None = None
    outcome: str = ""
    error: str | None = None
    trace_id: str | None = None
    run_id: str | None = None
    caller: str | None = None
    approval_id: str | None = None
    #: who decided (approval records)
    by: str | None = None
    #: a unified diff of the old and new definition (pin records)
    diff: str | None = None

    @classmethod
    def for_call(
        cls,
        ctx: CallContext,
        *,
        latency: float,
        error: str | None = None,
        arguments: ArgumentsMode = "redact",
        patterns: Sequence[re.Pattern[str]] | None = None,
    ) -> AuditRecord:
        """The record of one call that went through the policies."""
        context = ctx.context
        return cls(
            time=time.time(),
            kind=ctx.kind,
            server=ctx.server,
            tool=ctx.tool,
            name=ctx.name or None,
            arguments=audit_arguments(ctx.arguments, arguments, patterns),
            risk=ctx.risk.name if ctx.risk is not None else None,
            decision=ctx.approval or None,
            latency_ms=round(latency * 1000, 3),
            approval_wait_ms=round(ctx.approval_wait * 1000, 3) if ctx.approval_wait else None,
            outcome=ctx.outcome,
            error=error,
            trace_id=context.get("trace_id"),
            run_id=context.get("run_id"),
            caller=context.get("caller"),
            approval_id=ctx.approval_id,
        )


@runtime_checkable
class AuditSink(Protocol):
    """Where audit records go. ``write`` is synchronous and fast; it may raise ``OSError``."""

    def write(self, record: AuditRecord) -> None: ...


#: keys every JSONL call record has (null when empty); others appear only when set
_JSONL_KEYS: Final = (
    "server",
    "kind",
    "tool",
    "name",
    "arguments",
    "risk",
    "decision",
    "latency_ms",
    "outcome",
    "error",
)


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

    @property
    def patterns(self) -> list[re.Pattern[str]]:
        """The compiled ``secret_keys``."""
        return self._patterns

    def record(self, ctx: CallContext, *, latency: float, error: str | None = None) -> None:
        """Appends the record of one call, its arguments shown as this log's ``arguments`` says.
        Raises OSError when the file cannot be written."""
        self.write(
            AuditRecord.for_call(ctx, latency=latency, error=error, arguments=self.arguments, patterns=self._patterns)
        )

    def write(self, record: AuditRecord) -> None:
        """Appends one record (its arguments as given). Raises OSError when the file cannot be
        written."""
        now = record.time
        fields: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        }
        values = msgspec.structs.asdict(record)
        if record.kind in ("tool", "resource", "prompt"):
            fields.update((key, values[key]) for key in _JSONL_KEYS)
        fields.update((k, v) for k, v in values.items() if k != "time" and k not in fields and v is not None)
        line = json.dumps(fields, default=str, ensure_ascii=False)
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
