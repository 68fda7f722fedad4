"""The evidence of a result, structured from the wire to the report, and redacted once, here.

Theory of operation: a check talks to one or more wires; each wire records what it sent and
received (:class:`~.harness.Exchange`, and over HTTP the whole :class:`~.http_harness.HttpReply`).
When a result needs its evidence (a failure, a warning, an error, a rule not observed), the runner
calls :func:`collect` with the check's wire records and the run's :class:`Redactor`; the result
then carries :class:`ExchangeEntry` values and HTTP exchange dictionaries that every report shows
as they are (escaping them for its own format, never redacting again).

Redaction: everything a user gives the checker may be a secret. The :class:`Redactor` of a target
knows every value the user supplied (header values, ``--env`` values, the password and
secret-looking query values of the URL, argv values after secret-looking flags) and masks them
wherever they appear, whatever the text; it hides every value of a header the user supplied,
whatever its name, and any header, query parameter or flag named like a credential. Server text
is kept whole otherwise: reports escape it, they do not change it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mcpwire.redaction import (
    REDACTED,
    SecretValues,
    argv_secrets,
    is_secret_name,
    redact_argv,
    redact_url,
)

from .harness import Exchange

__all__ = [
    "DIRECTIONS",
    "MAX_ENTRIES",
    "ExchangeEntry",
    "Redactor",
    "WireRecord",
    "collect",
    "depth",
    "limit_depth",
    "record_of",
]

#: Evidence entries kept per result: the first :data:`FIRST_ENTRIES` and the last ones.
MAX_ENTRIES: Final = 80
FIRST_ENTRIES: Final = 20
#: HTTP exchanges kept per result, and SSE events shown per exchange (first and last halves)
MAX_HTTP: Final = 80
MAX_EVENTS: Final = 200
#: characters of the server's stderr shown at the end of a process's evidence
STDERR_TAIL_BYTES: Final = 400
#: what a recorded direction means in the evidence
DIRECTIONS: Final = {">": "sent", "<": "received", "!": "event"}
# A URL inside prose ends before the punctuation that follows it ("cannot reach URL: reason").
_URL_IN_TEXT = re.compile(r"\bhttps?://[^\s\"'<>]*[^\s\"'<>:;,.!?)]", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ExchangeEntry:
    """One line of evidence.

    ``direction``: ``sent`` (client to server), ``received``, ``event`` (the harness's own note,
    e.g. "stdin closed"), ``stderr`` (the tail of the server's stderr), ``omitted`` (entries left
    out: ``text`` says how many) or ``note`` (anything else). ``process`` numbers the wires of
    the check from 1 (a new server process on stdio, a new HTTP client over HTTP).
    """

    process: int | None
    at_s: float | None
    direction: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"process": self.process, "at_s": self.at_s, "direction": self.direction, "text": self.text}

    def line(self) -> str:
        """The entry as one text line (JUnit, terminal): ``  0.095 > {...}``."""
        arrow = {"sent": ">", "received": "<", "event": "!"}.get(self.direction)
        if self.at_s is not None and arrow is not None:
            return f"{self.at_s:7.3f} {arrow} {self.text}"
        if self.direction == "stderr":
            return f"stderr (tail): {self.text}"
        if self.direction == "omitted":
            return f"... ({self.text})"
        return self.text


@dataclass(frozen=True, slots=True)
class WireRecord:
    """What one wire recorded for one check (a pooled wire lends a fresh record to each check)."""

    exchanges: Sequence[Exchange]
    #: exchanges the wire no longer kept (its records keep the first and the last)
    dropped: int = 0
    stderr: bytes = b""
    #: HTTP exchanges (``HttpReply.to_dict()``), not redacted yet
    http: Sequence[Mapping[str, Any]] = ()
    #: a note placed first (e.g. that the session was reused)
    preface: str | None = None


class Redactor:
    """Masks what a user gave the checker, wherever it appears (see the module docstring)."""

    __slots__ = ("_extra", "_header_names", "_secrets")

    def __init__(
        self,
        *,
        values: Iterable[str] = (),
        header_names: Iterable[str] = (),
        url: str | None = None,
        argv: Sequence[str] = (),
        extra: SecretValues | None = None,
    ) -> None:
        found = [v for v in values if v]
        found += argv_secrets([url, *argv] if url else argv)
        self._secrets = SecretValues(found)
        self._extra = extra
        self._header_names = frozenset(name.lower() for name in header_names)

    def _mask(self, text: str) -> str:
        text = self._secrets.mask(text)
        return self._extra.mask(text) if self._extra is not None else text

    def text(self, text: str) -> str:
        """``text`` with every known secret masked and credentials in URLs redacted."""
        if "://" in text:
            text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group()), text)
        return self._mask(text)

    def url(self, url: str) -> str:
        return self._mask(redact_url(url))

    def argv(self, argv: Sequence[str]) -> list[str]:
        return [self._mask(word) for word in redact_argv(argv)]

    def headers(self, headers: Mapping[str, Any]) -> dict[str, str]:
        """Values of headers the user gave, and of credential-named ones, hidden; the rest masked."""
        return {
            str(name): REDACTED
            if str(name).lower() in self._header_names or is_secret_name(str(name))
            else self._mask(str(value))
            for name, value in headers.items()
        }

    def value(self, value: Any) -> Any:
        """Every string inside a JSON-like value, masked (iteratively: any depth)."""
        return _map_strings(value, self.text)


def _map_strings(value: Any, fn: Any) -> Any:
    """``value`` with ``fn`` applied to every string (keys included), without recursion."""
    if isinstance(value, str):
        return fn(value)
    if not isinstance(value, dict | list):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        source, parent, key = stack.pop()
        if isinstance(source, dict):
            copy: dict[Any, Any] = {}
            parent[key] = copy
            for k, v in source.items():
                new_key = fn(k) if isinstance(k, str) else k
                if isinstance(v, dict | list):
                    copy[new_key] = None
                    stack.append((v, copy, new_key))
                else:
                    copy[new_key] = fn(v) if isinstance(v, str) else v
        else:
            items: list[Any] = [None] * len(source)
            parent[key] = items
            for i, v in enumerate(source):
                if isinstance(v, dict | list):
                    stack.append((v, items, i))
                else:
                    items[i] = fn(v) if isinstance(v, str) else v
    return root[0]


def depth(value: Any) -> int:
    """How deeply containers nest in a JSON-like value (0 for a scalar), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def limit_depth(value: Any, max_depth: int = 32) -> Any:
    """A copy of a JSON-like value whose containers nested deeper than ``max_depth`` are replaced by
    a string saying so (iteratively: any depth), so that every report can encode it."""
    if not isinstance(value, dict | list):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 1)]
    while stack:
        source, parent, key, depth = stack.pop()
        if depth > max_depth:
            parent[key] = f"<{type(source).__name__} nested deeper than {max_depth} levels, not shown>"
            continue
        if isinstance(source, dict):
            copy: dict[Any, Any] = {}
            parent[key] = copy
            for k, v in source.items():
                copy[k] = v
                if isinstance(v, dict | list):
                    stack.append((v, copy, k, depth + 1))
        else:
            items = list(source)
            parent[key] = items
            for i, v in enumerate(items):
                if isinstance(v, dict | list):
                    stack.append((v, items, i, depth + 1))
    return root[0]


