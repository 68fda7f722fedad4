"""Request timeouts are watched by one task per client (no cancel scope per call).

Against the in-process HTTP fake on trio's autojump clock: timeouts of different lengths fire
each at its own time, whatever the order they were set in; progress pushes a deadline back; a
long run of calls leaves the watcher's heap bounded; and ``aclose()`` ends the watcher, so a
nursery given to ``connect_client`` exits.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
from http_fakes import HANG, FakeMCPServer, connect, fresh_era_cache  # noqa: F401 (fixture)
from trio.testing import MockClock

from mcpwire import RequestTimeout, connect_client
from mcpwire.client.waiters import COMPACT_DEADLINES_AT

BOUND = 100.0  # virtual seconds


def _hang_on_slow(fake: FakeMCPServer) -> None:
    def call(params: dict[str, Any]) -> Any:
        if params["arguments"].get("text") == "slow":
            return HANG
        return fake.builtin("tools/call", params)

    fake.handlers["tools/call"] = call


async def test_a_shorter_timeout_set_later_fires_first(autojump_clock: MockClock) -> None:
    """LC-60: a 1 s timeout registered after a 50 s one fires at 1 s, and the 50 s one at 50 s."""
    fake = FakeMCPServer()
    _hang_on_slow(fake)
    fired: dict[str, float] = {}

    async def call(label: str, timeout: float) -> None:
        start = trio.current_time()
        with pytest.raises(RequestTimeout):
            await client.call_tool("echo", {"text": "slow"}, timeout=timeout)
        fired[label] = trio.current_time() - start

    with trio.fail_after(BOUND):
        async with connect(fake) as client, trio.open_nursery() as nursery:
            nursery.start_soon(call, "long", 50.0)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(call, "short", 1.0)
    assert fired["short"] == pytest.approx(1.0, abs=0.01)
    assert fired["long"] == pytest.approx(50.0, abs=0.01)


async def test_an_answer_before_the_deadline_is_not_a_timeout(autojump_clock: MockClock) -> None:
    """A call answered in time returns its result even when the clock later passes its
    deadline: the watcher never touches a finished call."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            result = await client.call_tool("echo", {"text": "x"}, timeout=1.0)
            await trio.sleep(5)
            again = await client.call_tool("echo", {"text": "y"}, timeout=1.0)
    assert (result.text(), again.text()) == ('echo {"text": "x"}', 'echo {"text": "y"}')


async def test_the_deadline_heap_stays_bounded(autojump_clock: MockClock) -> None:
    """Finished calls leave entries behind until their deadline; compaction drops them, so
    3000 calls with the default 30 s timeout never hold more than the compaction threshold."""
    fake = FakeMCPServer()
    sizes: list[int] = []
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            for _ in range(3000):
                await client.call_tool("echo", {"text": "x"})
                sizes.append(len(client._engine.deadlines))
    assert max(sizes) <= COMPACT_DEADLINES_AT + 1
    assert sizes[-1] < 3000


async def test_aclose_ends_the_watcher_in_a_callers_nursery(autojump_clock: MockClock) -> None:
    """connect_client: the watcher runs in the caller's nursery; aclose() stops it, so the
    nursery exits without being cancelled."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with httpx.AsyncClient(transport=httpx.MockTransport(fake.handle), trust_env=False) as http:
            async with trio.open_nursery() as nursery:
                client = await connect_client(nursery, fake.url, http_client=http)
                await client.call_tool("echo", {"text": "x"})
                await client.aclose()
            assert not nursery.cancel_scope.cancel_called


async def test_finished_calls_left_in_the_heap_hold_no_answer(autojump_clock: MockClock) -> None:
    """A large answer must not outlive its call: the waiters the heap still holds (until their
    deadline or a compaction) keep neither the answer nor the progress list."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            result = await client.call_tool("echo", {"text": "x" * 100_000})
            held = client._engine.deadlines.waiters()
    assert len(result.text()) > 100_000
    assert held and all(w.done and w.outcome is None and w.progress is None for w in held)


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan")])
async def test_a_timeout_that_is_not_positive_is_refused_before_sending(timeout: float) -> None:
    """A bad ``timeout=`` is the caller's error: ValueError, and nothing goes to the server (no
    request that would then have to be cancelled)."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            before = len(fake.sent("tools/call"))
            with pytest.raises(ValueError, match=r"^timeout must be a positive number of seconds, not "):
                await client.call_tool("echo", {"text": "x"}, timeout=timeout)
            assert len(fake.sent("tools/call")) == before == 0
            assert (await client.call_tool("echo", {"text": "y"})).text() == 'echo {"text": "y"}'
