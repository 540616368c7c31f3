"""Garbage collection of pruned outputs: the operation (sans I/O, like ``ops``) and the storage steps
that cannot run inside a transaction.

Rules:

- ``drop_pruned_outputs`` deletes the ``tool_outputs`` rows of parts whose prune mark
  (``tool_states.compacted_at``) is older than ``before``; the tool state (status, input, title, metadata,
  times, ``output_tokens``) and the part's token estimate stay, so stats and the ``pruned_parts`` view still
  say what was pruned and how big it was. Outputs of parts that are not pruned are never touched. A loaded
  part whose output was dropped reads ``output=None`` and renders as the cleared placeholder, as any
  pruned part does.
- ``vacuum`` gives the space back: ``VACUUM`` on SQLite (outside any transaction, then a WAL checkpoint),
  ``VACUUM ANALYZE tool_outputs`` on PostgreSQL (autocommit). ``storage_bytes`` measures what it reclaimed: the
  whole database on either backend (the SQLite file and its WAL; ``pg_database_size`` on PostgreSQL).
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import Engine, delete, func, select, text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import GenericFunction
from sqlalchemy.types import BigInteger

from ..errors import InvalidInput
from ..reports import GcResult
from .statements import O, Op, T, step

__all__ = ["drop_pruned_outputs", "storage_bytes", "vacuum"]


class _byte_length(GenericFunction):  # noqa: N801  (SQL function naming)
    """The UTF-8 byte length of a text column on either backend."""

    type = BigInteger()
    inherit_cache = True


@compiles(_byte_length)
def _byte_length_default(element: Any, compiler: Any, **kw: Any) -> str:
    return f"octet_length({compiler.process(element.clauses, **kw)})"


@compiles(_byte_length, "sqlite")
def _byte_length_sqlite(element: Any, compiler: Any, **kw: Any) -> str:
    return f"length(CAST({compiler.process(element.clauses, **kw)} AS BLOB))"


def drop_pruned_outputs(before: Any, *, dry_run: bool) -> Op:
    """Delete (or, with ``dry_run``, only count) the outputs of parts pruned before ``before`` (ms)."""
    if isinstance(before, bool) or not isinstance(before, int) or before < 0:
        raise InvalidInput(f"before must be a time in epoch milliseconds, got {before!r}")
    old = T.c.compacted_at.is_not(None) & (T.c.compacted_at < before)
    found = yield step(
        select(
            func.count().label("parts"),
            func.coalesce(func.sum(T.c.output_tokens), 0).label("tokens"),
            func.coalesce(func.sum(_byte_length(O.c.output)), 0).label("bytes"),
        )
        .select_from(O.join(T, T.c.part_id == O.c.part_id))
        .where(old),
        fetch="first",
    )
    parts = int(found.parts or 0)
    if parts and not dry_run:
        yield step(delete(O).where(O.c.part_id.in_(select(T.c.part_id).where(old))))
    return GcResult(
        before=before, dry_run=dry_run, parts=parts, tokens=int(found.tokens or 0), output_bytes=int(found.bytes or 0)
    )


def _sqlite_file(engine: Engine) -> str | None:
    database = engine.url.database
    return database if database and database != ":memory:" and not database.startswith("file:") else None


def _checkpoint(dbapi: Any) -> None:
    dbapi.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def storage_bytes(engine: Engine) -> int:
    """The size of the whole database: SQLite's file plus its WAL after a checkpoint; PostgreSQL's
    ``pg_database_size`` of the current database."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            return int(connection.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
    pooled = engine.raw_connection()
    try:
        dbapi = pooled.driver_connection
        _checkpoint(dbapi)
        path = _sqlite_file(engine)
        if path is None:
            page_count = dbapi.execute("PRAGMA page_count").fetchone()[0]
            page_size = dbapi.execute("PRAGMA page_size").fetchone()[0]
            return int(page_count * page_size)
        return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))
    finally:
        pooled.close()


def vacuum(engine: Engine) -> None:
    """Give freed pages back: VACUUM outside any transaction (SQLite), VACUUM ANALYZE in autocommit (PostgreSQL)."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("VACUUM ANALYZE tool_outputs")
        return
    pooled = engine.raw_connection()
    try:
        dbapi = pooled.driver_connection
        if dbapi.in_transaction:  # a pooled connection is returned rolled back; be sure, VACUUM refuses otherwise
            dbapi.execute("ROLLBACK")
        dbapi.execute("VACUUM")
        _checkpoint(dbapi)
    finally:
        pooled.close()
