"""Pins alone: what a pinned definition covers, which changes are a reordering (recorded, not
quarantined) and which quarantine, the word-level diff, and pins stored before titles, names and
_meta were pinned."""

from __future__ import annotations

import msgspec
import pytest

from mcpwire.host.pins import (
    MemoryPins,
    Pin,
    PinState,
    WordChange,
    check_pin,
    definition_hash,
    same_words,
    tool_definition,
    word_diff,
)
from mcpwire.protocol.types import Tool

FORMATS = "Predefined formats: `ANSIC`, `RFC3339`, `Kitchen`.\n\nOr a custom layout."


def _tool(**fields: object) -> Tool:
    base: dict[str, object] = {
        "name": "current_time",
        "description": "Returns the current time.",
        "inputSchema": {"type": "object", "properties": {"format": {"type": "string", "description": FORMATS}}},
    }
    return msgspec.convert({**base, **fields}, Tool)


def test_the_pinned_definition_covers_what_a_client_is_shown() -> None:
    tool = _tool(title="Time", outputSchema={"type": "object"}, annotations={"readOnlyHint": True}, _meta={"x": 1})
    assert tool_definition(tool) == {
        "name": "current_time",
        "title": "Time",
        "description": "Returns the current time.",
        "inputSchema": tool.input_schema,
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
        "_meta": {"x": 1},
    }


@pytest.mark.parametrize(
    ("new", "same"),
    [
        ("Predefined formats: `Kitchen`, `ANSIC`, `RFC3339`.\n\nOr a custom layout.", True),  # map order
        ("Predefined formats:  `ANSIC`,\n`RFC3339`, `Kitchen`.\n\nOr a custom layout.", True),  # spacing
        ("Predefined formats: `ANSIC`, `RFC3339`, `Kitchen`, `Unix`.\n\nOr a custom layout.", False),  # added
        ("Predefined formats: `ANSIC`, `RFC3339`.\n\nOr a custom layout.", False),  # removed
        ("Predefined formats: `ANSIC`, `RFC3339`, `Kitchen`.\n\nOr a custom layouts.", False),  # changed
        ("Predefined formats: `ANSIC`, `RFC3339`, `Kitchen`!\n\nOr a custom layout.", False),  # punctuation
    ],
)
def test_only_the_same_words_in_another_order_are_a_reordering(new: str, same: bool) -> None:
    old = tool_definition(_tool())
    changed = tool_definition(_tool(inputSchema={"type": "object", "properties": {"format": {"description": new}}}))
    changed["inputSchema"]["properties"]["format"]["type"] = "string"  # type: ignore[index]
    assert same_words(old, changed) is same


def test_words_moved_to_another_field_and_lists_in_another_order() -> None:
    old = tool_definition(_tool(title="Current time", inputSchema={"type": "object", "required": ["a", "b"]}))
    # a list in another order holds the same words; a word moved from the title to the description does not
    reordered = tool_definition(_tool(title="Current time", inputSchema={"type": "object", "required": ["b", "a"]}))
    moved = tool_definition(
        _tool(title="Current", description="Returns the current time. time", inputSchema=old["inputSchema"])
    )
    assert same_words(old, reordered) and not same_words(old, moved)


def test_the_diff_shows_the_words_removed_and_added_field_by_field() -> None:
    old = tool_definition(_tool(title="Weather"))
    new = tool_definition(_tool(title="Weather <b>now</b>", description="Returns the current time, and your keys."))
    assert word_diff(old, new) == [
        WordChange(
            field="description",
            pieces=[("same", "Returns the current time"), ("add", ", and your keys"), ("same", ".")],
        ),
        WordChange(field="title", pieces=[("same", "Weather"), ("add", " <b>now</b>")]),
    ]
    assert word_diff(old, old) == []


async def test_a_reordering_is_recorded_without_quarantine_and_a_new_word_quarantines() -> None:
    store = MemoryPins()
    first, change = await check_pin(store, "time", _tool(), clock=lambda: 1.0)
    assert change == "pinned"
    swapped = FORMATS.replace("`ANSIC`, `RFC3339`, `Kitchen`", "`Kitchen`, `RFC3339`, `ANSIC`")
    schema = {"type": "object", "properties": {"format": {"type": "string", "description": swapped}}}
    pin, change = await check_pin(store, "time", _tool(inputSchema=schema), clock=lambda: 2.0)
    assert change == "reordered"
    assert (pin.state, pin.hash, pin.reorders, pin.reordered_at) == (PinState.PINNED, first.hash, 1, 2.0)
    assert (await check_pin(store, "time", _tool(inputSchema=schema)))[1] == "same"  # seen in this order before
    assert (await check_pin(store, "time", _tool()))[1] == "same"  # and the pinned order is the pinned one
    pin, change = await check_pin(store, "time", _tool(title="Time (deprecated: use the other one)"))
    assert (change, pin.state) == ("changed", PinState.QUARANTINED)
    # the pinned words come back in another order: the quarantine is lifted
    pin, change = await check_pin(store, "time", _tool(inputSchema=schema))
    assert (change, pin.state, pin.pending_definition) == ("reverted", PinState.PINNED, None)


async def test_a_pin_stored_before_titles_were_pinned_is_completed_not_quarantined() -> None:
    tool = _tool(title="Time")
    older = {key: tool_definition(tool)[key] for key in ("description", "inputSchema", "outputSchema", "annotations")}
    store = MemoryPins()
    await store.put(
        Pin(server="time", tool="current_time", hash=definition_hash(older), definition=older, first_seen=1)
    )
    pin, change = await check_pin(store, "time", tool)
    assert change == "same"
    assert (pin.definition, pin.hash) == (tool_definition(tool), definition_hash(tool_definition(tool)))
    assert await store.get("time", "current_time") == pin
    # from now on its title is pinned too
    assert (await check_pin(store, "time", _tool(title="Clock")))[1] == "changed"
