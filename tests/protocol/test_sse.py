"""SSEDecoder: the WHATWG event-stream fields that are easy to get wrong (HT-S01, HT-S02, HT-S03)."""

from __future__ import annotations

import pytest

from mcpwire.errors import FrameTooLarge
from mcpwire.protocol.framing import DEFAULT_MAX_MESSAGE_BYTES
from mcpwire.protocol.sse import SSEDecoder, SSEEvent

MiB = 1024 * 1024


# -- id -----------------------------------------------------------------------------------------


def test_id_containing_nul_is_ignored() -> None:
    """HT-S01 (WHATWG: "If the field value does not contain U+0000 NULL, then set the last event
    ID buffer to the field value. Otherwise, ignore the field."): the id before it stays, on the
    event and as the id to resume from."""
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 1\ndata: a\n\n") == [SSEEvent("message", "a", "1", None)]
    assert decoder.feed(b"id: 2\x003\ndata: b\n\n") == [SSEEvent("message", "b", "1", None)]
    assert decoder.last_event_id == "1"


def test_id_containing_nul_on_a_priming_event_is_ignored() -> None:
    """HT-S02, HT-L17: a priming event (an id, empty data: reported, but not a message) whose id
    contains NUL leaves no id to resume from."""
    decoder = SSEDecoder()
    assert decoder.feed(b"id: \x00\ndata:\n\n") == [SSEEvent("message", "", None, None)]
    assert decoder.last_event_id is None


def test_empty_id_resets_the_last_event_id() -> None:
    """HT-S01: an empty ``id`` has no NUL: it sets the last event id to the empty string."""
    decoder = SSEDecoder()
    decoder.feed(b"id: 7\ndata: a\n\nid\ndata: b\n\n")
    assert decoder.last_event_id == ""


# -- retry --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [b"soon", b"10ms", b"-5", b"1.5", b"", b" 10", b"\xc2\xb2", b"\xd9\xa3"],
    ids=["word", "unit", "negative", "decimal", "empty", "extra-space", "superscript-two", "arabic-indic-three"],
)
def test_retry_that_is_not_ascii_digits_is_ignored(value: bytes) -> None:
    """HT-S01, HT-L18 (WHATWG: "If the field value consists of only ASCII digits, then interpret
    the field value as an integer in base ten ... Otherwise, ignore the field."): the previous
    ``retry`` stays, and the decoder does not fail (``"²".isdigit()`` is true in Python, but
    ``int("²")`` raises)."""
    decoder = SSEDecoder()
    decoder.feed(b"retry: 250\ndata: a\n\n")
    events = decoder.feed(b"retry: " + value + b"\ndata: b\n\n")
    assert events == [SSEEvent("message", "b", None, 250)]
    assert decoder.retry == 250


def test_retry_with_ascii_digits_is_taken() -> None:
    """HT-L18: "The client MUST respect the retry field"; one leading space after the colon is
    not part of the value."""
    decoder = SSEDecoder()
    assert decoder.feed(b"retry:3000\n\n") == []
    assert decoder.retry == 3000
    decoder.feed(b"retry: 0042\n\n")
    assert decoder.retry == 42


# -- size ------------------------------------------------------------------------------------------


def test_a_3_mib_event_fits_the_default_limit() -> None:
    """HT-S03: the default limit is far above the 1 MiB event cap of other SDKs; a 3 MiB event
    fed in 64 KiB chunks is one event."""
    payload = b"x" * (3 * MiB)
    raw = b"data: " + payload + b"\n\n"
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for start in range(0, len(raw), 64 * 1024):
        events += decoder.feed(raw[start : start + 64 * 1024])
    assert 64 * MiB <= DEFAULT_MAX_MESSAGE_BYTES
    assert [len(e.data) for e in events] == [3 * MiB]


def test_an_event_past_the_limit_fails() -> None:
    """HT-S03: past ``max_event_bytes`` the decoder raises instead of buffering more."""
    decoder = SSEDecoder(1024)
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"data: " + b"x" * 2048 + b"\n\n")
