"""Adding one member to a JSON (or JSON-with-comments) file without rewriting the rest of it.

Theory of operation: editors' MCP configs are hand-written files with their own layout, key order,
unknown keys and, in VS Code's case, comments. Decoding and re-encoding them would lose all of
that, so :func:`set_member` works on the text: a small scanner tokenizes JSONC (strings with
escapes, ``//`` and ``/* */`` comments, trailing commas), a recursive reader records where each
object and member starts and ends, and the new member is spliced in (or an existing one's value
replaced) with the indentation of its neighbours. :func:`decode` reads the result back (comments
dropped) so callers can check that the edit says what they meant.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["JSONEditError", "decode", "set_member"]


class JSONEditError(ValueError):
    """The text is not a JSON object this module can edit; the message says where."""


_TOKEN: Final = re.compile(
    r"""
    (?P<space>[ \t\r\n]+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\x00-\x1f]|\\.)*")
  | (?P<punct>[{}\[\]:,])
  | (?P<literal>-?[0-9][0-9eE.+-]*|true|false|null)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    start: int
    end: int
    text: str


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            line = text.count("\n", 0, pos) + 1
            column = pos - (text.rfind("\n", 0, pos) + 1) + 1
            raise JSONEditError(f"unexpected {text[pos]!r} at line {line} column {column}")
        kind = match.lastgroup or ""
        if kind not in ("space", "comment"):
            out.append(_Token(kind, match.start(), match.end(), match.group()))
        pos = match.end()
    return out


@dataclass(slots=True)
class _Member:
    key: str
    key_token: _Token
    value_start: int
    value_end: int
    comma_end: int | None = None  #: end of the comma after the value, if any


@dataclass(slots=True)
class _Object:
    start: int  #: the ``{``
    end: int  #: just after the ``}``
    members: list[_Member] = field(default_factory=list)


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0

    def _peek(self) -> _Token:
        if self.i >= len(self.tokens):
            raise JSONEditError("the text ends too early (a '}' or ']' is missing)")
        return self.tokens[self.i]

    def _where(self, token: _Token) -> str:
        line = self.text.count("\n", 0, token.start) + 1
        return f"line {line} column {token.start - (self.text.rfind(chr(10), 0, token.start) + 1) + 1}"

    def value(self) -> tuple[int, int, _Object | None]:
        """Reads one value; returns its span and, for an object, its structure."""
        token = self._peek()
        if token.text == "{":
            obj = self.object()
            return obj.start, obj.end, obj
        if token.text == "[":
            self.i += 1
            while self._peek().text != "]":
                self.value()
                if self._peek().text == ",":
                    self.i += 1
            end = self._peek().end
            self.i += 1
            return token.start, end, None
        if token.kind in ("string", "literal"):
            self.i += 1
            return token.start, token.end, None
        raise JSONEditError(f"unexpected {token.text!r} at {self._where(token)}")

    def object(self) -> _Object:
        opening = self._peek()
        self.i += 1
        obj = _Object(start=opening.start, end=opening.end)
        while self._peek().text != "}":
            key = self._peek()
            if key.kind != "string":
                raise JSONEditError(f"expected a key at {self._where(key)}, got {key.text!r}")
            self.i += 1
            if self._peek().text != ":":
                raise JSONEditError(f"expected ':' at {self._where(self._peek())}")
            self.i += 1
            start, end, _ = self.value()
            member = _Member(json.loads(key.text), key, start, end)
            if self._peek().text == ",":
                member.comma_end = self._peek().end
                self.i += 1
            elif self._peek().text != "}":
                raise JSONEditError(f"expected ',' or '}}' at {self._where(self._peek())}")
            obj.members.append(member)
        obj.end = self._peek().end
        self.i += 1
        return obj

    def root(self) -> _Object:
        if not self.tokens or self.tokens[0].text != "{":
            raise JSONEditError("expected a JSON object at the top of the file")
        obj = self.object()
        if self.i != len(self.tokens):
            extra = self.tokens[self.i]
            raise JSONEditError(f"unexpected {extra.text!r} after the object at {self._where(extra)}")
        return obj


