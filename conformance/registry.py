"""The check catalogue: ``@check`` registers a small async function with its metadata.

Theory of operation: a check is ``async def fn(ctx: Context) -> None``. Returning normally is a
pass; :meth:`Context.fail`, :meth:`Context.warn`, :meth:`Context.skip` and
:meth:`Context.not_observed` end it with that outcome. A failure of a SHOULD-level check is
reported as a warning unless ``--strict``. The runner decides applicability from ``eras``,
``revisions`` (inclusive ``(first, last)`` bounds, ISO dates), ``transports`` and ``needs`` (server
capabilities that must be advertised). Transports are ``stdio``, ``http`` (Streamable HTTP) and
``sse`` (the 2024-11-05 HTTP+SSE transport). A rule whose text changed between revisions carries
``quotes``: ``(first revision, spec reference, quote)`` entries; a result shows the one in force
for its revision. A rule whose BCP 14 level changed carries ``levels`` the same way (SV-11: SHOULD
before 2025-06-18, MUST from it). A check with ``on_counter_offer`` also runs in a legacy revision
the server answered with another version (the version negotiation checks judge that answer). A
check marked ``ends_session`` leaves its server process to no later check (it ends it, or sends
what may change it): the runner starts it after the other checks of its revision, so that it takes
a process they left (see :mod:`.pool`) rather than a new one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from .context import Context
from .levels import Level

__all__ = ["CATALOGUE", "Check", "CheckFn", "Level", "check"]

CheckFn = Callable[[Context], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Check:
    """One rule and the function that tests it."""

    id: str
    title: str
    level: Level
    spec: str
    quote: str
    fn: CheckFn
    eras: frozenset[str]
    revisions: tuple[str, str]
    transports: frozenset[str]
    needs: tuple[str, ...]
    tags: frozenset[str]
    #: (first revision, spec reference, quote), oldest first; empty = ``spec``/``quote`` everywhere
    quotes: tuple[tuple[str, str, str], ...] = ()
    #: (first revision, level), oldest first; empty = ``level`` everywhere
    levels: tuple[tuple[str, Level], ...] = ()
    #: also run in a legacy revision the server refused by counter-offering another version
    on_counter_offer: bool = False
    #: leaves its process to no later check: started after the other checks of its revision
    ends_session: bool = False

    def level_at(self, revision: str) -> Level:
        """The level of the rule in ``revision`` (``level`` is the one in the newest revision)."""
        level = self.level
        for first, entry in self.levels:
            if revision >= first:
                level = entry
        return level

    def reference(self, revision: str) -> tuple[str, str]:
        """The spec reference and quote in force in ``revision``."""
        spec, quote = self.spec, self.quote
        for first, entry_spec, entry_quote in self.quotes:
            if revision >= first:
                spec, quote = entry_spec, entry_quote
        return spec, quote

    def applies_to_revision(self, revision: str, era: str) -> str | None:
        """None when the check applies to ``revision``, else why not."""
        if era not in self.eras:
            return f"applies to the {'/'.join(sorted(self.eras))} era only"
        first, last = self.revisions
        if not first <= revision <= last:
            return f"applies to revisions {first}..{last} only"
        return None


#: Every registered check by id, in registration order.
CATALOGUE: Final[dict[str, Check]] = {}


def check(
    *,
    id: str,
    title: str,
    level: Level | str,
    spec: str,
    quote: str,
    eras: tuple[str, ...] = ("legacy", "modern"),
    revisions: tuple[str, str] = ("2024-11-05", "9999-12-31"),
    transports: tuple[str, ...] = ("stdio", "http", "sse"),
    needs: tuple[str, ...] = (),
    tags: tuple[str, ...] = (),
    quotes: tuple[tuple[str, str, str], ...] = (),
    levels: tuple[tuple[str, Level | str], ...] = (),
    on_counter_offer: bool = False,
    ends_session: bool = False,
) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as the check ``id``; ids are unique."""

    def register(fn: CheckFn) -> CheckFn:
        if id in CATALOGUE:
            raise ValueError(f"duplicate check id {id!r}")
        table = tuple(sorted(((first, Level(entry)) for first, entry in levels), key=lambda e: e[0]))
        if table and table[-1][1] is not Level(level):
            raise ValueError(f"{id}: the newest entry of levels must be its level {Level(level).value}")
        CATALOGUE[id] = Check(
            id=id,
            title=title,
            level=Level(level),
            spec=spec,
            quote=quote,
            fn=fn,
            eras=frozenset(eras),
            revisions=revisions,
            transports=frozenset(transports),
            needs=needs,
            tags=frozenset(tags) | {id.split("-")[0].lower()},
            quotes=tuple(sorted(quotes)),
            levels=table,
            on_counter_offer=on_counter_offer,
            ends_session=ends_session,
        )
        return fn

    return register
