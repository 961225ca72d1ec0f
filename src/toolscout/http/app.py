"""The FastAPI application: a thin HTTP layer over :class:`toolscout.Toolscout`.

Routes live under ``/v1``; every one but the health checks needs a bearer JWT, and
the principal comes from that token only. Errors have one JSON shape
(:mod:`toolscout.http.errors`); bodies are size-limited; no stack trace leaves
the process.
"""

import json
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import TypeAdapter
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolscout.errors import CardError, ToolscoutError, UnknownDiscoveryError
from toolscout.http import models as m
from toolscout.http.errors import APIError, ErrorBody, body, from_library, responses
from toolscout.http.guard import Guard, bearer_token
from toolscout.http.metrics import CONTENT_TYPE, CountRequests, Metrics
from toolscout.http.ready import Readiness
from toolscout.policy import AdminAction, Principal

#: a discovery's answer as FastAPI writes a route's response model
_DISCOVER: TypeAdapter[m.DiscoverResponse] = TypeAdapter(m.DiscoverResponse)

#: default largest request body, in bytes
MAX_BODY = 1 << 20
#: largest body of a catalog import, in bytes
MAX_IMPORT_BODY = 64 << 20
#: largest body of a /v1 call whose bearer token does not verify, in bytes
UNAUTHENTICATED_BODY = 16 << 10


class BodyLimit:
    """ASGI middleware: refuse bodies over the limit (413) before the app reads them.

    The limit is decided before a byte of the body is read: the import route's large
    one, or the default; and, for a ``/v1`` call whose bearer token does not verify
    (``verifies``), at most ``unauthenticated_limit`` — an unauthenticated caller never
    makes the server read a large body. A body without a declared length (chunked) is
    read up to the limit here, so going over it is a 413 too (the app would see a
    broken stream and answer 400)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: int,
        import_limit: int,
        verifies: Callable[[str | None], bool] | None = None,
        unauthenticated_limit: int = UNAUTHENTICATED_BODY,
    ) -> None:
        self.app = app
        self.limit = limit
        self.import_limit = import_limit
        self.verifies = verifies
        self.unauthenticated_limit = unauthenticated_limit

    def _limit(self, scope: Scope) -> int:
        limit = self.import_limit if scope["path"] == "/v1/catalog/import" else self.limit
        if (
            self.verifies is not None
            and scope["path"].startswith("/v1/")
            and limit > self.unauthenticated_limit
            and not self.verifies(bearer_token(scope.get("headers", ())))
        ):
            limit = self.unauthenticated_limit
        return limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope)
        declared: int | None = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = limit + 1
                if declared > limit:
                    await _too_large(send, limit)
                    return
        if declared is None and scope.get("method") in ("POST", "PUT", "PATCH"):
            buffered = await _read_body(receive, limit)
            if buffered is None:
                await _too_large(send, limit)
                return
            receive = _replay(buffered, receive)
        seen = 0
        started = False

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge
            return message

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited, tracking)
        except _BodyTooLarge:
            if not started:
                await _too_large(send, limit)


class _BodyTooLarge(Exception):
    pass


async def _read_body(receive: Receive, limit: int) -> list[Message] | None:
    """The request's body messages, read up to ``limit`` bytes; ``None`` when over it."""
    messages: list[Message] = []
    seen = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages
        seen += len(message.get("body", b""))
        if seen > limit:
            return None
        if not message.get("more_body", False):
            return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives ``messages`` first, then what ``receive`` gives."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


