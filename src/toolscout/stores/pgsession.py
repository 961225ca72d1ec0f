"""One PostgreSQL connection of a log, kept open across a replica's life.

The discovery log and the audit log each hold one autocommit psycopg connection of
their own (never the store's pool: their writes must not join a catalog
transaction). Both need the same care: a connection the server dropped (a restart,
a proxy's idle time-out) is opened again, and every driver error reaches the
caller as one :class:`~toolscout.errors.StoreError` that names the database
without its password.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from toolscout.errors import MissingExtraError, StoreError
from toolscout.stores.dsn import one_line, redact

if TYPE_CHECKING:
    import psycopg


class PgSession:
    """An autocommit connection to ``dsn`` for the log called ``name``.

    A statement that finds the connection broken while no transaction was open is
    run once more on a new connection; inside a transaction it fails, so no
    transaction is ever half replayed. ``options`` are server settings for the
    session (``-c search_path=...``)."""

    def __init__(
        self,
        dsn: str,
        *,
        name: str,
        timeout_s: float,
        options: str = "",
        application_name: str = "toolscout",
    ) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise MissingExtraError(exc.name or "psycopg", "postgres") from None
        self._psycopg = psycopg
        #: the driver's base error (what :meth:`error` turns into a StoreError)
        self.driver_error: type[Exception] = psycopg.Error
        self.dsn = dsn
        self.name = name
        self.timeout_s = timeout_s
        self.options = options
        self.application_name = application_name
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    def error(self, what: str, exc: BaseException) -> StoreError:
        """``exc`` as one line after ``what`` and the database's name."""
        return StoreError(f"{what} {redact(self.dsn)}: {one_line(exc)}")

    def connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        """The open connection, opened (again) if there is none."""
        if self._conn is None or self._conn.closed:
            try:
                self._conn = self._psycopg.connect(
                    self.dsn,
                    autocommit=True,
                    connect_timeout=max(1, round(self.timeout_s)),
                    application_name=self.application_name,
                    options=self.options or None,  # None: not sent
                )
            except self._psycopg.Error as exc:
                raise self.error(f"cannot open the {self.name} in", exc) from None
        return self._conn

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def _idle(self) -> bool:
        """No transaction is open (a statement that failed on a lost connection may be re-run)."""
        status = self._psycopg.pq.TransactionStatus
        return self._conn is None or self._conn.info.transaction_status in (
            status.IDLE,
            status.UNKNOWN,
        )

    def run(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[tuple[Any, ...]]:
        """Run one statement (``%s`` parameters; none: ``sql`` is sent as written)."""
        retry = self._idle()
        for attempt in (1, 2):
            conn = self.connection()
            try:
                return conn.execute(sql, tuple(params) or None)
            except self._psycopg.OperationalError as exc:
                if attempt == 2 or not retry or not conn.broken:
                    raise self.error(f"{self.name} in", exc) from None
                conn.close()
            except self._psycopg.Error as exc:
                raise self.error(f"{self.name} in", exc) from None
        raise AssertionError("unreachable")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A transaction around the block (committed when it ends, rolled back if it raises)."""
        try:
            with self.connection().transaction():
                yield
        except self._psycopg.Error as exc:
            raise self.error(f"{self.name} in", exc) from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


__all__ = ["PgSession"]
