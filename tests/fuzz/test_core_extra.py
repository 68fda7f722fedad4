"""Self-fuzzing of mcpwire beyond ``tests/protocol/test_properties.py``: the SSE decoder and the
HTTP header values (properties in ``fuzz/core_properties.py``), and regression tests for the two
decoder bugs those properties found (fixed in ``mcpwire/protocol/sse.py``)."""

from __future__ import annotations

from mcpwire.fuzz.core_properties import (
    BOM,
    sse_feed,
    test_header_values_round_trip,
    test_sse_chunking_invariance,
    test_sse_feed_raises_only_frame_too_large,
)

from mcpwire.protocol.sse import SSEDecoder

__all__ = [
    "test_header_values_round_trip",
    "test_sse_chunking_invariance",
    "test_sse_feed_raises_only_frame_too_large",
]


def _feed_chunks(chunks: list[bytes]) -> list[tuple[str, str]]:
    decoder = SSEDecoder(1 << 20)
    return [(e.event, e.data) for chunk in chunks for e in decoder.feed(chunk)]


def test_an_empty_chunk_between_cr_and_lf_changes_nothing() -> None:
    """Found by the chunking property with empty chunks allowed: CR | (empty) | LF is read as two
    line ends, so an event is dispatched that the whole stream never dispatches (HT-S01)."""
    stream = b"data: x\r\ndata: y\r\n"
    assert sse_feed(stream, [])[0] == []
    assert _feed_chunks([b"data: x\r", b"", b"\ndata: y\r\n"]) == []


def test_a_bom_is_stripped_only_at_the_start_of_the_stream() -> None:
    """Found by the chunking property with a first chunk under 3 bytes: a BOM that starts the second
    line is dropped, so 'data: z' becomes a field and joins the event (WHATWG: only a leading BOM)."""
    stream = b"\n" + BOM + b"data: z\ndata: x\n\n"
    whole = [(e.event, e.data) for e in sse_feed(stream, [])[0]]
    assert whole == [("message", "x")]
    assert _feed_chunks([stream[:1], stream[1:]]) == whole
