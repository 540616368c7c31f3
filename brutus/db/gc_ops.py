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
  ``VACUUM ANALYZE tool_outputs`` on PostgreSQL (autocommit). ``storage_bytes`` measures the whole database
  before and after on either backend (the SQLite file and its WAL; ``pg_database_size`` on PostgreSQL).
- PostgreSQL's plain VACUUM does not shrink files: it makes the dead rows' space reusable by new rows and
  gives the operating system only empty pages at a table's end, while the free space and visibility maps it
  writes can grow the database. So on PostgreSQL gc reports ``bytes_reusable``, the dropped outputs' size as
  stored (summed in the transaction that deletes them), and ``bytes_reclaimed`` never below 0.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from typing import Any

from sqlalchemy import Engine, delete, func, select, text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import GenericFunction
from sqlalchemy.types import BigInteger

from ..errors import InvalidInput
from ..reports import GcResult
from .sqlite_driver import sqlite_end
from .statements import O, Op, T, step

__all__ = ["drop_pruned_outputs", "gc_flow", "sqlite_storage_bytes", "sqlite_vacuum", "storage_bytes", "vacuum"]


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


def gc_flow(before: Any, *, dry_run: bool, dialect: str) -> Generator[Any, Any, GcResult]:
    """gc as a flow (``brutus.flows``): drop the outputs pruned before ``before``, VACUUM, and the database's
    size before and after. On SQLite the search index first takes in what is pending (so the sizes compare
    alike), its segments are merged after the drop (FTS5 keeps a dropped output's words until then), and after
    the VACUUM every document without a key is indexed (VACUUM may renumber the rows its marks count)."""
    from ..flows import StorageBytes, Tx, Vacuum
    from .search_ops import index_pending, optimize_index

    _check_before(before)
    sqlite = dialect == "sqlite"
    if dry_run:
        return (yield Tx(drop_pruned_outputs(before, dry_run=True, stored=not sqlite), write=False))
    if sqlite:
        yield Tx(index_pending("sqlite"))
    size_before = yield StorageBytes()
    dropped = yield Tx(drop_pruned_outputs(before, dry_run=False, stored=not sqlite))
    if sqlite:
        yield Tx(optimize_index())
    yield Vacuum()
    if sqlite:
        yield Tx(index_pending("sqlite", keyless=True))
    size_after = yield StorageBytes()
    return dropped.model_copy(update={"vacuumed": True, "bytes_before": size_before, "bytes_after": size_after})


def _check_before(before: Any) -> None:
    if isinstance(before, bool) or not isinstance(before, int) or before < 0:
        raise InvalidInput(f"before must be a time in epoch milliseconds, got {before!r}")


def drop_pruned_outputs(before: Any, *, dry_run: bool, stored: bool = False) -> Op:
    """Delete (or, with ``dry_run``, only count) the outputs of parts pruned before ``before`` (ms). ``stored``
    (PostgreSQL only): also sum what the outputs take as stored (``pg_column_size``: compressed, in the table
    or its TOAST table; row and chunk headers not counted), what the VACUUM after the delete makes reusable."""
    _check_before(before)
    old = T.c.compacted_at.is_not(None) & (T.c.compacted_at < before)
    sums = [
        func.count().label("parts"),
        func.coalesce(func.sum(T.c.output_tokens), 0).label("tokens"),
        func.coalesce(func.sum(_byte_length(O.c.output)), 0).label("bytes"),
    ]
    if stored:
        sums.append(func.coalesce(func.sum(func.pg_column_size(O.c.output)), 0).label("stored"))
    found = yield step(select(*sums).select_from(O.join(T, T.c.part_id == O.c.part_id)).where(old), fetch="first")
    parts = int(found.parts or 0)
    if parts and not dry_run:
        yield step(delete(O).where(O.c.part_id.in_(select(T.c.part_id).where(old))))
    return GcResult(
        before=before,
        dry_run=dry_run,
        parts=parts,
        tokens=int(found.tokens or 0),
        output_bytes=int(found.bytes or 0),
        bytes_reusable=int(found.stored or 0) if stored else None,
    )


def _sqlite_file(database: str | None) -> str | None:
    return database if database and database != ":memory:" and not database.startswith("file:") else None


def _checkpoint(dbapi: Any, tries: int = 200) -> None:
    """Copy the whole WAL into the database and empty it. A checkpoint another connection is running (the
    store's checkpoint thread, woken by gc's own commit) makes this one return busy at once, without waiting:
    it is tried again (every 5 ms, ``tries`` times at most), so the size measured next holds no WAL left
    over."""
    for _ in range(tries):
        busy = dbapi.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if not busy:
            return
        time.sleep(0.005)


PG_STORAGE_BYTES = "SELECT pg_database_size(current_database())"
PG_VACUUM = "VACUUM ANALYZE tool_outputs"


def sqlite_storage_bytes(dbapi: Any, database: str | None) -> int:
    """SQLite, on a sqlite3 connection outside any transaction: the file and its WAL after a checkpoint (the
    pages, for a database in memory)."""
    _checkpoint(dbapi)
    path = _sqlite_file(database)
    if path is None:
        page_count = dbapi.execute("PRAGMA page_count").fetchone()[0]
        page_size = dbapi.execute("PRAGMA page_size").fetchone()[0]
        return int(page_count * page_size)
    return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))


def sqlite_vacuum(dbapi: Any) -> None:
    """SQLite, on a sqlite3 connection: VACUUM outside any transaction, then a WAL checkpoint."""
    sqlite_end(dbapi, commit=False)  # a pooled connection is returned rolled back; be sure, VACUUM refuses otherwise
    dbapi.execute("VACUUM")
    _checkpoint(dbapi)


def storage_bytes(engine: Engine) -> int:
    """The size of the whole database: SQLite's file plus its WAL after a checkpoint; PostgreSQL's
    ``pg_database_size`` of the current database."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            return int(connection.execute(text(PG_STORAGE_BYTES)).scalar_one())
    pooled = engine.raw_connection()
    try:
        return sqlite_storage_bytes(pooled.driver_connection, engine.url.database)
    finally:
        pooled.close()


def vacuum(engine: Engine) -> None:
    """Give freed pages back: VACUUM outside any transaction (SQLite), VACUUM ANALYZE in autocommit (PostgreSQL)."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql(PG_VACUUM)
        return
    pooled = engine.raw_connection()
    try:
        sqlite_vacuum(pooled.driver_connection)
    finally:
        pooled.close()
