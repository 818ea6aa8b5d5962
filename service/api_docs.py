"""``/docs``: Swagger UI served by the service itself, from the ``swagger-ui-bundle``
package, with a content security policy that allows nothing from elsewhere (FastAPI's
default loads it from a CDN: third-party code on the dashboard's origin, and a blank page
offline)."""

from __future__ import annotations

import base64
import hashlib
import re

import swagger_ui_bundle
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"


def install_api_docs(app: FastAPI) -> None:
    """``/docs`` and its assets on ``app`` (created with ``docs_url=None``)."""
    app.mount(ASSETS, StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs")
    page = get_swagger_ui_html(
        openapi_url=app.openapi_url or "/openapi.json",
        title=f"{app.title} API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
    )
    html = bytes(page.body).decode()
    # The page's one inline script (it starts Swagger UI) is allowed by its hash alone.
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
        for s in re.findall(r"<script>(.*?)</script>", html, re.S)
    )
    policy = (
        f"default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"
    )

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(html, headers={"Content-Security-Policy": policy})
