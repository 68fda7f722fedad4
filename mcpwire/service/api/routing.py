"""A small typed router: each operation is declared once, and both the handler's parsing and the
OpenAPI document come from that declaration.

Theory of operation: :meth:`Api.operation` registers a handler with its method, path, query type,
body type and response types (msgspec Structs). The same :class:`Operation` drives the starlette
endpoint (query parameters converted into the query Struct, the JSON body decoded into the body
Struct, the reply encoded; any refusal a 422 problem naming the field) and :meth:`Api.openapi`
(msgspec's JSON Schema of the same Structs, OpenAPI 3.1 being JSON Schema 2020-12). There is no
second description of the API to drift from the code.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..identity import Identity, Role
from ..middleware import forbidden
from ..problems import FieldError, Problem, ProblemError, validation_error

__all__ = [
    "JSON",
    "PROBLEM_JSON",
    "Api",
    "Ctx",
    "Operation",
    "Reply",
    "ResponseSpec",
    "problem_response",
    "run_operation",
]

log = logging.getLogger("mcpwire.service.api")

JSON: Final = "application/json"
PROBLEM_JSON: Final = "application/problem+json"
_encode = msgspec.json.Encoder().encode
T = TypeVar("T")

#: documented on every response
COMMON_HEADERS: Final = {
    "X-Trace-ID": "The request's trace id (from traceparent or X-Trace-ID, or made here).",
    "X-Process-Time": "Seconds the service spent on the request, until the response started.",
}


class Reply:
    """A handler's answer: a body (a Struct, list, dict or ``None``), a status and headers."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, body: object = None, *, status: int = 200, headers: Mapping[str, str] | None = None) -> None:
        self.body = body
        self.status = status
        self.headers = dict(headers or {})


@dataclass(frozen=True, slots=True)
class ResponseSpec:
    description: str
    type: Any = None  #: the body's type (``None``: no body)
    media: str = JSON
    headers: Mapping[str, str] = field(default_factory=dict)  #: extra documented headers


@dataclass(slots=True)
class Ctx:
    """What a handler gets: the request, its parsed parts, and the service."""

    request: Request
    service: Any
    path: dict[str, str]
    query: object | None
    body: object | None
    trace_id: str | None
    caller: str | None

    def query_as(self, kind: type[T]) -> T:
        assert isinstance(self.query, kind)
        return self.query

    def body_as(self, kind: type[T]) -> T:
        assert isinstance(self.body, kind)
        return self.body


Handler = Callable[[Ctx], Awaitable[Reply | Response | object]]
#: maps an exception a handler let through to a problem (or ``None``: a bug, answered 500)
ErrorMapper = Callable[[BaseException], ProblemError | None]


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    path: str
    operation_id: str
    summary: str
    handler: Handler
    tags: tuple[str, ...]
    query: type | None
    body: type | None
    responses: Mapping[int, ResponseSpec]
    description: str = ""
    #: needs no credential
    public: bool = False
    #: the least role that may run it
    role: Role = Role.VIEWER
    #: what the OpenAPI document says of the body, when the handler checks it itself (``body``
    #: is then a loose type, e.g. any JSON object)
    body_schema: Any = None


_PARAM = re.compile(r"{([a-zA-Z_][a-zA-Z0-9_]*)}")


def problem_response(exc: ProblemError, request: Request) -> Response:
    state = request.scope.get("state") or {}
    problem = exc.problem(instance=request.url.path, trace_id=state.get("trace_id"))
    return Response(_encode(problem), status_code=exc.status, media_type=PROBLEM_JSON, headers=exc.headers)


