"""The checker waits out HTTP 429 Too Many Requests: a rate-limiting server is not judged on it.

The reference server runs in-process behind :class:`Throttle`, an ASGI layer that answers 429 to
the requests a test picks; ``mcpwire serve``, whose rate limit is on by default, is the real peer.
"""

from __future__ import annotations

import email.utils
import json
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import trio
from mcpwire.conformance.context import Target
from mcpwire.conformance.evidence import Redactor, collect, record_of
from mcpwire.conformance.http_harness import open_http_wire
from mcpwire.conformance.ratelimit import MAX_ATTEMPTS, MAX_WAIT_S, backoff, retry_after
from mcpwire.conformance.report.html import to_html
from mcpwire.conformance.report.json_report import JSON_SCHEMA, to_dict
from mcpwire.conformance.runner import run

from mcpwire.server.http import serve_http
from mcpwire.server.streamable_app import StreamableHTTPApp
from mcpwire.testing.reference import ReferenceServer

sys.path.append(str(Path(__file__).resolve().parents[1] / "service"))
from _process import READY_LINE, clean_env, start_serve  # the service tests' helpers

SECRET = "rate-limit-test-secret-9f3a"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]


@dataclass(frozen=True, slots=True)
class Request:
    """What :class:`Throttle` decides on: the request's method, headers and body."""

    method: str
    headers: dict[str, str]
    body: bytes

    @property
    def rpc_method(self) -> Any:
        try:
            value = json.loads(self.body)
        except ValueError:
            return None
        return value.get("method") if isinstance(value, dict) else None


@dataclass
class Throttle:
    """An ASGI layer answering 429 (``Retry-After: retry_after``; None: no header) to the requests
    ``refuse`` picks; its body echoes the request's headers, as a careless server's might."""

    app: Any
    refuse: Callable[[Request], bool]
    retry_after: str | None = "1"
    refused: int = 0
    seen: list[Request] = field(default_factory=list)
    url: str = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request = Request(scope["method"], headers, body)
        self.seen.append(request)
        if self.refuse(request):
            self.refused += 1
            text = json.dumps({"detail": "slow down", "headers": headers}).encode()
            out = [(b"content-type", b"application/json"), (b"content-length", str(len(text)).encode())]
            if self.retry_after is not None:
                out.append((b"retry-after", self.retry_after.encode()))
            await send({"type": "http.response.start", "status": 429, "headers": out})
            await send({"type": "http.response.body", "body": text})
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return dict(await receive())

        await self.app(scope, replay, send)


def first(n: int) -> Callable[[Request], bool]:
    """The first ``n`` requests are refused, then none."""
    count = 0

    def refuse(_: Request) -> bool:
        nonlocal count
        count += 1
        return count <= n

    return refuse


def key(request: Request) -> tuple[str, tuple[tuple[str, str], ...], bytes]:
    return (request.method, tuple(sorted(request.headers.items())), request.body)


def once_each() -> Callable[[Request], bool]:
    """Every distinct request (its method, headers and body) is refused once: each is resent."""
    seen: set[tuple[str, tuple[tuple[str, str], ...], bytes]] = set()

    def refuse(request: Request) -> bool:
        if key(request) in seen:
            return False
        seen.add(key(request))
        return True

    return refuse


@asynccontextmanager
async def throttled(refuse: Callable[[Request], bool], retry_after: str | None = "1") -> AsyncIterator[Throttle]:
    """The reference server on a free loopback port behind a :class:`Throttle` (``.url`` set)."""
    async with trio.open_nursery() as nursery:
        server = ReferenceServer(nursery)
        throttle = Throttle(StreamableHTTPApp(server), refuse, retry_after)
        [base] = await nursery.start(partial(serve_http, throttle, port=0))
        throttle.url = f"{base}/mcp"
        try:
            yield throttle
        finally:
            await server.close()
            nursery.cancel_scope.cancel()


# -- Retry-After ----------------------------------------------------------------------------------


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert retry_after("1", now=now) == 1.0
    assert retry_after(" 120 ", now=now) == 120.0
    assert retry_after("0.5", now=now) == 0.5
    assert retry_after(email.utils.formatdate(now + 7, usegmt=True), now=now) == 7.0
    assert retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0
    for unreadable in (None, "", "soon", "-1", "1e3", "inf", "nan", "Fri, 99 Foo 2024 99:99:99 GMT", "9" * 40):
        assert retry_after(unreadable, now=now) is None, unreadable
    assert [backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, MAX_WAIT_S]


