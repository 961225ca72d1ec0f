"""The console's routes: a FastAPI application mounted at ``/console``.

Every page is rendered on the server from what ``Toolscout`` answers; the browser
runs one small vendored script (progress on submit) and no inline code. Every
response carries a strict Content-Security-Policy.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, select_autoescape

from toolscout.console import auditview, catalogview, health, playground
from toolscout.console.access import Level, admin_level, platform_scope, sees_tenant
from toolscout.console.session import COOKIE, LOGIN_COOKIE, Session, Sessions, same
from toolscout.errors import ToolscoutError
from toolscout.policy import Principal

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
FORMATS = ("openai", "anthropic", "gemini", "mcp", "langchain")


class _Redirect(Exception):
    def __init__(self, to: str) -> None:
        self.to = to


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("toolscout.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = lambda ts: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    env.filters["pct"] = lambda v: f"{v:.0%}"
    return env


class Console:
    """The console over one ``Toolscout``: sessions, rendering, the pages' handlers."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.sessions = Sessions()
        self.env = _environment()
        self.overlap = catalogview.OverlapCache()

    # -- rendering -------------------------------------------------------------------
    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        html = self.env.get_template(template).render(
            base=str(request.scope.get("root_path", "")), **context
        )
        return HTMLResponse(html, status_code=status)

    # -- who is asking ---------------------------------------------------------------
    def viewer(self, request: Request) -> tuple[Session, Principal, Level]:
        session = self.sessions.get(request.cookies.get(COOKIE))
        if session is None:
            raise _Redirect("/login")
        try:
            principal: Principal = self.service.verify(session.token)
        except ToolscoutError:
            self.sessions.drop(session.id)
            raise _Redirect("/login?expired=1") from None
        return session, principal, admin_level(principal, self.service.catalog.policy)

    def admin(self, request: Request) -> tuple[Session, Principal, Level]:
        session, principal, level = self.viewer(request)
        if level is Level.NONE:
            policy = self.service.catalog.policy
            raise _Refused(
                403,
                f"This page is for administrators: it needs the exact scope {policy.admin_scope}"
                f" (with a tenant) or {platform_scope(policy)}.",
            )
        return session, principal, level

    @staticmethod
    def same_origin(request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None or origin == "null":
            return origin is None
        ours = urlsplit(str(request.base_url))
        theirs = urlsplit(origin)
        return (theirs.scheme, theirs.netloc) == (ours.scheme, ours.netloc)

    async def form(self, request: Request, session: Session) -> dict[str, Any]:
        """The posted form, after the origin and CSRF checks."""
        data = await request.form()
        if not self.same_origin(request) or not same(str(data.get("csrf", "")), session.csrf):
            raise _Refused(
                403, "The form's anti-forgery token is missing or stale: reload the page."
            )
        out: dict[str, Any] = {}
        for key, value in data.multi_items():
            if isinstance(value, str):
                out.setdefault(key, []).append(value)
        return {k: v if len(v) > 1 or k.startswith("roles") else v[0] for k, v in out.items()}

    async def posted(
        self, request: Request, *, admin: bool = False
    ) -> tuple[Session, Principal, Level, dict[str, Any]]:
        """Who posted (a viewer, or an administrator when ``admin``) and the checked form."""
        session, principal, level = (self.admin if admin else self.viewer)(request)
        return session, principal, level, await self.form(request, session)

    @staticmethod
    def see_other(request: Request, to: str) -> RedirectResponse:
        """The 303 answering a post: ``to`` under the console's mount point."""
        return RedirectResponse(str(request.scope.get("root_path", "")) + to, 303)

    def page_context(self, session: Session, principal: Principal, level: Level) -> dict[str, Any]:
        return {
            "me": principal,
            "level": level.name.lower(),
            "admin": level is not Level.NONE,
            "csrf": session.csrf,
        }


def _cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=str(request.scope.get("root_path", "")) or "/",
    )


