"""RFC 9457 problem details: every error the service answers, in one shape.

Handlers raise :class:`ProblemError`; the app turns it (and any error it did not expect) into an
``application/problem+json`` response carrying the trace id. ``errors`` lists each bad field with
its JSON path (``$.env.TOKEN``) and where it was (``body``, ``query``, ``path``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Final, Literal

import msgspec

from ..redaction import shorten

__all__ = ["PROBLEM_TYPE", "FieldError", "Problem", "ProblemError", "field_errors_from_problems", "validation_error"]

PROBLEM_TYPE: Final = "about:blank"
Location = Literal["body", "query", "path", "header"]


class FieldError(msgspec.Struct, frozen=True, kw_only=True):
    """One bad field: where it is (``in``), its JSON path, and what is wrong with it."""

    location: Location = msgspec.field(name="in")
    path: str
    message: str


class Problem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An RFC 9457 problem details object."""

    type: str = PROBLEM_TYPE
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    trace_id: str | None = msgspec.field(default=None, name="traceId")
    errors: list[FieldError] | None = None


class ProblemError(Exception):
    """Raised by a handler: answered as a problem with ``status``.

    Args:
        status: the HTTP status.
        detail: one sentence for a person: what went wrong and what to do.
        errors: the bad fields, for 422.
        headers: extra response headers (``Retry-After``, ``Allow``...).
    """

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        errors: Iterable[FieldError] = (),
        headers: Mapping[str, str] | None = None,
        title: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = list(errors)
        self.headers = dict(headers or {})
        self.title = title or HTTPStatus(status).phrase

    def problem(self, *, instance: str | None = None, trace_id: str | None = None) -> Problem:
        return Problem(
            title=self.title,
            status=self.status,
            detail=self.detail,
            instance=instance,
            trace_id=trace_id,
            errors=self.errors or None,
        )


_AT = re.compile(r"^(?P<message>.*?)(?: - at `(?P<path>[^`]*)`)?$", re.DOTALL)


def validation_error(exc: msgspec.ValidationError | msgspec.DecodeError, location: Location) -> ProblemError:
    """A 422 naming the field msgspec refused, e.g. ``Expected `int`, got `str``` at ``$.limit``."""
    match = _AT.match(str(exc))
    message, path = (match.group("message"), match.group("path") or "$") if match else (str(exc), "$")
    if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
        message = f"not valid JSON: {message}"
    if location == "query":
        path = path.replace("$.", "", 1) if path.startswith("$.") else path
    error = FieldError(location=location, path=path, message=shorten(message, 300))
    where = "the request body" if location == "body" else f"the {location} parameter {path}"
    return ProblemError(422, f"{where} is invalid: {error.message}", errors=[error])


def field_errors_from_problems(
    problems: Iterable[str], prefix: str, *, location: Location = "body"
) -> list[FieldError]:
    """Host config problems (``$.NAME.command: expected ...``) as field errors with paths in the
    request body (``$.command``): ``prefix`` (``$.NAME``) becomes ``$``."""
    errors: list[FieldError] = []
    for problem in problems:
        path, sep, message = problem.partition(": ")
        if not sep:
            path, message = prefix, problem
        if path == prefix:
            path = "$"
        elif path.startswith(prefix + ".") or path.startswith(prefix + "["):
            path = "$" + path[len(prefix) :]
        errors.append(FieldError(location=location, path=path, message=message))
    return errors
