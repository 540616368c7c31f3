"""brutus's SQLite driver: SQLAlchemy statements compiled once, executed on the sqlite3 connection directly.

SQLAlchemy Core costs ~50 µs per statement on top of sqlite3's ~10 µs, and an agent step is ~25 statements.
brutus's operations are built from statement objects created once at import (``prebuilt``); for those, the
SQL text, the order of the positional parameters, the values of the parameters a call leaves out (a bind's own
value, a column's scalar ``default``), the values to pack and each parameter's and result column's processor are
worked out once per (statement, parameter keys) and cached. The processors are the column types' own
(``TypeEngine.bind_processor`` / ``result_processor`` of the type's dialect implementation, as SQLAlchemy runs
them), so every type, a ``TypeDecorator`` or one brutus has not used yet too, binds and reads as through
SQLAlchemy (tests/test_sqlite_driver_types.py). Statements built per call are compiled per call (still correct,
just not cached). Expanding ``IN`` parameters are not supported here: operations use ``executemany`` instead.

Packing (``codec.pack``, migration 0009): on a database with the size columns, an INSERT or UPDATE that writes
a packed column (``tables.PACKED_TYPES``, bound as the column's key or as ``b_`` plus it) also writes its size
column, and the value is compressed when large; on an older schema (``SessionStore(engine)`` does not
migrate) statements are sent as they are written.

Results come back as named tuples, so operations read ``row.seq`` as they do from SQLAlchemy rows.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import Insert, Update
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import Executable

from ..codec import pack
from .tables import PACKED_TYPES

__all__ = ["SQLiteDriver", "is_prebuilt", "left_out", "prebuilt", "sqlite_begin", "sqlite_end", "sqlite_transaction"]

_PREBUILT: dict[int, Executable] = {}


def prebuilt(statement: Executable) -> Executable:
    """Mark a module-level statement as built once, so its compiled form is cached."""
    _PREBUILT[id(statement)] = statement
    return statement


def is_prebuilt(statement: Executable) -> bool:
    """Whether ``statement`` was marked ``prebuilt`` (it lives as long as the process: its id is its key)."""
    return id(statement) in _PREBUILT


def sqlite_begin(dbapi: Any, write: bool) -> None:
    """Begin a transaction on the sqlite3 connection ``dbapi``: ``BEGIN IMMEDIATE`` for a write, so the write
    lock is taken before any statement (a busy database fails here, not half-way)."""
    dbapi.execute("BEGIN IMMEDIATE" if write else "BEGIN")


def sqlite_end(dbapi: Any, commit: bool) -> None:
    """COMMIT (or ROLLBACK) the transaction open on ``dbapi``, if any; a COMMIT that fails is rolled back."""
    if not dbapi.in_transaction:
        return
    try:
        dbapi.execute("COMMIT" if commit else "ROLLBACK")
    except BaseException:
        if dbapi.in_transaction:
            dbapi.execute("ROLLBACK")
        raise


def sqlite_transaction(
    dbapi: Any, write: bool, committed: Callable[[], None], run: Callable[..., Any], *args: Any, cancelled: Any = None
) -> Any:
    """``run(*args)`` in a transaction of its own on the sqlite3 connection ``dbapi``: committed, or rolled
    back if it raises or ``cancelled`` (an event) is set by then; after a write, ``committed()`` (the store's
    checkpoint thread). A call of the sync store, and of the async store in its connection's thread."""
    sqlite_begin(dbapi, write)
    try:
        value = run(*args)
    except BaseException:
        sqlite_end(dbapi, False)
        raise
    sqlite_end(dbapi, cancelled is None or not cancelled.is_set())
    if write:
        committed()
    return value


def _no_args(params: Any) -> tuple[()]:
    return ()


def _one_arg(name: str) -> Callable[[dict[str, Any]], tuple[Any]]:
    def args(params: dict[str, Any]) -> tuple[Any]:
        return (params[name],)

    return args


def _size_of(name: str) -> str:
    """The size column of the packed column a parameter ``name`` (``output``, ``b_metadata``) is bound to."""
    return f"{name.removeprefix('b_')}_size"


