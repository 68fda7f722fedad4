"""Showing hostile text and secrets safely: one place for every printer, log line and report.

Theory of operation: everything a server sends is hostile, and everything a user configures may be
a secret. Two kinds of helpers live here, with no dependency beyond the standard library, so that
the protocol core, the command line, the checker, the fuzzer and the service all use the same rules:

- *Sanitisers* turn text into something a terminal or a markup page shows literally:
  :func:`clean_terminal` (no escape sequences, carriage returns, backspaces, bidi overrides or
  lone surrogates: each becomes a visible ``\\xNN`` / ``\\uNNNN``) and :func:`clean_markup` (the
  same for XML/HTML text, which may keep tabs and newlines).
- *Redactors* hide credentials where targets are shown or stored: :func:`redact_url`
  (``user:pass@`` and secret-looking query values), :func:`redact_argv` (values after
  secret-looking flags, ``--api-key=X`` forms, ``KEY=VALUE`` pairs with secret-looking keys),
  :func:`redact_headers` (by name, or every value when asked), and :class:`SecretValues`, which
  masks known secret values (given on a command line or in a config) wherever they appear in text.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

__all__ = [
    "REDACTED",
    "SECRET_HEADERS",
    "SECRET_NAME",
    "SecretValues",
    "argv_secrets",
    "clean_markup",
    "clean_terminal",
    "is_secret_name",
    "redact_argv",
    "redact_headers",
    "redact_url",
    "shorten",
]

#: What replaces a secret wherever one is shown.
REDACTED: Final = "***"

#: Header names whose values are always secrets.
SECRET_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-auth-token"}
)

#: Names (of headers, query parameters, flags, environment variables) that look like credentials.
SECRET_NAME: Final = re.compile(
    r"token|secret|passw|pwd|api[-_]?key|apikey|credential|signature|private|auth|^key$|^sig$|^code$",
    re.IGNORECASE,
)

# A terminal must get no C0/C1 control (ESC, BEL, NUL, CR, BS, TAB...), no DEL, no bidi override or
# isolate, and no lone surrogate (it cannot be encoded). Newlines are kept: callers that print one
# line at a time pass ``newlines=False``.
_UNSAFE_TERMINAL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_TERMINAL_LINE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)
# XML 1.0 allows #x9 #xA #xD [#x20-#xD7FF] [#xE000-#xFFFD] [#x10000-#x10FFFF]; C1 controls and bidi
# overrides are allowed there but would hide or reorder text, so they are shown too.
_UNSAFE_MARKUP = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean_terminal(text: str, *, newlines: bool = True) -> str:
    """``text`` safe to print: every control character shown as a visible escape.

    Args:
        text: any text, typically from a server.
        newlines: keep ``\\n`` (multi-line output); with ``False`` a newline is escaped too, so
            the text stays on one line.
    """
    pattern = _UNSAFE_TERMINAL if newlines else _UNSAFE_TERMINAL_LINE
    return pattern.sub(_visible, text)


def clean_markup(text: str) -> str:
    """``text`` with every character XML 1.0 forbids (and bidi overrides) as a visible escape.

    This does not escape ``<`` or ``&``: pass the result through the markup escaper as well.
    """
    return _UNSAFE_MARKUP.sub(_visible, text)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with ``…`` when it was cut."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_secret_name(name: str) -> bool:
    """Whether a header, parameter, flag or variable name looks like it holds a credential."""
    return name.lower() in SECRET_HEADERS or SECRET_NAME.search(name.lstrip("-")) is not None


def redact_url(url: str) -> str:
    """``url`` with its userinfo and the values of secret-looking query parameters replaced.

    ``https://user:pw@host/mcp?api_key=X&x=1`` becomes ``https://***@host/mcp?api_key=***&x=1``.
    Text that is not a URL comes back unchanged.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = REDACTED + "@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        if any(is_secret_name(k) for k, _ in pairs):
            query = "&".join(
                f"{urllib.parse.quote(k, safe='')}={REDACTED if is_secret_name(k) else urllib.parse.quote(v, safe='')}"
                for k, v in pairs
            )
    if netloc == parts.netloc and query == parts.query:
        return url
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with credentials replaced, for showing or storing a server command.

    Replaced: the word after a secret-looking flag (``--api-key X``, ``--token X``), the value of
    ``--flag=VALUE`` and ``NAME=VALUE`` words whose name looks secret, and credentials inside
    URL arguments. The program and the other words are kept.
    """
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if word.startswith("-") and "=" not in word and len(word) > 1:
            hide_next = is_secret_name(word)
            out.append(word)
            continue
        name, sep, _value = word.partition("=")
        if sep and name and is_secret_name(name) and "://" not in name:
            out.append(f"{name}={REDACTED}")
            continue
        out.append(redact_url(word) if "://" in word else word)
    return out


def argv_secrets(argv: Sequence[str]) -> list[str]:
    """The values :func:`redact_argv` hides in ``argv`` (the word after a secret-looking flag, the
    value of ``--flag=VALUE`` and ``NAME=VALUE`` words, URL passwords and secret query values), for
    a :class:`SecretValues` that masks them wherever a server repeats its command line."""
    found: list[str] = []
    for word, shown in zip(argv, redact_argv(argv), strict=True):
        if word == shown:
            continue
        if shown == REDACTED:
            found.append(word)
        elif "://" in word:
            try:
                parts = urllib.parse.urlsplit(word)
            except ValueError:
                continue
            found += [parts.password] if parts.password else []
            found += [v for k, v in urllib.parse.parse_qsl(parts.query) if is_secret_name(k) and v]
        else:
            found.append(word.partition("=")[2])
    return found


def redact_headers(headers: Mapping[str, str], *, hide_all: bool = False) -> dict[str, str]:
    """``headers`` with secret values replaced (by name; every value with ``hide_all``)."""
    return {str(k): REDACTED if hide_all or is_secret_name(str(k)) else str(v) for k, v in headers.items()}


class SecretValues:
    """Known secret values (from a command line, a config or the environment), masked in any text.

    Values shorter than ``min_length`` are not masked: masking ``"1"`` would garble every number.
    """

    __slots__ = ("_pattern", "_values")

    def __init__(self, values: Iterable[str] = (), *, min_length: int = 4) -> None:
        self._values = frozenset(v for v in values if len(v) >= min_length)
        if self._values:
            alternatives = sorted(self._values, key=len, reverse=True)
            self._pattern: re.Pattern[str] | None = re.compile("|".join(re.escape(v) for v in alternatives))
        else:
            self._pattern = None

    def __bool__(self) -> bool:
        return bool(self._values)

    def __repr__(self) -> str:
        return f"SecretValues({len(self._values)} values)"

    def mask(self, text: str) -> str:
        """``text`` with every known secret value replaced by :data:`REDACTED`."""
        return text if self._pattern is None else self._pattern.sub(REDACTED, text)
