"""``mcpwire serve``'s garbage collector once started (service/runner.py: settle_memory): what
lives is frozen out of later collections, cyclic garbage is still freed, the youngest generation
is collected less often, and the rounds repeat until the service stops."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
import trio
from trio.testing import MockClock

from mcpwire.service import runner
from mcpwire.service.metrics import collector_lines
from mcpwire.service.runner import GC_YOUNG_THRESHOLD, keep_memory_settled, settle_memory


class _Node:
    other: _Node | None = None


@pytest.fixture
def collector() -> Iterator[None]:
    """Puts the collector back as the test found it."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def _cycle() -> weakref.ref[_Node]:
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    return weakref.ref(first)


def _tracked(thing: object) -> bool:
    """Whether a later collection would walk ``thing`` (frozen objects are in none)."""
    return any(candidate is thing for candidate in gc.get_objects())


def test_settle_memory_freezes_what_lives_after_freeing_garbage(collector: None) -> None:
    garbage = _cycle()  # unreachable already, but only a collection frees a cycle
    kept = _Node()
    assert _tracked(kept)
    settle_memory()
    assert garbage() is None
    assert not _tracked(kept)
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD


def test_a_frozen_cycle_dropped_later_is_freed_by_the_next_round(collector: None) -> None:
    first = _Node()
    first.other = _Node()
    first.other.other = first
    ref = weakref.ref(first)
    settle_memory()
    assert not _tracked(first)
    del first
    gc.collect()
    assert ref() is not None  # frozen: no ordinary collection looks at it
    settle_memory()
    assert ref() is None


async def test_keep_memory_settled_rounds_until_stopped(
    collector: None, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds: list[float] = []
    monkeypatch.setattr(runner, "settle_memory", lambda: rounds.append(trio.current_time()))
    stop = trio.Event()
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_memory_settled, stop, 600.0)
        await trio.sleep(1500.0)
        stop.set()
    assert [round(t - start) for t in rounds] == [0, 600, 1200]
    assert trio.current_time() - start == pytest.approx(1500.0)


def test_metrics_show_the_collector(collector: None) -> None:
    settle_memory()
    lines = collector_lines()
    frozen = next(line for line in lines if line.startswith("mcpwire_python_gc_frozen_objects "))
    assert int(frozen.split()[1]) == gc.get_freeze_count() > 0
    collections = [line for line in lines if line.startswith("mcpwire_python_gc_collections_total{")]
    assert [line.split('"')[1] for line in collections] == ["0", "1", "2"]
    assert int(collections[2].split()[1]) >= 1  # settle_memory's own full collection at least
