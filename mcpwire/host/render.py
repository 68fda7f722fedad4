"""Text renderings of results: for models (:func:`render_result`) and for a terminal
(:func:`render_for_terminal`). Every content block gets a line, nothing is lost silently (images
and audio become a placeholder naming their type and size); what goes to a terminal has every
control character shown as a visible escape."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec
from msgspec import UnsetType

from ..protocol.types import (
    AudioContent,
    ContentBlock,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    ResourceContents,
    ResourceLink,
    TextContent,
    ToolResult,
)
from ..redaction import clean_terminal, shorten

__all__ = [
    "DESCRIPTION_LIMIT",
    "closest",
    "first_line",
    "human_size",
    "parameter_lines",
    "prompt_text",
    "render_for_terminal",
    "render_result",
    "result_json",
    "terminal_block",
    "terminal_contents",
    "terminal_json",
    "ToolRow",
    "tool_listing",
    "tool_signature",
    "unknown_name",
]


def _size(b64: str) -> int:
    return len(b64) * 3 // 4 - b64[-2:].count("=") if b64 else 0


def render_result(result: ToolResult) -> str:
    """The result as text for a model. ``isError`` results start with ``Error:``."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image: {block.mime_type}, {_size(block.data)} bytes]")
        elif isinstance(block, AudioContent):
            parts.append(f"[audio: {block.mime_type}, {_size(block.data)} bytes]")
        elif isinstance(block, ResourceLink):
            label = block.title or block.name or block.uri
            parts.append(f"[resource link: {label} <{block.uri}>]")
        elif isinstance(block, EmbeddedResource):
            res = block.resource
            if res.text is not None:
                parts.append(res.text)
            else:
                parts.append(f"[resource {res.uri}: {res.mime_type or 'binary'}, {_size(res.blob or '')} bytes]")
        else:
            parts.append(f"[{block.type or 'unknown'} content]")
    structured = result.structured_content
    if not parts and not isinstance(structured, UnsetType):
        parts.append(msgspec.json.encode(structured).decode())
    text = "\n".join(parts)
    if result.is_error:
        return f"Error: {text}" if text else "Error: the tool failed without a message"
    return text


# -- for a terminal ------------------------------------------------------------------------------

#: Characters of a description kept on one line of a listing.
DESCRIPTION_LIMIT = 100


