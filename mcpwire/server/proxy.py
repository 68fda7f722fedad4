"""Believing a trusted reverse proxy: the client's address and scheme from its forwarding headers.

Theory of operation: behind a reverse proxy every connection comes from the proxy, so the
client's address (rate limits, audit, logs) and the scheme it used (a cookie's ``Secure``) are
known only from the headers the proxy adds. Anyone can send those headers, so they are believed
only when the connection comes from an address in ``forwarded_allow_ips`` (as uvicorn and
hypercorn do). :func:`client_of` reads RFC 7239 ``Forwarded`` when present, else
``X-Forwarded-For`` and ``X-Forwarded-Proto``, and walks the hops from the nearest: the first
address that is not itself a trusted proxy is the client (every hop trusted: the farthest one).
An address that is not an IP address, or a scheme other than http/https, is not believed.
:func:`forwarded` wraps an ASGI app so that its scopes say what the proxy saw.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from .lifespan import ASGIApp
from .listen import TrustedProxies

__all__ = ["client_of", "forwarded"]

_SCHEMES = frozenset({"http", "https"})


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value


def _node(value: str) -> tuple[str, int] | None:
    """An RFC 7239 node (``192.0.2.1``, ``"[2001:db8::1]:4711"``, ``198.51.100.7:80``) as
    ``(address, port)``; None for ``unknown``, an obfuscated name or anything else."""
    text = _unquote(value)
    port = 0
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        elif rest:
            return None
    elif text.count(":") == 1:
        host, _, tail = text.partition(":")
        if not tail.isdigit():
            return None
        port = int(tail)
    else:
        host = text
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return (str(address), port if port <= 65535 else 0)


def _hops(headers: Sequence[tuple[bytes, bytes]]) -> list[tuple[str, str | None]]:
    """The forwarding hops, farthest first: ``(for, proto)`` as the headers give them."""
    forwarded: list[str] = []
    xff: list[str] = []
    xfp: list[str] = []
    for name, value in headers:
        if name == b"forwarded":
            forwarded.append(value.decode("latin-1"))
        elif name == b"x-forwarded-for":
            xff.append(value.decode("latin-1"))
        elif name == b"x-forwarded-proto":
            xfp.append(value.decode("latin-1"))
    hops: list[tuple[str, str | None]] = []
    if forwarded:
        for element in ",".join(forwarded).split(","):
            pairs: dict[str, str] = {}
            for pair in element.split(";"):
                key, sep, raw = pair.partition("=")
                if sep:
                    pairs[key.strip().lower()] = _unquote(raw)
            if "for" in pairs:
                hops.append((pairs["for"], pairs.get("proto")))
        return hops
    addresses = [item.strip() for item in ",".join(xff).split(",") if item.strip()]
    protos = [item.strip().lower() for item in ",".join(xfp).split(",") if item.strip()]
    for index, item in enumerate(addresses):
        # a proto list as long as the address list is hop by hop; else its last value is the
        # scheme the nearest proxy saw, which is the one that counts
        if len(protos) == len(addresses):
            proto: str | None = protos[index]
        else:
            proto = protos[-1] if protos else None
        hops.append((item, proto))
    if not addresses and protos:
        hops.append(("", protos[-1]))
    return hops


def client_of(
    peer: tuple[str, int] | None,
    scheme: str,
    headers: Sequence[tuple[bytes, bytes]],
    trusted: TrustedProxies,
) -> tuple[tuple[str, int] | None, str]:
    """The client's address and scheme: the peer's own unless it is a trusted proxy that says
    otherwise (headers as ASGI gives them: lowercase names)."""
    if peer is None or peer[0] not in trusted:
        return peer, scheme
    hops = _hops(headers)
    if not hops:
        return peer, scheme
    chosen = hops[0]
    for hop in reversed(hops):
        node = _node(hop[0]) if hop[0] else None
        chosen = hop
        if node is None or node[0] not in trusted:
            break
    node = _node(chosen[0]) if chosen[0] else None
    proto = chosen[1]
    if proto is None:
        proto = next((p for _, p in reversed(hops) if p is not None), None)
    return (node if node is not None else peer), (proto if proto in _SCHEMES else scheme)


def forwarded(app: ASGIApp, allow_ips: Sequence[str]) -> ASGIApp:
    """``app`` with scopes that carry the client's address and scheme as a trusted proxy says;
    ``app`` itself when no proxy is trusted."""
    trusted = TrustedProxies(allow_ips)
    if not trusted:
        return app

    async def believing(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            client, scheme = client_of(scope.get("client"), scope.get("scheme", "http"), scope["headers"], trusted)
            if client is not scope.get("client") or scheme != scope.get("scheme"):
                scope = {**scope, "client": client, "scheme": scheme}
        await app(scope, receive, send)

    return believing
