"""Rendering a dashboard page: the templates, their filters and the headers every page gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from cpsched import __version__
from cpsched.service.ui.fmt import FILTERS

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters.update(FILTERS)

SECURITY_HEADERS = {
    # Everything is served from the package: no CDN, no inline script or style.
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def page(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    """``templates/name`` rendered with ``context``, with the dashboard's security headers."""
    response = templates.TemplateResponse(
        request, name, {"version": __version__, **context}, status_code=status_code
    )
    response.headers.update(SECURITY_HEADERS)
    return response
