"""``SessionStore``: the synchronous store, a runner for the calls of ``brutus.calls.StoreCalls``.

Every public method (``create_session`` … ``check``) is declared once in ``StoreCalls`` and returns its work
(``brutus.flows``); this class runs it: ``run(work)`` does one action, or drives a flow through ``_do``.

Rules it keeps:

- Every call is one transaction (``with store.batch():`` makes several calls one); a call that raises has
  written nothing.
- Write transactions take the write lock up front (``BEGIN IMMEDIATE`` on SQLite), so concurrent writers
  queue instead of failing with "database is locked".
- SQLAlchemy and driver errors are translated into ``brutus.errors`` at this boundary
  (``brutus.db.runner.translate_errors``).
- On SQLite, operations run on the sqlite3 connection with compiled-once statements (``db/sqlite_driver.py``),
  one connection kept per thread; elsewhere on a SQLAlchemy connection (``db/runner.drive``).
- With a read replica, lag-tolerant reads may run there, never staler than this store's writes
  (``db/replica.py``).
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from .calls import StoreCalls
from .compaction.locks import compaction_lock, held_sessions
from .db import gc_ops
from .db.checkpoint import Checkpointer
from .db.engine import AUTOCOMMIT, WRITE, default_url, describe, is_brutus_engine, make_engine, redact
from .db.indexer import BATCH, Indexer
from .db.migrate import prepare_schema
from .db.replica import (MAX_LAG_S, READ, Replica, caught_up, check_max_lag, engine_settings, failure,
                         primary_position)
from .db.runner import Clock, drive, now_ms, translate, translate_errors
from .db.search_ops import index_pending
from .db.sqlite_driver import SQLiteDriver, sqlite_begin, sqlite_end, sqlite_transaction
from .db.statements import Op
from .db.tenants import check_tenant, prepare_tenant, set_tenant, tenant_url
from .errors import InvalidInput
from .flows import HeldLocks, InBatch, Locked, StorageBytes, Summarize, Tx, Unindexed, Vacuum, drive_flow
from .live.conversation import Conversation

__all__ = ["SessionStore"]


class SessionStore(StoreCalls, mode="sync"):
    """The persistent, compaction-aware session store (sync). Build it with ``SessionStore.open(url)``."""

    conversation_type = Conversation

    def __init__(
        self,
        engine: Engine,
        *,
        url: str | None = None,
        clock: Clock = now_ms,
        read_only: bool = False,
        index_in_background: bool = True,
        read_engine: Engine | None = None,
        read_max_lag: float | None = MAX_LAG_S,
    ) -> None:
        if not is_brutus_engine(engine):
            raise InvalidInput(
                "SessionStore needs an engine with brutus's connection settings (JSON codec, SQLite pragmas such as "
                "foreign_keys): build it with brutus.make_engine(url, **engine_options), or use SessionStore.open(url)"
            )
        lag = check_max_lag(read_max_lag)  # before any thread starts
        self.engine = engine
        self.dialect = engine.dialect.name
        self.read_only = read_only
        self.url = url or engine.url.render_as_string(hide_password=True)
        self.clock = clock
        self._batch: ContextVar[Any] = ContextVar(f"brutus_batch_{id(self)}", default=None)
        # SQLite: operations run on the sqlite3 connection with compiled-once statements (see db/sqlite_driver.py).
        self._fast = SQLiteDriver(engine.dialect) if engine.dialect.name == "sqlite" else None
        # SQLite: WAL checkpoints in a thread of their own, after commits (see db/checkpoint.py)
        self._checkpointer = Checkpointer(engine.url.database or "") if self._fast is not None else None
        if self._checkpointer is not None:  # a store dropped without close() stops its thread too
            weakref.finalize(self, self._checkpointer.close, 0.0)
        # the search index filled in a thread a moment after commits (see db/indexer.py)
        background = index_in_background and not read_only
        self._indexer = Indexer(self._index_batch, name=self.url) if background else None
        if self._indexer is not None:
            weakref.finalize(self, self._indexer.close, 0.0)
        self._local = threading.local()  # SQLite: one driver connection kept per thread (no pool round trip)
        self._held: list[Any] = []
        self._held_lock = threading.Lock()
        self._replica = Replica(read_engine, threading.Lock(), max_lag=lag) if read_engine is not None else None
        # PostgreSQL: a Tx(autocommit=True) runs without BEGIN and COMMIT (not on a tenant's store: its BEGIN
        # sets the tenant; nor a read-only one: its BEGIN says READ ONLY)
        self._autocommits = self.dialect == "postgresql" and not read_only

    @classmethod
    def open(
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
    ) -> SessionStore:
        """Open the store at ``url`` (default ``$BRUTUS_DATABASE_URL``, else a SQLite file in the user data
        dir). With ``auto_migrate`` the schema is upgraded in place; without, a database behind head raises
        ``SchemaOutOfDate`` naming the command to run.

        ``create``: a new SQLite file may be made, in a directory that exists (the default location's is made
        for it), and an empty database gets brutus's schema; ``create=False`` raises ``NoDatabase`` instead.
        ``read_only``: open an existing database without creating, migrating or writing anything (implies
        ``create=False``; the schema must be at head). ``index_in_background``: a thread puts what is written
        into the search index a moment after commits (``brutus.db.indexer``); without, the next search or
        ``settle`` does. ``read_url``: a PostgreSQL streaming replica of ``url`` for the reads that tolerate
        lag (listing, search, stats, export), never staler than this store's own writes; a replica more than
        ``read_max_lag`` seconds behind (None: no bound) serves nothing (``brutus.db.replica``); ``InvalidInput``
        on SQLite. ``tenant``: every call sees and writes that tenant's sessions only
        (PostgreSQL's row-level security, SQLite a file of the tenant's own: ``brutus.db.tenants``)."""
        tenant, read_max_lag = check_tenant(tenant), check_max_lag(read_max_lag)
        url = tenant_url(url or default_url(), tenant)
        create = create and not read_only
        replica = engine_settings(url, read_url) if read_url is not None else None
        engine = make_engine(url, create=create, read_only=read_only)
        try:
            with translate_errors():
                migrated = prepare_schema(engine, describe(url), migrate=auto_migrate and not read_only, create=create)
                if tenant is not None and engine.dialect.name == "postgresql":
                    prepare_tenant(engine, tenant, read_only=read_only)
                    set_tenant(engine, tenant)
        except BaseException:
            engine.dispose()
            raise
        read_engine = make_engine(read_url, **replica) if replica is not None else None
        if read_engine is not None and tenant is not None:
            set_tenant(read_engine, tenant)  # the replica's reads are the tenant's too
        settings = dict(clock=clock, read_only=read_only, index_in_background=index_in_background,
                        read_max_lag=read_max_lag)
        return cls._opened(engine, redact(url), read_engine, tenant, migrated, **settings)

    def close(self) -> None:
        """Release the store's connections (the store opens new ones if it is used again)."""
        self._local = threading.local()
        with self._held_lock:
            held, self._held = self._held, []
        for pooled in held:
            try:
                pooled.close()
            except Exception:  # noqa: BLE001  closing what another thread held: best effort
                pass
        if self._indexer is not None:
            self._indexer.close()
        if self._checkpointer is not None:
            self._checkpointer.close()
        if self._replica is not None:
            self._replica.engine.dispose()
        self.engine.dispose()

    def _driver_connection(self) -> Any:
        pooled = getattr(self._local, "pooled", None)
        if pooled is None:
            pooled = self.engine.raw_connection()
            self._local.pooled = pooled
            with self._held_lock:
                self._held.append(pooled)
        return pooled.driver_connection

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running operations ---------------------------------------------------------------------------------

    @contextmanager
    def _connection(self, write: bool) -> Iterator[Any]:
        """A connection inside a transaction: the batch's, else a new one committed on success.

        On SQLite it is the sqlite3 connection itself (BEGIN IMMEDIATE for writes), else a SQLAlchemy one.
        """
        active = self._batch.get()
        if active is not None:
            yield active
            return
        with translate_errors():
            if self._fast is not None:
                dbapi = self._driver_connection()
                sqlite_begin(dbapi, write)
                try:
                    yield dbapi
                except BaseException:
                    sqlite_end(dbapi, False)
                    raise
                sqlite_end(dbapi, True)
                if write:
                    self._committed()
                return
            options = WRITE if write else {}
            with self.engine.connect().execution_options(**options) as connection:
                with connection.begin():
                    yield connection
            if write:
                self._committed()

    def _committed(self) -> None:
        """A write committed: the threads that work after commits (SQLite's checkpoints, the search index), and
        the replica's reads, which must now see it."""
        if self._checkpointer is not None:
            self._checkpointer.committed()
        if self._indexer is not None:
            self._indexer.committed()
        if self._replica is not None:
            self._replica.wrote()

    def _index_batch(self) -> bool:
        """One small transaction of the background indexer: whether anything was pending."""
        return self._run(index_pending(self.dialect, batch=BATCH))

    def run(self, work: Any) -> Any:
        """Run ``work`` (an action or a flow, ``brutus.flows``) on this store; what it returns. Every public
        method is this over the work ``StoreCalls`` declares; an integration runs its own operations so."""
        if type(work) is Tx:  # most calls: one operation
            if work.replica and self._replica is not None:
                return self._read(self._replica, work.op)
            if work.autocommit and self._autocommits and self._batch.get() is None:
                with translate_errors(), self.engine.connect().execution_options(**AUTOCOMMIT) as connection:
                    value = self._drive(connection, work.op)
                if work.write:
                    self._committed()
                return value
            return self._run(work.op, write=work.write)
        if inspect.isgenerator(work):
            return drive_flow(work, self._do)
        return self._do(work)

    def _do(self, action: Any) -> Any:
        """One action of a flow (``brutus.flows``)."""
        if type(action) is Tx:
            return self.run(action)
        if isinstance(action, Summarize):
            from .summarizers.fallbacks import summarize_with_fallbacks

            return summarize_with_fallbacks(action.summarizer, action.request)
        if isinstance(action, Locked):
            with translate_errors(), compaction_lock(self.engine, action.session_id):
                return self.run(action.work)
        if isinstance(action, InBatch):
            return self._batch.get() is not None
        if isinstance(action, Unindexed):
            with self._indexer.paused() if self._indexer is not None else nullcontext():
                return self.run(action.work)
        with translate_errors():
            if isinstance(action, HeldLocks):
                return held_sessions(self.engine, action.session_ids)
            if isinstance(action, Vacuum):
                return gc_ops.vacuum(self.engine, action.full, action.pages)
            if isinstance(action, StorageBytes):
                return gc_ops.storage_bytes(self.engine)
        raise InvalidInput(f"not an action of brutus.flows: {action!r}")

    def _run(self, op: Op, *, write: bool = True) -> Any:
        if self._fast is None:
            with self._connection(write) as connection, translate_errors():
                return self._drive(connection, op)
        # SQLite: the same as above without the context managers (this runs some ten times per agent step).
        try:
            active = self._batch.get()
            if active is not None:
                return self._drive(active, op)
            dbapi = self._driver_connection()
            return sqlite_transaction(dbapi, write, self._committed, self._drive, dbapi, op)
        except Exception as exc:
            translated = translate(exc)
            if translated is exc:
                raise
            raise translated from exc

    def _read(self, replica: Replica, op: Op) -> Any:
        """A lag-tolerant read: on the replica when it may serve it (``brutus.db.replica``), else on the primary."""
        connection = self._replica_transaction(replica)
        if connection is None:
            return self._run(op, write=False)
        with connection, translate_errors():
            try:
                return drive(connection, op)
            except (OperationalError, InterfaceError) as exc:  # cut, or cancelled by replay: not the read's fault
                raise failure(replica, exc) from exc

    def _replica_transaction(self, replica: Replica) -> Connection | None:
        """A REPEATABLE READ transaction on the replica that has replayed this store's writes; None when the
        read must go to the primary (inside a batch, the replica resting, behind, or failing now)."""
        if self._batch.get() is not None or not replica.usable():
            return None
        if replica.asking():
            with replica.lock:  # a thread that waited here finds the position read, unless it wrote since
                if replica.take_stale():
                    try:
                        replica.seen(self._run(primary_position(), write=False))
                    except BaseException:
                        replica.wrote()  # still to be asked
                        raise
        connection, ready = None, False
        try:
            connection = replica.engine.connect().execution_options(**AUTOCOMMIT)
            check = caught_up(replica.needed, replica.max_lag)
            ready = drive(connection, check)  # before the read's snapshot (``replica``)
            if ready:
                if connection.in_transaction():  # Core began one (a listener sent the check through it): none there
                    connection.commit()
                connection.execution_options(**READ)
                connection.begin()
        except DBAPIError:
            replica.failed()
        finally:
            if connection is not None and not ready:
                connection.close()
        return connection if ready else None

    def _drive(self, connection: Any, op: Op) -> Any:
        """Run ``op``'s steps on ``connection``; its return value."""
        if self._fast is None:
            return drive(connection, op)
        return self._fast.run(connection, op)

    @contextmanager
    def batch(self) -> Iterator[SessionStore]:
        """A unit of work: the calls inside commit once when the block ends, or not at all if it raises."""
        if self._batch.get() is not None:
            yield self
            return
        with self._connection(write=True) as connection:
            token = self._batch.set(connection)
            try:
                yield self
            finally:
                self._batch.reset(token)
