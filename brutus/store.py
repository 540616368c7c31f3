"""``SessionStore``: the synchronous store.

Rules it keeps:

- Every call is one transaction (``with store.batch():`` makes several calls one); a call that raises has
  written nothing.
- Write transactions take the write lock up front (``BEGIN IMMEDIATE`` on SQLite), so concurrent writers
  queue instead of failing with "database is locked".
- SQLAlchemy and driver errors are translated into ``brutus.errors`` at this boundary.
- The logic lives in ``brutus.db.ops`` (shared with the async store); this module only runs it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError

from .db import bulk_ops, edit_ops, history_ops, ops
from .db.checkpoint import Checkpointer
from .db.indexer import BATCH, Indexer
from .db.pg_bulk import BULK_INSERTS, insert_rows
from .db.search_ops import index_pending
from .db.settle_ops import BULK_MESSAGES
from .db.engine import WRITE, default_url, describe, is_brutus_engine, make_engine, redact
from .db.sqlite_driver import SQLiteDriver, sqlite_begin, sqlite_end, sqlite_transaction
from .db.migrate import prepare_schema
from .db.statements import Op, Step
from .errors import BrutusError, DatabaseBusy, DatabaseError, InvalidInput
from .flows import HeldLocks, Locked, StorageBytes, Summarize, Tx, Vacuum, drive_flow
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
    TokenCounts,
    ToolPart,
)

if TYPE_CHECKING:
    from .compaction.hooks import Hooks
    from .reports import CheckReport, GcResult, SessionStats
    from .search import SearchHit
    from .summarizers.base import Summarizer
    from .tiers import TierConfig, TierRunReport

__all__ = ["SessionStore", "drive", "fetch", "translate", "translate_errors"]

Clock = Callable[[], int]


def _now_ms() -> int:
    return int(time.time() * 1000)


def fetch(result: Any, how: str) -> Any:
    """Materialize a statement's result the way its ``Step`` asked."""
    if how == "all" or how == "raw":
        return result.all()
    if how == "first":
        return result.first()
    if how == "rowcount":
        return result.rowcount
    return None


def drive(connection: Any, op: Op) -> Any:
    """Run ``op``'s steps on a SQLAlchemy ``Connection``, statement by statement; its return value. (The async
    store runs it too, through ``AsyncConnection.run_sync``: the whole operation in one greenlet.) The rows of
    a bulk insert go in as one statement on PostgreSQL (``db/pg_bulk.py``)."""
    bulk = connection.dialect.name == "postgresql"
    try:
        current: Step = next(op)
        while True:
            statement, params = current.statement, current.params
            if bulk and type(params) is list and params and statement in BULK_INSERTS and current.fetch == "none":
                insert_rows(connection, statement, params)  # type: ignore[arg-type]
                current = op.send(None)
                continue
            current = op.send(fetch(connection.execute(statement, params), current.fetch))
    except StopIteration as stop:
        return stop.value
    finally:
        op.close()  # an operation's cleanup runs now, not when a held traceback lets it go


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
    if isinstance(exc, IntegrityError):
        return InvalidInput(f"refused by the database: {_reason(exc)}")
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


def _reason(exc: SQLAlchemyError) -> str:
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc).strip().splitlines()[0]


