"""Running operations on a SQLAlchemy connection, and the one place driver errors become brutus errors.

- ``drive(connection, op)`` runs an operation's ``Step``s (``brutus.db.statements``) on a SQLAlchemy
  ``Connection``: PostgreSQL in both stores (the async store on a thread with a sync connection,
  ``brutus.db.async_pg``, or, in a batch, through ``AsyncConnection.run_sync``: the whole operation in one
  greenlet). SQLite runs on ``brutus.db.sqlite_driver`` instead. These two are the statement
  runners; everything else runs work (``brutus.flows``).
- ``translate_errors()`` turns SQLAlchemy and driver exceptions into ``brutus.errors`` at the stores'
  boundary: no driver exception reaches a user.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError, SQLAlchemyError

from ..errors import BrutusError, DatabaseBusy, DatabaseError, InvalidInput, Unavailable
from .pg_bulk import BULK_INSERTS, insert_rows
from .pg_driver import PGDriver, pg_driver
from .statements import Op, Step

__all__ = ["Clock", "drive", "fetch", "lost_connection", "now_ms", "translate", "translate_errors"]

Clock = Callable[[], int]


def now_ms() -> int:
    """The store's default clock: epoch milliseconds."""
    return int(time.time() * 1000)


def fetch(result: Any, how: str) -> Any:
    """Materialize a statement's result the way its ``Step`` asked."""
    if how == "all":
        return result.all()
    if how == "raw":  # plain tuples, as the SQLite driver gives them (``convert.reuse_history`` compares them)
        return list(map(tuple, result))
    if how == "first":
        return result.first()
    if how == "rowcount":
        return result.rowcount
    return None


def drive(connection: Any, op: Op) -> Any:
    """Run ``op``'s steps on a SQLAlchemy ``Connection``, statement by statement; its return value.

    On PostgreSQL a prebuilt statement runs on psycopg directly (``pg_driver``), and the rows of a bulk insert
    go in as one statement (``pg_bulk``). On psycopg's sync connection, steps whose results are not wanted
    (``fetch="none"``) that follow each other go in psycopg's pipeline mode: sent without waiting, their
    results read in one round trip when a step wants a result or the operation ends (a tool step's four
    writes: one round trip, not four). An error of one of them is raised there, or by the next of them, as a
    SQLAlchemy error like any other."""
    postgres = connection.dialect.name == "postgresql"
    psycopg_sync = _psycopg_sync(connection) if postgres else None
    runner = pg_driver(connection.dialect) if psycopg_sync is not None and PGDriver.direct(connection) else None
    pipeline = None  # open while no-fetch steps run back to back

    def run(statement: Any, params: Any, how: str) -> Any:
        plan = runner.plan(statement, params, how) if runner is not None else None
        if plan is not None:
            return runner.execute(connection, psycopg_sync, plan, params, how)  # type: ignore[union-attr]
        return fetch(connection.execute(statement, params), how)

    try:
        current: Step = next(op)
        while True:
            statement, params, how = current
            if how == "none" and psycopg_sync is not None and pipeline is None:
                pipeline = psycopg_sync.pipeline()
                pipeline.__enter__()
            elif how != "none" and pipeline is not None:
                pipeline, ending = None, pipeline
                _sync(ending)
            if postgres and type(params) is list and params and statement in BULK_INSERTS:
                for query, chunk in insert_rows(statement, params):  # type: ignore[arg-type]
                    run(query, chunk, "none")
                current = op.send(None)
            else:
                current = op.send(run(statement, params, how))
    except StopIteration as stop:
        if pipeline is not None:
            pipeline, ending = None, pipeline
            _sync(ending)
        return stop.value
    finally:
        if pipeline is not None:  # an error on the way: the pipeline ends without its results
            try:
                pipeline.__exit__(None, None, None)
            except Exception:  # noqa: BLE001  the error already raised says what failed
                pass
        op.close()  # an operation's cleanup runs now, not when a held traceback lets it go


def _psycopg_sync(connection: Any) -> Any:
    """``connection``'s driver connection if it is a sync psycopg connection (an async one, under ``run_sync``,
    runs statement by statement through Core), else None."""
    import psycopg  # loaded already: the dialect's driver

    driver = connection.connection.driver_connection
    return driver if isinstance(driver, psycopg.Connection) else None


def _sync(pipeline: Any) -> None:
    """End ``pipeline``: wait for the results of what it sent; a statement's error as a SQLAlchemy error (as
    ``Connection.execute`` raises it, so ``translate`` and the disconnect checks see it the same way)."""
    import psycopg

    try:
        pipeline.__exit__(None, None, None)
    except psycopg.Error as exc:
        raise DBAPIError.instance(None, None, exc, psycopg.Error) from exc


@contextmanager
def translate_errors() -> Iterator[None]:
    """Turn SQLAlchemy / driver exceptions into ``BrutusError``s."""
    try:
        yield
    except Exception as exc:
        translated = translate(exc)
        if translated is exc:
            raise
        raise translated from exc


def translate(exc: Exception) -> Exception:
    """The ``BrutusError`` for a SQLAlchemy or driver exception; any other exception as it is."""
    if isinstance(exc, BrutusError):
        return exc
    if lost_connection(exc):
        return Unavailable(f"database unavailable: {_reason(exc)} (retryable: the store reconnects)")
    if isinstance(exc, IntegrityError):
        return InvalidInput(f"refused by the database: {_reason(exc)}")
    if isinstance(exc, DBAPIError) and getattr(exc.orig, "sqlstate", None) in _PREPARED_ELSEWHERE:
        return DatabaseError(f"database error: {_reason(exc)} ({_BEHIND_A_POOLER})")
    if isinstance(exc, OperationalError):
        reason = _reason(exc)
        if "locked" in reason or "busy" in reason:
            return DatabaseBusy(f"database busy: {reason}")
        return DatabaseError(f"database error: {reason}")
    if isinstance(exc, (DBAPIError, SQLAlchemyError)):
        return DatabaseError(f"database error: {_reason(exc)}")
    # the SQLite driver runs on the sqlite3 connection directly
    if isinstance(exc, sqlite3.IntegrityError):
        return InvalidInput(f"refused by the database: {exc}")
    if isinstance(exc, sqlite3.OperationalError):
        if "locked" in str(exc) or "busy" in str(exc):
            return DatabaseBusy(f"database busy: {exc}")
        return DatabaseError(f"database error: {exc}")
    if isinstance(exc, sqlite3.Error):
        return DatabaseError(f"database error: {exc}")
    return exc


# a prepared statement missing or there already: its server connection is not the one psycopg prepared it on
_PREPARED_ELSEWHERE = {"26000", "42P05"}
_BEHIND_A_POOLER = "behind a transaction-pooling pooler such as pgbouncer? add ?pooler=transaction to the database URL"


def lost_connection(exc: Exception) -> bool:
    """Whether ``exc`` says the PostgreSQL server could not be reached or cut the connection: SQLAlchemy saw a
    disconnect, or psycopg failed with no server error code (connecting, the socket closed) or with a code of
    class 08 (connection exception) or 57P (the server shutting down or starting up)."""
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    if not hasattr(orig, "sqlstate"):  # not psycopg (sqlite3 has no SQLSTATE)
        return False
    code = orig.sqlstate
    return code is None or code.startswith(("08", "57P"))


def _reason(exc: SQLAlchemyError) -> str:
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc).strip().splitlines()[0]
