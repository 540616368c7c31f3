"""PostgreSQL: a prebuilt statement compiled once and executed on psycopg directly, not through Core's execute.

SQLAlchemy's ``Connection.execute`` costs about 90 µs of the client's CPU a statement on top of psycopg's own
(a SELECT of one row, this machine: 212 µs against 125), and a live agent step runs ten statements; Core also
reads a result row by row. Run this way, one agent's live step takes 10-20 % less of the client's CPU (sync
store 4.3-4.5 → 3.3-3.8 ms, async 5.3-5.5 → 4.6-5.1 ms, ``benchmarks/agents.py --step-cpu``). This runner
does for PostgreSQL what ``sqlite_driver`` does for SQLite, on the psycopg connection of the SQLAlchemy
``Connection`` the store opened (``Connection.connection.driver_connection``): SQLAlchemy still checks the
connection out of its pool and begins, commits and rolls back the transaction (its events, the tenant's
``BEGIN`` among them, run as before); only the statements skip Core.

For a statement marked ``prebuilt`` and a call's parameter keys, the SQL text (the same string Core sends), the
values of the binds a call leaves out (a bind's own value, a column's scalar ``default`` or ``onupdate``) and
each bind's and result column's processor (the column types' own, as Core runs them) are worked out once and
cached. A result comes back as named tuples (``row.seq``, as from Core's rows), a ``raw`` one as plain tuples.
A driver error is raised as the SQLAlchemy error Core raises for it (``DBAPIError.instance``), with the
connection invalidated when the server went away, so ``translate`` and the disconnect checks see no
difference.

Everything else runs through Core as before: a statement built per call, a list of parameters whose rows
name different keys or whose rows are fetched, a bind Core expands at execution, an async connection (a batch
of the async store, under ``run_sync``), and any connection whose engine has cursor-execute listeners, so
instrumentation that hooks ``before_cursor_execute`` / ``after_cursor_execute`` (tracing, the tests' probes)
sees every statement.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Executable

from .sqlite_driver import is_prebuilt, left_out

__all__ = ["PGDriver", "pg_driver"]


class _Plan:
    """How to run one prebuilt statement with one set of parameter keys."""

    __slots__ = ("_converters", "bind_at", "defaults", "dialect", "row_type", "sql", "statement")

    def __init__(self, statement: Executable, dialect: Dialect, compiled: Any, defaults: dict[str, Any]) -> None:
        self.statement, self.dialect, self.sql = statement, dialect, compiled.string
        self.defaults = defaults
        at: list[tuple[str, Callable[[Any], Any]]] = []
        for name, bind in compiled.binds.items():
            if not bind.required and name not in defaults:
                defaults[name] = bind.effective_value
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                at.append((name, process))
        self.bind_at = tuple(at)
        self.row_type: Any = None  # the named tuple of the result's columns, and their processors: at the first read
        self._converters: tuple[tuple[int, Callable[[Any], Any]], ...] = ()

    def params(self, params: dict[str, Any] | None) -> dict[str, Any]:
        """The parameters psycopg is given: the call's, the statement's own values where it leaves them out, each
        through its type's bind processor (a JSON value wrapped for psycopg …)."""
        values = {**self.defaults, **params} if params else dict(self.defaults)
        for name, process in self.bind_at:
            if name in values:
                values[name] = process(values[name])
        return values

    def _learn(self, cursor: Any) -> None:
        """The row type and the result processors, from the first result's description (its type codes, as Core
        asks the types for their processors)."""
        description = cursor.description
        columns = getattr(self.statement, "exported_columns", ()) or ()
        converters = []
        for index, (column, described) in enumerate(zip(columns, description)):
            process = column.type.dialect_impl(self.dialect).result_processor(self.dialect, described[1])
            if process is not None:
                converters.append((index, process))
        self._converters = tuple(converters)  # before the row type: another thread reads them once it is set
        self.row_type = namedtuple("Row", [d[0] for d in description], rename=True)  # type: ignore[misc]

    def rows(self, cursor: Any, raw: Sequence[tuple[Any, ...]], named: bool) -> list[Any]:
        if self.row_type is None:
            self._learn(cursor)
        if self._converters:
            raw = [self._convert(row) for row in raw]
        if not named:
            return list(raw)
        make = self.row_type._make
        return [make(row) for row in raw]

    def _convert(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        values = list(row)
        for index, process in self._converters:
            values[index] = process(values[index])
        return tuple(values)


class PGDriver:
    """Runs the ``Step``s it can on the psycopg connection under a SQLAlchemy ``Connection``; one per dialect."""

    def __init__(self, dialect: Dialect) -> None:
        import psycopg  # the dialect's driver: loaded already

        self.dialect = dialect
        self._error = psycopg.Error
        self._plans: dict[tuple[int, tuple[str, ...]], _Plan | None] = {}

    @staticmethod
    def direct(connection: Any) -> bool:
        """Whether statements on ``connection`` may skip Core: not while listeners wait for them."""
        dispatch = connection.dispatch
        return not (dispatch.before_cursor_execute or dispatch.after_cursor_execute)

    def plan(self, statement: Executable, params: Any, fetch: str) -> _Plan | None:
        """The cached plan for ``statement`` with these parameters' keys (a list's: an ``executemany`` whose
        rows name the same ones, and whose rows are not fetched); None when Core must run it."""
        if type(params) is list:
            if not params or fetch not in ("none", "rowcount"):
                return None
            keys = tuple(params[0])
            if any(tuple(row) != keys for row in params):
                return None
        else:
            keys = tuple(params) if params else ()
        key = (id(statement), keys)
        try:
            return self._plans[key]
        except KeyError:
            if not is_prebuilt(statement):  # built per call: Core's own cache compiles it
                return None
        found = self._plans[key] = self._compile(statement, keys)
        return found

    def _compile(self, statement: Executable, keys: tuple[str, ...]) -> _Plan | None:
        compiled = statement.compile(dialect=self.dialect, column_keys=list(keys))
        if compiled.escaped_bind_names or compiled.post_compile_params or compiled.literal_execute_params:
            return None  # names Core renames, or binds it renders at execution
        try:
            defaults = left_out(statement, keys)
        except ValueError:  # a Python function as a column's default: Core calls it
            return None
        return _Plan(statement, self.dialect, compiled, defaults)

    def execute(self, connection: Any, driver: Any, plan: _Plan, params: Any, fetch: str) -> Any:
        """Run ``plan`` with ``params`` (a list of them: an ``executemany``) on ``driver``, ``connection``'s
        psycopg connection; the result fetched the way the ``Step`` asked, as ``runner.fetch`` gives Core's."""
        many = type(params) is list
        values: Any = [plan.params(row) for row in params] if many else plan.params(params)
        cursor = driver.cursor()
        try:
            if many:
                cursor.executemany(plan.sql, values)
            else:
                cursor.execute(plan.sql, values)
            if fetch == "none":
                return None
            if fetch == "rowcount":
                return cursor.rowcount
            if fetch == "first":
                row = cursor.fetchone()
                return None if row is None else plan.rows(cursor, [row], True)[0]
            return plan.rows(cursor, cursor.fetchall(), fetch == "all")
        except self._error as exc:
            raise self.failed(connection, driver, cursor, plan.sql, values, exc) from exc
        finally:
            cursor.close()

    def failed(self, connection: Any, driver: Any, cursor: Any, sql: Any, params: Any, exc: Exception) -> DBAPIError:
        """The SQLAlchemy error Core raises for the driver's ``exc``; a connection the server cut is
        invalidated first, as Core does, so the pool does not hand it out again."""
        gone = self.dialect.is_disconnect(exc, driver, cursor)
        if gone:
            connection.invalidate(exc)
        return DBAPIError.instance(sql, params, exc, self._error, connection_invalidated=gone, dialect=self.dialect)


_DRIVERS: WeakKeyDictionary[Dialect, PGDriver] = WeakKeyDictionary()


def pg_driver(dialect: Dialect) -> PGDriver:
    """The runner for ``dialect``: one per engine's dialect, its plans going with the engine."""
    found = _DRIVERS.get(dialect)
    if found is None:
        found = _DRIVERS[dialect] = PGDriver(dialect)
    return found
