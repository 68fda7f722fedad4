"""Tool-definition pins: a tool whose definition changes after it was first seen is quarantined
until someone approves the new definition.

Theory of operation: a tool's *definition* is everything a model and a person judge it by and a
gateway passes on: its ``name``, ``title``, ``description``, ``inputSchema``, ``outputSchema``,
``annotations`` and ``_meta``. Its hash is the SHA-256 of that definition as canonical JSON (sorted
keys, no spaces), so the same definition always has the same hash whatever the server's key order.
The host, given a :class:`PinStore`, checks every tool each time a server's list is read
(:func:`check_pin`): a tool seen for the first time is pinned; a tool whose hash differs from its
pin is quarantined, its new definition kept beside the pinned one as ``pending_*`` (a later list
with yet another definition replaces the pending one, and a server that goes back to the pinned
definition lifts the quarantine).

Only a change of words quarantines. A definition whose every field holds the same multiset of
words as the pinned one (:func:`same_words`: the same words and punctuation, in another order, as
a server that lists a map in its runtime's map order gives on each start) is *reordered*: recorded
(``reordered_*``, an audit record and an event) but not quarantined. Any word added, removed or
changed quarantines. :func:`word_diff` shows a change as the words removed and added, field by
field.

Pins stored before titles, names and ``_meta`` were pinned hold the older four fields; such a pin is
completed from the tool the first time its older fields are seen unchanged. A quarantined tool is hidden from
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
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Final, Literal, Protocol, runtime_checkable

import msgspec

from ..protocol.types import JSONObject, JSONValue, Tool

__all__ = [
    "MemoryPins",
    "Pin",
    "PinChange",
    "PinState",
    "PinStore",
    "WordChange",
    "check_pin",
    "definition_diff",
    "definition_hash",
    "same_words",
    "tool_definition",
    "word_diff",
]

#: words, numbers and runs of punctuation: what a change of a definition is judged by
_TOKENS: Final = re.compile(r"\w+|[^\w\s]+")
#: the same, with the whitespace between them kept (to show a field's text again)
_PIECES: Final = re.compile(r"\w+|[^\w\s]+|\s+")
#: the fields pinned before titles, names and _meta were
_OLDER_FIELDS: Final = ("description", "inputSchema", "outputSchema", "annotations")


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
    #: the last definition seen that has the pinned one's words in another order (not quarantined)
    reordered_hash: str | None = None
    reordered_definition: JSONObject | None = None
    reordered_at: float | None = None
    #: how many such reorderings were seen since the definition was pinned
    reorders: int = 0

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
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": None if tool.annotations is None else msgspec.to_builtins(tool.annotations),
        "_meta": tool.meta,
    }


def _leaves(value: JSONValue, path: str = "") -> Iterator[tuple[str, str]]:
    """``(path, text)`` of every scalar in a JSON value; object keys are part of the path, array
    positions are not (so a list in another order has the same leaves)."""
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, f"{path}[]")
    elif value is not None:
        yield path, value if isinstance(value, str) else json.dumps(value)


def _words(definition: JSONObject) -> Counter[tuple[str, str]]:
    return Counter((path, token) for path, text in _leaves(definition) for token in _TOKENS.findall(text))


def same_words(old: JSONObject, new: JSONObject) -> bool:
    """Whether two definitions hold, field by field, the same multiset of words and punctuation
    (they differ at most in order and spacing)."""
    return _words(old) == _words(new)


class WordChange(msgspec.Struct, frozen=True, kw_only=True):
    """One field of a definition that changed, as pieces of text: ``op`` is ``same``, ``add`` or
    ``del`` for each piece (whitespace kept, so the pieces read as the field's text)."""

    field: str  #: the field's path (``description``, ``inputSchema.properties.q.description``)
    pieces: list[tuple[str, str]]


def _flat(definition: JSONObject) -> dict[str, str]:
    """Each scalar of a definition by its path, array positions included (``required[0]``)."""
    out: dict[str, str] = {}

    def walk(value: JSONValue, path: str) -> None:
        if isinstance(value, dict):
            for key in sorted(value):
                walk(value[key], f"{path}.{key}" if path else key)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")
        elif value is not None:
            out[path] = value if isinstance(value, str) else json.dumps(value)

    walk(definition, "")
    return out


def word_diff(old: JSONObject, new: JSONObject) -> list[WordChange]:
    """The fields that differ between two definitions, each as the words removed and added."""
    before, after = _flat(old), _flat(new)
    changes: list[WordChange] = []
    for field in sorted(before.keys() | after.keys()):
        a, b = before.get(field, ""), after.get(field, "")
        if a == b:
            continue
        changes.append(WordChange(field=field, pieces=_pieces(_PIECES.findall(a), _PIECES.findall(b))))
    return changes


def _pieces(left: list[str], right: list[str]) -> list[tuple[str, str]]:
    """The pieces of one field's change. A stretch kept between two changes that is only a mark
    or a space (the ``.`` of ``window.x`` matched with a sentence's full stop) joins them: one
    change reads better than three."""
    runs: list[list[str]] = []  # ["same", text] or ["change", removed, added]
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        removed, added = "".join(left[i1:i2]), "".join(right[j1:j2])
        if op == "equal":
            runs.append(["same", removed])
        elif runs and runs[-1][0] == "change":
            runs[-1][1] += removed
            runs[-1][2] += added
        else:
            runs.append(["change", removed, added])
        if len(runs) >= 3 and runs[-1][0] == runs[-3][0] == "change" and _slight(runs[-2][1]):
            kept = runs[-2][1]
            last = runs.pop()
            runs.pop()
            runs[-1][1] += kept + last[1]
            runs[-1][2] += kept + last[2]
    pieces: list[tuple[str, str]] = []
    for run in runs:
        if run[0] == "same":
            pieces.append(("same", run[1]))
            continue
        if run[1]:
            pieces.append(("del", run[1]))
        if run[2]:
            pieces.append(("add", run[2]))
    return pieces


def _slight(text: str) -> bool:
    """Whether a kept stretch is too slight to read on its own between two changes."""
    return len(text) <= 2 and not any(c.isalnum() for c in text)


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


#: what :func:`check_pin` found: ``pinned`` (first seen), ``same``, ``reordered`` (the pinned
#: words in another order: recorded, not quarantined), ``changed`` (now quarantined, or a different
#: pending definition), ``reverted`` (back to the pinned one) or ``quarantined`` (the same pending
#: definition again)
PinChange = Literal["pinned", "same", "reordered", "changed", "reverted", "quarantined"]


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
    if "name" not in pin.definition:
        completed = _completed(pin, definition, digest)
        if completed is not pin:
            pin = completed
            await store.put(pin)
    if digest == pin.hash:
        if not pin.quarantined:
            return pin, "same"
        pin = msgspec.structs.replace(
            pin, state=PinState.PINNED, pending_hash=None, pending_definition=None, changed_at=clock()
        )
        await store.put(pin)
        return pin, "reverted"
    if pin.quarantined and (
        digest == pin.pending_hash
        or (pin.pending_definition is not None and same_words(pin.pending_definition, definition))
    ):
        return pin, "quarantined"
    if same_words(pin.definition, definition):
        if not pin.quarantined and digest == pin.reordered_hash:
            return pin, "same"  # this order was seen (and recorded) before
        now = clock()
        reverted = pin.quarantined
        pin = msgspec.structs.replace(
            pin,
            state=PinState.PINNED,
            pending_hash=None,
            pending_definition=None,
            changed_at=now if reverted else pin.changed_at,
            reordered_hash=digest,
            reordered_definition=definition,
            reordered_at=now,
            reorders=pin.reorders + 1,
        )
        await store.put(pin)
        return pin, "reverted" if reverted else "reordered"
    pin = msgspec.structs.replace(
        pin, state=PinState.QUARANTINED, pending_hash=digest, pending_definition=definition, changed_at=clock()
    )
    await store.put(pin)
    return pin, "changed"


def _completed(pin: Pin, definition: JSONObject, digest: str) -> Pin:
    """A pin stored before names, titles and ``_meta`` were pinned, completed from the tool seen
    now when its older fields are the pinned (or pending) ones; else as it was."""
    older = {key: definition.get(key) for key in _OLDER_FIELDS}
    older_hash = definition_hash(older)
    if older_hash == pin.hash:
        return msgspec.structs.replace(pin, hash=digest, definition=definition)
    if pin.quarantined and older_hash == pin.pending_hash:
        return msgspec.structs.replace(pin, pending_hash=digest, pending_definition=definition)
    return pin


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
        reordered_hash=None,
        reordered_definition=None,
        reordered_at=None,
        reorders=0,
    )
