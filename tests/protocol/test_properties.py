"""The Hypothesis properties of `fuzz/core_properties.py`, collected under the default `tests` path.

pyproject's testpaths is ``["tests"]``; re-exporting here makes ``python -m pytest`` run them too.
"""

from __future__ import annotations

from mcpwire.fuzz.core_properties import (
    TestClientSessionMachine,
    TestRequestTableMachine,
    test_chunking_invariance_of_encoded_messages,
    test_chunking_invariance_of_lines,
    test_classify_is_total_on_bytes,
    test_classify_is_total_on_invalid_utf8_in_string_members,
    test_classify_is_total_on_json_like_text,
    test_feed_raises_only_frame_too_large,
    test_receive_is_total,
    test_round_trips,
)

__all__ = [
    "TestClientSessionMachine",
    "TestRequestTableMachine",
    "test_chunking_invariance_of_encoded_messages",
    "test_chunking_invariance_of_lines",
    "test_classify_is_total_on_bytes",
    "test_classify_is_total_on_invalid_utf8_in_string_members",
    "test_classify_is_total_on_json_like_text",
    "test_feed_raises_only_frame_too_large",
    "test_receive_is_total",
    "test_round_trips",
]