class Api:
    """A set of operations; mount :meth:`routes` and serve :meth:`openapi`."""

    def __init__(self, *, title: str, version: str, description: str = "") -> None:
        self.title = title
        self.version = version
        self.description = description
        self.operations: list[Operation] = []
        #: the public operations' (method, path), as of how many operations there were
        self._public: tuple[int, frozenset[tuple[str, str]]] | None = None

    def operation(
        self,
        method: str,
        path: str,
        *,
        summary: str,
        responses: Mapping[int, ResponseSpec],
        query: type | None = None,
        body: type | None = None,
        tags: Sequence[str] = (),
        public: bool = False,
        role: Role | None = None,
        body_schema: Any = None,
    ) -> Callable[[Handler], Handler]:
        """Registers an operation; ``role`` is the least role that may run it (reading needs a
        viewer, anything else an admin, unless it says otherwise). ``body_schema``: the body's
        documented type when ``body`` is only what is decoded before the handler checks it."""
        needed = role if role is not None else Role.VIEWER if method.upper() in ("GET", "HEAD") else Role.ADMIN

        def register(handler: Handler) -> Handler:
            self.operations.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    operation_id=handler.__name__.strip("_"),
                    summary=summary,
                    handler=handler,
                    tags=tuple(tags),
                    query=query,
                    body=body,
                    responses=dict(responses),
                    description=(handler.__doc__ or "").strip(),
                    public=public,
                    role=needed,
                    body_schema=body_schema,
                )
            )
            return handler

        return register

    # -- serving ---------------------------------------------------------------------------------

    def routes(self, service: object, errors: ErrorMapper) -> list[Route]:
        """Starlette routes; operations sharing a path share one route (405 for other methods)."""
        by_path: dict[str, dict[str, Operation]] = {}
        for op in self.operations:
            by_path.setdefault(op.path, {})[op.method] = op
        routes: list[Route] = []
        for path, ops in by_path.items():
            routes.append(Route(path, _endpoint(ops, service, errors), methods=sorted(ops)))
        return routes

    def is_public(self, method: str, path: str) -> bool:
        if self._public is None or self._public[0] != len(self.operations):  # (operations registered since)
            found = frozenset((op.method, op.path) for op in self.operations if op.public)
            self._public = (len(self.operations), found)
        return (method, path) in self._public[1]

    # -- OpenAPI ---------------------------------------------------------------------------------

    def openapi(self, *, secured: bool = True) -> dict[str, Any]:
        """The OpenAPI 3.1 document of every operation; ``secured``: the bearer token is required
        (on all but the public operations)."""
        types: list[Any] = [Problem]
        for op in self.operations:
            if op.body is not None:
                types.append(op.body_schema if op.body_schema is not None else op.body)
            types += [r.type for r in op.responses.values() if r.type is not None]
        unique = list(dict.fromkeys(types))
        schemas, components = msgspec.json.schema_components(unique, ref_template="#/components/schemas/{name}")
        schema_of = dict(zip(map(id, unique), schemas, strict=True))
        headers = {
            name: {"description": text, "required": True, "schema": {"type": "string"}}
            for name, text in COMMON_HEADERS.items()
        }
        problem = {
            "description": "A problem (RFC 9457): what went wrong, and for 422 each bad field with its JSON path.",
            "headers": headers,
            "content": {PROBLEM_JSON: {"schema": schema_of[id(Problem)]}},
        }
        paths: dict[str, dict[str, Any]] = {}
        for op in self.operations:
            item: dict[str, Any] = {
                "operationId": op.operation_id,
                "summary": op.summary,
                "tags": list(op.tags),
                "parameters": [
                    {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
                    for name in _PARAM.findall(op.path)
                ]
                + _query_parameters(op.query),
                "responses": {},
            }
            if op.description:
                item["description"] = op.description
            if op.body is not None:
                body = op.body_schema if op.body_schema is not None else op.body
                item["requestBody"] = {"required": True, "content": {JSON: {"schema": schema_of[id(body)]}}}
            if secured and not op.public:
                item["security"] = [{"bearer": []}]
                item["x-mcpwire-role"] = op.role.label
                note = f"Needs the {op.role.label} role (or a higher one)."
                item["description"] = f"{item['description']}\n\n{note}" if op.description else note
            for status, spec in sorted(op.responses.items()):
                response: dict[str, Any] = {
                    "description": spec.description,
                    "headers": {
                        **headers,
                        **{
                            n: {"description": t, "required": True, "schema": {"type": "string"}}
                            for n, t in spec.headers.items()
                        },
                    },
                }
                if spec.type is not None:
                    response["content"] = {spec.media: {"schema": schema_of[id(spec.type)]}}
                elif spec.media != JSON:
                    response["content"] = {spec.media: {"schema": {"type": "string"}}}
                item["responses"][str(status)] = response
            item["responses"]["4XX"] = problem
            item["responses"]["5XX"] = problem
            paths.setdefault(op.path, {})[op.method.lower()] = item
        components_out: dict[str, Any] = {"schemas": components}
        if secured:
            components_out["securitySchemes"] = {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token: the service's admin token ($MCPWIRE_TOKEN, --token-file, or "
                    "the one it made in its data folder), a named token with a role (mcpwire token create), or "
                    "a JWT from the configured identity provider. Roles: viewer < caller < approver < admin.",
                }
            }
        return {
            "openapi": "3.1.0",
            "info": {"title": self.title, "version": self.version, "description": self.description},
            "paths": paths,
            "components": components_out,
        }


