"""``/ui/login`` and ``/ui/logout``: a session cookie in exchange for a token, and back."""

from __future__ import annotations

import time
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from cpsched.service.auth import find_token
from cpsched.service.ui.render import SECURITY_HEADERS, page
from cpsched.service.ui.session import COOKIE, SESSION_SECONDS, safe_next, session_cookie

router = APIRouter(prefix="/ui", include_in_schema=False)

MAX_FORM_BYTES = 4096


@router.get("/login")
def login_form(
    request: Request, next_path: Annotated[str | None, Query(alias="next")] = None
) -> HTMLResponse:
    return page(request, "login.html", {"next": safe_next(next_path), "error": None})


def cross_origin(request: Request) -> bool:
    """Whether a browser sent this form from another site (login CSRF).

    ``Sec-Fetch-Site`` decides where the browser sends it (every current one does): only
    ``same-origin`` (or ``none``, typed by the user) passes. Else the ``Origin`` must be
    this service's; ``null`` (a sandboxed frame, or a page whose referrer policy hides
    its origin) does not pass. A request with neither header comes from no browser (curl,
    a script) and is no cross-site forgery."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site not in {"same-origin", "none"}
    origin = request.headers.get("origin")
    if origin is None:
        return False
    host = request.headers.get("host", "")
    return origin not in {f"{request.url.scheme}://{host}", f"http://{host}", f"https://{host}"}


def refused_cross_origin() -> Response:
    response = HTMLResponse("cross-origin form posts are refused", status_code=403)
    response.headers.update(SECURITY_HEADERS)
    return response


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the token typed into the form; on success set the session cookie and go on."""
    if cross_origin(request):
        return refused_cross_origin()
    body = await request.body()
    form = parse_qs(body[:MAX_FORM_BYTES].decode("utf-8", "replace"))
    presented = (form.get("token") or [""])[0].strip()
    next_path = safe_next((form.get("next") or [""])[0])
    token = find_token(request.app.state.settings.tokens, presented) if presented else None
    if token is None:
        error = "That token is not one this service knows." if presented else "Enter a token."
        return page(request, "login.html", {"next": next_path, "error": error}, 401)
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(
        COOKIE,
        session_cookie(request.app.state.ui_key, token, time.time()),
        max_age=SESSION_SECONDS,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    response.headers.update(SECURITY_HEADERS)
    return response


@router.post("/logout")
def logout(request: Request) -> Response:
    if cross_origin(request):
        return refused_cross_origin()
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
    response.headers.update(SECURITY_HEADERS)
    return response
