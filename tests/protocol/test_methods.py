"""The method table's idempotency column: what an HTTP transport may send twice."""

from __future__ import annotations

from mcpwire.protocol.methods import METHODS


def test_reads_and_lists_are_idempotent_and_nothing_that_changes_state_is() -> None:
    idempotent = {name for name, info in METHODS.items() if info.idempotent}
    reads = {"resources/read", "prompts/get", "completion/complete", "server/discover", "ping"}
    lists = {"tools/list", "resources/list", "resources/templates/list", "prompts/list"}
    assert idempotent == reads | lists | {"logging/setLevel"}  # the same level twice is one level
    # a second initialize opens a second session; a tool call may act twice; a subscription's
    # stream (and the legacy subscribe pair) is a registration, not a read
    for name in ("initialize", "tools/call", "subscriptions/listen", "resources/subscribe", "resources/unsubscribe"):
        assert not METHODS[name].idempotent, name