def _size_keys(statement: Executable, keys: Sequence[str], compiled: Any) -> list[str]:
    """The size columns an INSERT or UPDATE writes beside the packed columns it writes."""
    if not isinstance(statement, (Insert, Update)):
        return []
    columns = statement.table.c
    names = [name for name, bind in compiled.binds.items() if isinstance(bind.type, PACKED_TYPES)]
    return [_size_of(name) for name in names if _size_of(name) in columns and _size_of(name) not in keys]


def left_out(statement: Executable, keys: Sequence[str]) -> dict[str, Any]:
    """The values SQLAlchemy writes for the columns an INSERT or UPDATE leaves out (their ``default`` /
    ``onupdate``, read from the table's columns): scalars only; a Python function as a default is refused."""
    attribute = "default" if isinstance(statement, Insert) else "onupdate" if isinstance(statement, Update) else None
    if attribute is None or getattr(statement, "select", None) is not None:  # INSERT ... SELECT: no parameters
        return {}
    values = {}
    for column in statement.table.c:
        default = getattr(column, attribute)
        if default is None or column.key in keys:
            continue
        if not default.is_scalar:
            raise ValueError(f"the SQLite driver does not run {column.key!r}'s {attribute} function")
        values[column.key] = default.arg
    return values


def _result_processors(statement: Executable, dialect: Dialect) -> list[tuple[int, Callable[[Any], Any]]]:
    """(index, processor) of the result columns whose type converts what sqlite3 returns, as SQLAlchemy does
    (sqlite3 reports no column types: SQLAlchemy asks for each processor with ``None`` too)."""
    columns = getattr(statement, "exported_columns", ()) or ()
    processors = [(i, c.type.dialect_impl(dialect).result_processor(dialect, None)) for i, c in enumerate(columns)]
    return [(index, process) for index, process in processors if process is not None]


class _Plan:
    __slots__ = ("_bind_at", "_pack_at", "_values", "args", "converters", "defaults", "names", "row_type", "sql")

    def __init__(self, statement: Executable, dialect: Dialect, keys: Sequence[str], packs: bool = False) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        sizes = _size_keys(statement, keys, compiled) if packs else []
        if sizes:
            compiled = statement.compile(dialect=dialect, column_keys=[*keys, *sizes])
        self.sql: str = compiled.string
        # The order of the positional parameters: ``positiontup``, the compiler's attribute that SQLAlchemy's own
        # execution reads (documented on ``SQLCompiler``, not part of the execution API). The public way,
        # ``compiled.construct_expanded_state(params)``, builds every parameter anew on each call: with it an agent
        # step's 21 statements took 1.7x the driver's time and a finished turn's 5 in ``append_messages`` 1.6x
        # (Core's ``execute``: 3.6x and 2.6x; benchmarks/driver_vs_core.py), the whole turn in ``append_messages``
        # 1.4-1.6x and a step with a commit per call 1.04-1.3x (the two drivers alternated in one process,
        # 2026-11-27; benchmarks/RESULTS.md).
        self.names: list[str] = list(compiled.positiontup or ())
        self.defaults: dict[str, Any] = {**dict.fromkeys(sizes), **left_out(statement, keys)}
        binds = compiled.binds
        bind_at: list[tuple[int, Callable[[Any], Any]]] = []
        for index, name in enumerate(self.names):
            bind = binds[name]
            if bind.expanding:
                raise ValueError("expanding IN parameters are not supported by the SQLite driver")
            if not bind.required and name not in self.defaults:
                self.defaults[name] = bind.effective_value
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                bind_at.append((index, process))
        self._bind_at = tuple(bind_at)
        at = {name: index for index, name in enumerate(self.names)}
        packed = [name for name in self.names if sizes and isinstance(binds[name].type, PACKED_TYPES)]
        self._pack_at = tuple((at[name], at[_size_of(name)]) for name in packed if _size_of(name) in at)
        self.converters = _result_processors(statement, dialect)
        self.row_type: Any = None
        # ``args(params)``: the positional parameters. Most statements need no defaults and no processing: a getter.
        self._values = itemgetter(*self.names) if len(self.names) > 1 else _one_arg(self.names[0]) if self.names else _no_args
        self.args: Callable[[Any], Sequence[Any]]
        self.args = self._converted_args if self.defaults or self._bind_at or self._pack_at else self._values

    def _converted_args(self, params: dict[str, Any] | None) -> list[Any]:
        """The positional parameters: the statement's own values as defaults, each value through its type's bind
        processor (a JSON value serialized, a boolean an int …), a large packed value packed."""
        if self.defaults:
            params = {**self.defaults, **params} if params else self.defaults
        args = list(self._values(params))
        for index, process in self._bind_at:
            args[index] = process(args[index])
        for index, size_at in self._pack_at:
            value = args[index]
            if value is not None:
                args[index], args[size_at] = pack(value)
        return args

    def rows(self, cursor: Any, raw: list[tuple[Any, ...]]) -> list[Any]:
        if self.row_type is None:
            names = [d[0] for d in cursor.description]
            self.row_type = namedtuple("Row", names, rename=True)  # type: ignore[misc]
        make = self.row_type._make
        if not self.converters:
            return [make(r) for r in raw]
        converted = []
        for r in raw:
            values = list(r)
            for index, process in self.converters:
                values[index] = process(values[index])
            converted.append(make(values))
        return converted


