"""Reading a session's history and pruning it: ``messages()`` / ``filter_compacted()`` and ``prune``.

Operations in the ``Step`` protocol (see ``statements``), like ``ops``: the store runs each in one
transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from ..errors import InvalidInput, NotFound
from ..models import CompactionConfig, MessageWithParts, PruneResult, Session
from ..pruning import PruneCandidate, plan_prune, prune_result
from . import statements as st
from .convert import build_history, message_from_row, part_from_row, reuse_history
from .ops import check_id, get_session
from .statements import Op, step

__all__ = [
    "HISTORY_CHUNK",
    "consistent_reads",
    "history_in_chunks",
    "history_times",
    "load_message",
    "live_view",
    "load_messages",
    "mark_pruned",
    "message_tools",
    "newest_assistant",
    "prune_session",
]

HISTORY_CHUNK = 200  # messages per read of a whole history in chunks (about 15 MB of Python objects in the corpus)
_REPEATABLE_READ = text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


# -- reads --------------------------------------------------------------------------------------------------


def load_messages(session_id: Any, *, filtered: bool, reuse: dict[str, Any] | None = None) -> Op:
    """The history of a session, whole or from its last completed boundary on, as ``MessageWithParts``.

    Filtered, both queries are index range scans from the boundary (cost grows with the view, not the
    history), and the output of a pruned part is not read. ``reuse``: see ``convert.reuse_history``.
    """
    session_id = check_id("session", session_id)
    session = yield step(st.SESSION_BOUNDARY, {"b_sid": session_id}, fetch="first")
    return (yield from _history(session_id, session, filtered=filtered, reuse=reuse))


def live_view(session_id: str, reuse: dict[str, Any]) -> Op:
    """A live request's reads: the view (``load_messages`` filtered, reusing) and whether a compaction marker
    is pending, the latter asked with the boundary, in the same statement."""
    session = yield step(st.SESSION_BOUNDARY_PENDING, {"b_sid": session_id}, fetch="first")
    view = yield from _history(session_id, session, filtered=True, reuse=reuse)
    return view, bool(session.pending)


def _history(session_id: str, session: Any, *, filtered: bool, reuse: dict[str, Any] | None) -> Op:
    """``load_messages`` once the session's row (its ``boundary_seq``; None: no such session) was read."""
    if session is None:
        raise NotFound("session", session_id)
    if filtered and session.boundary_seq:
        params = {"b_sid": session_id, "b_from_seq": session.boundary_seq}
        message_rows = yield step(st.MESSAGES_FROM, params, fetch="raw")
        part_rows = (yield step(st.PARTS_FROM, params, fetch="raw")) if message_rows else []
        tool_rows = None  # joined into part_rows
    else:
        params = {"b_sid": session_id}
        message_rows = yield step(st.MESSAGES, params, fetch="raw")
        part_rows = (yield step(st.SESSION_PARTS, params, fetch="raw")) if message_rows else []
        tools_query = st.SESSION_TOOLS_UNPRUNED if filtered else st.SESSION_TOOLS
        tool_rows = (yield step(tools_query, params, fetch="raw")) if part_rows else []
    if reuse is not None:
        return reuse_history(message_rows, part_rows, tool_rows, reuse)
    return build_history(message_rows, part_rows, tool_rows)


def newest_assistant(session_id: str) -> Op:
    """The session's newest assistant message if it is in the view (at or after the last completed boundary);
    None when it is not, or there is none, or no such session."""
    row = yield step(st.NEWEST_ASSISTANT, {"b_sid": session_id}, fetch="first")
    if row is None or row.boundary_seq is None or row.seq < row.boundary_seq:
        return None
    return message_from_row(row)


def message_tools(message_id: str) -> Op:
    """A message's tool parts, each as ``ops.ToolRow`` then its part id, locked for a change (``FOR NO KEY
    UPDATE`` on PostgreSQL), in position order."""
    return (yield step(st.TOOLS_OF_MESSAGE, {"b_mid": message_id}, fetch="all"))


def consistent_reads(dialect: str) -> Op:
    """The first step of a read transaction whose reads must all see one snapshot (a history read in chunks):
    PostgreSQL's REPEATABLE READ; a SQLite read transaction sees one snapshot already."""
    if dialect == "postgresql":
        yield step(_REPEATABLE_READ)