def _entries(record: WireRecord, process: int, redactor: Redactor) -> list[ExchangeEntry]:
    out: list[ExchangeEntry] = []
    if record.preface:
        out.append(ExchangeEntry(process, None, "note", redactor.text(record.preface)))
    if record.dropped:
        out.append(ExchangeEntry(process, None, "omitted", f"{record.dropped} exchanges not kept by the wire"))
    for exchange in record.exchanges:
        text = exchange.text
        if exchange.headers:
            shown = " ".join(f"{k}: {v}" for k, v in redactor.headers(exchange.headers).items())
            text = f"{text} [{shown}]"
        out.append(ExchangeEntry(process, round(exchange.at, 6), DIRECTIONS[exchange.direction], redactor.text(text)))
    if record.stderr:
        tail = record.stderr[-STDERR_TAIL_BYTES:].decode("utf-8", "replace").strip()
        if tail:
            out.append(ExchangeEntry(process, None, "stderr", redactor.text(tail)))
    return out


def _http_view(exchange: Mapping[str, Any], redactor: Redactor) -> dict[str, Any]:
    view = {k: redactor.value(v) for k, v in exchange.items()}
    view["url"] = redactor.url(str(exchange.get("url", "")))
    view["request_headers"] = redactor.headers(exchange.get("request_headers") or {})
    view["response_headers"] = redactor.headers(exchange.get("response_headers") or {})
    events = view.get("events")
    if isinstance(events, list) and len(events) > MAX_EVENTS:
        half = MAX_EVENTS // 2
        view["events"] = events[:half] + events[-half:]
        view["events_omitted"] = len(events) - MAX_EVENTS
    return view


def collect(records: Sequence[WireRecord], redactor: Redactor) -> tuple[list[ExchangeEntry], list[dict[str, Any]]]:
    """The evidence of one result: its exchange entries (at most :data:`MAX_ENTRIES`, the first and
    the last, with an ``omitted`` entry between) and its HTTP exchanges, redacted."""
    entries: list[ExchangeEntry] = []
    for number, record in enumerate(records, 1):
        entries += _entries(record, number, redactor)
    if len(entries) > MAX_ENTRIES:
        last = MAX_ENTRIES - FIRST_ENTRIES - 1
        left_out = len(entries) - FIRST_ENTRIES - last
        middle = ExchangeEntry(entries[FIRST_ENTRIES].process, None, "omitted", f"{left_out} entries left out")
        entries = [*entries[:FIRST_ENTRIES], middle, *entries[-last:]]
    http = [_http_view(e, redactor) for record in records for e in record.http]
    return entries, http[:MAX_HTTP]


def record_of(wire: Any) -> WireRecord:
    """The record of a live wire that no pool lent (a stdio :class:`~.harness.Wire` or an
    :class:`~.http_harness.HttpWire`)."""
    exchanges = wire.exchanges
    replies = getattr(wire, "replies", ())
    return WireRecord(
        exchanges,
        dropped=getattr(exchanges, "dropped", 0),
        stderr=bytes(getattr(wire, "stderr", b"")),
        http=[reply.to_dict() for reply in replies],
    )