def _query_parameters(query: type | None) -> list[dict[str, Any]]:
    if query is None:
        return []
    out: list[dict[str, Any]] = []
    for f in msgspec.structs.fields(query):
        schema = msgspec.json.schema(f.type)
        required = f.required
        if f.default is not msgspec.NODEFAULT and f.default is not None:
            schema = {**schema, "default": f.default}
        out.append({"name": f.encode_name, "in": "query", "required": required, "schema": schema})
    return out


def _endpoint(
    ops: Mapping[str, Operation], service: object, errors: ErrorMapper
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        op = ops[request.method if request.method != "HEAD" else "GET"]
        if not op.public:
            identity = (request.scope.get("state") or {}).get("identity")
            if not isinstance(identity, Identity):  # (the service's middleware names every caller)
                return problem_response(ProblemError(401, "this endpoint needs a token"), request)
            if not identity.may(op.role):
                return problem_response(ProblemError(403, forbidden(identity, op.role)), request)
        try:
            reply = await _handle(op, request, service, errors)
        except ProblemError as exc:
            return problem_response(exc, request)
        except Exception as exc:
            log.error("%s %s failed unexpectedly", op.method, op.path, exc_info=exc)
            return problem_response(ProblemError(500, "an unexpected error; the service log has the details"), request)
        if isinstance(reply, Response):
            return reply
        if not isinstance(reply, Reply):
            reply = Reply(reply)
        if reply.body is None:
            return Response(status_code=reply.status, headers=reply.headers)
        return Response(_encode(reply.body), status_code=reply.status, media_type=JSON, headers=reply.headers)

    return endpoint


def _unknown_parameters(op: Operation, given: Iterable[str]) -> None:
    """A 422 for query parameters the operation does not take (a misspelt filter would
    otherwise be ignored, and the answer look filtered when it is not)."""
    known = [] if op.query is None else [f.encode_name for f in msgspec.structs.fields(op.query)]
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return
    takes = f"it takes {', '.join(known)}" if known else "it takes none"
    errors = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        errors.append(FieldError(location="query", path=name, message=f"unknown query parameter{hint}"))
    listed = ", ".join(repr(name) for name in unknown)
    raise ProblemError(422, f"{op.method} {op.path} has no query parameter {listed}; {takes}", errors=errors)


async def _handle(op: Operation, request: Request, service: object, errors: ErrorMapper) -> Reply | Response | object:
    _unknown_parameters(op, request.query_params.keys())
    query: object | None = None
    if op.query is not None:
        params = {k: v for k, v in request.query_params.items()}
        try:
            query = msgspec.convert(params, op.query, strict=False)
        except msgspec.ValidationError as exc:
            raise validation_error(exc, "query") from None
    body: object | None = None
    if op.body is not None:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != JSON and not kind.endswith("+json"):
            raise ProblemError(415, f"send the request body as {JSON}, not {kind or 'without a Content-Type'}")
        raw = await request.body()
        try:
            body = msgspec.json.decode(raw, type=op.body)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise validation_error(exc, "body") from None
    state = request.scope.get("state") or {}
    ctx = Ctx(
        request=request,
        service=service,
        path=dict(request.path_params),
        query=query,
        body=body,
        trace_id=state.get("trace_id"),
        caller=state.get("caller"),
    )
    return await run_operation(op, ctx, errors)


async def run_operation(op: Operation, ctx: Ctx, errors: ErrorMapper) -> Reply | Response | object:
    """Runs ``op``'s handler; an error it lets through becomes the problem ``errors`` maps it
    to, or propagates (a bug, answered 500)."""
    try:
        return await op.handler(ctx)
    except ProblemError:
        raise
    except Exception as exc:
        mapped = errors(exc)
        if mapped is None:
            raise
        raise mapped from exc
