"""``ClientOptions``: one frozen, validated value; ``open_client``'s keywords override its fields.

Synchronous and without I/O, except the last tests, which open the bundled demo server to see a
value and its overrides reach the connection (and asyncio handlers reach it through
``mcpwire.aio``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
import trio

import mcpwire
import mcpwire.aio
from mcpwire.client import USE_DEFAULT, ClientOptions
from mcpwire.client.options import OptionKeywords, merge_options


def test_defaults_are_valid_and_the_value_is_frozen() -> None:
    options = ClientOptions()
    assert (options.timeout, options.era, options.validate_output) == (30.0, "auto", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.timeout = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"timeout": 0}, r"^timeout must be a positive number of seconds, not 0$"),
        ({"max_timeout": True}, r"^max_timeout must be a positive number of seconds, not True$"),
        ({"probe_timeout": "1"}, r"^probe_timeout must be a positive number of seconds, not '1'$"),
        ({"max_message_bytes": 0}, r"^max_message_bytes must be a positive integer, not 0$"),
        ({"max_input_rounds": 2.5}, r"^max_input_rounds must be a positive integer, not 2\.5$"),
        ({"notification_buffer": -1}, r"^notification_buffer must be an integer >= 0, not -1$"),
        ({"era": "new"}, r"^era must be 'auto', 'legacy' or 'modern', not 'new'$"),
        ({"protocol_version": "2099-01-01"}, r"^unknown protocol_version '2099-01-01'; mcpwire speaks 20"),
    ],
)
def test_every_field_is_checked_when_the_value_is_made(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClientOptions(**fields)


def test_replace_checks_names_and_values() -> None:
    options = ClientOptions(timeout=5.0)
    assert options.replace(strict=True) == ClientOptions(timeout=5.0, strict=True)
    with pytest.raises(ValueError, match=r"^unknown client option 'timout'; did you mean 'timeout'\?$"):
        options.replace(timout=1.0)
    with pytest.raises(ValueError, match=r"^timeout must be a positive number of seconds, not -1$"):
        options.replace(timeout=-1)


def test_from_mapping_names_an_unknown_option_and_reads_a_null_era_as_auto() -> None:
    assert ClientOptions.from_mapping({"era": None, "timeout": 2.0}) == ClientOptions(timeout=2.0)
    with pytest.raises(ValueError, match=r"^unknown client option 'zzz'$"):
        ClientOptions.from_mapping({"zzz": 1})


def test_keywords_override_the_value_and_a_keyword_left_at_use_default_does_not() -> None:
    base = ClientOptions(timeout=5.0, strict=True)
    merged = merge_options("open_client", base, {"timeout": 7.0, "strict": USE_DEFAULT, "era": None})
    assert merged == ClientOptions(timeout=7.0, strict=True)
    assert merge_options("open_client", base, {}) is base
    assert merge_options("open_client", None, {"max_input_rounds": 3}) == ClientOptions(max_input_rounds=3)


def test_a_keyword_that_is_no_option_is_a_type_error_naming_the_entry_point() -> None:
    with pytest.raises(
        TypeError, match=r"^connect_client\(\) got an unexpected keyword argument 'notification_bufer'; "
        r"did you mean 'notification_buffer'\?$"
    ):
        merge_options("connect_client", None, {"notification_bufer": 3})


def test_the_keywords_are_exactly_the_fields_with_the_same_types() -> None:
    """``OptionKeywords`` types ``**overrides``: one key per field, of the field's type (or
    ``USE_DEFAULT``; ``era`` also takes ``None``, read as ``"auto"``)."""
    fields = {f.name: f.type for f in dataclasses.fields(ClientOptions)}
    keywords = {name: ref.__forward_arg__ for name, ref in OptionKeywords.__annotations__.items()}
    assert list(keywords) == list(fields)
    for name, annotation in keywords.items():
        expected = "EraMode | None" if name == "era" else fields[name]
        assert annotation.replace(" | UseDefault", "") == expected, name


async def test_open_client_refuses_an_unknown_keyword_before_starting_anything() -> None:
    with pytest.raises(TypeError, match=r"^open_client\(\) got an unexpected keyword argument 'timout'; did you mean"):
        async with mcpwire.open_client(["/no/such/server-binary"], timout=1.0):  # type: ignore[call-arg]
            pass


async def test_the_value_and_its_overrides_reach_the_connection() -> None:
    options = ClientOptions(timeout=4.0, max_input_rounds=2, era_cache=False)
    async with mcpwire.open_client(None, options=options, timeout=9.0, era="legacy") as client:
        assert client.options == ClientOptions(timeout=9.0, max_input_rounds=2, era_cache=False, era="legacy")
        assert client.era is mcpwire.Era.LEGACY
    async with trio.open_nursery() as nursery:
        client = await mcpwire.connect_client(nursery, None, options=options)
        try:
            assert client.options is options
        finally:
            await client.aclose()


def test_asyncio_handlers_in_an_options_value_are_run_in_asyncio() -> None:
    """``mcpwire.aio.open_client(options=...)``: the value's handlers may be asyncio coroutine
    functions, as keyword handlers may."""
    loops: list[bool] = []

    async def sampling(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        loops.append(asyncio.get_running_loop() is not None)
        return {"role": "assistant", "content": {"type": "text", "text": "from asyncio"}, "model": "m"}

    async def main() -> str:
        options = ClientOptions(sampling=sampling, era="legacy", era_cache=False)
        async with mcpwire.aio.open_client(None, options=options) as client:
            return (await client.call_tool("sample", {"prompt": "hello"})).text()

    assert "from asyncio" in asyncio.run(main())
    assert loops == [True]
