"""A tool's result as the try-it form shows it: each content block as a view, structured content
as a table or a tree.

Everything here comes from a server. Text stays text (the templates escape it); an image is shown
only when it is a raster type (PNG, JPEG, GIF, WebP) whose data is base64, as a ``data:`` URL built
here (an SVG could carry script); links (``resource_link``, resource URIs) are shown as text, never
as links, so a ``javascript:`` URI is only ever read.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ...redaction import shorten

__all__ = ["Block", "blocks_of", "table_of"]

RASTER: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: the largest image shown inline (decoded bytes)
MAX_IMAGE_BYTES: Final = 2 * 1024 * 1024
MAX_TEXT_CHARS: Final = 100_000


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  #: text, image, resource, link, audio, other
    text: str = ""
    mime: str = ""
    uri: str = ""
    name: str = ""
    #: a data: URL this module built (raster images only)
    src: str = ""
    note: str = ""
    size: int = 0
    #: why an ``other`` block is not shown: ``not_base64``, ``not_shown`` or ``unknown`` (its type)
    why: str = ""
    #: the content type as the server named it (``image``, ``audio``, or another)
    of: str = ""


def _decoded_size(data: object) -> int | None:
    if not isinstance(data, str):
        return None
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _block(content: Mapping[str, Any]) -> Block:
    kind = content.get("type")
    if kind == "text":
        return Block("text", text=shorten(str(content.get("text", "")), MAX_TEXT_CHARS))
    if kind in ("image", "audio"):
        mime = str(content.get("mimeType", ""))[:100]
        data = content.get("data")
        size = _decoded_size(data)
        if size is None:
            note = f"{kind} whose data is not base64; not shown"
            return Block("other", mime=mime, note=note, why="not_base64", of=kind)
        if kind == "image" and mime.lower() in RASTER and size <= MAX_IMAGE_BYTES:
            return Block("image", mime=mime, src=f"data:{mime.lower()};base64,{data}", size=size)
        note = f"{kind} of type {mime or 'unknown'} ({size} bytes); not shown"
        return Block("other", mime=mime, size=size, note=note, why="not_shown", of=kind)
    if kind == "resource":
        resource = content.get("resource")
        resource = resource if isinstance(resource, Mapping) else {}
        text = resource.get("text")
        blob_size = _decoded_size(resource.get("blob"))
        return Block(
            "resource",
            uri=str(resource.get("uri", "")),
            mime=str(resource.get("mimeType", "")),
            text=shorten(text, MAX_TEXT_CHARS) if isinstance(text, str) else "",
            size=blob_size or 0,
            note="" if isinstance(text, str) else f"binary, {blob_size or 0} bytes",
        )
    if kind == "resource_link":
        return Block(
            "link",
            uri=str(content.get("uri", "")),
            name=str(content.get("name", "")),
            mime=str(content.get("mimeType", "")),
            text=str(content.get("description", "") or ""),
        )
    text = shorten(json.dumps(content, indent=2, default=repr), MAX_TEXT_CHARS)
    return Block("other", text=text, note=str(kind), why="unknown", of=str(kind)[:100])


def blocks_of(content: list[dict[str, Any]]) -> list[Block]:
    return [_block(c) for c in content if isinstance(c, Mapping)]


def table_of(value: object) -> tuple[list[str], list[list[object]]] | None:
    """Columns and rows when ``value`` reads best as a table: a list of flat objects (or an
    object holding one such list and nothing else); ``None`` for a tree."""
    if isinstance(value, Mapping) and len(value) == 1:
        (inner,) = value.values()
        if isinstance(inner, list):
            value = inner
    if not isinstance(value, list) or not value or len(value) > 1000:
        return None
    if not all(isinstance(row, Mapping) for row in value):
        return None
    columns: list[str] = []
    for row in value:
        for key in row:
            if key not in columns:
                columns.append(key)
    if len(columns) > 30 or any(isinstance(v, dict | list) for row in value for v in row.values()):
        return None
    return columns, [[row.get(c) for c in columns] for row in value]
