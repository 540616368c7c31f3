"""Garbage collection of pruned outputs: the operation (sans I/O, like ``ops``) and the storage steps
that cannot run inside a transaction.

Rules:

- ``drop_pruned_outputs`` deletes the ``tool_outputs`` rows of parts whose prune mark
  (``tool_states.compacted_at``) is older than ``before``; the tool state (status, input, title, metadata,
  times, ``output_tokens``) and the part's token estimate stay, so stats and the ``pruned_parts`` view still
  say what was pruned and how big it was. Outputs of parts that are not pruned are never touched. A loaded
  part whose output was dropped reads ``output=None`` and renders as the cleared placeholder, as any
  pruned part does.
- gc's time and extra disk follow what it drops, not the database: the outputs go in chunks
  (``drop_chunk``: at most ``CHUNK_BYTES`` of text, ``CHUNK_PARTS`` parts), each its own transaction, and on
  SQLite the WAL is checkpointed and truncated after each (``StorageBytes``), so it never holds more than
  one chunk. A kill at any point leaves whole chunks dropped and the rest as it was.
- SQLite by default rewrites nothing: the dropped outputs' pages go on the file's free list, where later writes
  reuse them before the file grows (``bytes_reusable``: the free list's growth, ``PRAGMA freelist_count`` ×
  page size). A file with ``auto_vacuum = INCREMENTAL`` gives them back to the system in steps of
  ``CHUNK_BYTES`` (``PRAGMA incremental_vacuum``, a checkpoint after each). The search index forgets the
  dropped outputs at once (FTS5 delete markers) and merges its segments as writes go on; no ``optimize``,
  which would rewrite the whole index into the WAL.
- ``vacuum=True`` (``brutus gc --vacuum``) rewrites the database to shrink it: SQLite's ``VACUUM``, which
  needs free disk the size of the database (its copy goes through the WAL), the search index first merged
  (``optimize``) and, after, every document without a key indexed again (VACUUM may renumber rows);
  PostgreSQL's ``VACUUM FULL`` of ``tool_outputs`` (a copy of the table, locked meanwhile).
- PostgreSQL's plain ``VACUUM ANALYZE tool_outputs`` (the default there) does not shrink files: it makes the
  dead rows' space reusable by new rows and gives the operating system only empty pages at a table's end,
  while the free space and visibility maps it writes can grow the database. So on PostgreSQL gc reports
  ``bytes_reusable``, the dropped outputs' size as stored (summed in the transactions that delete them), and
  ``bytes_reclaimed`` never below 0. ``storage_bytes`` measures the whole database before and after on either
  backend (the SQLite file and its WAL; ``pg_database_size`` on PostgreSQL).
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from typing import Any, NamedTuple

from sqlalchemy import Engine, Integer, bindparam, column, delete, func, select, text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import GenericFunction
from sqlalchemy.types import BigInteger

from ..errors import InvalidInput
from ..reports import GcResult
from .sqlite_driver import sqlite_end
from .statements import O, Op, T, step

__all__ = [
    "CHUNK_BYTES",
    "drop_chunk",
    "drop_pruned_outputs",
    "free_pages",
    "gc_flow",
    "pg_vacuum",
    "sqlite_storage_bytes",
    "sqlite_vacuum",
    "storage_bytes",
    "vacuum",
]


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


CHUNK_BYTES = 16 << 20  # output text dropped per transaction, and free pages given back per incremental step
CHUNK_PARTS = 1000  # outputs per transaction at most


def gc_flow(before: Any, *, dry_run: bool, dialect: str, vacuum: bool = False) -> Generator[Any, Any, GcResult]:
    """gc as a flow (``brutus.flows``): the database's size and free pages before, the outputs pruned before
    ``before`` dropped in chunks (a checkpoint after each on SQLite), the space handled as the module docstring
    says, and the size and free pages after. With ``vacuum`` on SQLite the search index first takes in what is
    pending (so the sizes compare alike) and is merged before the VACUUM, and every document without a key is
    indexed after it (VACUUM may renumber the rows its marks count)."""
    from ..flows import StorageBytes, Tx, Vacuum
    from .search_ops import index_pending, optimize_index

    _check_before(before)
    sqlite = dialect == "sqlite"
    if dry_run:
        return (yield Tx(drop_pruned_outputs(before, dry_run=True, stored=not sqlite), write=False))
    if sqlite and vacuum:
        yield Tx(index_pending("sqlite"))
    size_before = yield StorageBytes()
    pages_before = (yield Tx(free_pages(), write=False)) if sqlite else None
    dropped = GcResult(before=before, dry_run=False, parts=0, tokens=0, output_bytes=0, bytes_reusable=None if sqlite else 0)
    while True:
        chunk = yield Tx(drop_chunk(before, stored=not sqlite))
        if not chunk.parts:
            break
        dropped = _add(dropped, chunk)
        if sqlite:
            yield StorageBytes()  # a TRUNCATE checkpoint: the WAL holds one chunk at most
    if sqlite and vacuum:
        yield Tx(optimize_index())
        yield Vacuum(full=True)
        yield Tx(index_pending("sqlite", keyless=True))
    elif sqlite and pages_before.incremental:
        yield from _give_back(pages_before.page_size)
    elif not sqlite:
        yield Vacuum(full=vacuum)
    size_after = yield StorageBytes()
    reusable = dropped.bytes_reusable
    free_after = None
    if sqlite:
        pages_after = yield Tx(free_pages(), write=False)
        free_after = pages_after.free * pages_after.page_size
        reusable = max(0, free_after - pages_before.free * pages_before.page_size)
    return dropped.model_copy(
        update={
            "vacuumed": vacuum or not sqlite,
            "bytes_before": size_before,
            "bytes_after": size_after,
            "bytes_reusable": reusable,
            "bytes_free": free_after,
        }
    )


def _give_back(page_size: int) -> Generator[Any, Any, None]:
    """SQLite with ``auto_vacuum = INCREMENTAL``: the free pages back to the system, ``CHUNK_BYTES`` a step,
    a checkpoint after each; until none is left, or writers free pages as fast as they go."""
    from ..flows import StorageBytes, Vacuum

    left, pages = None, max(1, CHUNK_BYTES // page_size)
    while True:
        now = yield Vacuum(full=False, pages=pages)  # the free pages left
        yield StorageBytes()
        if now == 0 or (left is not None and now >= left):
            return
        left = now


def _add(total: GcResult, chunk: GcResult) -> GcResult:
    reusable = None if chunk.bytes_reusable is None else (total.bytes_reusable or 0) + chunk.bytes_reusable
    return total.model_copy(
        update={
            "parts": total.parts + chunk.parts,
            "tokens": total.tokens + chunk.tokens,
            "output_bytes": total.output_bytes + chunk.output_bytes,
            "bytes_reusable": reusable,
        }
    )


def _check_before(before: Any) -> None:
    if isinstance(before, bool) or not isinstance(before, int) or before < 0:
        raise InvalidInput(f"before must be a time in epoch milliseconds, got {before!r}")


def _old(before: int) -> Any:
    return T.c.compacted_at.is_not(None) & (T.c.compacted_at < before)


def _sums(stored: bool) -> list[Any]:
    sums = [
        func.count().label("parts"),
        func.coalesce(func.sum(T.c.output_tokens), 0).label("tokens"),
        func.coalesce(func.sum(func.coalesce(O.c.output_size, _byte_length(O.c.output))), 0).label("bytes"),
    ]
    if stored:
        sums.append(func.coalesce(func.sum(func.pg_column_size(O.c.output)), 0).label("stored"))
    return sums


def drop_pruned_outputs(before: Any, *, dry_run: bool, stored: bool = False) -> Op:
    """Delete (or, with ``dry_run``, only count) the outputs of parts pruned before ``before`` (ms), all in one
    transaction (gc drops them in chunks: ``drop_chunk``). ``stored`` (PostgreSQL only): also sum what the
    outputs take as stored (``pg_column_size``: compressed, in the table or its TOAST table; row and chunk
    headers not counted), what the VACUUM after the delete makes reusable."""
    _check_before(before)
    old = _old(before)
    found = yield step(select(*_sums(stored)).select_from(O.join(T, T.c.part_id == O.c.part_id)).where(old), fetch="first")
    parts = int(found.parts or 0)
    if parts and not dry_run:
        yield step(delete(O).where(O.c.part_id.in_(select(T.c.part_id).where(old))))
    return _result(before, found, dry_run=dry_run, stored=stored)


def drop_chunk(before: Any, *, stored: bool = False) -> Op:
    """Delete the next chunk of outputs pruned before ``before``: the first ones in part order up to about
    ``CHUNK_BYTES`` of text (one at least) and ``CHUNK_PARTS`` parts; what it dropped (0 parts: none left)."""
    _check_before(before)
    # sized by the stored token estimates (ceil(UTF-8 bytes / 4)): choosing reads no output text
    sizes = (
        select(T.c.part_id, (func.coalesce(T.c.output_tokens, 0) * 4).label("bytes"))
        .select_from(T.join(O, O.c.part_id == T.c.part_id))
        .where(_old(before))
        .order_by(T.c.part_id)
        .limit(CHUNK_PARTS)
    )
    rows = yield step(sizes, fetch="all")
    last, total = None, 0
    for row in rows:
        if last is not None and total + int(row.bytes) > CHUNK_BYTES:
            break
        last, total = row.part_id, total + int(row.bytes)
    if last is None:
        return _result(before, None, dry_run=False, stored=stored)
    # the chunk: the old outputs up to ``last`` in part order (a range, the statement the same every time)
    which = _old(before) & (T.c.part_id <= bindparam("b_last"))
    found = yield step(
        select(*_sums(stored)).select_from(O.join(T, T.c.part_id == O.c.part_id)).where(which),
        {"b_last": last},
        fetch="first",
    )
    yield step(delete(O).where(O.c.part_id.in_(select(T.c.part_id).where(which))), {"b_last": last})
    return _result(before, found, dry_run=False, stored=stored)


def _result(before: int, found: Any, *, dry_run: bool, stored: bool) -> GcResult:
    return GcResult(
        before=before,
        dry_run=dry_run,
        parts=int(found.parts or 0) if found else 0,
        tokens=int(found.tokens or 0) if found else 0,
        output_bytes=int(found.bytes or 0) if found else 0,
        bytes_reusable=(int(found.stored or 0) if found else 0) if stored else None,
    )


class FreePages(NamedTuple):
    page_size: int
    free: int  # pages on the free list
    incremental: bool  # auto_vacuum = INCREMENTAL: free pages can be given back without a VACUUM


_PAGE_SIZE = text("PRAGMA page_size").columns(column("page_size", Integer))
_FREELIST = text("PRAGMA freelist_count").columns(column("freelist_count", Integer))
_AUTO_VACUUM = text("PRAGMA auto_vacuum").columns(column("auto_vacuum", Integer))
_INCREMENTAL = 2  # PRAGMA auto_vacuum's INCREMENTAL


def free_pages() -> Op:
    """SQLite: the page size, the pages on the free list (space later writes reuse before the file grows), and
    whether the file vacuums incrementally."""
    page_size = (yield step(_PAGE_SIZE, fetch="first"))[0]
    free = (yield step(_FREELIST, fetch="first"))[0]
    auto = (yield step(_AUTO_VACUUM, fetch="first"))[0]
    return FreePages(int(page_size), int(free), int(auto) == _INCREMENTAL)


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
PG_VACUUM_FULL = "VACUUM (FULL, ANALYZE) tool_outputs"


def pg_vacuum(full: bool) -> str:
    """PostgreSQL's VACUUM of gc: plain (space made reusable), or FULL (the table copied, the space returned)."""
    return PG_VACUUM_FULL if full else PG_VACUUM


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


