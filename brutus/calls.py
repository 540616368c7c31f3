"""``StoreCalls``: every public method of ``SessionStore`` and ``AsyncSessionStore``, written once.

Each method checks its arguments and returns its **work** (``brutus.flows``): one ``Tx`` for a call that is
one database operation (``brutus.db.*_ops``), a flow for a call of several steps. ``SessionStore`` runs it
(``store.run``) and returns the value; ``AsyncSessionStore`` is the same method as an ``async def``
(``flows.Runs``), so the two surfaces have one signature and one docstring per method.

Rules every call keeps (the runners see to them):

- A call is one transaction (``batch()`` makes several calls one); a call that raises has written nothing.
- Write transactions take the write lock up front (``BEGIN IMMEDIATE`` on SQLite).
- SQLAlchemy and driver errors become ``brutus.errors`` (``brutus.db.runner.translate_errors``).
- With a read replica (``open(url, read_url=...)``), the reads that tolerate lag (``list_sessions``,
  ``search``, ``stats``, export) are ``Tx(..., replica=True)`` and may run there, never staler than this
  store's own writes (``brutus.db.replica``); everything else runs on the primary.

A new store method is one ``@work`` method here; a new kind of step is an action in ``brutus.flows`` and a
branch in each runner's ``_do``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .compaction.engine import compaction
from .db import check_ops, edit_ops, fork_ops, gc_ops, history_ops, lookup_ops, ops, search_ops, settle_ops, stats_ops
from .db.compaction_ops import list_compactions
from .flows import Runs, Tx, Unindexed, unbatched, work
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
from .tiers.run import tier_run

if TYPE_CHECKING:
    from .compaction.hooks import Hooks
    from .db.runner import Clock
    from .reports import CheckReport, GcResult, SessionStats
    from .search import SearchHit
    from .summarizers.base import Summarizer
    from .tiers import TierConfig, TierRunReport

__all__ = ["StoreCalls"]


class StoreCalls(Runs):
    """The store's public calls (module docstring); a store subclass gives ``run``, ``batch`` and ``close``."""

    clock: Clock
    dialect: str  # "sqlite" or "postgresql"
    read_only: bool
    conversation_type: Any  # Conversation or AsyncConversation
    _replica: Any  # the read replica (brutus.db.replica.Replica), or None
    tenant: str | None = None  # the tenant ``open`` was given (``brutus.db.tenants``)

    @classmethod
    def _opened(cls, engine: Any, url: str, read_engine: Any, tenant: str | None, migrated: bool, **settings: Any) -> Any:
        """``open``'s store on ``engine`` (and the replica's ``read_engine``), once the schema is ready: in
        ``tenant``; after a migration, its replica reads wait for the schema this open wrote."""
        store = cls(engine, url=url, read_engine=read_engine, **settings)
        store.tenant = tenant
        store._autocommits = store._autocommits and tenant is None  # a tenant is set by each transaction's BEGIN
        if migrated and store._replica is not None:
            store._replica.wrote()
        return store

    # -- sessions ---------------------------------------------------------------------------------------------

    @work
    def create_session(
        self,
        *,
        title: str | None = None,
        directory: str | None = None,
        parent_id: str | None = None,
        id: str | None = None,
    ) -> Session:
        """A new session (``parent_id``: a sub-agent's session under its parent; ``id``: keep a given id)."""
        return Tx(ops.create_session(now=self.clock(), title=title, directory=directory, parent_id=parent_id, id=id))

    @work
    def get_session(self, session_id: str) -> Session:
        """The session, or ``NotFound``."""
        return Tx(ops.get_session(session_id), write=False)

    @work
    def list_sessions(
        self,
        *,
        parent_id: str | None = None,
        limit: int | None = None,
        include_archived: bool = True,
        after: str | Session | None = None,
        forked_from: str | None = None,
    ) -> list[Session]:
        """Sessions, most recently updated first (ties by id, descending). ``limit`` and ``after`` page it by
        keyset: ``after`` is the previous page's last session, as a ``Session`` (its position as read: the
        stable choice) or an id (its position now; ``NotFound`` when it does not exist). ``forked_from``: only
        the forks of that session (``fork``)."""
        op = ops.list_sessions(
            parent_id=parent_id, limit=limit, include_archived=include_archived, after=after, forked_from=forked_from
        )
        return Tx(op, write=False, replica=True)

    @work
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
        return Tx(
            edit_ops.update_session(
                session_id, title=title, directory=directory, now=self.clock(), created_at=created_at, updated_at=updated_at
            )
        )

    @work
    def rewind(self, session_id: str, message_id: str) -> int:
        """Delete ``message_id`` and every later message of the session (parts, tool states, the compaction
        markers they hold): the undo of an append. The next message takes the first deleted one's seq. Returns
        how many messages were deleted."""
        return Tx(edit_ops.rewind(session_id, message_id, now=self.clock()))

    @work
    def resolve_session(self, prefix: str) -> str:
        """The session id equal to or starting with ``prefix`` (an indexed range query): ``NotFound`` when none
        does, ``InvalidInput`` naming a few candidates when several do."""
        return Tx(lookup_ops.resolve_session(prefix), write=False)

    @work
    def fork(self, session_id: str, message_id: str | None = None, *, title: str | None = None) -> Session:
        """A new session holding copies of ``session_id``'s messages up to and including ``message_id`` (None:
        all of them), with their parts, tool states, outputs, prune marks, compaction markers and boundary,
        under new ids; copied in the database in one transaction (``brutus.db.fork_ops``). Its view is the
        original's at that point, so a conversation on it sends what the original sent there. ``title``: the
        original's when None. The fork names where it came from (``forked_from``, ``forked_at``) and shares
        nothing with it: deleting either leaves the other whole. ``list_sessions(forked_from=id)`` lists the
        forks of a session."""
        return fork_ops.fork_flow(session_id, message_id, title=title, dialect=self.dialect, clock=self.clock)

    @work
    def delete_session(self, session_id: str) -> None:
        """Delete a session and everything in it (messages, parts, tool states, compactions, child sessions)."""
        return Tx(ops.delete_session(session_id))

    # -- messages and parts -------------------------------------------------------------------------------------

    @work
    def append_message(self, session_id: str, role: str, **fields: Any) -> Message:
        """Append a message; ``fields`` are ``Message`` fields (parent_id, agent, mode, model_id, …)."""
        return Tx(ops.append_message(session_id, role, fields, now=self.clock()))

    @work
    def append_part(self, message_id: str, part: Part | dict[str, Any]) -> Part:
        """Append a part (any of the twelve types, a model or a dict); the store assigns its id if it has none."""
        return Tx(ops.append_part(message_id, part, now=self.clock()))

    @work
    def append_messages(
        self, session_id: str, messages: Sequence[MessageWithParts | dict[str, Any]]
    ) -> list[MessageWithParts]:
        """Append whole messages with their parts in one call and one transaction (a finished turn, a copy):
        each item is a ``MessageWithParts`` or a dict ``{"info": {...}, "parts": [...]}``. Ids given are kept,
        missing ones assigned; the session, seq and positions come from where the messages land. A call of
        ``BULK_MESSAGES`` (1,000) or more then ``settle``s (outside ``batch()``)."""
        return settle_ops.append_work(session_id, messages, now=self.clock(), dialect=self.dialect)

    @work
    def settle(self, *, messages: int | None = None) -> bool:
        """After a bulk write of ``messages`` messages: index what search has pending, and on PostgreSQL renew
        the planner's statistics when the write grew the tables by a tenth (None: always). ``import`` and a
        large ``append_messages`` call it; a caller writing many messages inside ``batch()`` calls it after.
        Returns whether the statistics were renewed. Inside ``store.batch()`` it does nothing (the batch has
        not committed): call it after the batch."""
        return settle_ops.settle_flow(self.dialect, messages=messages)

    @work
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
        fields = dict(status=status, output=output, error=error, title=title, metadata=metadata, input=input)
        return Tx(ops.update_tool(part_id, **fields, now=self.clock()))

    @work
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
        return Tx(ops.finish_message(message_id, finish=finish, tokens=tokens, cost=cost, error=error, now=self.clock()))

    @work
    def messages(self, session_id: str) -> list[MessageWithParts]:
        """The full history of a session, chronological."""
        return Tx(history_ops.load_messages(session_id, filtered=False), write=False)

    @work
    def filter_compacted(self, session_id: str) -> list[MessageWithParts]:
        """The history back to the last completed compaction boundary only (outputs of pruned parts unread)."""
        return Tx(history_ops.load_messages(session_id, filtered=True), write=False)

    # -- compaction ---------------------------------------------------------------------------------------------

    @work
    def prune(self, session_id: str, config: CompactionConfig | None = None, *, dry_run: bool = False) -> PruneResult:
        """Mark old tool outputs pruned (seed 004: protect the newest 40K estimated tokens, commit only above
        20K), from stored estimates, in one transaction. The output text is kept. ``dry_run``: what would be
        pruned, nothing written."""
        op = history_ops.prune_session(session_id, config or CompactionConfig(), now=self.clock(), dry_run=dry_run)
        return Tx(op, write=not dry_run)

    @work
    def stats(self, session_id: str) -> SessionStats:
        """A session's token accounting (``brutus stats``): estimates by part type and by tool, pruned parts and
        tokens, compactions, provider-reported usage and cost; SQL aggregates, no output text read."""
        return Tx(stats_ops.session_stats(session_id), write=False, replica=True)

    @work
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
        offline extractive one; its failures fall back to the extractive summary, then to a truncation text.
        On the async store the summarizer's ``asummarize`` is awaited when it has one (else its ``summarize``
        runs in a worker thread); a task cancelled mid-way leaves the session as a crash would: the view as
        before, the pending marker resolved by the next compaction."""
        return compaction(
            session_id, summarizer, trigger=trigger, instructions=instructions, hooks=hooks, config=config, clock=self.clock
        )

    @work
    def compactions(self, session_id: str) -> list[CompactionRecord]:
        """The compaction markers of a session, oldest first (pending, completed and failed)."""
        return Tx(list_compactions(session_id), write=False)

    @work
    def run_tiers(
        self, session_id: str, summarizer: Summarizer | None = None, config: TierConfig | None = None
    ) -> TierRunReport:
        """Run the tiered compaction once (ADR-0041: tool-call summaries, threshold summaries, goal batches),
        writing summary messages that cover ranges of the session, each in a transaction of its own, under the
        session's compaction lock; see ``brutus.tiers.run_tiers``. Not inside ``store.batch()``."""
        return tier_run(session_id, summarizer, config, clock=self.clock)

    def conversation(self, session_id: str, *, model: str, **settings: Any) -> Any:
        """A live ``Conversation`` on the Anthropic Messages API over this store (``brutus.live``;
        ``AsyncConversation`` on the async store): settings ``system``, ``tools``, ``max_tokens``, ``thinking``,
        ``policy`` (``ContextPolicy``), ``limits``, ``summarizer``, and ``extra`` keyword arguments passed
        through to ``messages.create``."""
        return self.conversation_type(self, session_id, model=model, **settings)

    # -- search and maintenance -----------------------------------------------------------------------------------

    @work
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
        index alone), unless the store is read-only, reads from a replica (``read_url``: the search stays one
        read there), or that fails (another writer holding a SQLite database past the busy timeout): the search
        then reads those documents itself."""
        filters = dict(session_id=session_id, role=role, tool=tool, since=since, limit=limit)
        index = not self.read_only and self._replica is None  # a replica's reader leaves indexing to the writers
        return search_ops.search_flow(query, dialect=self.dialect, index=index, **filters)

    @work
    def gc(self, before: int, *, dry_run: bool = False, vacuum: bool = False) -> GcResult:
        """Drop the output text of parts pruned before ``before`` (epoch ms), keeping their tool state and token
        counts, in chunks (time and extra disk follow what is dropped; ``brutus.db.gc_ops``). SQLite: the space
        goes on the file's free list for later writes (``bytes_reusable``), or back to the system on a file
        with ``auto_vacuum = INCREMENTAL``; PostgreSQL: VACUUM ANALYZE in autocommit. ``vacuum``: rewrite to
        shrink (SQLite VACUUM, which needs free disk the size of the database; PostgreSQL VACUUM FULL of the
        outputs). ``dry_run`` only counts. Not inside ``store.batch()``."""
        flow = gc_ops.gc_flow(before, dry_run=dry_run, dialect=self.dialect, vacuum=vacuum)
        why = "gc cannot run inside store.batch(): it commits chunk by chunk, VACUUM outside any transaction"
        return unbatched(why, Unindexed(flow))  # no snapshot held during gc

    @work
    def check(self, *, repair: bool = False) -> CheckReport:
        """Check the integrity of the whole database (``brutus check``). A compaction marker left pending is a
        notice, not a problem: abandoned when its session's compaction lock is free, running when held.
        ``repair`` first marks the abandoned ones failed (holding each session's lock, so a compaction that
        starts meanwhile is never touched) and rebuilds message counters, ``last_seq`` and boundary pointers
        from the rows in one transaction; the report then lists those ``repairs`` and what is left. Real
        corruption (orphans, gaps inside a history, mismatched rows) is never "repaired". Not inside
        ``store.batch()``."""
        flow = check_ops.check_flow(repair=repair, read_only=self.read_only, clock=self.clock)
        return unbatched("check cannot run inside store.batch(): it reads the whole database, repairs commit", flow)
