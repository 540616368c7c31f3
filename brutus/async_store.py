"""``AsyncSessionStore``: the session store for asyncio agents.

Rules it keeps (the sync store's, see ``brutus.store``):

- It runs the operations of ``brutus.db.ops``, the very generators ``SessionStore`` runs, on an
  ``AsyncConnection``: each call is one transaction, ``async with store.batch():`` makes several calls one.
  Each method only builds its operation and awaits ``_run``; a new operation is one such method.
- Nothing blocks the event loop: on SQLite a call runs on a sqlite3 connection in a thread of brutus's own
  (all of its statements at once, with the sync store's compiled statements, and a call of its own with its
  BEGIN and COMMIT; connections kept between calls: ``brutus.db.async_sqlite``), on PostgreSQL on psycopg's
  async connection; ``open`` migrates the schema in a worker thread.
- Write transactions take the write lock up front (``BEGIN IMMEDIATE`` on SQLite), as in the sync store; a
  batch on SQLite takes it in its first call's trip, before that call's first statement.
- SQLAlchemy and driver errors are translated into ``brutus.errors`` by the sync store's ``translate_errors``.
- A batch belongs to the task that opened it and to the tasks started inside it: their calls take turns on
  the batch's one connection, and the batch commits once all of them are done.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, nullcontext
from contextvars import ContextVar
from functools import partial
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .extras import require

# the async store runs on greenlet (SQLAlchemy's asyncio extension) and aiosqlite: say what to install
require("the async store", {"greenlet": "async", "aiosqlite": "async"})

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine  # noqa: E402

from .db import bulk_ops, edit_ops, history_ops, ops
from .db.async_engine import make_async_engine, sqlite_engine, sync_url
from .db.async_sqlite import SQLiteConnections, SQLiteThread
from .db.checkpoint import Checkpointer
from .db.indexer import BATCH, AsyncIndexer
from .db.search_ops import index_pending
from .db.compaction_ops import list_compactions
from .db.settle_ops import BULK_MESSAGES
from .db.engine import WRITE, default_url, describe, is_brutus_engine, make_engine, redact
from .db.migrate import prepare_schema
from .db.sqlite_driver import SQLiteDriver, sqlite_begin, sqlite_end, sqlite_transaction
from .db.statements import Op
from .errors import InvalidInput
from .flows import HeldLocks, Locked, Summarize, Tx, Vacuum, adrive_flow
from .models import (
    CompactionConfig,
    CompactionRecord,
    CompactionResult,
    CompactionTrigger,
    Message,
    MessageWithParts,
    Part,
    PruneResult,
    Session,
    TextPart,
    TokenCounts,
    ToolPart,
)
from .reports import CheckReport, GcResult, SessionStats
from .search import SearchHit
from .store import Clock, _now_ms, drive, translate_errors

if TYPE_CHECKING:
    from .compaction.hooks import Hooks
    from .summarizers.base import AsyncSummarizer, Summarizer
    from .tiers import TierConfig, TierRunReport

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


def _prepare_schema(url: str, auto_migrate: bool, create: bool, read_only: bool) -> None:
    """Upgrade (or check) the schema with the sync migration code, on a sync engine used only for that."""
    engine = make_engine(sync_url(url), create=create, read_only=read_only)
    try:
        prepare_schema(engine, describe(url), migrate=auto_migrate and not read_only, create=create)
    finally:
        engine.dispose()


class AsyncSessionStore:
    """The persistent, compaction-aware session store (asyncio). Build it with
    ``await AsyncSessionStore.open(url)``; every method of ``SessionStore`` is here, awaitable."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        url: str | None = None,
        clock: Clock = _now_ms,
        read_only: bool = False,
        index_in_background: bool = True,
    ) -> None:
        if not is_brutus_engine(engine.sync_engine):
            raise InvalidInput(
                "AsyncSessionStore needs an engine with brutus's connection settings: build it with "
                "brutus.db.async_engine.make_async_engine(url, **engine_options), or use AsyncSessionStore.open(url)"
            )
        self.engine = engine
        self.read_only = read_only
        self.url = url or engine.url.render_as_string(hide_password=True)
        self.clock = clock
        self._batch: ContextVar[_Batch | None] = ContextVar(f"brutus_async_batch_{id(self)}", default=None)
        # SQLite: operations run on sqlite3 connections of the sync engine built beside ``engine``, each in a
        # thread of its own (see ``_drive_sqlite``)
        sqlite = sqlite_engine(engine) if engine.dialect.name == "sqlite" else None
        self._fast = SQLiteDriver(sqlite.dialect) if sqlite is not None else None
        # SQLite: WAL checkpoints in a thread of their own, after commits (see db/checkpoint.py)
        self._checkpointer = Checkpointer(engine.url.database or "") if self._fast is not None else None
        if self._checkpointer is not None:  # a store dropped without close() stops its thread too
            weakref.finalize(self, self._checkpointer.close, 0.0)
        # SQLite: those connections, kept between calls (see db/async_sqlite.py)
        self._workers = SQLiteConnections(sqlite) if sqlite is not None else None
        # the search index filled by a task a moment after commits (see db/indexer.py)
        self._indexer = AsyncIndexer(self._index_batch) if index_in_background and not read_only else None

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        auto_migrate: bool = True,
        create: bool = True,
        read_only: bool = False,
        clock: Clock = _now_ms,
        index_in_background: bool = True,
    ) -> AsyncSessionStore:
        """Open the store at ``url`` (default ``$BRUTUS_DATABASE_URL``, else a SQLite file in the user data
        dir), the same URLs and options ``SessionStore.open`` takes."""
        url = url or default_url()
        create = create and not read_only
        engine = make_async_engine(url, create=create, read_only=read_only)
        try:
            with translate_errors():
                await asyncio.to_thread(_prepare_schema, url, auto_migrate, create, read_only)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine, url=redact(url), clock=clock, read_only=read_only, index_in_background=index_in_background)

    async def close(self) -> None:
        if self._indexer is not None:
            await self._indexer.close()
        if self._workers is not None:
            await self._workers.close()
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

    async def _run(self, op: Op, *, write: bool = True) -> Any:
        batch = self._batch.get()
        if batch is not None and batch.open:
            async with batch.lock:
                if batch.worker is not None:  # the whole operation in one trip to the connection's thread
                    batch.begun = True  # before the trip: the thread begins even if this call is cancelled
                    with translate_errors():
                        return await batch.worker.call(self._drive_in_batch, op)
                return await self._drive_async(batch.connection, op)
        if self._workers is None:
            async with self._pg_transaction(write) as connection:
                value = await self._drive_async(connection, op)
            if write and self._indexer is not None:
                self._indexer.committed()
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

    async def _index_batch(self) -> bool:
        """One small transaction of the background indexer: whether anything was pending."""
        return await self._run(index_pending(self.engine.dialect.name, batch=BATCH))

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
            if self._indexer is not None:
                self._indexer.committed()
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

    # -- sessions ---------------------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        title: str | None = None,
        directory: str | None = None,
        parent_id: str | None = None,
        id: str | None = None,
    ) -> Session:
        return await self._run(
            ops.create_session(now=self.clock(), title=title, directory=directory, parent_id=parent_id, id=id)
        )

    async def get_session(self, session_id: str) -> Session:
        return await self._run(ops.get_session(session_id), write=False)

    async def list_sessions(
        self,
        *,
        parent_id: str | None = None,
        limit: int | None = None,
        include_archived: bool = True,
        after: str | Session | None = None,
    ) -> list[Session]:
        """Sessions, most recently updated first (ties by id, descending). ``limit`` and ``after`` page it by
        keyset: ``after`` is the previous page's last session, as a ``Session`` (its position as read: the
        stable choice) or an id (its position now; ``NotFound`` when it does not exist)."""
        return await self._run(
            ops.list_sessions(parent_id=parent_id, limit=limit, include_archived=include_archived, after=after),
            write=False,
        )

    async def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        directory: str | None = None,
        created_at: int | None = None,
        updated_at: int | None = None,
    ) -> Session:
        """Set a session's title and/or directory (None leaves one as it is); ``created_at`` / ``updated_at``
        (epoch ms) set the session's own times, e.g. restoring those of an imported session."""
        return await self._run(
            edit_ops.update_session(
                session_id, title=title, directory=directory, now=self.clock(), created_at=created_at, updated_at=updated_at
            )
        )

    async def rewind(self, session_id: str, message_id: str) -> int:
        """Delete ``message_id`` and every later message of the session (parts, tool states, the compaction
        markers they hold): the undo of an append. The next message takes the first deleted one's seq. Returns
        how many messages were deleted."""
        return await self._run(edit_ops.rewind(session_id, message_id, now=self.clock()))

    async def resolve_session(self, prefix: str) -> str:
        """The session id equal to or starting with ``prefix`` (an indexed range query): ``NotFound`` when none
        does, ``InvalidInput`` naming a few candidates when several do."""
        from .db.lookup_ops import resolve_session

        return await self._run(resolve_session(prefix), write=False)

    async def delete_session(self, session_id: str) -> None:
        """Delete a session and everything in it (messages, parts, tool states, compactions, child sessions)."""
        await self._run(ops.delete_session(session_id))

    # -- messages and parts -------------------------------------------------------------------------------------

    async def append_message(self, session_id: str, role: str, **fields: Any) -> Message:
        """Append a message; ``fields`` are ``Message`` fields (parent_id, agent, mode, model_id, …)."""
        return await self._run(ops.append_message(session_id, role, fields, now=self.clock()))

    async def append_part(self, message_id: str, part: Part | dict[str, Any]) -> Part:
        """Append a part (any of the twelve types, a model or a dict); the store assigns its id if it has none."""
        return await self._run(ops.append_part(message_id, part, now=self.clock()))

    async def append_messages(
        self, session_id: str, messages: Sequence[MessageWithParts | dict[str, Any]]
    ) -> list[MessageWithParts]:
        """Append whole messages with their parts in one call and one transaction (see ``SessionStore``)."""
        appended = await self._run(
            bulk_ops.append_messages(session_id, messages, now=self.clock(), id_arrays=self.engine.dialect.name == "postgresql")
        )
        if len(appended) >= BULK_MESSAGES:
            await self.settle(messages=len(appended))
        return appended

    async def settle(self, *, messages: int | None = None) -> bool:
        """``SessionStore.settle``: the same flow (``brutus.db.settle_ops.settle_flow``)."""
        from .db.settle_ops import settle_flow

        if self._batch.get() is not None:  # what the batch wrote is not committed yet: its caller settles after
            return False
        return await adrive_flow(settle_flow(self.engine.dialect.name, messages=messages), partial(self._act, None))

    async def update_tool(
        self,
        part_id: str,
        *,
        status: str,
        output: str | None = None,
        error: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        input: dict[str, Any] | None = None,
    ) -> ToolPart:
        """Move a tool part along pending → running → completed | error (or pending → error)."""
        return await self._run(
            ops.update_tool(
                part_id,
                status=status,
                output=output,
                error=error,
                title=title,
                metadata=metadata,
                input=input,
                now=self.clock(),
            )
        )

    async def finish_message(
        self,
        message_id: str,
        *,
        finish: str,
        tokens: TokenCounts | dict[str, Any] | None = None,
        cost: float = 0.0,
        error: Any = None,
    ) -> Message:
        """Record how an assistant message ended, its provider-reported usage and cost."""
        return await self._run(
            ops.finish_message(message_id, finish=finish, tokens=tokens, cost=cost, error=error, now=self.clock())
        )

    async def messages(self, session_id: str) -> list[MessageWithParts]:
        """The full history of a session, chronological."""
        return await self._run(history_ops.load_messages(session_id, filtered=False), write=False)

    async def filter_compacted(self, session_id: str) -> list[MessageWithParts]:
        """The history back to the last completed compaction boundary only (outputs of pruned parts unread)."""
        return await self._run(history_ops.load_messages(session_id, filtered=True), write=False)

    # -- compaction ---------------------------------------------------------------------------------------------

    async def prune(
        self, session_id: str, config: CompactionConfig | None = None, *, dry_run: bool = False
    ) -> PruneResult:
        """Mark old tool outputs pruned (seed 004: protect the newest 40K estimated tokens, commit only above
        20K), from stored estimates, in one transaction. The output text is kept. ``dry_run``: what would be
        pruned, nothing written."""
        op = history_ops.prune_session(session_id, config or CompactionConfig(), now=self.clock(), dry_run=dry_run)
        return await self._run(op, write=not dry_run)

    async def stats(self, session_id: str) -> SessionStats:
        """A session's token accounting (``brutus stats``): estimates by part type and by tool, pruned parts and
        tokens, compactions, provider-reported usage and cost; SQL aggregates, no output text read."""
        from .db.stats_ops import session_stats

        return await self._run(session_stats(session_id), write=False)

    async def compact(
        self,
        session_id: str,
        summarizer: Summarizer | AsyncSummarizer | None = None,
        *,
        trigger: CompactionTrigger = "manual",
        instructions: str | None = None,
        hooks: Hooks | None = None,
        config: CompactionConfig | None = None,
    ) -> CompactionResult:
        """``SessionStore.compact`` for asyncio: the same flow (``brutus.compaction.engine``), the summarizer's
        ``asummarize`` (``anthropic.AsyncAnthropic`` for ``AnthropicSummarizer``). A task cancelled mid-way
        leaves the session as a crash would: the view as before, the pending marker resolved by the next
        compaction."""
        from .compaction.engine import compaction_flow
        from .compaction.locks import async_compaction_lock
        from .summarizers import default_summarizer

        summarizer = summarizer or default_summarizer()
        flow = compaction_flow(
            ops.check_id("session", session_id),
            trigger=trigger,
            instructions=instructions,
            hooks=hooks,
            config=config or CompactionConfig(),
            clock=self.clock,
        )
        with translate_errors():
            async with async_compaction_lock(self.engine, session_id):
                return await adrive_flow(flow, partial(self._act, summarizer))

    async def _act(self, summarizer: Any, action: Any) -> Any:
        """One action of a flow (``brutus.flows``), as ``SessionStore._act`` runs it: compaction, the tiers, gc,
        check and search go through here. gc's storage steps run on a connection outside any transaction: a SQLite
        connection's thread, or a PostgreSQL connection in autocommit."""
        from .compaction.locks import async_compaction_lock, async_held_sessions
        from .db import gc_ops

        if isinstance(action, Tx):
            return await self._run(action.op, write=action.write)
        if isinstance(action, Summarize):
            from .summarizers.fallbacks import asummarize_with_fallbacks

            return await asummarize_with_fallbacks(summarizer, action.request)
        if isinstance(action, Locked):
            with translate_errors():
                async with async_compaction_lock(self.engine, action.session_id):
                    return await self._run(action.op)
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

    async def run_tiers(
        self, session_id: str, summarizer: Summarizer | None = None, config: TierConfig | None = None
    ) -> TierRunReport:
        """``SessionStore.run_tiers`` for asyncio: the same flow (``brutus.tiers.manager.tier_flow``), each summary
        from the summarizer's ``asummarize`` (or its ``summarize`` in a worker thread) and written in a
        transaction of its own, under the session's compaction lock."""
        from .compaction.locks import async_compaction_lock
        from .summarizers import default_summarizer
        from .tiers.manager import Append, StrategyManager

        if self._batch.get() is not None:
            raise InvalidInput("run_tiers cannot run inside store.batch(): each summary commits on its own")
        summarizer = summarizer or default_summarizer()
        manager = StrategyManager(config)

        async def act(action: Any) -> Any:
            if not isinstance(action, Append):
                return await self._act(summarizer, action)
            async with self.batch():
                fields = action.summary.message_fields()
                message = await self.append_message(session_id, "assistant", **fields, completed_at=self.clock())
                part = await self.append_part(message.id, TextPart(text=action.summary.text))
            return MessageWithParts(info=message, parts=[part])

        with translate_errors():
            async with async_compaction_lock(self.engine, session_id):
                flow = manager.flow(await self.filter_compacted(session_id), session_id=session_id)
                return await adrive_flow(flow, act)

    def conversation(self, session_id: str, *, model: str, **settings: Any) -> Any:
        """An ``AsyncConversation`` over this store (see ``SessionStore.conversation``)."""
        from .live import AsyncConversation

        return AsyncConversation(self, session_id, model=model, **settings)

    async def compactions(self, session_id: str) -> list[CompactionRecord]:
        """The compaction markers of a session, oldest first (pending, completed and failed)."""
        return await self._run(list_compactions(session_id), write=False)

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        role: str | None = None,
        tool: str | None = None,
        since: int | None = None,
        limit: int = 50,
    ) -> list[SearchHit]:
        """``SessionStore.search``: full-text search over every session's whole history, newest first (on
        SQLite, indexing what was written since first, as the sync store does)."""
        from .db.search_ops import search_flow

        flow = search_flow(
            query,
            dialect=self.engine.dialect.name,
            index=not self.read_only,
            session_id=session_id,
            role=role,
            tool=tool,
            since=since,
            limit=limit,
        )
        return await adrive_flow(flow, partial(self._act, None))

    # -- maintenance ----------------------------------------------------------------------------------------------

    async def check(self, *, repair: bool = False) -> CheckReport:
        """``SessionStore.check``: the same flow (``brutus.db.check_ops.check_flow``)."""
        from .db.check_ops import check_flow

        if self._batch.get() is not None:
            raise InvalidInput("check cannot run inside store.batch(): it reads the whole database, repairs commit")
        flow = check_flow(repair=repair, read_only=self.read_only, clock=self.clock)
        return await adrive_flow(flow, partial(self._act, None))

    async def gc(self, before: int, *, dry_run: bool = False, vacuum: bool = False) -> GcResult:
        """``SessionStore.gc``: the same flow (``brutus.db.gc_ops.gc_flow``), VACUUM on a connection outside any
        transaction (``_act``)."""
        from .db.gc_ops import gc_flow

        if self._batch.get() is not None:
            raise InvalidInput("gc cannot run inside store.batch(): it commits chunk by chunk, VACUUM outside any transaction")
        flow = gc_flow(before, dry_run=dry_run, dialect=self.engine.dialect.name, vacuum=vacuum)
        async with self._indexer.paused() if self._indexer is not None else nullcontext():  # no snapshot during gc
            return await adrive_flow(flow, partial(self._act, None))

