"""LineBuffer: newline-delimited framing of a byte stream (ST-02, ST-03, ST-07, ST-08)."""

from __future__ import annotations

import pytest

from mcpwire.errors import FrameTooLarge, RemoteProtocolError
from mcpwire.protocol import DEFAULT_MAX_MESSAGE_BYTES, LineBuffer, Notification, classify
from mcpwire.protocol.framing import encode_line
from mcpwire.protocol.jsonrpc import decode_json

BOM = b"\xef\xbb\xbf"
KiB = 1024
MiB = 1024 * KiB


def feed_all(buffer: LineBuffer, *chunks: bytes) -> list[bytes]:
    lines: list[bytes] = []
    for chunk in chunks:
        lines.extend(buffer.feed(chunk))
    return lines


# -- splitting --------------------------------------------------------------------------------


def test_splits_on_newline_and_keeps_partial_lines() -> None:
    """ST-03: one message per line; a partial line waits for its terminator."""
    buffer = LineBuffer()
    assert buffer.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert buffer.buffered == 4
    assert buffer.feed(b":2}\n") == [b'{"b":2}']
    assert buffer.buffered == 0


def test_many_lines_in_one_feed() -> None:
    assert LineBuffer().feed(b"1\n2\n3\n4") == [b"1", b"2", b"3"]


@pytest.mark.parametrize(
    "separator",
    [
        "\u2028".encode(),  # LINE SEPARATOR: legal raw inside a JSON string
        "\u2029".encode(),  # PARAGRAPH SEPARATOR
        "\u0085".encode(),  # NEXT LINE
        b"\x1c",  # FILE SEPARATOR (str.splitlines splits on it)
        b"\x1d",
        b"\x1e",
        b"\x0b",  # vertical tab
        b"\x0c",  # form feed
        b"\r",  # a lone CR inside content
    ],
    ids=["U+2028", "U+2029", "U+0085", "x1c", "x1d", "x1e", "VT", "FF", "CR"],
)
def test_only_newline_splits(separator: bytes) -> None:
    """ST-03: only ``\\n`` delimits; other line breaks are content (``str.splitlines`` would split)."""
    line = b"a" + separator + b"b"
    assert LineBuffer().feed(line + b"\n") == [line]


