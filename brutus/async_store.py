"""``AsyncSessionStore``: the session store for asyncio agents, a runner for ``brutus.calls.StoreCalls``.

Rules it keeps (the sync store's, see ``brutus.store``):

- Every public method is ``SessionStore``'s, declared once in ``StoreCalls``, as an ``async def`` that awaits
  ``run(work)``: the very work the sync store runs, each action done here (``_do``) without blocking the
  loop. Each call is one transaction, ``async with store.batch():`` makes several calls one.
- Nothing blocks the event loop: on SQLite a call runs on a sqlite3 connection in a thread of brutus's own
  (all of its statements at once, with the sync store's compiled statements, and a call of its own with its
  BEGIN and COMMIT; connections kept between calls: ``brutus.db.async_sqlite``); on PostgreSQL a call with a
  transaction of its own likewise runs whole on a thread of a pool, with psycopg's sync connection
  (``brutus.db.async_pg``: half the CPU of its async one), and a batch or the compaction lock on psycopg's
  async connection; ``open`` migrates the schema in a worker thread.
- Write transactions take the write lock up front (``BEGIN IMMEDIATE`` on SQLite), as in the sync store; a
  batch on SQLite takes it in its first call's trip, before that call's first statement.
- SQLAlchemy and driver errors are translated into ``brutus.errors`` (``brutus.db.runner.translate_errors``).
- A batch belongs to the task that opened it and to the tasks started inside it: their calls take turns on
  the batch's one connection, and the batch commits once all of them are done.
- With a read replica, lag-tolerant reads may run there, never staler than this store's writes
  (``brutus.db.replica``), as in the sync store.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .extras import require

# the async store runs on greenlet (SQLAlchemy's asyncio extension) and aiosqlite: say what to install
require("the async store", {"greenlet": "async", "aiosqlite": "async"})

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine  # noqa: E402

from .calls import StoreCalls  # noqa: E402
from .compaction.locks import async_compaction_lock, async_held_sessions  # noqa: E402
from .db import gc_ops  # noqa: E402
from .db.async_engine import make_async_engine, sync_url, twin_engine  # noqa: E402
from .db.async_pg import PGThreads  # noqa: E402
from .db.async_sqlite import SQLiteConnections, SQLiteThread  # noqa: E402
from .db.checkpoint import Checkpointer  # noqa: E402
from .db.engine import AUTOCOMMIT, WRITE, default_url, describe, is_brutus_engine, make_engine, redact  # noqa: E402
from .db.indexer import BATCH, AsyncIndexer  # noqa: E402
from .db.migrate import prepare_schema  # noqa: E402
from .db.replica import (MAX_LAG_S, READ, Replica, caught_up, check_max_lag, engine_settings, failure,  # noqa: E402
                         primary_position)
from .db.runner import Clock, drive, now_ms, translate_errors  # noqa: E402
from .db.search_ops import index_pending  # noqa: E402
from .db.sqlite_driver import SQLiteDriver, sqlite_begin, sqlite_end, sqlite_transaction  # noqa: E402
from .db.statements import Op  # noqa: E402
from .db.tenants import check_tenant, prepare_tenant, set_tenant, tenant_url  # noqa: E402
from .errors import InvalidInput  # noqa: E402
from .flows import HeldLocks, InBatch, Locked, StorageBytes, Summarize, Tx, Unindexed, Vacuum, adrive_flow  # noqa: E402
from .live.conversation import AsyncConversation  # noqa: E402

__all__ = ["AsyncSessionStore"]


@dataclass(eq=False)
class _Batch:
    """An open ``batch()``: its SQLite connection's thread or SQLAlchemy connection, and the lock its calls
    take turns with."""

    connection: AsyncConnection | None = None
    worker: SQLiteThread | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    open: bool = True
    begun: bool = False  # SQLite: a call was sent, so its trip began the transaction


def _prepare_schema(url: str, auto_migrate: bool, create: bool, read_only: bool, tenant: str | None) -> bool:
    """Upgrade (or check) the schema with the sync migration code, on a sync engine used only for that (and
    ready a PostgreSQL tenant, ``brutus.db.tenants.prepare_tenant``); whether it migrated."""
    engine = make_engine(sync_url(url), create=create, read_only=read_only)
    try:
        migrated = prepare_schema(engine, describe(url), migrate=auto_migrate and not read_only, create=create)
        if tenant is not None and engine.dialect.name == "postgresql":
            prepare_tenant(engine, tenant, read_only=read_only)
        return migrated
    finally:
        engine.dispose()


class AsyncSessionStore(StoreCalls, mode="async"):
    """The persistent, compaction-aware session store (asyncio). Build it with
    ``await AsyncSessionStore.open(url)``; every method of ``SessionStore`` is here, awaitable."""

    conversation_type = AsyncConversation

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        url: str | None = None,
        clock: Clock = now_ms,
        read_only: bool = False,
        index_in_background: bool = True,
        read_engine: AsyncEngine | None = None,
        read_max_lag: float | None = MAX_LAG_S,
    ) -> None:
        if not is_brutus_engine(engine.sync_engine):
            raise InvalidInput(
                "AsyncSessionStore needs an engine with brutus's connection settings: build it with "
                "brutus.db.async_engine.make_async_engine(url, **engine_options), or use AsyncSessionStore.open(url)"
            )
        lag = check_max_lag(read_max_lag)  # before any thread starts
        self.engine = engine
        self.dialect = engine.dialect.name
        self.read_only = read_only
        self.url = url or engine.url.render_as_string(hide_password=True)
        self.clock = clock
        self._batch: ContextVar[_Batch | None] = ContextVar(f"brutus_async_batch_{id(self)}", default=None)
        # SQLite: operations run on sqlite3 connections of the sync engine built beside ``engine``, each in a
        # thread of its own (see ``_drive_sqlite``)
        sqlite = twin_engine(engine) if engine.dialect.name == "sqlite" else None
        self._fast = SQLiteDriver(sqlite.dialect) if sqlite is not None else None
        # SQLite: WAL checkpoints in a thread of their own, after commits (see db/checkpoint.py)
        self._checkpointer = Checkpointer(engine.url.database or "") if self._fast is not None else None
        if self._checkpointer is not None:  # a store dropped without close() stops its thread too
            weakref.finalize(self, self._checkpointer.close, 0.0)
        # SQLite: those connections, kept between calls (see db/async_sqlite.py)
        self._workers = SQLiteConnections(sqlite) if sqlite is not None else None
        # PostgreSQL: a call with a transaction of its own runs on a thread, on the sync twin's connections
        # (see db/async_pg.py)
        self._threads = PGThreads(twin_engine(engine)) if sqlite is None else None
        # the search index filled by a task a moment after commits (see db/indexer.py)
        self._indexer = AsyncIndexer(self._index_batch) if index_in_background and not read_only else None
        self._replica = Replica(read_engine, asyncio.Lock(), max_lag=lag) if read_engine is not None else None
        # PostgreSQL: a read Tx(autocommit=True) runs without BEGIN and COMMIT (``SessionStore``'s rules; not a
        # write: a cancelled call's write must not commit on its thread)
        self._autocommits = self.dialect == "postgresql" and not read_only

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        auto_migrate: bool = True,
        create: bool = True,
        read_only: bool = False,
        clock: Clock = now_ms,
        index_in_background: bool = True,
        read_url: str | None = None,
        read_max_lag: float | None = MAX_LAG_S,
        tenant: str | None = None,
    ) -> AsyncSessionStore:
        """Open the store at ``url`` (default ``$BRUTUS_DATABASE_URL``, else a SQLite file in the user data
        dir), the same URLs and options ``SessionStore.open`` takes (``read_url``, ``read_max_lag``: a read
        replica; ``tenant``)."""
        tenant, read_max_lag = check_tenant(tenant), check_max_lag(read_max_lag)
        url = tenant_url(url or default_url(), tenant)
        create = create and not read_only
        replica = engine_settings(url, read_url) if read_url is not None else None
        engine = make_async_engine(url, create=create, read_only=read_only)
        try:
            with translate_errors():
                migrated = await asyncio.to_thread(_prepare_schema, url, auto_migrate, create, read_only, tenant)
        except BaseException:
            await engine.dispose()
            raise
        read_engine = make_async_engine(read_url, **replica) if replica is not None else None
        if tenant is not None and engine.dialect.name == "postgresql":
            set_tenant(engine.sync_engine, tenant)
            set_tenant(twin_engine(engine), tenant)
            if read_engine is not None:
                set_tenant(read_engine.sync_engine, tenant)  # the replica's reads are the tenant's too
        settings = dict(clock=clock, read_only=read_only, index_in_background=index_in_background,
                        read_max_lag=read_max_lag)
        return cls._opened(engine, redact(url), read_engine, tenant, migrated, **settings)

    async def close(self) -> None:
        if self._indexer is not None:
            await self._indexer.close()
        if self._workers is not None:
            await self._workers.close()
        if self._threads is not None:
            await self._threads.close()
        if self._replica is not None:
            await self._replica.engine.dispose()
        await self.engine.dispose()
        if self._checkpointer is not None:
            await asyncio.to_thread(self._checkpointer.close)  # may wait for a checkpoint under way

    aclose = close

    async def __aenter__(self) -> AsyncSessionStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- running operations ---------------------------------------------------------------------------------

    @asynccontextmanager
    async def _pg_transaction(self, write: bool) -> AsyncIterator[AsyncConnection]:
        """PostgreSQL: a SQLAlchemy connection inside a transaction of its own, committed on success."""
        with translate_errors():
            async with self.engine.connect() as connection:
                if write:
                    await connection.execution_options(**WRITE)
                async with connection.begin():
                    yield connection

    async def _run(self, op: Op, *, write: bool = True, autocommit: bool = False) -> Any:
        batch = self._batch.get()
        if batch is not None and batch.open:
            async with batch.lock:
                if batch.worker is not None:  # the whole operation in one trip to the connection's thread
                    batch.begun = True  # before the trip: the thread begins even if this call is cancelled
                    with translate_errors():
                        return await batch.worker.call(self._drive_in_batch, op)
                return await self._drive_async(batch.connection, op)
        if self._threads is not None:  # PostgreSQL: the whole transaction in one trip to a thread
            with translate_errors():
                value = await self._threads.run(op, write, autocommit and not write and self._autocommits)
            if write:
                self._pg_committed()
            return value
        # SQLite, a call with its own transaction: BEGIN, the operation and COMMIT in one trip to the thread
        worker = self._workers.take()
        cancelled = threading.Event()
        try:
            with translate_errors():
                value = await worker.call(self._transaction_sqlite, op, write, cancelled)
            if write and self._indexer is not None:
                self._indexer.committed()
            return value
        except asyncio.CancelledError:
            cancelled.set()  # the thread rolls back what it has not committed yet
            raise
        finally:
            await self._workers.give_back(worker)

    def _pg_committed(self) -> None:
        """PostgreSQL: a write committed: the search index has work, and the replica's reads must see it."""
        if self._indexer is not None:
            self._indexer.committed()
        if self._replica is not None:
            self._replica.wrote()

    async def _read(self, replica: Replica, op: Op) -> Any:
        """A lag-tolerant read: on the replica when it may serve it (``brutus.db.replica``), else on the primary."""
        connection = await self._replica_transaction(replica)
        if connection is None:
            return await self._run(op, write=False)
        try:
            with translate_errors():
                try:
                    return await connection.run_sync(drive, op)
                except (OperationalError, InterfaceError) as exc:  # cut, or cancelled by replay: not the read's fault
                    raise failure(replica, exc) from exc
        finally:
            await connection.close()

    async def _replica_transaction(self, replica: Replica) -> AsyncConnection | None:
        """A REPEATABLE READ transaction on the replica that has replayed this store's writes; None when the
        read must go to the primary (inside a batch, the replica resting, behind, or failing now)."""
        batch = self._batch.get()
        if (batch is not None and batch.open) or not replica.usable():
            return None
        if replica.asking():
            async with replica.lock:  # a task that waited here finds the position read, unless it wrote since
                if replica.take_stale():
                    try:
                        replica.seen(await self._run(primary_position(), write=False))
                    except BaseException:
                        replica.wrote()  # still to be asked
                        raise
        connection, ready = None, False
        try:
            connection = await replica.engine.connect()
            await connection.execution_options(**AUTOCOMMIT)
            check = caught_up(replica.needed, replica.max_lag)
            ready = await connection.run_sync(drive, check)  # before the read's snapshot
            if ready:
                if connection.in_transaction():  # Core's, begun by the check in autocommit: nothing on the server
                    await connection.commit()
                await connection.execution_options(**READ)
                await connection.begin()
        except DBAPIError:
            replica.failed()
        finally:
            if connection is not None and not ready:
                await connection.close()
        return connection if ready else None

    async def _index_batch(self) -> bool:
        """One small transaction of the background indexer: whether anything was pending."""
        return await self._run(index_pending(self.dialect, batch=BATCH))

    async def run(self, work: Any) -> Any:
        """Run ``work`` (an action or a flow, ``brutus.flows``) on this store, as ``SessionStore.run`` does."""
        return await self._perform(work)

    def _perform(self, work: Any) -> Awaitable[Any]:
        """``run``'s awaitable, which the bound methods await directly (no coroutine of ``run``'s own per call)."""
        if type(work) is Tx:  # most calls: one operation
            if work.replica and self._replica is not None:
                return self._read(self._replica, work.op)
            return self._run(work.op, write=work.write, autocommit=work.autocommit)
        if inspect.isgenerator(work):
            return adrive_flow(work, self._do)
        return self._do(work)

    async def _do(self, action: Any) -> Any:
        """One action of a flow (``brutus.flows``), as ``SessionStore._do`` does it. gc's storage steps run on a
        connection outside any transaction: a SQLite connection's thread, or a PostgreSQL one in autocommit."""
        if type(action) is Tx:
            return await self._perform(action)
        if isinstance(action, Summarize):
            from .summarizers.fallbacks import asummarize_with_fallbacks

            return await asummarize_with_fallbacks(action.summarizer, action.request)
        if isinstance(action, Locked):
            with translate_errors():
                async with async_compaction_lock(self.engine, action.session_id):
                    return await self.run(action.work)
        if isinstance(action, InBatch):
            return self._batch.get() is not None
        if isinstance(action, Unindexed):
            async with self._indexer.paused() if self._indexer is not None else nullcontext():
                return await self.run(action.work)
        if not isinstance(action, (HeldLocks, Vacuum, StorageBytes)):
            raise InvalidInput(f"not an action of brutus.flows: {action!r}")
        with translate_errors():
            if isinstance(action, HeldLocks):
                return await async_held_sessions(self.engine, action.session_ids)
            if self._workers is not None:
                worker = self._workers.take()
                try:
                    if isinstance(action, Vacuum):
                        return await worker.call(gc_ops.sqlite_vacuum, 0 if action.full else action.pages)
                    return await worker.call(gc_ops.sqlite_storage_bytes, self.engine.url.database)
                finally:
                    await self._workers.give_back(worker)
            async with self.engine.connect() as connection:
                if isinstance(action, Vacuum):
                    await connection.execution_options(isolation_level="AUTOCOMMIT")
                    await connection.exec_driver_sql(gc_ops.pg_vacuum(action.full))
                    return None
                return (await connection.exec_driver_sql(gc_ops.PG_STORAGE_BYTES)).scalar_one()

    async def _drive_async(self, connection: Any, op: Op) -> Any:
        """Run ``op`` statement by statement on a SQLAlchemy ``AsyncConnection``: the sync store's loop in one
        greenlet (``run_sync``), not a greenlet per statement."""
        with translate_errors():
            return await connection.run_sync(drive, op)

    def _transaction_sqlite(self, conn: Any, op: Op, write: bool, cancelled: threading.Event) -> Any:
        """``op`` in a transaction of its own on the sqlite3 connection ``conn``, in its thread (as the sync
        store runs a call): committed, or rolled back if it raises or its caller was cancelled."""
        committed = self._checkpointer.committed  # type: ignore[union-attr]
        return sqlite_transaction(conn, write, committed, self._drive_sqlite, conn, op, cancelled=cancelled)

    def _drive_in_batch(self, conn: Any, op: Op) -> Any:
        """``op`` inside a batch, in the connection's thread: the batch's first call begins its transaction
        (``BEGIN IMMEDIATE``, the write lock before any statement), in the same trip."""
        if not conn.in_transaction:
            sqlite_begin(conn, write=True)
        return self._drive_sqlite(conn, op)

    def _drive_sqlite(self, conn: Any, op: Op) -> Any:
        """Run ``op`` on the sqlite3 connection ``conn``, in its thread, as the sync store does (compiled-once
        statements, ``brutus.db.sqlite_driver``): one thread hop per call instead of several per statement.
        The transaction is the caller's: ``_transaction_sqlite``'s for a call of its own, the batch's inside a
        batch."""
        return self._fast.run(conn, op)  # type: ignore[union-attr]

    @asynccontextmanager
    async def batch(self) -> AsyncIterator[AsyncSessionStore]:
        """A unit of work: the calls inside commit once when the block ends, or not at all if it raises."""
        current = self._batch.get()
        if current is not None and current.open:
            yield self
            return
        if self._workers is None:
            async with self._pg_transaction(write=True) as connection, self._batch_open(_Batch(connection)):
                yield self
            self._pg_committed()
            return
        # SQLite: each call inside is a trip to the connection's thread, the first with the BEGIN IMMEDIATE, and
        # the COMMIT one more (a batch without calls costs none)
        worker = self._workers.take()
        batch, committed = _Batch(worker=worker), False
        try:
            with translate_errors():
                async with self._batch_open(batch):
                    yield self
                if batch.begun:
                    await worker.call(sqlite_end, True)
            committed = True
        finally:
            try:
                if batch.begun and not committed:  # also after a cancelled call, which the thread completes
                    with translate_errors():
                        await worker.call(sqlite_end, False)
            finally:
                await self._workers.give_back(worker)
        if batch.begun:
            self._checkpointer.committed()  # type: ignore[union-attr]
            if self._indexer is not None:
                self._indexer.committed()

    @asynccontextmanager
    async def _batch_open(self, batch: _Batch) -> AsyncIterator[None]:
        """``batch`` is the current batch inside the block; at its end, calls still running in tasks started
        inside it finish first."""
        token = self._batch.set(batch)
        try:
            yield
        finally:
            async with batch.lock:
                batch.open = False
            self._batch.reset(token)
