"""The host's event hub: an event of a kind no listener takes is not even built, and what the
listeners take follows them as they come and go."""

from __future__ import annotations

from mcpwire.host.events import EventHub, HostEvent, HostEvents


def _event(kind: str) -> HostEvent:
    return HostEvent(server="a", kind=kind, status="connected")  # type: ignore[arg-type]


def test_what_the_hub_wants_follows_its_listeners() -> None:
    hub = EventHub()
    assert not hub.wants("audit") and not hub.wants("status")
    statuses = HostEvents(hub, 8, kinds=["status"])
    assert hub.wants("status") and not hub.wants("audit")
    everything = HostEvents(hub, 8)
    assert hub.wants("audit") and hub.wants("tools")
    hub.emit(_event("audit"))
    hub.emit(_event("status"))
    assert [statuses._recv.receive_nowait().kind] == ["status"]
    assert [everything._recv.receive_nowait().kind for _ in range(2)] == ["audit", "status"]
    everything.close()
    assert not hub.wants("audit") and hub.wants("status")
    everything.close()  # (again: nothing changes)
    statuses.close()
    assert not hub.wants("status") and hub.listeners == []
    hub.close()
    late = HostEvents(hub, 8)  # a closed hub takes no more listeners
    assert not hub.wants("status") and late not in hub.listeners
