"""Tool-definition pins: a tool whose definition changes after it was first seen is quarantined
until someone approves the new definition.

Theory of operation: a tool's *definition* is what a model and a person judge it by: its
``description``, ``inputSchema``, ``outputSchema`` and ``annotations``. Its hash is the SHA-256 of
that definition as canonical JSON (sorted keys, no spaces), so the same definition always has the
same hash whatever the server's key order. The host, given a :class:`PinStore`, checks every tool
each time a server's list is read (:func:`check_pin`): a tool seen for the first time is pinned; a
tool whose hash differs from its pin is quarantined, its new definition kept beside the pinned one
as ``pending_*`` (a later list with yet another definition replaces the pending one, and a server
that goes back to the pinned definition lifts the quarantine). A quarantined tool is hidden from
the host's tool list and refused by calls (2025-11-25 server/tools, TL-05: tool definitions from
untrusted servers are untrusted; a definition that changes under the same name — a "rug pull" —
is the case pinning exists for). :meth:`Host.approve_pin` makes the pending definition the pinned
one.

A :class:`PinStore` may block (a database), so it is async; :class:`MemoryPins` keeps pins for the
host's lifetime.
"""

from __future__ import annotations

import difflib
import enum
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Literal, Protocol, runtime_checkable

import msgspec

from ..protocol.types import JSONObject, Tool

__all__ = [
    "MemoryPins",
    "Pin",
    "PinChange",
    "PinState",
    "PinStore",
    "check_pin",
    "definition_diff",
    "definition_hash",
    "tool_definition",
]


class PinState(enum.Enum):
    PINNED = "pinned"  #: the tool is used as pinned
    QUARANTINED = "quarantined"  #: its definition changed: hidden and refused until approved


class Pin(msgspec.Struct, frozen=True, kw_only=True):
    """The pinned definition of one tool of one server (times in epoch seconds)."""

    server: str
    tool: str  #: the tool's name on its server
    hash: str
    definition: JSONObject
    state: PinState = PinState.PINNED
    pending_hash: str | None = None
    pending_definition: JSONObject | None = None
    first_seen: float
    changed_at: float | None = None

    @property
    def quarantined(self) -> bool:
        return self.state is PinState.QUARANTINED

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (state as a lower-case word), for APIs and stores."""
        data: dict[str, object] = msgspec.to_builtins(self)
        data["state"] = self.state.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Pin:
        """The inverse of :meth:`to_dict`. Raises msgspec.ValidationError."""
        return msgspec.convert(dict(data), cls)


@runtime_checkable
class PinStore(Protocol):
    """Where pins live. Every method may block, so every one is async."""

    async def get(self, server: str, tool: str) -> Pin | None: ...

    async def put(self, pin: Pin) -> None: ...

    async def all(self) -> list[Pin]: ...


class MemoryPins:
    """Pins in memory, for the lifetime of the object."""

    def __init__(self) -> None:
        self._pins: dict[tuple[str, str], Pin] = {}

    async def get(self, server: str, tool: str) -> Pin | None:
        return self._pins.get((server, tool))

    async def put(self, pin: Pin) -> None:
        self._pins[(pin.server, pin.tool)] = pin

    async def all(self) -> list[Pin]:
        return sorted(self._pins.values(), key=lambda p: (p.server, p.tool))


def tool_definition(tool: Tool) -> JSONObject:
    """The parts of a tool that are pinned, as JSON (wire names)."""
    return {
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": None if tool.annotations is None else msgspec.to_builtins(tool.annotations),
    }


def _canonical(definition: JSONObject) -> bytes:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def definition_hash(definition: JSONObject) -> str:
    """``sha256:<hex>`` of the definition as canonical JSON."""
    return "sha256:" + hashlib.sha256(_canonical(definition)).hexdigest()


def definition_diff(old: JSONObject, new: JSONObject, *, label: str = "tool") -> str:
    """A unified diff of two definitions, as indented JSON with sorted keys."""
    before = json.dumps(old, sort_keys=True, indent=2, ensure_ascii=False).splitlines()
    after = json.dumps(new, sort_keys=True, indent=2, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(before, after, f"{label} (pinned)", f"{label} (new)", lineterm=""))


#: what :func:`check_pin` found: ``pinned`` (first seen), ``same``, ``changed`` (now quarantined,
#: or a different pending definition), ``reverted`` (back to the pinned one) or ``quarantined``
#: (the same pending definition again)
PinChange = Literal["pinned", "same", "changed", "reverted", "quarantined"]


async def check_pin(
    store: PinStore, server: str, tool: Tool, *, clock: Callable[[], float] = time.time
) -> tuple[Pin, PinChange]:
    """Compares ``tool`` with its pin (pinning it when first seen); returns the pin as stored."""
    definition = tool_definition(tool)
    digest = definition_hash(definition)
    pin = await store.get(server, tool.name)
    if pin is None:
        pin = Pin(server=server, tool=tool.name, hash=digest, definition=definition, first_seen=clock())
        await store.put(pin)
        return pin, "pinned"
    if digest == pin.hash:
        if not pin.quarantined:
            return pin, "same"
        pin = msgspec.structs.replace(
            pin, state=PinState.PINNED, pending_hash=None, pending_definition=None, changed_at=clock()
        )
        await store.put(pin)
        return pin, "reverted"
    if pin.quarantined and digest == pin.pending_hash:
        return pin, "quarantined"
    pin = msgspec.structs.replace(
        pin, state=PinState.QUARANTINED, pending_hash=digest, pending_definition=definition, changed_at=clock()
    )
    await store.put(pin)
    return pin, "changed"


def approved(pin: Pin, *, clock: Callable[[], float] = time.time) -> Pin:
    """``pin`` with its pending definition accepted."""
    if pin.pending_hash is None or pin.pending_definition is None:
        return msgspec.structs.replace(pin, state=PinState.PINNED)
    return msgspec.structs.replace(
        pin,
        hash=pin.pending_hash,
        definition=pin.pending_definition,
        state=PinState.PINNED,
        pending_hash=None,
        pending_definition=None,
        changed_at=clock(),
    )