# -- one request ----------------------------------------------------------------------------------


async def test_a_429_is_waited_out_and_the_request_sent_again() -> None:
    headers = {"Authorization": f"Bearer {SECRET}"}
    async with throttled(first(2)) as server, open_http_wire(server.url, "2025-11-25", headers=headers) as wire:
        began = trio.current_time()
        reply = await wire.post(INIT, timeout=1.5)  # the read window moves on by each wait
        elapsed = trio.current_time() - began
        record = record_of(wire)
    assert reply.status == 200 and reply.answers(1)
    assert 2.0 <= elapsed < 5.0
    assert [(r.attempt, r.retry_after, r.waited_s, r.resent) for r in reply.rate_limited] == [
        (1, "1", 1.0, True),
        (2, "1", 1.0, True),
    ]
    assert server.refused == 2 and len(server.seen) == 3
    assert len({request.body for request in server.seen}) == 1  # the same request, resent
    entries, http = collect([record], Redactor(values=[SECRET], header_names=["Authorization"]))
    noted = [e.text for e in entries if "429 Too Many Requests" in e.text]
    assert noted == [
        f"POST#1 429 Too Many Requests (Retry-After: '1', attempt {n} of {MAX_ATTEMPTS}): "
        "rate-limited, resent after 1 s"
        for n in (1, 2)
    ]
    [exchange] = http
    assert exchange["status"] == 200
    assert [r["status"] for r in exchange["rate_limited"]] == [429, 429]
    assert "slow down" in exchange["rate_limited"][0]["body"]
    shown = json.dumps([[e.to_dict() for e in entries], http])
    assert SECRET not in shown and "***" in shown  # the 429 echoed the token: the evidence masks it