def human_size(size: int) -> str:
    """``512 B``, ``1.2 KiB``, ``3.4 MiB``: a size as people read it."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def _placeholder(*parts: str | None, size: int | None) -> str:
    shown = [p for p in parts if p]
    if size is not None:
        shown.append(human_size(size))
    return clean_terminal(f"[{', '.join(shown)}]", newlines=False)


def terminal_block(block: ContentBlock) -> str:
    """One content block for a terminal: text cleaned of control characters; images, audio and
    binary resources as placeholders such as ``[image/png, 1.2 KiB]``."""
    if isinstance(block, TextContent):
        return clean_terminal(block.text)
    if isinstance(block, ImageContent):
        return _placeholder(block.mime_type or "image", size=_size(block.data))
    if isinstance(block, AudioContent):
        return _placeholder(block.mime_type or "audio", size=_size(block.data))
    if isinstance(block, ResourceLink):
        return _placeholder("resource link", block.uri, block.mime_type, size=block.size)
    if isinstance(block, EmbeddedResource):
        return terminal_contents(block.resource, embedded=True)
    return clean_terminal(f"[{block.type or 'unknown'} content]", newlines=False)


def terminal_contents(contents: ResourceContents, *, embedded: bool = False) -> str:
    """A resource's contents for a terminal: its text (under a header line when embedded in a
    result), or a placeholder for a blob."""
    kind = "embedded resource" if embedded else "resource"
    if contents.text is not None:
        text = clean_terminal(contents.text)
        if not embedded:
            return text
        return f"{_placeholder(kind, contents.uri, contents.mime_type, size=len(contents.text.encode()))}\n{text}"
    return _placeholder(kind, contents.uri, contents.mime_type or "binary", size=_size(contents.blob or ""))


def render_for_terminal(result: ToolResult) -> str:
    """A tool result for a person at a terminal: every block shown (see :func:`terminal_block`),
    structured content as JSON when there is no other content, nothing that controls the terminal."""
    parts = [terminal_block(block) for block in result.content]
    structured = result.structured_content
    if not parts and not isinstance(structured, UnsetType):
        parts.append(clean_terminal(msgspec.json.encode(structured).decode()))
    return "\n".join(parts)


# JSON escapes every C0 control itself; these would still reorder or hide text on a terminal (or
# cannot be encoded), so they are written as \uXXXX escapes, which JSON readers decode the same.
_UNSAFE_IN_JSON: Final = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


def terminal_json(value: object) -> str:
    """``value`` (plain JSON data, or msgspec Structs) as indented JSON safe to print: no character
    in it can control or reorder a terminal, and the document decodes to the same value."""
    text = json.dumps(msgspec.to_builtins(value), indent=2, ensure_ascii=False, default=str)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _type_name(schema: object) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "|".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"][:6]) + (
            "|…" if len(schema["enum"]) > 6 else ""
        )
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return "|".join(_type_name(o) for o in options[:4])
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        return f"{_type_name(schema.get('items'))}[]"
    return str(kind) if isinstance(kind, str) else "any"


def _parameters(schema: Mapping[str, object]) -> list[tuple[str, bool, str, str]]:
    """``(name, required, type, description)`` per property of an input schema."""
    properties = schema.get("properties")
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    if not isinstance(properties, dict):
        return []
    rows = []
    for name, prop in properties.items():
        description = prop.get("description") if isinstance(prop, dict) else None
        rows.append((str(name), name in needed, _type_name(prop), description if isinstance(description, str) else ""))
    return rows


def tool_signature(name: str, schema: Mapping[str, object]) -> str:
    """A compact signature such as ``echo(text: string, times?: integer)``, terminal-safe."""
    params = ", ".join(f"{p}{'' if req else '?'}: {kind}" for p, req, kind, _ in _parameters(schema))
    return clean_terminal(f"{name}({params})", newlines=False)


def parameter_lines(schema: Mapping[str, object], *, indent: str = "    ") -> list[str]:
    """One line per described parameter (name, type, ``optional``, description), terminal-safe."""
    rows = [row for row in _parameters(schema) if row[3].strip()]  # the signature shows the rest
    if not rows:
        return []
    width = max(len(p) for p, *_ in rows)
    lines = []
    for param, req, kind, description in rows:
        first = description.strip().splitlines()[0] if description.strip() else ""
        text = f"{indent}{param:<{width}}  {kind}{'' if req else ' (optional)'}"
        if first:
            text += f"  {shorten(first, DESCRIPTION_LIMIT)}"
        lines.append(clean_terminal(text, newlines=False))
    return lines


#: one tool as :func:`tool_listing` shows it: name, input schema, description, and a note (or None)
ToolRow = tuple[str, Mapping[str, object], str | None, str | None]


def tool_listing(rows: Sequence[ToolRow], *, schema: bool) -> list[str]:
    """The lines that list tools on a terminal, terminal-safe: each tool's signature, first line
    of description and described parameters (``schema``), or a table of names and first lines.
    A row's note (the host's risk) follows its name."""
    if schema:
        lines: list[str] = []
        for name, input_schema, description, note in rows:
            lines.append(tool_signature(name, input_schema) + (f"  {note}" if note else ""))
            if description:
                lines.append(f"    {first_line(description)}")
            lines += parameter_lines(input_schema, indent="      ")
        return lines
    names = [clean_terminal(row[0], newlines=False) for row in rows]
    width = max((len(n) for n in names), default=0)
    return [
        f"{name:<{width}}  {'' if note is None else f'{note:<8}  '}{first_line(description)}".rstrip()
        for name, (_, _, description, note) in zip(names, rows, strict=True)
    ]

def first_line(text: str | None, limit: int = DESCRIPTION_LIMIT) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters with ``…``, terminal-safe."""
    for line in (text or "").strip().splitlines():
        if line.strip():
            more = len((text or "").strip().splitlines()) > 1
            cut = shorten(line.strip(), limit)
            return clean_terminal(cut + ("" if cut.endswith("…") or not more else " …"), newlines=False)
    return ""


def closest(name: str, candidates: Sequence[str]) -> list[str]:
    """Up to three candidates close to ``name`` (spelling, case, or a namespaced suffix)."""
    found = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    lowered = {c.lower(): c for c in candidates}
    if name.lower() in lowered and lowered[name.lower()] not in found:
        found.insert(0, lowered[name.lower()])
    for candidate in candidates:  # `call echo` under mcp.json, where it is `demo__echo`
        if candidate.endswith(("__" + name, "_" + name, "." + name)) and candidate not in found:
            found.append(candidate)
    return found[:3]


def unknown_name(kind: str, name: str, candidates: Sequence[str], where: str) -> str:
    """``no tool named 'ecoh' on X; did you mean echo?`` (or the known names when none is close)."""
    shown = repr(name)  # repr escapes every character that is not printable
    close = closest(name, candidates)
    if close:
        hint = "did you mean " + " or ".join(clean_terminal(c, newlines=False) for c in close) + "?"
    elif candidates:
        listed = ", ".join(clean_terminal(c, newlines=False) for c in sorted(candidates)[:20])
        hint = f"known {kind}s: {listed}" + (f" (and {len(candidates) - 20} more)" if len(candidates) > 20 else "")
    else:
        hint = f"it has no {kind}s"
    return f"no {kind} named {shown} on {where}; {hint}"


def prompt_text(result: GetPromptResult) -> str:
    """A rendered prompt for a terminal: its description, then each message under its role."""
    lines = [f"# {first_line(result.description)}"] if result.description else []
    for message in result.messages:
        lines.append(f"[{clean_terminal(str(message.role), newlines=False)}]")
        lines.append(terminal_block(message.block()))
    return "\n".join(lines)


def result_json(result: ToolResult) -> dict[str, object]:
    """A tool result as MCP writes it (``content``, ``structuredContent`` when present,
    ``isError``; not ``_meta``, which carries protocol bookkeeping), for JSON output."""
    payload: dict[str, object] = {"content": msgspec.to_builtins(result.content), "isError": result.is_error}
    if not isinstance(result.structured_content, UnsetType):
        payload["structuredContent"] = result.structured_content
    return payload
