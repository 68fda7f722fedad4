"""Exceptions out of trio's exception groups, as themselves.

A nursery wraps what its tasks raise in an :class:`ExceptionGroup`; the client's own nurseries
(the connection's, an actor's while it starts) hold one meaningful error at most, and the
caller should see that error, with its own chain, not a group.
"""

from __future__ import annotations

from typing import NoReturn

import trio

__all__ = ["reraise_alone", "single_exception"]


def single_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The single meaningful exception of a group (``Cancelled`` aside), or the group itself."""
    leaves: list[BaseException] = []

    def walk(inner: BaseExceptionGroup[BaseException]) -> None:
        for exc in inner.exceptions:
            if isinstance(exc, BaseExceptionGroup):
                walk(exc)
            elif not isinstance(exc, trio.Cancelled):
                leaves.append(exc)

    walk(group)
    return leaves[0] if len(leaves) == 1 else group


def reraise_alone(exc: BaseException) -> NoReturn:
    """Raises ``exc`` out of the group that carried it with its own chain intact: its
    ``__cause__``, ``__context__`` and ``__suppress_context__`` are the ones it was raised with,
    not the group's."""
    cause, context, suppress = exc.__cause__, exc.__context__, exc.__suppress_context__
    try:
        raise exc
    finally:
        exc.__cause__, exc.__context__, exc.__suppress_context__ = cause, context, suppress
