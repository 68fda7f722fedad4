"""The legacy HTTP session's life: one renewal however many calls lose it, then what belonged to
the old session restored (HT-L12, HT-L13, HS-04)."""

from __future__ import annotations

from mcpwire.protocol.legacy_session import (
    Fail,
    LegacySession,
    OpenServerStream,
    Renew,
    Resubscribe,
    SessionLife,
    SetLogLevel,
)


def test_one_renewal_for_every_call_that_lost_the_session() -> None:
    """HT-L12: the first call that finds generation 0 gone renews it; the others wait (no
    action); once renewed, a call that still reports generation 0 is simply sent again."""
    session = LegacySession()
    assert session.lost(0) == [Renew()]
    assert session.life is SessionLife.RENEWING
    assert session.lost(0) == []
    session.renewed()
    assert (session.life, session.generation) == (SessionLife.OPEN, 1)
    assert session.lost(0) == []
    assert session.lost(1) == [Renew()]


def test_a_renewed_session_gets_back_what_the_old_one_had() -> None:
    """HT-L13: "re-issue logging/setLevel, resources/subscribe, re-open GET stream"."""
    session = LegacySession()
    session.level_set("warning")
    for uri in ("file:///a", "file:///b", "file:///a"):
        session.subscribed(uri)
    session.unsubscribed("file:///b")
    session.unsubscribed("file:///a")  # one of the two subscriptions to it is still open
    session.lost(0)
    assert session.renewed() == [OpenServerStream(), SetLogLevel("warning"), Resubscribe("file:///a")]


def test_without_the_stream_or_any_state_nothing_is_restored() -> None:
    session = LegacySession(server_stream=False)
    session.lost(0)
    assert session.renewed() == []
    assert session.subscriptions == []


def test_a_failed_renewal_fails_the_connection_once() -> None:
    session = LegacySession()
    session.lost(0)
    assert session.renewal_failed("initialize answered 500") == [Fail("initialize answered 500")]
    assert session.life is SessionLife.FAILED
    assert session.lost(0) == []
    assert session.renewal_failed("again") == []
    assert session.renewed() == []


def test_a_closed_session_is_never_renewed() -> None:
    session = LegacySession()
    session.closed()
    assert session.lost(0) == []