async def test_a_status_the_check_looks_at_comes_after_the_429s() -> None:
    # SV-23 wants 400 for an unsupported MCP-Protocol-Version: the 429 before it is not the answer
    async with throttled(first(0)) as server, open_http_wire(server.url, "2025-11-25") as wire:
        await wire.post(INIT, timeout=5)
        await wire.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, timeout=5)
        server.refuse = first(1)
        bad = await wire.post(
            {"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={"MCP-Protocol-Version": "1999-01-01"}, timeout=5
        )
    assert bad.status == 400
    assert [(r.attempt, r.resent) for r in bad.rate_limited] == [(1, True)]


async def test_a_429_that_never_ends_is_the_answer_after_bounded_attempts() -> None:
    async with throttled(lambda _: True) as server, open_http_wire(server.url, "2025-11-25") as wire:
        began = trio.current_time()
        reply = await wire.post(INIT, timeout=1)
        elapsed = trio.current_time() - began
    assert reply.status == 429 and "slow down" in reply.body.decode()
    assert server.refused == MAX_ATTEMPTS
    assert elapsed < (MAX_ATTEMPTS - 1) * 1.0 + 3
    *resent, last = reply.rate_limited
    assert [r.resent for r in resent] == [True] * (MAX_ATTEMPTS - 1)
    assert (last.resent, last.gave_up) == (False, f"after {MAX_ATTEMPTS} attempts")
    assert reply.to_dict()["rate_limited"][-1]["gave_up"] == f"after {MAX_ATTEMPTS} attempts"


async def test_no_wait_reaches_past_the_deadline_and_no_retry_after_backs_off() -> None:
    async with throttled(lambda _: True, retry_after=None) as server, open_http_wire(server.url, "2025-11-25") as wire:
        began = trio.current_time()
        with trio.fail_after(2.5):  # a check's deadline: the 429 comes back before it
            reply = await wire.post(INIT, timeout=1)
        elapsed = trio.current_time() - began
    assert reply.status == 429 and elapsed < 2.5
    assert [(r.waited_s, r.resent) for r in reply.rate_limited[:-1]] == [(0.5, True)]
    last = reply.rate_limited[-1]
    assert (last.attempt, last.resent, last.retry_after) == (2, False, None)
    assert last.gave_up == "waiting 1 s would pass the deadline"


async def test_the_sse_transport_stream_waits_out_a_429() -> None:
    async with throttled(first(1)) as server:
        base = server.url.removesuffix("/mcp")
        async with open_http_wire(f"{base}/sse", "2024-11-05", transport="sse") as wire:
            assert wire.endpoint is not None
            [stream, *_] = wire.replies
    assert stream.status == 200 and [r.resent for r in stream.rate_limited] == [True]


# -- whole runs -----------------------------------------------------------------------------------


async def test_a_run_against_a_rate_limiting_server_is_clean() -> None:
    # every distinct request is refused once: the probes, the handshakes, and the requests whose
    # status the checks judge (SV-23 400, SV-05c 404, SV-14b 400) are each answered 429 first
    checks = ["SV-09", "SV-12", "SV-23", "SV-24b", "SV-05c", "SV-14b", "SV-20"]
    async with throttled(once_each()) as server:
        target = Target(url=server.url, transport="auto", name="throttled")
        outcome = await run(target, only=checks, revisions=["2025-11-25", "2026-07-28"])
    assert server.refused >= 10
    assert min(Counter(key(r) for r in server.seen).values()) >= 2  # each was resent after its 429
    assert any(r.headers.get("mcp-protocol-version") == "1999-01-01" for r in server.seen)  # SV-23's
    judged = sorted((r.id, r.revision, r.status) for r in outcome.results if r.status != "skipped")
    assert judged == [
        ("SV-05c", "2026-07-28", "pass"),
        ("SV-09", "2025-11-25", "pass"),
        ("SV-12", "2025-11-25", "pass"),
        ("SV-14b", "2026-07-28", "pass"),
        ("SV-20", "2025-11-25", "pass"),
        ("SV-20", "2026-07-28", "pass"),
        ("SV-23", "2025-11-25", "pass"),
        ("SV-24b", "2025-11-25", "pass"),
    ]
    assert outcome.exit_code == 0


async def test_a_check_whose_requests_stay_refused_fails_with_the_429() -> None:
    async with throttled(lambda r: r.rpc_method == "ping") as server:
        target = Target(url=server.url, transport="http", name="throttled")
        began = time.monotonic()
        outcome = await run(target, only=["SV-12"], revisions=["2025-11-25"])
        elapsed = time.monotonic() - began
    [result] = outcome.results
    assert result.status == "fail"
    assert result.message.startswith(f"HTTP 429 (rate-limited: {MAX_ATTEMPTS} times 429, then not resent after ")
    assert elapsed < MAX_ATTEMPTS + 10
    [ping] = [e for e in result.http_exchanges if b'"ping"' in str(e["request_body"]).encode()]
    assert ping["status"] == 429
    assert [r["resent"] for r in ping["rate_limited"]] == [True] * (MAX_ATTEMPTS - 1) + [False]
    assert any("rate-limited, resent after 1 s" in e.text for e in result.exchanges)
    doc = to_dict(outcome)
    jsonschema.Draft202012Validator(JSON_SCHEMA).validate(doc)
    page = to_html(outcome)
    assert "429 Too Many Requests (Retry-After: &#x27;1&#x27;), attempt 1: resent after 1.0 s" in page
    assert f"attempt {MAX_ATTEMPTS}: not resent (after {MAX_ATTEMPTS} attempts)" in page


@pytest.mark.slow
async def test_mcpwire_check_is_clean_against_mcpwire_serve_with_its_rate_limit(tmp_path: Path) -> None:
    # the default limit (50 calls a second, 100 saved up) is far below what the checker sends
    work = tmp_path / "work"
    work.mkdir()
    db = f"sqlite:///{tmp_path / 'service.db'}"
    token = "rate-limited-admin-token-0123456789"
    auth = {"Authorization": f"Bearer {token}"}
    serve = start_serve(["--port", "0", "--db", db], cwd=work, env=clean_env(tmp_path / "home", MCPWIRE_TOKEN=token))
    try:
        await trio.to_thread.run_sync(serve.read_until, READY_LINE)
        target = Target(url=f"{serve.url}/mcp", transport="auto", name="serve", headers=auth)
        with trio.fail_after(240):
            outcome = await run(target)
        async with httpx.AsyncClient(timeout=10, headers=auth) as client:
            metrics = (await client.get(f"{serve.url}/metrics")).text
    finally:
        await trio.to_thread.run_sync(serve.stop)
    bad = [(r.id, r.revision, r.status, r.message[:200]) for r in outcome.results if r.status in ("fail", "error")]
    assert bad == []
    assert [r.status for r in outcome.results if r.status == "warning"] == []
    assert outcome.exit_code == 0 and len(outcome.accepted) == 5
    [limited] = [line for line in metrics.splitlines() if line.startswith("mcpwire_rate_limited_total ")]
    assert float(limited.split()[1]) > 0  # the checker was rate-limited, and waited it out
