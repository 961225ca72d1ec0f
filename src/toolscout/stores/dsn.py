"""PostgreSQL connection strings: telling one from a file path, and naming one safely.

The catalog, the discovery log and the audit log each accept a SQLite path or a
``postgresql://`` DSN; they all decide which it is here, and every message that
names a database shows it through :func:`redact`.
"""

from __future__ import annotations

import re

#: the URL schemes libpq accepts for a connection string
SCHEMES = ("postgresql://", "postgres://")


def is_dsn(target: object) -> bool:
    """Is ``target`` a PostgreSQL connection URL rather than a file path?"""
    return isinstance(target, str) and target.startswith(SCHEMES)


def redact(dsn: str) -> str:
    """``dsn`` without its password (URL user info, or a ``password=`` parameter)."""
    dsn = re.sub(r"(://[^:@/?#]*):[^@/?#]*@", r"\1@", dsn)
    return re.sub(r"(password\s*=\s*)('[^']*'|[^&\s]*)", r"\1***", dsn)


def one_line(exc: BaseException) -> str:
    """A driver error as one line (libpq's messages span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


__all__ = ["SCHEMES", "is_dsn", "one_line", "redact"]