async def _too_large(send: Send, limit: int) -> None:
    payload = json.dumps(body("payload_too_large", f"request body over {limit} bytes")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _error(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse(body(code, message), status_code=status, headers=headers or None)


def create_app(
    service: Any,
    *,
    max_body: int = MAX_BODY,
    max_import_body: int = MAX_IMPORT_BODY,
    close_on_shutdown: bool = False,
    on_ready: Callable[[Readiness], None] | None = None,
) -> FastAPI:
    """The HTTP API over one ``Toolscout`` (``service``).

    It warms the service in the background as it starts (:mod:`toolscout.http.ready`);
    ``/readyz`` is 503 until then, and ``on_ready`` is called once it is warm."""
    from contextlib import asynccontextmanager

    readiness = Readiness(service, on_ready=on_ready)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        readiness.start()
        yield
        readiness.stop()
        if close_on_shutdown:
            service.close()

    app = FastAPI(
        title="toolscout",
        version="1",
        summary="Progressive tool discovery for AI agents",
        description="Entitle first, hybrid retrieval, just-in-time schemas, an execution gateway."
        " Every /v1 route needs `Authorization: Bearer <JWT>`.",
        lifespan=lifespan,
        docs_url=None,  # /docs is served from local files by the console (no CDN)
    )
    metrics = Metrics()
    app.state.metrics = metrics
    app.state.service = service
    guard = Guard(service)
    app.state.guard = guard
    app.state.readiness = readiness
    bearer = HTTPBearer(auto_error=False, description="A JWT issued for toolscout")

    # -- errors ----------------------------------------------------------------------
    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError) -> JSONResponse:
        extra = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
        if exc.status == 429:
            extra = {"Retry-After": "1"}
        return _error(exc.status, exc.code, exc.message, **extra)

    @app.exception_handler(ToolscoutError)
    async def library_error(request: Request, exc: ToolscoutError) -> JSONResponse:
        err = from_library(exc)
        return await api_error(request, err)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        return _error(422, "invalid_request", f"{where}: {first.get('msg', 'invalid value')}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        code = codes.get(exc.status_code, "invalid_request")
        return _error(exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        return _error(500, "internal", "internal error")

    # -- auth ------------------------------------------------------------------------
    async def caller(
        request: Request,
        creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Principal:
        ok = creds is not None and creds.scheme.lower() == "bearer" and creds.credentials
        token = creds.credentials if ok and creds is not None else None
        if token:
            # a token that verifies, on the event loop: verifying is CPU only (a key or a
            # local JWKS; the principal cached after a token's first use), as BodyLimit
            # already does for every /v1 call, and a worker thread costs more than it
            principal = guard.principal(token)
            if principal is not None:
                return principal
        # a caller whose token fails is throttled per client address and audited (an
        # audit write: on a worker thread, guard.py)
        route = getattr(request.scope.get("route"), "path", "") or request.url.path
        refused: Principal = await run_in_threadpool(
            guard.authenticate,
            token,
            client=request.client.host if request.client else "",
            route=route,
        )
        return refused

    Caller = Annotated[Principal, Depends(caller)]

    def admin(principal: Caller) -> Principal:
        # the one administration check (policy.may_administer): exact scopes, no wildcard
        service.admin.require(principal, AdminAction.VIEW, operation="catalog")
        return principal

    Admin = Annotated[Principal, Depends(admin)]

    def generation() -> int:
        gen = service.catalog.generation
        return int(gen() if callable(gen) else gen)

    # -- health ----------------------------------------------------------------------
    @app.get("/healthz", response_model=m.HealthResponse, tags=["health"])
    def healthz() -> m.HealthResponse:
        return m.HealthResponse(status="ok")

    @app.get("/readyz", response_model=m.HealthResponse, responses=responses(503), tags=["health"])
    def readyz() -> m.HealthResponse:
        if not readiness.ready:  # ready means warm: the model loaded, one discovery done
            raise APIError(503, "unavailable", readiness.problem)
        try:
            gen = generation()
            n = len(service.catalog)
        except ToolscoutError as exc:
            raise APIError(503, "unavailable", "the catalog store is unavailable") from exc
        return m.HealthResponse(status="ready", tools=n, generation=gen)

    @app.get(
        "/metrics",
        response_class=Response,
        tags=["health"],
        responses={200: {"content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}}}},
    )
    def metrics_text() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    # -- discovery and execution -------------------------------------------------------
    @app.post(
        "/v1/discover",
        response_model=m.DiscoverResponse,
        responses=responses(400, 401, 413, 422, 429),
        tags=["discovery"],
    )
    async def discover(req: m.DiscoverRequest, principal: Caller) -> Response:
        # the whole discovery, its answer's JSON included, in one trip to a worker thread
        # (a sync route's answer is validated on a second one)
        return await run_in_threadpool(discovered, req, principal)

    def discovered(req: m.DiscoverRequest, principal: Principal) -> Response:
        guard.discovery_budget(principal)
        shortlist = service.discover(
            principal,
            req.query,
            k=req.k,
            fmt=req.format,
            token_budget=req.token_budget,
            conversation=req.conversation,
        )
        metrics.discovered(shortlist)
        out: dict[str, Any] = shortlist.to_dict()
        out["names"] = dict(shortlist.names)
        # what FastAPI does with a route's answer: validated into the response model (its
        # fields only), written by pydantic's serializer
        content = _DISCOVER.dump_json(_DISCOVER.validate_python(out), by_alias=True)
        return Response(content, media_type="application/json")

    @app.get(
        # a path parameter: MCP tool ids are "<server>/<tool>"
        "/v1/tools/{tool_id:path}/schema",
        response_model=dict[str, Any],
        responses=responses(400, 401, 404, 422, 429),
        tags=["discovery"],
    )
    def schema(tool_id: str, principal: Caller, format: m.Format = "openai") -> dict[str, Any]:
        rendered: dict[str, Any] = service.schema(principal, tool_id, fmt=format)
        return rendered

    @app.post(
        "/v1/execute",
        response_model=m.ExecuteResponse,
        responses=responses(400, 401, 404, 413, 422, 429),
        tags=["execution"],
    )
    def execute(req: m.ExecuteRequest, principal: Caller) -> m.ExecuteResponse:
        if req.discovery_id is not None:
            # only the caller who made a discovery may link a call to it (404 otherwise,
            # as /v1/feedback): a stranger's id would record calls against its owner's log
            log = service.catalog.log
            if log is None or log.owner(req.discovery_id) != (principal.subject, principal.tenant):
                raise UnknownDiscoveryError(str(req.discovery_id))
        result = service.execute(
            principal,
            req.name,
            req.arguments,
            discovery_id=req.discovery_id,
            grant=req.grant,
            conversation=req.conversation,
        )
        metrics.executed(result.status, result.reason)
        audit = getattr(result, "audit_id", None)
        return m.ExecuteResponse(
            status=result.status,
            ok=result.ok,
            tool_id=result.tool_id,
            name=result.name,
            value=_jsonable(result.value),
            reason=result.reason,
            message=result.message,
            audit_id=None if audit is None else str(audit),
            discovery_id=result.discovery_id,
            latency_ms=float(result.latency_ms or 0.0),
            overhead_ms=float(result.overhead_ms or 0.0),
        )

    @app.post(
        "/v1/feedback",
        response_model=m.OkResponse,
        responses=responses(400, 401, 404, 413, 422, 429),
        tags=["discovery"],
    )
    def feedback(req: m.FeedbackRequest, principal: Caller) -> m.OkResponse:
        # only a tool the caller may use, after the caller's own discovery (404 otherwise)
        service.feedback(principal, req.discovery_id, req.tool_id)
        return m.OkResponse()

    # -- catalog (admin) ---------------------------------------------------------------
    @app.post(
        "/v1/catalog/import",
        response_model=m.ImportResponse,
        responses=responses(400, 401, 403, 409, 413, 422, 503),
        tags=["catalog"],
    )
    def catalog_import(req: m.ImportRequest, principal: Admin) -> m.ImportResponse:
        from toolscout.cards import check_unique, make_spec
        from toolscout.imports import import_warnings

        specs = []
        for i, record in enumerate(req.tools):
            try:
                specs.append(make_spec(record, default_source="http", strict=req.strict))
            except CardError as exc:
                raise APIError(400, "invalid_catalog", f"tools[{i}]: {exc}") from None
        specs = check_unique(specs)
        warned = [str(w) for w in import_warnings(specs)]
        report = service.import_tools(
            principal, specs, replace_all=req.replace_all, force=req.force, warnings=warned
        )
        s = report.stats
        return m.ImportResponse(
            added=s.added,
            updated=s.updated,
            unchanged=s.unchanged,
            removed=s.removed,
            embedded=s.embedded,
            seconds=round(report.seconds, 4),
            warnings=list(report.warnings),
            generation=generation(),
        )

    @app.post(
        "/v1/catalog/delete",
        response_model=m.DeleteResponse,
        responses=responses(400, 401, 403, 413, 422, 503),
        tags=["catalog"],
    )
    def catalog_delete(req: m.DeleteRequest, principal: Admin) -> m.DeleteResponse:
        removed = service.delete_tools(principal, req.ids)
        return m.DeleteResponse(removed=int(removed), generation=generation())

    from toolscout.console import mount_console

    mount_console(app, service)  # /console and /docs
    app.add_middleware(CountRequests, metrics=metrics)
    app.add_middleware(
        BodyLimit, limit=max_body, import_limit=max_import_body, verifies=guard.verifies
    )
    return app


def _jsonable(value: Any) -> Any:
    """A tool's value as JSON (anything else as its string form)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def openapi_document(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


__all__ = ["BodyLimit", "ErrorBody", "create_app", "openapi_document"]
