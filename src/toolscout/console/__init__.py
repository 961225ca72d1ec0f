"""The web console: a thin, server-rendered surface over ``Toolscout`` at ``/console``.

Pages: the playground (a request as one or two principals), the catalog (cards, lint,
overlap), discovery health (the false-negative report, alias suggestions to accept)
and the audit log. Needs the ``server`` extra (FastAPI, Jinja2); nothing is imported
until :func:`mount_console` is called.
"""

from __future__ import annotations

from typing import Any


def mount_console(app: Any, service: Any) -> None:
    """Serve the console at ``/console`` and Swagger UI at ``/docs`` (local files) on ``app``."""
    from toolscout.console.app import mount_console as mount

    mount(app, service)


__all__ = ["mount_console"]