def create_console(service: Any) -> FastAPI:
    """The console application over one ``Toolscout`` (mount it at ``/console``)."""
    import secrets

    console = Console(service)
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.console = console
    app.mount(
        "/static", StaticFiles(directory=str(files("toolscout.console") / "static")), "static"
    )

    @app.middleware("http")
    async def headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for key, value in SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        return response

    @app.exception_handler(_Redirect)
    async def redirect(request: Request, exc: _Redirect) -> Response:
        return RedirectResponse(str(request.scope.get("root_path", "")) + exc.to, 303)

    @app.exception_handler(_Refused)
    async def refused(request: Request, exc: _Refused) -> Response:
        return console.render(request, "error.html", exc.status, message=exc.message)

    @app.exception_handler(ToolscoutError)
    async def library_error(request: Request, exc: ToolscoutError) -> Response:
        return console.render(request, "error.html", 400, message=str(exc))

    # -- login -----------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    def index(request: Request) -> Response:
        return RedirectResponse(str(request.scope.get("root_path", "")) + "/playground", 303)

    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request, expired: int = 0) -> Response:
        nonce = secrets.token_urlsafe(24)
        message = (
            "Your session ended (the token expired or was refused): log in again."
            if expired
            else ""
        )
        response = console.render(request, "login.html", nonce=nonce, message=message)
        _cookie(response, request, LOGIN_COOKIE, nonce, 600)
        return response

    @app.post("/login", response_class=HTMLResponse)
    async def login(request: Request) -> Response:
        data = await request.form()
        client = request.client.host if request.client else "-"
        nonce = str(data.get("nonce", ""))
        if not console.same_origin(request) or not same(
            nonce, request.cookies.get(LOGIN_COOKIE, "")
        ):
            raise _Refused(
                403, "The login form is stale or was posted from another site: reload it."
            )
        if console.sessions.throttled(client):
            raise _Refused(429, "Too many failed logins from this address: wait a minute.")
        token = str(data.get("token", "")).strip()
        try:
            service.verify(token)
        except ToolscoutError as exc:
            console.sessions.failed(client)
            fresh = secrets.token_urlsafe(24)
            response = console.render(
                request, "login.html", 401, nonce=fresh, message=f"That token was refused: {exc}"
            )
            _cookie(response, request, LOGIN_COOKIE, fresh, 600)
            return response
        session = console.sessions.create(token)
        done = console.see_other(request, "/playground")
        _cookie(done, request, COOKIE, session.id, int(console.sessions.idle_s))
        done.delete_cookie(LOGIN_COOKIE, path=str(request.scope.get("root_path", "")) or "/")
        return done

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        session, _, _, _ = await console.posted(request)
        console.sessions.drop(session.id)
        response = console.see_other(request, "/login")
        response.delete_cookie(COOKIE, path=str(request.scope.get("root_path", "")) or "/")
        return response

    # -- playground ------------------------------------------------------------------
    def playground_choices(principal: Principal, level: Level) -> dict[str, Any]:
        policy = service.catalog.policy
        tenants = sorted(
            {t for c in service.catalog.cards() for t in c.tenants} | {principal.tenant} - {""}
        )
        return {
            "roles": sorted(policy.roles),
            "tenants": [t for t in tenants if sees_tenant(principal, level, t)],
            "formats": FORMATS,
        }

    @app.get("/playground", response_class=HTMLResponse)
    def playground_form(request: Request) -> Response:
        session, principal, level = console.viewer(request)
        return console.render(
            request,
            "playground.html",
            nav="playground",
            form={"k": "3", "format": "openai", "mode_a": "me", "mode_b": "none"},
            runs=[],
            **playground_choices(principal, level),
            **console.page_context(session, principal, level),
        )

    def chosen(
        form: dict[str, Any], side: str, principal: Principal, level: Level
    ) -> tuple[Principal, str] | None:
        mode = form.get(f"mode_{side}", "none")
        if mode == "me":
            return principal, f"you ({playground.describe(principal)})"
        if mode == "token":
            other: Principal = service.verify(str(form.get(f"token_{side}", "")).strip())
            return other, f"token ({playground.describe(other)})"
        if mode == "roles":
            if level is Level.NONE:
                raise _Refused(403, "Only administrators may try a request as another principal.")
            tenant = str(form.get(f"tenant_{side}", ""))
            if not sees_tenant(principal, level, tenant):
                raise _Refused(403, f"You do not administer tenant {tenant!r}.")
            roles = [r for r in form.get(f"roles_{side}", []) if r in service.catalog.policy.roles]
            who = Principal.of(f"console:{principal.subject}", tenant, roles=roles)
            return who, f"roles {', '.join(roles) or '(none)'} in tenant {tenant or '-'}"
        return None

    @app.post("/playground", response_class=HTMLResponse)
    async def playground_run(request: Request) -> Response:
        session, principal, level, form = await console.posted(request)
        query = str(form.get("query", "")).strip()
        fmt = str(form.get("format", "openai"))
        if fmt not in FORMATS:
            raise _Refused(400, f"format must be one of {', '.join(FORMATS)}")
        try:
            k = int(str(form.get("k", "3")))
        except ValueError:
            raise _Refused(400, "k must be a whole number from 1 to 10") from None
        runs = []
        for side in ("a", "b"):
            pick = chosen(form, side, principal, level)
            if pick is not None:
                who, label = pick
                runs.append(
                    playground.run(service, principal, level, who, label, query, k=k, fmt=fmt)
                )
        form.pop("token_a", None)
        form.pop("token_b", None)  # a pasted token is never sent back to the page
        return console.render(
            request,
            "playground.html",
            nav="playground",
            form=form,
            runs=runs,
            **playground_choices(principal, level),
            **console.page_context(session, principal, level),
        )

    # -- catalog ---------------------------------------------------------------------
    @app.get("/catalog", response_class=HTMLResponse)
    def catalog_page(
        request: Request,
        q: str = "",
        source: str = "",
        group: str = "",
        risk: str = "",
        scope: str = "",
        tenant: str = "",
        page: int = 1,
        overlap: int = 0,
    ) -> Response:
        session, principal, level = console.admin(request)
        filters = catalogview.Filters(q, source, group, risk, scope, tenant)
        data = catalogview.page(
            service, principal, level, filters, page, console.overlap, measure=bool(overlap)
        )
        graph = None
        if data["pairs"] is not None:
            from toolscout.console import svg

            nodes = sorted({t for p in data["pairs"] for t in (p.a, p.b)})
            graph = svg.graph(
                nodes, [(p.a, p.b, p.rate) for p in data["pairs"]], "Tools retrieval confuses"
            )
        return console.render(
            request,
            "catalog.html",
            nav="catalog",
            graph=graph,
            **data,
            **console.page_context(session, principal, level),
        )

    # -- discovery health ------------------------------------------------------------
    @app.get("/health", response_class=HTMLResponse)
    def health_page(
        request: Request, period: str = "7d", page: int = 1, accepted: str = ""
    ) -> Response:
        session, principal, level = console.admin(request)
        data = health.page(service, principal, level, period, page)
        return console.render(
            request,
            "health.html",
            nav="health",
            accepted=accepted,
            **data,
            **console.page_context(session, principal, level),
        )

    @app.post("/health/accept")
    async def accept(request: Request) -> Response:
        from toolscout.console.actions import accept_alias

        _, principal, level, form = await console.posted(request, admin=True)
        done = accept_alias(service, principal, level, str(form.get("suggestion", "")))
        if isinstance(done, str):
            raise _Refused(403, done)
        return console.see_other(request, f"/health?accepted={done.suggestion.id}")

    # -- audit -----------------------------------------------------------------------
    @app.get("/audit", response_class=HTMLResponse)
    def audit_page(
        request: Request,
        subject: str = "",
        tool: str = "",
        outcome: str = "",
        since: str = "",
        until: str = "",
        page: int = 1,
    ) -> Response:
        session, principal, level = console.admin(request)
        query = auditview.Query(
            subject, tool, outcome if outcome in auditview.OUTCOMES else "", since, until
        )
        data = auditview.page(service, principal, level, query, page)
        return console.render(
            request,
            "audit.html",
            nav="audit",
            **data,
            **console.page_context(session, principal, level),
        )

    return app


def mount_console(app: FastAPI, service: Any) -> None:
    """Serve the console at ``/console`` and Swagger UI at ``/docs`` from local assets."""
    from toolscout.console.docs import add_offline_docs

    app.mount("/console", create_console(service), "console")
    add_offline_docs(app)


__all__ = ["CSP", "Console", "create_console", "mount_console"]
