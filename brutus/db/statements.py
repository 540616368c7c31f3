"""The store's operations, written once for the sync and the async store ("sans I/O").

Each operation is a generator: it yields ``Step``s (a statement plus how to fetch its result), receives the
fetched result, and returns the API value. ``SessionStore`` runs the steps on a ``Connection``,
``AsyncSessionStore`` on an ``AsyncConnection``; both run an operation inside one transaction, so an
operation that raises half way writes nothing.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import and_, null, select, update
from sqlalchemy.sql import Executable

from .tables import CompactionRow, MessageRow, PartRow, SessionRow, ToolOutputRow, ToolStateRow

__all__ = [
    "C",
    "M",
    "MESSAGE_COLUMNS",
    "O",
    "Op",
    "P",
    "S",
    "Step",
    "T",
    "refresh_boundary",
    "select_messages",
    "select_parts",
    "step",
]

Fetch = Literal["all", "first", "rowcount", "none"]


@dataclass(frozen=True, slots=True)
class Step:
    statement: Executable
    params: dict[str, Any] | list[dict[str, Any]] | None = None
    fetch: Fetch = "none"


Op = Generator[Step, Any, Any]


def step(statement: Executable, params: Any = None, fetch: Fetch = "none") -> Step:
    return Step(statement, params, fetch)


S, M, P, T, O, C = (
    SessionRow.__table__,
    MessageRow.__table__,
    PartRow.__table__,
    ToolStateRow.__table__,
    ToolOutputRow.__table__,
    CompactionRow.__table__,
)

MESSAGE_COLUMNS = [
    M.c.id,
    M.c.session_id,
    M.c.seq,
    M.c.role,
    M.c.parent_id,
    M.c.agent,
    M.c.mode,
    M.c.provider_id,
    M.c.model_id,
    M.c.summary,
    M.c.synthetic,
    M.c.finish,
    M.c.error,
    M.c.cost,
    M.c.tokens_input,
    M.c.tokens_output,
    M.c.tokens_reasoning,
    M.c.tokens_cache_read,
    M.c.tokens_cache_write,
    M.c.metadata.label("meta"),
    M.c.created_at,
    M.c.completed_at,
]


def select_messages(session_id_param: Any, from_seq: Any | None = None) -> Any:
    """Messages of a session in order, from ``from_seq`` on: a range scan on ``uq_messages_session_id_seq``."""
    query = select(*MESSAGE_COLUMNS).where(M.c.session_id == session_id_param)
    if from_seq is not None:
        query = query.where(M.c.seq >= from_seq)
    return query.order_by(M.c.seq)


def select_parts(outputs: Literal["all", "unpruned", "none"] = "all") -> Any:
    """Parts joined with their tool state and output; the caller adds the WHERE clause.

    ``outputs="unpruned"`` does not read the output of a pruned part; ``"none"`` reads no output at all.
    """
    source = P.outerjoin(T, T.c.part_id == P.c.id)
    if outputs == "none":
        output = null().label("output")
    else:
        joined = T.c.part_id == O.c.part_id
        if outputs == "unpruned":
            joined = and_(joined, T.c.compacted_at.is_(None))
        source = source.outerjoin(O, joined)
        output = O.c.output
    return select(
        P.c.id,
        P.c.session_id,
        P.c.message_id,
        P.c.position,
        P.c.type,
        P.c.data,
        T.c.call_id,
        T.c.tool,
        T.c.status,
        T.c.input,
        T.c.title,
        T.c.metadata.label("tool_meta"),
        T.c.error.label("tool_error"),
        T.c.started_at,
        T.c.ended_at,
        T.c.compacted_at,
        output,
    ).select_from(source)


def refresh_boundary(session_id: str) -> Op:
    """Recompute the session's cached boundary from the rows (the same rule as ``filter_compacted``).

    The boundary is the newest user message holding a ``compaction`` part whose summary (an assistant
    message with summary set, a finish and no error, written after it) exists; the view starts there, or at
    the part's ``tail_start_id`` when that message lies before it.
    """
    a, u = M.alias("a"), M.alias("u")
    found = yield step(
        select(u.c.id, u.c.seq, P.c.data)
        .select_from(a.join(u, u.c.id == a.c.parent_id).join(P, and_(P.c.message_id == u.c.id, P.c.type == "compaction")))
        .where(
            a.c.session_id == session_id,
            a.c.role == "assistant",
            a.c.summary.is_(True),
            a.c.finish.is_not(None),
            a.c.error.is_(None),
            u.c.session_id == session_id,
            u.c.role == "user",
            u.c.seq < a.c.seq,
        )
        .order_by(u.c.seq.desc(), P.c.position)
        .limit(1),
        fetch="first",
    )
    boundary_id, start = None, 0
    if found is not None:
        boundary_id, start = found.id, found.seq
        tail_id = (found.data or {}).get("tail_start_id")
        if tail_id:
            tail = yield step(
                select(M.c.seq).where(M.c.id == tail_id, M.c.session_id == session_id), fetch="first"
            )
            if tail is not None and tail.seq < start:
                start = tail.seq
    yield step(
        update(S).where(S.c.id == session_id).values(boundary_message_id=boundary_id, boundary_seq=start)
    )
    return boundary_id