def sqlite_vacuum(dbapi: Any, pages: int = 0) -> int | None:
    """SQLite, on a sqlite3 connection: VACUUM outside any transaction, then a WAL checkpoint. With ``pages``
    (a file with ``auto_vacuum = INCREMENTAL``): give up to that many free pages back instead, in a transaction
    of its own, and return the free pages left."""
    sqlite_end(dbapi, commit=False)  # a pooled connection is returned rolled back; be sure, VACUUM refuses otherwise
    if pages:
        # executescript steps the pragma to its end: execute() would free one page (one step) and stop
        dbapi.executescript(f"PRAGMA incremental_vacuum({int(pages)})")
        return int(dbapi.execute("PRAGMA freelist_count").fetchone()[0])
    dbapi.execute("VACUUM")
    _checkpoint(dbapi)
    return None


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


def vacuum(engine: Engine, full: bool = True, pages: int = 0) -> int | None:
    """SQLite: VACUUM outside any transaction, or with ``pages`` an incremental step (``sqlite_vacuum``);
    PostgreSQL: VACUUM ANALYZE of ``tool_outputs`` in autocommit (``full``: VACUUM FULL)."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql(pg_vacuum(full))
        return None
    pooled = engine.raw_connection()
    try:
        return sqlite_vacuum(pooled.driver_connection, 0 if full else pages)
    finally:
        pooled.close()