def history_in_chunks(
    session_id: Any,
    on_chunk: Callable[[list[MessageWithParts]], None],
    *,
    chunk: int | None = None,
    on_session: Callable[[Session], None] | None = None,
) -> Op:
    """A session's whole history (``messages()``), handed to ``on_chunk`` ``chunk`` (``HISTORY_CHUNK``) messages at a time in seq
    order, so a reader holds one chunk, not the history; the number of messages. Each chunk is two range scans
    by seq (messages, then their parts with tool states and outputs). Run it in one transaction after
    ``consistent_reads`` so the chunks agree; a missing session is ``NotFound``. ``on_session`` is given the
    session first, as read in the same transaction."""
    session = yield from get_session(session_id)
    session_id, chunk = session.id, chunk or HISTORY_CHUNK
    if on_session is not None:
        on_session(session)
    after, count = -1, 0
    while True:
        rows = yield step(st.messages_after(chunk), {"b_sid": session_id, "b_after": after}, fetch="raw")
        if not rows:
            return count
        upto = rows[-1][2]  # the seq column
        params = {"b_sid": session_id, "b_after": after, "b_upto": upto}
        on_chunk(build_history(rows, (yield step(st.PARTS_BETWEEN, params, fetch="raw"))))
        count += len(rows)
        if len(rows) < chunk:
            return count
        after = upto


def history_times(session_id: Any) -> Op:
    """The latest creation and completion among a session's messages (None, None without messages)."""
    row = yield step(st.HISTORY_TIMES, {"b_sid": check_id("session", session_id)}, fetch="first")
    return row.created, row.completed


def load_message(message_id: Any) -> Op:
    """One message with its parts."""
    message_id = check_id("message", message_id)
    row = yield step(st.MESSAGE, {"b_mid": message_id}, fetch="first")
    if row is None:
        raise NotFound("message", message_id)
    part_rows = yield step(st.PARTS_OF_MESSAGE, {"b_mid": message_id}, fetch="all")
    return MessageWithParts.model_construct(info=message_from_row(row), parts=[part_from_row(r) for r in part_rows])


# -- prune --------------------------------------------------------------------------------------------------

def mark_pruned(part_ids: Any, *, now: int) -> Op:
    """Set the prune mark on parts not marked yet (one executemany)."""
    if part_ids:
        yield step(st.MARK_PRUNED, [{"b_pid": part_id, "b_now": now} for part_id in part_ids])


def prune_session(session_id: Any, config: CompactionConfig, *, now: int, dry_run: bool = False) -> Op:
    """Seed 004's prune over stored token estimates: reads no output text, scans back to the last boundary
    only (prune stops at the summary there anyway), marks the chosen parts in this one transaction.
    ``dry_run``: the same choice, nothing marked (the parts come back as they are)."""
    session_id = check_id("session", session_id)
    if not isinstance(config, CompactionConfig):
        raise InvalidInput(f"config must be a CompactionConfig, got {type(config).__name__}")
    session = yield step(st.SESSION if dry_run else st.SESSION_FOR_UPDATE, {"b_sid": session_id}, fetch="first")
    if session is None:
        raise NotFound("session", session_id)
    if not config.prune:
        return PruneResult()
    rows = yield step(st.PRUNE_ROWS, {"b_sid": session_id, "b_from_seq": session.boundary_seq}, fetch="raw")
    candidates = [  # by position: a first prune of a long session reads a row per message
        PruneCandidate(seq, role, bool(summary), part_id, tool, status, tokens or 0, compacted is not None)
        for seq, role, summary, part_id, tool, status, tokens, compacted in rows
    ]
    plan = plan_prune(candidates, config)
    if not plan.part_ids:
        return prune_result(plan, config, [])
    if dry_run:
        chosen = []
        for part_id in plan.part_ids:
            chosen.append(part_from_row((yield step(st.PART_WITHOUT_OUTPUT, {"b_pid": part_id}, fetch="first"))))
        return prune_result(plan, config, chosen)
    yield from mark_pruned(plan.part_ids, now=now)
    # read back in one query, not one per part (a first prune of a long session marks thousands)
    rows = yield step(st.PARTS_PRUNED_AT, {"b_sid": session_id, "b_now": now}, fetch="all")
    by_id = {row.id: row for row in rows}
    marked = []
    for part_id in plan.part_ids:
        found = by_id.get(part_id)
        if found is None:  # its tool row names another session (an operator's edit): read it by id
            found = yield step(st.PART_WITHOUT_OUTPUT, {"b_pid": part_id}, fetch="first")
        marked.append(part_from_row(found))
    return prune_result(plan, config, marked)
