"""After a bulk write (an import, an ``append_messages`` of ``BULK_MESSAGES`` or more): the database is left
as fast to read as before it (issue 32, "no backlog" and "statistics are current").

- The search index takes in what the write left pending (``search_ops.index_pending``), in a transaction of
  its own right after the write's, so the first search after an import is as fast as any other. If that
  transaction fails (SQLite busy, a PostgreSQL index run giving way to a delete), the write stands and what is
  left stays pending for the background indexer or the next search.
- PostgreSQL: the planner's statistics of the tables the write filled are renewed (``ANALYZE``) when it
  grew them by a tenth or more (autovacuum's own default threshold, which it would act on only after its
  next nap, and the view of a session's tail takes a sequential scan over every part meanwhile), or when
  they were never analyzed. SQLite's planner keeps no such statistics here: nothing to do.

Nothing is done inside ``store.batch()``: the batch's caller settles once it has committed (the importers
do).
"""

from __future__ import annotations

from collections.abc import Generator, Sized
from typing import Any

from sqlalchemy import column, text

from ..errors import DatabaseError
from ..flows import Tx
from .bulk_ops import append_messages, append_planned, plan_append
from .sqlite_driver import prebuilt
from .statements import Op, step

__all__ = ["BULK_MESSAGES", "GROWTH", "append_work", "settle_flow"]

BULK_MESSAGES = 1_000  # an append_messages call of at least this many messages is a bulk write
GROWTH = 0.1  # a table grown by this fraction of its rows since its statistics were taken is analyzed again
TABLES = ("messages", "parts", "tool_states", "tool_outputs", "search_vectors")

_ESTIMATE = prebuilt(
    text("SELECT reltuples FROM pg_class WHERE oid = CAST('messages' AS regclass)").columns(column("reltuples"))
)
_ANALYZE = prebuilt(text("ANALYZE messages, parts, tool_states, tool_outputs, search_vectors"))  # TABLES


def append_work(session_id: Any, messages: Any, *, now: int, dialect: str) -> Any:
    """``store.append_messages``: the messages in one transaction (``bulk_ops.append_messages``), then, for
    ``BULK_MESSAGES`` or more, ``settle_flow`` (a flow); fewer, the one operation alone."""
    pg = dialect == "postgresql"
    if isinstance(messages, Sized) and len(messages) < BULK_MESSAGES:
        plan = plan_append(session_id, messages, now=now)  # checked before any transaction
        one = pg and plan.one_statement
        return Tx(append_planned(plan, id_arrays=pg), autocommit=one)  # one statement: no BEGIN, no COMMIT
    return _append_then_settle(append_messages(session_id, messages, now=now, id_arrays=pg), dialect)


def _append_then_settle(op: Op, dialect: str) -> Generator[Any, Any, Any]:
    appended = yield Tx(op)
    if len(appended) >= BULK_MESSAGES:
        yield from settle_flow(dialect, messages=len(appended))
    return appended


def settle_flow(dialect: str, *, messages: int | None) -> Generator[Any, Any, bool]:
    """Settle after a bulk write of ``messages`` messages (None: however many, the statistics are renewed),
    as a flow (``brutus.flows``); whether the statistics were renewed. Inside ``store.batch()``: nothing
    (False)."""
    from ..flows import InBatch
    from .search_ops import index_pending  # imported when used: the store's import stays light

    if (yield InBatch()):  # what the batch wrote is not committed yet: its caller settles after
        return False
    try:
        yield Tx(index_pending(dialect))
    except DatabaseError:  # the write is committed; what stays pending the background indexer or a search takes
        pass
    if dialect != "postgresql":
        return False
    return (yield Tx(_analyze_if_grown(messages)))


def _analyze_if_grown(messages: int | None) -> Op:
    if messages is not None:
        estimate = (yield step(_ESTIMATE, {}, fetch="first")).reltuples  # -1: never analyzed
        if estimate >= 0 and messages < GROWTH * estimate:
            return False
    yield step(_ANALYZE)
    return True
