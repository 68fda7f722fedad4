"""RequestTable: ids and exactly-once resolution (JR-03..JR-06, UT-C03)."""

from __future__ import annotations

import pytest

from mcpwire.protocol import RequestTable
from mcpwire.protocol.pending import ABANDONED_MEMORY


def test_ids_are_monotonic_integers_from_one() -> None:
    """JR-05: one increasing integer counter per connection."""
    table: RequestTable[str] = RequestTable()
    assert table.next_id == 1
    ids = [table.add("tools/list", f"w{i}").id for i in range(5)]
    assert ids == [1, 2, 3, 4, 5]
    assert all(type(i) is int for i in ids)
    assert table.next_id == 6


def test_first_id_is_configurable() -> None:
    table: RequestTable[None] = RequestTable(first_id=100)
    assert table.add("ping", None).id == 100


def test_ids_are_never_reused() -> None:
    """JR-03/JR-04: not after an answer, an abandon, or fail_all (a legacy re-initialise)."""
    table: RequestTable[str] = RequestTable()
    first = table.add("a", "w").id
    table.resolve(first)
    second = table.add("b", "w").id
    table.abandon(second)
    third = table.add("c", "w").id
    table.fail_all()
    fourth = table.add("initialize", "w").id
    assert [first, second, third, fourth] == [1, 2, 3, 4]


def test_entry_carries_method_and_waiter() -> None:
    table: RequestTable[object] = RequestTable()
    waiter = object()
    entry = table.add("tools/call", waiter)
    assert (entry.method, entry.waiter) == ("tools/call", waiter)
    assert repr(entry) == "<PendingRequest tools/call id=1>"
    assert table.get(1) is entry
    assert 1 in table and len(table) == 1


def test_get_does_not_remove() -> None:
    table: RequestTable[str] = RequestTable()
    entry = table.add("m", "w")
    assert table.get(entry.id) is entry
    assert table.get(entry.id) is entry
    assert len(table) == 1
    assert table.get(99) is None


def test_resolve_exactly_once() -> None:
    """JR-12 from our side: each waiter leaves the table once; a duplicate answer is unknown."""
    table: RequestTable[str] = RequestTable()
    entry = table.add("m", "w")
    assert table.resolve(entry.id) is entry
    assert entry.id not in table and len(table) == 0
    assert table.resolve(entry.id) is None
    assert (table.late, table.unknown) == (0, 1)


def test_answer_for_an_id_never_allocated_is_unknown() -> None:
    table: RequestTable[str] = RequestTable()
    table.add("m", "w")
    assert table.resolve(42) is None
    assert table.resolve("nope") is None
    assert (table.late, table.unknown) == (0, 2)
    assert len(table) == 1


def test_answer_without_id_is_unknown() -> None:
    """JR-09: an error without an id cannot resolve a waiter."""
    table: RequestTable[str] = RequestTable()
    table.add("m", "w")
    assert table.resolve(None) is None
    assert (table.late, table.unknown, len(table)) == (0, 1, 1)


def test_answer_after_abandon_is_late_once() -> None:
    """JR-06/UT-C03: the answer to a cancelled request is ignored and counted as late."""
    table: RequestTable[str] = RequestTable()
    entry = table.add("tools/call", "w")
    assert table.abandon(entry.id) is entry
    assert len(table) == 0
    assert table.resolve(entry.id) is None
    assert (table.late, table.unknown) == (1, 0)
    # A second answer for the same id is no longer "late": it was already accounted for.
    assert table.resolve(entry.id) is None
    assert (table.late, table.unknown) == (1, 1)


def test_abandon_is_idempotent_and_ignores_unknown_ids() -> None:
    table: RequestTable[str] = RequestTable()
    entry = table.add("m", "w")
    assert table.abandon(entry.id) is entry
    assert table.abandon(entry.id) is None
    assert table.abandon(999) is None
    assert table.resolve(999) is None
    assert (table.late, table.unknown) == (0, 1)


def test_abandon_after_resolve_does_nothing() -> None:
    table: RequestTable[str] = RequestTable()
    entry = table.add("m", "w")
    table.resolve(entry.id)
    assert table.abandon(entry.id) is None
    assert table.resolve(entry.id) is None
    assert (table.late, table.unknown) == (0, 1)


def test_fail_all_returns_every_entry_once() -> None:
    """LC-54: the connection ended; every waiter is failed locally, exactly once."""
    table: RequestTable[str] = RequestTable()
    entries = [table.add(f"m{i}", f"w{i}") for i in range(4)]
    table.resolve(entries[1].id)
    table.abandon(entries[2].id)
    failed = table.fail_all()
    assert failed == [entries[0], entries[3]]
    assert len(table) == 0
    assert table.fail_all() == []
    # Answers that straggle in afterwards resolve nothing.
    assert table.resolve(entries[0].id) is None
    assert table.resolve(entries[2].id) is None  # abandoned before: late
    assert (table.late, table.unknown) == (1, 1)


def test_ids_keep_their_json_type() -> None:
    """JR-05: an answer with id ``"1"`` does not resolve request ``1``."""
    table: RequestTable[str] = RequestTable()
    entry = table.add("m", "w")
    assert "1" not in table
    assert table.get("1") is None
    assert table.resolve("1") is None
    assert table.unknown == 1
    assert entry.id in table
    assert table.resolve(1) is entry


def test_abandoned_type_is_preserved_for_late_accounting() -> None:
    table: RequestTable[str] = RequestTable()
    entry = table.add("m", "w")
    table.abandon(entry.id)
    assert table.resolve(str(entry.id)) is None
    assert (table.late, table.unknown) == (0, 1)
    assert table.resolve(entry.id) is None
    assert (table.late, table.unknown) == (1, 1)


def test_abandoned_memory_is_bounded() -> None:
    """Only the most recent abandoned ids are remembered; older late answers count as unknown."""
    table: RequestTable[None] = RequestTable()
    ids = []
    for _ in range(ABANDONED_MEMORY + 10):
        entry = table.add("m", None)
        table.abandon(entry.id)
        ids.append(entry.id)
    assert table.resolve(ids[0]) is None
    assert (table.late, table.unknown) == (0, 1)  # forgotten
    assert table.resolve(ids[9]) is None
    assert (table.late, table.unknown) == (0, 2)  # the newest one forgotten
    assert table.resolve(ids[10]) is None
    assert (table.late, table.unknown) == (1, 2)  # the oldest one remembered
    assert table.resolve(ids[-1]) is None
    assert (table.late, table.unknown) == (2, 2)


@pytest.mark.parametrize("count", [1, 10, 1000])
def test_every_entry_resolves_once_in_any_order(count: int) -> None:
    table: RequestTable[int] = RequestTable()
    entries = [table.add("m", i) for i in range(count)]
    for entry in reversed(entries):
        assert table.resolve(entry.id) is entry
    assert len(table) == 0
    assert (table.late, table.unknown) == (0, 0)
