"""HTTP header rules of Streamable HTTP, without I/O.

Theory of operation: the transport adds headers but never reads payloads, so every header that
mirrors the body is computed here, from the method and params the client is about to send.

- 2025-06-18 .. 2025-11-25: ``MCP-Protocol-Version: <negotiated>`` on every request after
  ``initialize`` (LC-13, HT-L08); ``Mcp-Session-Id`` is the transport's own business.
- 2026-07-28 (HT-M03..HT-M09): ``MCP-Protocol-Version`` equal to the ``_meta`` version on every
  POST; ``Mcp-Method`` on all requests; ``Mcp-Name`` (``params.name`` or ``params.uri``) on
  ``tools/call``, ``resources/read`` and ``prompts/get``; ``Mcp-Param-{Name}`` for every argument
  a tool annotates with ``x-mcp-header``. Values that are not plain visible ASCII, have
  leading or trailing white space, or look like the sentinel itself are sent as
  ``=?base64?...?=``. A tool whose annotations break the rules is dropped by the client:
  "Clients using the Streamable HTTP transport MUST reject tool definitions where any
  x-mcp-header value violates these constraints".
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Final

__all__ = [
    "HeaderSpec",
    "encode_header_value",
    "is_event_stream",
    "media_type",
    "mirrored_headers",
    "tool_header_spec",
]

_TOKEN: Final = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_SAFE_VALUE: Final = re.compile(r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?\Z")
_JS_SAFE_INT: Final = 2**53 - 1
_NAMED_METHODS: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

#: ``(path of properties keys, header name)`` pairs of one tool.
HeaderSpec = tuple[tuple[tuple[str, ...], str], ...]


def media_type(content_type: str) -> str:
    """The media type of a ``Content-Type`` value, lower-cased (RFC 9110 8.3.1: the type and
    subtype are case-insensitive), without parameters."""
    return content_type.split(";", 1)[0].strip().lower()


def is_event_stream(content_type: str) -> bool:
    """Whether a ``Content-Type`` value names ``text/event-stream`` (HT-05), in any case."""
    return media_type(content_type) == "text/event-stream"


def encode_header_value(value: str) -> str:
    """The header form of ``value``: as is when safe, else the base64 sentinel."""
    if _SAFE_VALUE.fullmatch(value) and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode("ascii") + "?="


def tool_header_spec(input_schema: Mapping[str, object]) -> HeaderSpec:
    """The ``x-mcp-header`` annotations of a tool's inputSchema.

    Raises:
        ValueError: an annotation breaks the rules; the message says which and why.
    """
    found: list[tuple[tuple[str, ...], str]] = []
    _walk(input_schema, (), found, reachable=True)
    seen: dict[str, tuple[str, ...]] = {}
    for path, name in found:
        key = name.lower()
        if key in seen:
            raise ValueError(
                f"x-mcp-header {name!r} is used twice (case-insensitively), at {_dotted(seen[key])} and {_dotted(path)}"
            )
        seen[key] = path
    return tuple(found)


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path) or "(root)"


def _walk(schema: object, path: tuple[str, ...], found: list[tuple[tuple[str, ...], str]], *, reachable: bool) -> None:
    if isinstance(schema, list):
        for item in schema:
            _walk(item, path, found, reachable=False)
        return
    if not isinstance(schema, Mapping):
        return
    if "x-mcp-header" in schema:
        name = schema["x-mcp-header"]
        where = _dotted(path)
        if not reachable or not path:
            raise ValueError(f"x-mcp-header at {where} is not statically reachable through 'properties'")
        if not isinstance(name, str) or not name:
            raise ValueError(f"x-mcp-header at {where} must be a non-empty string")
        if not _TOKEN.match(name):
            raise ValueError(f"x-mcp-header {name!r} at {where} is not an HTTP field-name token")
        kind = schema.get("type")
        if kind not in ("string", "integer", "boolean"):
            raise ValueError(
                f"x-mcp-header {name!r} at {where} is on a parameter of type {kind!r}; "
                "only string, integer and boolean are allowed"
            )
        found.append((path, name))
    for key, value in schema.items():
        if key == "properties" and isinstance(value, Mapping):
            for prop, sub in value.items():
                _walk(sub, (*path, str(prop)), found, reachable=reachable)
        elif key not in ("x-mcp-header",) and isinstance(value, Mapping | list):
            _walk(value, path, found, reachable=False)


def _value_at(arguments: Mapping[str, object], path: tuple[str, ...]) -> object:
    current: object = arguments
    for key in path:
        if not isinstance(current, Mapping) or key not in current:
            return None
        current = current[key]
    return current


def mirrored_headers(
    method: str,
    params: Mapping[str, object] | None,
    version: str,
    *,
    modern: bool,
    tool_headers: HeaderSpec = (),
) -> dict[str, str]:
    """Headers that mirror the body of one request."""
    headers = {"MCP-Protocol-Version": version}
    if not modern:
        return headers
    headers["Mcp-Method"] = method
    field = _NAMED_METHODS.get(method)
    if field is not None and params is not None:
        value = params.get(field)
        if isinstance(value, str):
            headers["Mcp-Name"] = encode_header_value(value)
    if tool_headers and params is not None:
        arguments = params.get("arguments")
        if isinstance(arguments, Mapping):
            for path, name in tool_headers:
                value = _value_at(arguments, path)
                if value is None:
                    continue  # null or absent: "Client MUST omit the header"
                if isinstance(value, bool):
                    text = "true" if value else "false"
                elif isinstance(value, int):
                    if abs(value) > _JS_SAFE_INT:
                        raise ValueError(
                            f"argument {_dotted(path)}={value} is outside the JavaScript safe integer range"
                        )
                    text = str(value)
                elif isinstance(value, str):
                    text = value
                else:
                    raise ValueError(
                        f"argument {_dotted(path)} mirrored to Mcp-Param-{name} must be a string, integer or boolean"
                    )
                headers[f"Mcp-Param-{name}"] = encode_header_value(text)
    return headers
