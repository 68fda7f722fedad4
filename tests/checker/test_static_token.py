"""A server guarded by a token of its own (no MCP authorization): the checker, given the token,
checks everything else and says why it cannot grade the authorization challenge."""

from __future__ import annotations

from _targets import fixture_argv, http_server
from mcpwire.conformance.context import Target
from mcpwire.conformance.runner import run


async def test_a_static_token_is_not_graded_as_broken_authorization() -> None:
    async with http_server(fixture_argv("static_token")) as url:
        target = Target(
            url=url, transport="auto", name="static", headers={"Authorization": "Bearer fixture-static-token"}
        )
        outcome = await run(target, revisions=["2025-11-25"], jobs=4, timeout=10.0)
    [sv39] = [r for r in outcome.results if r.id == "SV-39"]
    assert sv39.status == "skipped"
    assert sv39.message.startswith("the server needs credentials but does not use MCP authorization")
    assert [r.id for r in outcome.results if r.status in ("fail", "error")] == []
    assert "fixture-static-token" not in repr([(r.http_exchanges, r.exchanges, r.message) for r in outcome.results])