_HAS_SIZES = "SELECT 1 FROM pragma_table_info('tool_outputs') WHERE name = 'output_size'"


class SQLiteDriver:
    """Runs ``Step``s on a sqlite3 connection with cached compiled plans."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self._plans: dict[tuple[int, tuple[str, ...]], _Plan] = {}
        self._packs: bool | None = None  # whether the database has the size columns (0009): read once

    def _plan(self, statement: Executable, keys: tuple[str, ...], dbapi: Any) -> _Plan:
        if self._packs is None:
            self._packs = dbapi.execute(_HAS_SIZES).fetchone() is not None
        if not is_prebuilt(statement):
            return _Plan(statement, self.dialect, keys, self._packs)
        key = (id(statement), keys)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan(statement, self.dialect, keys, self._packs)
        return plan

    def run(self, dbapi: Any, op: Any) -> Any:
        """Run the operation ``op`` (a generator of ``Step``s, see ``statements``) on the sqlite3 connection
        ``dbapi``; its return value. The transaction is the caller's."""
        execute = self.execute
        try:
            current = next(op)
            while True:
                current = op.send(execute(dbapi, *current))
        except StopIteration as stop:
            return stop.value
        finally:
            op.close()  # an operation's cleanup runs now, not when a held traceback lets it go

    def execute(self, dbapi: Any, statement: Executable, params: Any, fetch: str) -> Any:
        if isinstance(params, list):
            if not params:
                return 0 if fetch == "rowcount" else None
            plan = self._plan(statement, tuple(params[0]), dbapi)
            cursor = dbapi.cursor()
            try:
                cursor.executemany(plan.sql, [plan.args(p) for p in params])
                return cursor.rowcount if fetch == "rowcount" else None
            finally:
                cursor.close()
        plan = self._plans.get((id(statement), tuple(params) if params else ()))
        if plan is None:
            plan = self._plan(statement, tuple(params) if params else (), dbapi)
        cursor = dbapi.execute(plan.sql, plan.args(params))
        try:
            if fetch == "raw":
                return cursor.fetchall()
            if fetch == "all":
                return plan.rows(cursor, cursor.fetchall())
            if fetch == "first":
                row = cursor.fetchone()
                cursor.fetchall()  # finish the statement (RETURNING) so its changes are complete
                if row is None:
                    return None
                if plan.row_type is not None and not plan.converters:
                    return plan.row_type._make(row)
                return plan.rows(cursor, [row])[0]
            cursor.fetchall()
            return cursor.rowcount if fetch == "rowcount" else None
        finally:
            cursor.close()
