"""``WWW-Authenticate`` parsing (RFC 9110 §11.6.1, RFC 6750 §3).

Theory of operation: a header value holds one or more challenges separated by commas; each is
an auth-scheme followed either by a token68 or by a comma-separated list of ``name=value``
auth-params, whose values are tokens or quoted-strings with backslash escapes. A comma is
therefore ambiguous (next param or next challenge); it is resolved by looking ahead for
``token =``. Parsing is lenient: malformed input yields what could be read, never an exception,
because the header comes from the server and a bad challenge must not crash the client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["BearerChallenge", "Challenge", "bearer_challenge", "parse_www_authenticate"]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_PARAM_START = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+)[ \t]*=(?!=*[ \t]*(?:,|$))")
_SPACE = " \t"


@dataclass(frozen=True, slots=True)
class Challenge:
    """One challenge: the scheme (lower-cased) and its auth-params (names lower-cased)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)
    token68: str | None = None


@dataclass(frozen=True, slots=True)
class BearerChallenge:
    """The parameters of a ``Bearer`` (or ``DPoP``, RFC 9449 §7.1) challenge that drive the
    OAuth flow."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None
    #: ``bearer`` or ``dpop``.
    scheme: str = "bearer"

    @property
    def scopes(self) -> list[str]:
        """The challenged scopes, split on spaces (AU-17)."""
        return self.scope.split() if self.scope else []


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _quoted(text: str, pos: int) -> tuple[str, int]:
    """Reads a quoted-string starting at the opening quote; returns its value and the end."""
    out: list[str] = []
    pos += 1
    while pos < len(text):
        char = text[pos]
        if char == "\\" and pos + 1 < len(text):
            out.append(text[pos + 1])
            pos += 2
            continue
        if char == '"':
            return "".join(out), pos + 1
        out.append(char)
        pos += 1
    return "".join(out), pos


def parse_www_authenticate(value: str) -> list[Challenge]:
    """Parses a ``WWW-Authenticate`` header value into its challenges, in order."""
    challenges: list[Challenge] = []
    pos = 0
    while pos < len(value):
        pos = _skip(value, pos, _SPACE + ",")
        match = _TOKEN.match(value, pos)
        if match is None:
            # Not a scheme: skip to the next comma and try again.
            comma = value.find(",", pos)
            if comma < 0:
                break
            pos = comma + 1
            continue
        scheme = match.group().lower()
        pos = _skip(value, match.end(), _SPACE)
        params: dict[str, str] = {}
        token68: str | None = None
        if pos < len(value) and value[pos] != "," and _PARAM_START.match(value, pos) is None:
            t68 = _TOKEN68.match(value, pos)
            if t68 is not None:
                token68 = t68.group()
                pos = _skip(value, t68.end(), _SPACE)
        while token68 is None and pos < len(value):
            param = _PARAM_START.match(value, pos)
            if param is None:
                break
            name = param.group(1).lower()
            pos = _skip(value, param.end(), _SPACE)
            if pos < len(value) and value[pos] == '"':
                param_value, pos = _quoted(value, pos)
            else:
                tok = _TOKEN.match(value, pos)
                param_value = tok.group() if tok else ""
                pos = tok.end() if tok else pos
            params.setdefault(name, param_value)
            pos = _skip(value, pos, _SPACE)
            if pos < len(value) and value[pos] == ",":
                after = _skip(value, pos + 1, _SPACE + ",")
                if _PARAM_START.match(value, after) is None:
                    pos = after  # the next challenge starts here
                    break
                pos = after
        challenges.append(Challenge(scheme, params, token68))
    return challenges


def bearer_challenge(values: list[str]) -> BearerChallenge | None:
    """The first ``Bearer`` or ``DPoP`` challenge among the given header values, if any (AU-03).

    Both schemes carry the same OAuth parameters (RFC 6750 §3, RFC 9449 §7.1).
    """
    for value in values:
        for challenge in parse_www_authenticate(value):
            if challenge.scheme in ("bearer", "dpop"):
                get = challenge.params.get
                return BearerChallenge(
                    resource_metadata=get("resource_metadata") or None,
                    scope=get("scope") or None,
                    error=get("error") or None,
                    error_description=get("error_description"),
                    scheme=challenge.scheme,
                )
    return None