class SessionStore:
    """The persistent, compaction-aware session store (sync). Build it with ``SessionStore.open(url)``."""

    def __init__(
        self,
        engine: Engine,
        *,
        url: str | None = None,
        clock: Clock = _now_ms,
        read_only: bool = False,
        index_in_background: bool = True,
    ) -> None:
        if not is_brutus_engine(engine):
            raise InvalidInput(
                "SessionStore needs an engine with brutus's connection settings (JSON codec, SQLite pragmas such as "
                "foreign_keys): build it with brutus.make_engine(url, **engine_options), or use SessionStore.open(url)"
            )
        self.engine = engine
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

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        auto_migrate: bool = True,
        create: bool = True,
        read_only: bool = False,
        clock: Clock = _now_ms,
        index_in_background: bool = True,
    ) -> SessionStore:
        """Open the store at ``url`` (default ``$BRUTUS_DATABASE_URL``, else a SQLite file in the user data
        dir). With ``auto_migrate`` the schema is upgraded in place; without, a database behind head raises
        ``SchemaOutOfDate`` naming the command to run.

        ``create``: a new SQLite file may be made, in a directory that exists (the default location's is made
        for it), and an empty database gets brutus's schema; ``create=False`` raises ``NoDatabase`` instead.
        ``read_only``: open an existing database without creating, migrating or writing anything (implies
        ``create=False``; the schema must be at head). ``index_in_background``: a thread puts what is written
        into the search index a moment after commits (``brutus.db.indexer``); without, the next search or
        ``settle`` does."""
        url = url or default_url()
        create = create and not read_only
        engine = make_engine(url, create=create, read_only=read_only)
        try:
            with translate_errors():
                prepare_schema(engine, describe(url), migrate=auto_migrate and not read_only, create=create)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, url=redact(url), clock=clock, read_only=read_only, index_in_background=index_in_background)

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
            if write and self._indexer is not None:
                self._indexer.committed()

    def _committed(self) -> None:
        """A write committed: the threads that work after commits (SQLite's checkpoints, the search index)."""
        if self._checkpointer is not None:
            self._checkpointer.committed()
        if self._indexer is not None:
            self._indexer.committed()

    def _index_batch(self) -> bool:
        """One small transaction of the background indexer: whether anything was pending."""
        return self._run(index_pending(self.engine.dialect.name, batch=BATCH))

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

    # -- sessions ---------------------------------------------------------------------------------------------

    def create_session(
        self,
        *,
        title: str | None = None,
        directory: str | None = None,
        parent_id: str | None = None,
        id: str | None = None,
    ) -> Session:
        return self._run(
            ops.create_session(now=self.clock(), title=title, directory=directory, parent_id=parent_id, id=id)
        )

    def get_session(self, session_id: str) -> Session:
        return self._run(ops.get_session(session_id), write=False)

    def list_sessions(
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
        return self._run(
            ops.list_sessions(parent_id=parent_id, limit=limit, include_archived=include_archived, after=after),
            write=False,
        )

    def update_session(
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
        return self._run(
            edit_ops.update_session(
                session_id, title=title, directory=directory, now=self.clock(), created_at=created_at, updated_at=updated_at
            )
        )

    def rewind(self, session_id: str, message_id: str) -> int:
        """Delete ``message_id`` and every later message of the session (parts, tool states, the compaction
        markers they hold): the undo of an append. The next message takes the first deleted one's seq. Returns
        how many messages were deleted."""
        return self._run(edit_ops.rewind(session_id, message_id, now=self.clock()))

    def resolve_session(self, prefix: str) -> str:
        """The session id equal to or starting with ``prefix`` (an indexed range query): ``NotFound`` when none
        does, ``InvalidInput`` naming a few candidates when several do."""
        from .db.lookup_ops import resolve_session

        return self._run(resolve_session(prefix), write=False)

    def delete_session(self, session_id: str) -> None:
        """Delete a session and everything in it (messages, parts, tool states, compactions, child sessions)."""
        self._run(ops.delete_session(session_id))

    # -- messages and parts -------------------------------------------------------------------------------------

    def append_message(self, session_id: str, role: str, **fields: Any) -> Message:
        """Append a message; ``fields`` are ``Message`` fields (parent_id, agent, mode, model_id, …)."""
        return self._run(ops.append_message(session_id, role, fields, now=self.clock()))

    def append_part(self, message_id: str, part: Part | dict[str, Any]) -> Part:
        """Append a part (any of the twelve types, a model or a dict); the store assigns its id if it has none."""
        return self._run(ops.append_part(message_id, part, now=self.clock()))

    def append_messages(
        self, session_id: str, messages: Sequence[MessageWithParts | dict[str, Any]]
    ) -> list[MessageWithParts]:
        """Append whole messages with their parts in one call and one transaction (a finished turn, a copy):
        each item is a ``MessageWithParts`` or a dict ``{"info": {...}, "parts": [...]}``. Ids given are kept,
        missing ones assigned; the session, seq and positions come from where the messages land. A call of
        ``BULK_MESSAGES`` (1,000) or more then ``settle``s (outside ``batch()``)."""
        appended = self._run(
            bulk_ops.append_messages(session_id, messages, now=self.clock(), id_arrays=self.engine.dialect.name == "postgresql")
        )
        if len(appended) >= BULK_MESSAGES:
            self.settle(messages=len(appended))
        return appended

    def settle(self, *, messages: int | None = None) -> bool:
        """After a bulk write of ``messages`` messages: index what search has pending, and on PostgreSQL renew
        the planner's statistics when the write grew the tables by a tenth (None: always). ``import`` and a
        large ``append_messages`` call it; a caller writing many messages inside ``batch()`` calls it after.
        Returns whether the statistics were renewed. Inside ``store.batch()`` it does nothing (the batch has
        not committed): call it after the batch."""
        from .db.settle_ops import settle_flow

        if self._batch.get() is not None:  # what the batch wrote is not committed yet: its caller settles after
            return False
        return drive_flow(settle_flow(self.engine.dialect.name, messages=messages), partial(self._act, None))

    def update_tool(
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
        return self._run(
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

    def finish_message(
        self,
        message_id: str,
        *,
        finish: str,
        tokens: TokenCounts | dict[str, Any] | None = None,
        cost: float = 0.0,
        error: Any = None,
    ) -> Message:
        """Record how an assistant message ended, its provider-reported usage and cost."""
        return self._run(
            ops.finish_message(message_id, finish=finish, tokens=tokens, cost=cost, error=error, now=self.clock())
        )

    def messages(self, session_id: str) -> list[MessageWithParts]:
        """The full history of a session, chronological."""
        return self._run(history_ops.load_messages(session_id, filtered=False), write=False)

    def filter_compacted(self, session_id: str) -> list[MessageWithParts]:
        """The history back to the last completed compaction boundary only (outputs of pruned parts unread)."""
        return self._run(history_ops.load_messages(session_id, filtered=True), write=False)

    def prune(
        self, session_id: str, config: CompactionConfig | None = None, *, dry_run: bool = False
    ) -> PruneResult:
        """Mark old tool outputs pruned (seed 004: protect the newest 40K estimated tokens, commit only above
        20K), from stored estimates, in one transaction. The output text is kept. ``dry_run``: what would be
        pruned, nothing written."""
        op = history_ops.prune_session(session_id, config or CompactionConfig(), now=self.clock(), dry_run=dry_run)
        return self._run(op, write=not dry_run)

    def stats(self, session_id: str) -> SessionStats:
        """A session's token accounting (``brutus stats``): estimates by part type and by tool, pruned parts and
        tokens, compactions, provider-reported usage and cost; SQL aggregates, no output text read."""
        from .db.stats_ops import session_stats

        return self._run(session_stats(session_id), write=False)

    def compact(
        self,
        session_id: str,
        summarizer: Summarizer | None = None,
        *,
        trigger: CompactionTrigger = "manual",
        instructions: str | None = None,
        hooks: Hooks | None = None,
        config: CompactionConfig | None = None,
    ) -> CompactionResult:
        """Compact a session: prune, summarize the view (outside any transaction), then write the compaction
        message, the summary and the new boundary in one transaction. One compaction per session at a time
        (``CompactionInProgress``); one that would not shrink the context or repeats the previous one raises
        ``CompactionStalled``. The summarizer defaults to Anthropic when ANTHROPIC_API_KEY is set, else the
        offline extractive one; its failures fall back to the extractive summary, then to a truncation text."""
        from .compaction.engine import compaction_flow
        from .compaction.locks import compaction_lock
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
        with translate_errors(), compaction_lock(self.engine, session_id):
            return drive_flow(flow, partial(self._act, summarizer))

    def _act(self, summarizer: Any, action: Any) -> Any:
        """One action of a flow (``brutus.flows``): compaction, the tiers, gc, check and search go through here."""
        if isinstance(action, Tx):
            return self._run(action.op, write=action.write)
        if isinstance(action, Summarize):
            from .summarizers.fallbacks import summarize_with_fallbacks

            return summarize_with_fallbacks(summarizer, action.request)
        from .compaction.locks import compaction_lock, held_sessions
        from .db import gc_ops

        if isinstance(action, Locked):
            with translate_errors(), compaction_lock(self.engine, action.session_id):
                return self._run(action.op)
        with translate_errors():
            if isinstance(action, HeldLocks):
                return held_sessions(self.engine, action.session_ids)
            if isinstance(action, Vacuum):
                return gc_ops.vacuum(self.engine, action.full, action.pages)
            assert isinstance(action, StorageBytes), action
            return gc_ops.storage_bytes(self.engine)

    def conversation(self, session_id: str, *, model: str, **settings: Any) -> Any:
        """A live ``Conversation`` on the Anthropic Messages API over this store (``brutus.live``): settings
        ``system``, ``tools``, ``max_tokens``, ``thinking``, ``policy`` (``ContextPolicy``), ``limits``,
        ``summarizer``, and ``extra`` keyword arguments passed through to ``messages.create``."""
        from .live import Conversation

        return Conversation(self, session_id, model=model, **settings)

    def compactions(self, session_id: str) -> list[CompactionRecord]:
        """The compaction markers of a session, oldest first (pending, completed and failed)."""
        from .db.compaction_ops import list_compactions

        return self._run(list_compactions(session_id), write=False)

    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        role: str | None = None,
        tool: str | None = None,
        since: int | None = None,
        limit: int = 50,
    ) -> list[SearchHit]:
        """Full-text search over every session's whole history (turns before a compaction, summaries, pruned
        outputs), newest first: each hit names its session, message and part, with a snippet and whether the
        model still sees it. ``query`` is words, all of which must appear in one text (``brutus.search``).
        It first puts what was written since into the index (a write transaction of its own: writes leave the
        index alone), unless the store is read-only or that fails (another writer holding a SQLite database
        past the busy timeout): the search then reads those documents itself."""
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
        return drive_flow(flow, partial(self._act, None))

    def gc(self, before: int, *, dry_run: bool = False, vacuum: bool = False) -> GcResult:
        """Drop the output text of parts pruned before ``before`` (epoch ms), keeping their tool state and token
        counts, in chunks (time and extra disk follow what is dropped; ``brutus.db.gc_ops``). SQLite: the space
        goes on the file's free list for later writes (``bytes_reusable``), or back to the system on a file
        with ``auto_vacuum = INCREMENTAL``; PostgreSQL: VACUUM ANALYZE in autocommit. ``vacuum``: rewrite to
        shrink (SQLite VACUUM, which needs free disk the size of the database; PostgreSQL VACUUM FULL of the
        outputs). ``dry_run`` only counts. Not inside ``store.batch()``."""
        from .db.gc_ops import gc_flow

        if self._batch.get() is not None:
            raise InvalidInput("gc cannot run inside store.batch(): it commits chunk by chunk, VACUUM outside any transaction")
        flow = gc_flow(before, dry_run=dry_run, dialect=self.engine.dialect.name, vacuum=vacuum)
        with self._indexer.paused() if self._indexer is not None else nullcontext():  # no snapshot held during gc
            return drive_flow(flow, partial(self._act, None))

    def check(self, *, repair: bool = False) -> CheckReport:
        """Check the integrity of the whole database (``brutus check``). A compaction marker left pending is a
        notice, not a problem: abandoned when its session's compaction lock is free, running when held.
        ``repair`` first marks the abandoned ones failed (holding each session's lock, so a compaction that
        starts meanwhile is never touched) and rebuilds message counters, ``last_seq`` and boundary pointers
        from the rows in one transaction; the report then lists those ``repairs`` and what is left. Real
        corruption (orphans, gaps inside a history, mismatched rows) is never "repaired". Not inside
        ``store.batch()``."""
        from .db.check_ops import check_flow

        if self._batch.get() is not None:
            raise InvalidInput("check cannot run inside store.batch(): it reads the whole database, repairs commit")
        flow = check_flow(repair=repair, read_only=self.read_only, clock=self.clock)
        return drive_flow(flow, partial(self._act, None))

    def run_tiers(
        self, session_id: str, summarizer: Summarizer | None = None, config: TierConfig | None = None
    ) -> TierRunReport:
        """Run the tiered compaction once (ADR-0041: tool-call summaries, threshold summaries, goal batches),
        writing summary messages that cover ranges of the session; see ``brutus.tiers.run_tiers``."""
        from .tiers import run_tiers

        return run_tiers(self, session_id, summarizer, config)
