"""Putting the dashboard on the app: its routes, its static files, its error pages."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from cpsched.service.ui import login, pages
from cpsched.service.ui.render import HERE, page
from cpsched.service.ui.session import LoginRequired, new_key
from cpsched.wire.schemas import ErrorOut


def install_ui(app: FastAPI) -> None:
    """Serve the dashboard from ``app`` (sessions signed with a key of this process)."""
    app.state.ui_key = new_key()
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    app.include_router(login.router)
    app.include_router(pages.router)

    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, exc: LoginRequired) -> Response:
        app.state.metrics.bad_requests.labels("401").inc()
        if "text/html" in request.headers.get("accept", ""):
            return RedirectResponse(f"/ui/login?next={quote(exc.next_path)}", status_code=303)
        body = ErrorOut(error="unauthorized", detail="log in at /ui/login or send a bearer token")
        return JSONResponse(
            body.model_dump(), status_code=401, headers={"WWW-Authenticate": "Bearer"}
        )

    @app.exception_handler(pages.PageError)
    async def page_error(request: Request, exc: pages.PageError) -> Response:
        app.state.metrics.bad_requests.labels(str(exc.status)).inc()
        context = {"status": exc.status, "message": exc.message}
        return page(request, "error.html", context, exc.status)
