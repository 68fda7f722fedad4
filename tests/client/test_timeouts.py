"""Request timeouts against a real server process: progress resets the clock, the hard cap does not
move (LC-60..LC-62).

The demo server's ``slow`` tool sleeps ``seconds`` in ``steps`` and sends progress after each step
(only when the request carries a progress token, that is when ``on_progress`` is given). A real
subprocess cannot run on trio's MockClock, so the bounds are wide: steps come every 0.25 s against
a 1 s timeout, and elapsed times are checked only from below and against generous ceilings.
"""

from __future__ import annotations

import pytest
import trio
from _demo import ERAS, open_demo, requests
from _faulty import Record, wait_until

from mcpwire import RequestTimeout
from mcpwire.client import Progress

#: id 1 is ``initialize`` (legacy forced) or ``server/discover`` (modern forced)
FIRST_CALL_ID = 2


@pytest.mark.parametrize("era", ERAS)
async def test_progress_resets_the_timeout(era: str) -> None:
    """LC-62 ("MAY choose to reset the timeout clock when receiving a progress notification"): a
    2.5 s call with a 1 s timeout completes because progress arrives every 0.25 s; each update
    reaches ``on_progress`` in order."""
    seen: list[Progress] = []
    with trio.fail_after(20):
        async with open_demo(None, era=era) as client:
            start = trio.current_time()
            result = await client.call_tool("slow", {"seconds": 2.5, "steps": 10}, timeout=1.0, on_progress=seen.append)
            elapsed = trio.current_time() - start
    assert result.text() == "done after 10 steps"
    assert elapsed >= 2.5, f"the call took {elapsed:.2f}s"
    assert seen == [Progress(float(i), 10.0, f"step {i} of 10") for i in range(1, 11)]


@pytest.mark.parametrize("era", ERAS)
async def test_without_progress_the_same_call_times_out(era: str, record: Record) -> None:
    """LC-60, LC-61: without ``on_progress`` no progress token is sent, so nothing resets the clock:
    RequestTimeout after the 1 s per-call timeout, and ``notifications/cancelled`` goes out."""
    with trio.fail_after(20):
        async with open_demo(record, era=era) as client:
            start = trio.current_time()
            with pytest.raises(RequestTimeout) as info:
                await client.call_tool("slow", {"seconds": 2.5, "steps": 10}, timeout=1.0)
            elapsed = trio.current_time() - start
            await record.wait_for(lambda r: bool(requests(r, "notifications/cancelled")))
    call_id = FIRST_CALL_ID
    assert str(info.value) == f"'tools/call' (id {call_id}) to server 'demo' got no answer within 1s; it was cancelled"
    assert 1.0 <= elapsed < 2.5, f"timing out took {elapsed:.2f}s"
    (call,) = requests(record, "tools/call")
    assert "progressToken" not in call["params"].get("_meta", {})
    assert [m["params"] for m in requests(record, "notifications/cancelled")] == [
        {"requestId": call_id, "reason": "timeout"}
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_the_hard_cap_ends_a_call_that_keeps_reporting_progress(era: str, record: Record) -> None:
    """LC-62 ("SHOULD always enforce a maximum timeout, regardless of progress notifications"):
    progress every 0.25 s keeps a 1 s timeout from ever firing, but ``max_timeout=2`` ends the call
    after 2 s with RequestTimeout naming the cap; the server is told, and the client stays usable."""
    seen: list[Progress] = []
    with trio.fail_after(20):
        async with open_demo(record, era=era, max_timeout=2.0) as client:
            start = trio.current_time()
            with pytest.raises(RequestTimeout) as info:
                await client.call_tool("slow", {"seconds": 60, "steps": 240}, timeout=1.0, on_progress=seen.append)
            elapsed = trio.current_time() - start
            await wait_until(lambda: bool(requests(record, "notifications/cancelled")))
            assert (await client.call_tool("echo", {"text": "still usable"})).text() == "still usable"
    call_id = FIRST_CALL_ID
    assert str(info.value) == (
        f"'tools/call' (id {call_id}) to server 'demo' got no answer within the hard cap of 2s; it was cancelled"
    )
    assert (info.value.method, info.value.request_id, info.value.timeout) == ("tools/call", call_id, 1.0)
    assert 2.0 <= elapsed < 4.0, f"the cap took {elapsed:.2f}s"
    assert len(seen) >= 4, seen  # progress did arrive, and kept resetting the 1 s timeout
    assert [p.progress for p in seen] == [float(i) for i in range(1, len(seen) + 1)]
    assert [m["params"] for m in requests(record, "notifications/cancelled")] == [
        {"requestId": call_id, "reason": "timeout"}
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_a_deadline_ends_a_call_however_much_progress_it_reports(era: str, record: Record) -> None:
    """A caller's ``deadline`` (a host's timeout policy hands its own down) is a hard end on the
    clock: progress every 0.25 s keeps resetting the 1 s timeout, yet the call ends at the
    deadline, 1.5 s in, is cancelled on the wire, and the client stays usable."""
    seen: list[Progress] = []
    with trio.fail_after(20):
        async with open_demo(record, era=era) as client:
            start = trio.current_time()
            with pytest.raises(RequestTimeout) as info:
                await client.call_tool(
                    "slow",
                    {"seconds": 60, "steps": 240},
                    timeout=1.0,
                    on_progress=seen.append,
                    deadline=start + 1.5,
                )
            elapsed = trio.current_time() - start
            await wait_until(lambda: bool(requests(record, "notifications/cancelled")))
            assert (await client.call_tool("echo", {"text": "still usable"})).text() == "still usable"
    call_id = FIRST_CALL_ID
    assert (info.value.method, info.value.request_id) == ("tools/call", call_id)
    assert 1.5 <= elapsed < 3.0, f"the deadline took {elapsed:.2f}s"
    assert len(seen) >= 3, seen  # progress did arrive: the timeout alone would not have ended it
    assert [m["params"] for m in requests(record, "notifications/cancelled")] == [
        {"requestId": call_id, "reason": "timeout"}
    ]


async def test_a_deadline_already_passed_sends_nothing(record: Record) -> None:
    """A call whose deadline has passed before it is sent is not sent at all."""
    with trio.fail_after(20):
        async with open_demo(record, era="legacy") as client:
            with pytest.raises(RequestTimeout, match="its caller's deadline passed before it was sent"):
                await client.call_tool("echo", {"text": "late"}, deadline=trio.current_time() - 1)
            assert (await client.call_tool("echo", {"text": "on time"})).text() == "on time"
    assert [m["params"]["arguments"] for m in requests(record, "tools/call")] == [{"text": "on time"}]
