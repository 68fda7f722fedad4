"""The leak oracle's eyes: stack traces, source paths and secrets in what a server answers.

Theory of operation: a server that answers bad input with its stack trace, the path and line of
its source, or a secret tells an attacker how it is built and what it holds. :func:`find_leak`
looks at the text of an answer (error message and data, result content) for:

- stack traces of the usual runtimes (Python, Node.js, Java/.NET, Go, Rust), recognised by their
  frame syntax, not by words a message could simply contain;
- a source file path with a line number (``/srv/app/handlers.py:42``, ``C:\\app\\x.js:10:5``);
- secrets: the canary the fuzzer plants in the environment of every server it starts
  (:data:`CANARY_ENV`; it shows a tool that dumps its environment), private keys, and tokens with a
  well-known shape (AWS, GitHub, Slack, OpenAI and Anthropic keys).

What the request itself held is never a leak (an echo tool returns what it got), and plain paths
are not judged: a filesystem server's answers are full of them, by design.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any, Final

__all__ = ["CANARY", "CANARY_ENV", "find_leak"]

#: the variable planted in the environment of every server the fuzzer starts, and its value (one per
#: fuzzer process: a replay plants its own)
CANARY_ENV: Final = "MCPWIRE_FUZZ_CANARY_TOKEN"
CANARY: Final = "mcpwire-canary-" + secrets.token_hex(12)

_TRACES: Final = (
    ("a Python stack trace", re.compile(r"Traceback \(most recent call last\)|File \"[^\"\n]+\", line \d+, in ")),
    (
        "a Node.js stack trace",
        re.compile(r"\n\s+at (?:[^\s()]+ )?\(?(?:/|[A-Za-z]:\\|file://|node:)[^\s)]*:\d+:\d+\)?"),
    ),
    ("a Java stack trace", re.compile(r"\n\s*at [\w$.<>]+\([\w$]+\.(?:java|kt|scala):\d+\)")),
    ("a .NET stack trace", re.compile(r"\n\s*at [\w.<>`]+\(.*\) in .+:line \d+")),
    ("a Go stack trace", re.compile(r"goroutine \d+ \[[a-z ]+\]:|\.go:\d+ \+0x[0-9a-f]+")),
    ("a Rust panic", re.compile(r"panicked at [^\n]*\.rs:\d+:\d+")),
)
_SOURCE_PATH: Final = re.compile(
    r"(?:/|[A-Za-z]:\\)(?:[\w.@+-]+[/\\])+[\w.@+-]+\.(?:py|js|mjs|cjs|ts|go|rs|java|rb|php|cs|kt):\d+"
)
_SECRETS: Final = (
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("an API key (sk-...)", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{24,}")),
)


def _text(message: dict[str, Any]) -> str:
    """The parts of an answer a client would show: error message and data, result content."""
    parts: list[str] = []
    error = message.get("error")
    if isinstance(error, dict):
        parts.append(str(error.get("message", "")))
        if "data" in error:
            parts.append(json.dumps(error["data"], ensure_ascii=False, default=str))
    result = message.get("result")
    if isinstance(result, dict):
        for block in result.get("content") or []:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        for key in ("structuredContent", "messages", "contents"):
            if key in result:
                parts.append(json.dumps(result[key], ensure_ascii=False, default=str))
    return "\n".join(parts)


def _sent_text(sent: bytes) -> str:
    """The request's text and every string in it, unescaped (what an echo would give back)."""
    raw = sent.decode("utf-8", "replace")
    strings: list[str] = [raw]
    try:
        stack: list[Any] = [json.loads(raw)]
    except (ValueError, RecursionError):
        return raw
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
    return "\n".join(strings)


def find_leak(message: Any, sent: bytes) -> str | None:
    """What an answer leaks (``"a Python stack trace (File \"/srv/x.py\", line 3, in f)"``), or
    ``None``. ``sent`` is the request line: what it held is not counted."""
    if not isinstance(message, dict):
        return None
    text = _text(message)
    if not text:
        return None
    request = _sent_text(sent)
    if CANARY in text and CANARY not in request:
        return f"the server's environment (the value of {CANARY_ENV}, planted by the fuzzer)"
    found: list[tuple[str, re.Match[str]]] = []
    for name, pattern in (*_SECRETS, *_TRACES, ("a source path with a line number", _SOURCE_PATH)):
        match = pattern.search("\n" + text)
        if match is not None and match.group().strip() not in request:
            found.append((name, match))
    if not found:
        return None
    name, match = found[0]
    shown = json.dumps(match.group().strip()[:80], ensure_ascii=True)
    if any(name == secret for secret, _ in _SECRETS):
        shown = "(value not shown)"
    return f"{name} {shown}"