def _indent_of(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    prefix = text[line_start:pos]
    return prefix if not prefix.strip() else re.match(r"[ \t]*", prefix).group()  # type: ignore[union-attr]


def _render(value: object, indent: str, unit: str) -> str:
    lines = json.dumps(value, indent=unit, ensure_ascii=False).splitlines()
    return "\n".join([lines[0], *(indent + line for line in lines[1:])])


def _find(obj: _Object, key: str) -> _Member | None:
    return next((m for m in obj.members if m.key == key), None)


def _insert(text: str, obj: _Object, key: str, value: object, unit: str) -> str:
    """``text`` with ``"key": value`` added as the last member of ``obj``."""
    if obj.members:
        last = obj.members[-1]
        indent = _indent_of(text, last.key_token.start)
        member = f"{json.dumps(key)}: {_render(value, indent, unit)}"
        if last.comma_end is not None:  # a trailing comma (JSONC): keep the style
            return text[: last.comma_end] + f"\n{indent}{member}," + text[last.comma_end :]
        return text[: last.value_end] + f",\n{indent}{member}" + text[last.value_end :]
    outer = _indent_of(text, obj.start)
    indent = outer + unit
    member = f"{json.dumps(key)}: {_render(value, indent, unit)}"
    return text[: obj.start + 1] + f"\n{indent}{member}\n{outer}" + text[obj.end - 1 :]


def set_member(text: str, path: tuple[str, ...], key: str, value: object, *, replace: bool = False) -> str:
    """``text`` with ``value`` set at ``path + (key,)``; objects on ``path`` are created as needed.

    Args:
        text: a JSON object, possibly with comments and trailing commas; empty means ``{}``.
        path: the keys of the enclosing objects, from the top (``("mcpServers",)``).
        key: the member to add.
        value: plain JSON data.
        replace: replace the member's value if it exists (else that is an error).

    Raises:
        JSONEditError: the text cannot be read, something on ``path`` is not an object, or
            ``key`` exists and ``replace`` is false.
    """
    if not text.strip():
        text = "{}\n"
    obj = _Reader(text).root()
    unit = "  "
    for member in obj.members:
        found = _indent_of(text, member.key_token.start)
        if found:
            unit = found
            break
    for depth, name in enumerate(path):
        found_member = _find(obj, name)
        if found_member is None:
            nested: object = {key: value}
            for outer in reversed(path[depth + 1 :]):
                nested = {outer: nested}
            return _insert(text, obj, name, nested, unit)
        inner = _Reader(text[found_member.value_start : found_member.value_end])
        if not inner.tokens or inner.tokens[0].text != "{":
            raise JSONEditError(f"{'.'.join(path[: depth + 1])} is not an object")
        obj = _shift(inner.root(), found_member.value_start)
    existing = _find(obj, key)
    if existing is None:
        return _insert(text, obj, key, value, unit)
    if not replace:
        raise JSONEditError(f"{'.'.join((*path, key))} exists")
    indent = _indent_of(text, existing.key_token.start)
    return text[: existing.value_start] + _render(value, indent, unit) + text[existing.value_end :]


def _shift(obj: _Object, by: int) -> _Object:
    """An object read from a slice, with positions in the whole text."""

    def moved(token: _Token) -> _Token:
        return _Token(token.kind, token.start + by, token.end + by, token.text)

    members = [
        _Member(
            m.key,
            moved(m.key_token),
            m.value_start + by,
            m.value_end + by,
            None if m.comma_end is None else m.comma_end + by,
        )
        for m in obj.members
    ]
    return _Object(start=obj.start + by, end=obj.end + by, members=members)


def decode(text: str) -> object:
    """The value of a JSON-with-comments text (comments and trailing commas dropped).

    Raises:
        JSONEditError: not JSON even so.
    """
    _Reader(text).value()  # structural errors, with their line and column
    parts: list[str] = []
    tokens = _tokens(text)
    for index, token in enumerate(tokens):
        following = tokens[index + 1].text if index + 1 < len(tokens) else ""
        if token.text == "," and following in ("}", "]"):
            continue
        parts.append(token.text)
    try:
        return json.loads(" ".join(parts))
    except json.JSONDecodeError as exc:
        raise JSONEditError(f"not JSON: {exc.msg}") from None