def test_unicode_line_separators_inside_a_json_string_survive_to_classify() -> None:
    """ST-03: U+2028/U+2029/U+0085 may appear unescaped in JSON strings; the message stays whole.

    (``\\x1c`` is a control character, which JSON requires to be escaped, so it is not used here.)
    """
    text = "a\u2028b\u0085c\u2029d"
    line = ('{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + text + '"}}').encode()
    (got,) = LineBuffer().feed(line + b"\n")
    message = classify(got)
    assert isinstance(message, Notification)
    assert decode_json(message.params) == {"data": text}


def test_strips_exactly_one_trailing_cr() -> None:
    """CRLF-terminated lines (Windows servers) lose the CR; a second CR is content."""
    assert LineBuffer().feed(b"a\r\nb\r\r\n") == [b"a", b"b\r"]


def test_crlf_split_between_feeds() -> None:
    buffer = LineBuffer()
    assert buffer.feed(b"abc\r") == []
    assert buffer.feed(b"\ndef\r") == [b"abc"]
    assert buffer.feed(b"\n") == [b"def"]


def test_blank_lines_are_skipped() -> None:
    """ST-08: blank lines are not messages; nothing is reported for them."""
    assert LineBuffer().feed(b"\n\n\r\n\na\n\r\n\nb\n") == [b"a", b"b"]


# -- byte order mark ---------------------------------------------------------------------------


def test_bom_at_stream_start_is_dropped() -> None:
    assert LineBuffer().feed(BOM + b"a\nb\n") == [b"a", b"b"]


def test_bom_elsewhere_is_content() -> None:
    """Only the very first bytes of the stream may be a BOM; later it is content (and not JSON)."""
    buffer = LineBuffer()
    assert buffer.feed(b"a\n" + BOM + b"b\n") == [b"a", BOM + b"b"]
    assert buffer.feed(BOM + b"c\n") == [BOM + b"c"]


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_bom_split_across_two_feeds(cut: int) -> None:
    data = BOM + b'{"jsonrpc":"2.0","method":"x"}\n'
    buffer = LineBuffer()
    assert buffer.feed(data[:cut]) == []
    assert buffer.feed(data[cut:]) == [b'{"jsonrpc":"2.0","method":"x"}']


def test_bom_fed_byte_by_byte_after_empty_feeds() -> None:
    buffer = LineBuffer()
    assert feed_all(buffer, b"", b"\xef", b"", b"\xbb", b"\xbf", b"", b"a", b"\n") == [b"a"]


def test_bytes_that_only_start_like_a_bom_are_content() -> None:
    buffer = LineBuffer()
    assert buffer.feed(b"\xef") == []
    assert buffer.feed(b"\xbbx\n") == [b"\xef\xbbx"]


def test_bom_only_once_per_stream() -> None:
    buffer = LineBuffer()
    assert buffer.feed(BOM + BOM + b"a\n") == [BOM + b"a"]


# -- end of stream -----------------------------------------------------------------------------


def test_close_returns_the_unterminated_last_line() -> None:
    buffer = LineBuffer()
    assert buffer.feed(b'{"a":1}\n{"b":2}') == [b'{"a":1}']
    assert buffer.close() == b'{"b":2}'
    assert buffer.buffered == 0
    assert buffer.close() is None


def test_close_strips_a_trailing_cr() -> None:
    buffer = LineBuffer()
    buffer.feed(b"abc\r")
    assert buffer.close() == b"abc"


@pytest.mark.parametrize("tail", [b"", b"\n", b"\r\n", b"\r", b"\n\n"])
def test_close_with_nothing_pending_is_none(tail: bytes) -> None:
    buffer = LineBuffer()
    buffer.feed(b"a\n" + tail)
    assert buffer.close() is None


def test_close_of_an_untouched_buffer_is_none() -> None:
    assert LineBuffer().close() is None


# -- size limit --------------------------------------------------------------------------------


def test_max_line_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^max_line_bytes must be positive, not 0$"):
        LineBuffer(0)
    with pytest.raises(ValueError, match=r"^max_line_bytes must be positive, not -1$"):
        LineBuffer(-1)


def test_default_limit() -> None:
    assert 64 * MiB == DEFAULT_MAX_MESSAGE_BYTES


def test_unterminated_line_raises_as_soon_as_the_buffer_passes_the_limit() -> None:
    """ST-07: a server that never sends a newline cannot make the buffer grow without bound."""
    limit = 10 * KiB
    buffer = LineBuffer(limit)
    chunk = b"x" * KiB
    fed = 0
    with pytest.raises(FrameTooLarge) as info:
        for _ in range(100):
            fed += 1
            assert buffer.feed(chunk) == []
            assert buffer.buffered <= limit + 1
    # 10 chunks are exactly the limit (a CR may still follow); the 11th passes it.
    assert fed == 11
    assert buffer.buffered <= limit + len(chunk)
    assert info.value.limit == limit
    assert info.value.size == 11 * KiB
    assert isinstance(info.value, RemoteProtocolError)


def test_frame_too_large_message() -> None:
    buffer = LineBuffer(4)
    with pytest.raises(
        FrameTooLarge,
        match=(
            r"^message of at least 6 bytes exceeds the limit of 4 bytes; "
            r"raise max_message_bytes if the server legitimately sends larger messages$"
        ),
    ):
        buffer.feed(b"abcdef")


@pytest.mark.parametrize("terminator", [b"\n", b"\r\n"])
def test_a_line_of_exactly_the_limit_passes(terminator: bytes) -> None:
    limit = 10 * KiB
    line = b"y" * limit
    buffer = LineBuffer(limit)
    assert buffer.feed(line + terminator + line + terminator) == [line, line]


def test_a_line_of_exactly_the_limit_passes_in_chunks_with_crlf_split() -> None:
    limit = 10 * KiB
    buffer = LineBuffer(limit)
    for _ in range(10):
        assert buffer.feed(b"z" * KiB) == []
    assert buffer.feed(b"\r") == []  # limit + 1 bytes held: could be a CR before \n
    assert buffer.feed(b"\n") == [b"z" * limit]


@pytest.mark.parametrize("terminator", [b"\n", b"\r\n"])
def test_a_terminated_line_one_byte_over_the_limit_raises(terminator: bytes) -> None:
    buffer = LineBuffer(10)
    with pytest.raises(FrameTooLarge):
        buffer.feed(b"a" * 11 + terminator)


def test_limit_applies_per_line_not_per_feed() -> None:
    """Many small lines in one large feed are fine; only a single long line is refused."""
    buffer = LineBuffer(10)
    lines = [b"%08d" % i for i in range(1000)]
    assert buffer.feed(b"\n".join(lines) + b"\n") == lines


def test_a_long_line_after_good_ones_raises() -> None:
    buffer = LineBuffer(10)
    assert buffer.feed(b"ok\n") == [b"ok"]
    with pytest.raises(FrameTooLarge):
        buffer.feed(b"a" * 20 + b"\n")


def test_close_never_returns_a_line_over_the_limit() -> None:
    """ST-07: the limit holds for the last line of the stream too."""
    buffer = LineBuffer(10)
    assert buffer.feed(b"a" * 11) == []
    with pytest.raises(FrameTooLarge):
        buffer.close()


# -- cost --------------------------------------------------------------------------------------


def test_32_mib_line_in_64_kib_chunks_scans_each_byte_once() -> None:
    """A huge line costs one pass: each feed scans only the bytes it added, never the whole buffer.

    Checked through the buffer's scan cursor (``_scanned``: bytes known to hold no newline), not
    by timing: after every feed it equals the bytes held, so the next ``find`` starts at the end.
    """
    size, chunk_size = 32 * MiB, 64 * KiB
    chunk = b"q" * chunk_size
    buffer = LineBuffer()
    held = 0
    for _ in range(size // chunk_size - 1):
        assert buffer.feed(chunk) == []
        held += chunk_size
        assert buffer.buffered == held
        assert buffer._scanned == held
    lines = buffer.feed(chunk[:-1] + b"\n")
    assert len(lines) == 1 and len(lines[0]) == size - 1
    assert buffer.buffered == 0 and buffer._scanned == 0


def test_scan_cursor_restarts_after_each_complete_line() -> None:
    buffer = LineBuffer()
    buffer.feed(b"abc")
    assert buffer._scanned == 3
    assert buffer.feed(b"d\nef") == [b"abcd"]
    assert buffer._scanned == 2  # only the partial "ef" remains, already scanned


def test_encode_line_terminates_with_one_newline() -> None:
    """ST-03: an encoded message plus exactly one ``\\n``."""
    assert encode_line(b'{"a":1}') == b'{"a":1}\n'
