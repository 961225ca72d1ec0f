"""``/docs``: Swagger UI from local files, so the API reference works offline.

The Swagger UI bundle and stylesheet come from the ``fastapi-offline`` package (MIT,
on PyPI; installed with the ``server`` extra), served from its installed folder; the
page itself is ours and loads no inline script, so it runs under a CSP as strict as
the console's (Swagger UI's components set inline styles, which that CSP allows).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

DOCS_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} — API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" href="/docs/assets/favicon.png">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{openapi}"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/console/static/swagger-init.js"></script>
</body>
</html>
"""


def swagger_assets() -> Path | None:
    """The folder holding ``swagger-ui-bundle.js`` (None without the ``server`` extra)."""
    try:
        folder = Path(str(files("fastapi_offline") / "static"))
    except ModuleNotFoundError:
        return None
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


def add_offline_docs(app: FastAPI) -> None:
    """Add ``/docs`` to an app built with ``docs_url=None``."""
    from html import escape

    folder = swagger_assets()
    headers = {"Content-Security-Policy": DOCS_CSP, "X-Content-Type-Options": "nosniff"}

    @app.get("/docs", include_in_schema=False)
    def docs() -> Response:
        if folder is None:
            return PlainTextResponse(
                "Swagger UI's files are not installed: pip install 'toolscout[server]'"
                " (the API reference is also at /openapi.json)",
                status_code=503,
            )
        html = PAGE.format(title=escape(app.title), openapi=escape(app.openapi_url or ""))
        return HTMLResponse(html, headers=headers)

    if folder is not None:
        app.mount("/docs/assets", StaticFiles(directory=str(folder)), "docs-assets")


__all__ = ["DOCS_CSP", "add_offline_docs", "swagger_assets"]
