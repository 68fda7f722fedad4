"""The shared sanitisers and redactors (mcpwire.redaction)."""

from __future__ import annotations

import pytest

from mcpwire.redaction import (
    REDACTED,
    SecretValues,
    clean_markup,
    clean_terminal,
    redact_argv,
    redact_headers,
    redact_url,
    shorten,
)


@pytest.mark.parametrize(
    ("hostile", "shown"),
    [
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("bell\x07", "bell\\x07"),
        ("nul\x00", "nul\\x00"),
        ("over\rwrite", "over\\x0dwrite"),
        ("back\x08space", "back\\x08space"),
        ("tab\there", "tab\\x09here"),
        ("csi\x9b31m", "csi\\x9b31m"),
        ("bidi\u202eevil", "bidi\\u202eevil"),
        ("isolate\u2066x\u2069", "isolate\\u2066x\\u2069"),
        ("lone\ud800", "lone\\ud800"),
        ("plain text, ünïcode ✓", "plain text, ünïcode ✓"),
    ],
)
def test_clean_terminal_shows_every_control_character(hostile: str, shown: str) -> None:
    assert clean_terminal(hostile) == shown


def test_clean_terminal_keeps_newlines_unless_told() -> None:
    assert clean_terminal("a\nb") == "a\nb"
    assert clean_terminal("a\nb\u2028c", newlines=False) == "a\\x0ab\\u2028c"


def test_clean_markup_keeps_layout_whitespace_only() -> None:
    assert clean_markup("a\tb\nc\x1bd\x0ce") == "a\tb\nc\\x1bd\\x0ce"


def test_shorten_marks_the_cut() -> None:
    assert shorten("abcdef", 10) == "abcdef"
    assert shorten("abcdef", 4) == "abc…"
    with pytest.raises(ValueError, match=r"^limit must be at least 1, not 0$"):
        shorten("x", 0)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pw@mcp.example/mcp", f"https://{REDACTED}@mcp.example/mcp"),
        ("http://h/mcp?api_key=S3&x=1", f"http://h/mcp?api_key={REDACTED}&x=1"),
        ("http://h/mcp?access_token=S3", f"http://h/mcp?access_token={REDACTED}"),
        ("http://h/mcp?page=2", "http://h/mcp?page=2"),
        ("not a url", "not a url"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_argv_hides_values_of_secret_flags_pairs_and_urls() -> None:
    argv = ["srv", "--api-key", "S3CRET", "--token=abc", "API_TOKEN=zz", "http://a:b@h/x?token=q", "--port", "80"]
    assert redact_argv(argv) == [
        "srv",
        "--api-key",
        REDACTED,
        "--token=***",
        "API_TOKEN=***",
        f"http://{REDACTED}@h/x?token={REDACTED}",
        "--port",
        "80",
    ]
    assert "S3CRET" not in " ".join(redact_argv(argv))


def test_redact_headers_by_name_or_all() -> None:
    headers = {"Authorization": "Bearer t", "X-Trace": "1", "X-My-Token": "t2"}
    assert redact_headers(headers) == {"Authorization": REDACTED, "X-Trace": "1", "X-My-Token": REDACTED}
    assert set(redact_headers(headers, hide_all=True).values()) == {REDACTED}


def test_secret_values_mask_known_values_anywhere() -> None:
    secrets = SecretValues(["hunter22", "ab", "hunter2"])
    assert secrets.mask("pw=hunter22; other=hunter2; ab stays") == f"pw={REDACTED}; other={REDACTED}; ab stays"
    assert not SecretValues([])
    assert SecretValues([]).mask("x") == "x"
    assert "hunter" not in repr(secrets)
