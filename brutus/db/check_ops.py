"""``check_database``: integrity of every row in the store (a read operation, sans I/O like ``ops``).

What it looks for (each a ``Problem`` kind):

- rows that lost their parent (``orphan-message``, ``orphan-part``, ``orphan-tool-state``,
  ``orphan-tool-output``), a tool state on a part that is not a tool part and a tool part without a state,
  rows whose ``session_id`` disagrees with their parent's (``session-mismatch``). Foreign keys prevent these;
  a database written with them off (or by hand) can still hold them.
- a session boundary pointer that is not what ``filter_compacted`` computes from the rows
  (``broken-boundary``; see ``brutus.integrity``), compaction markers left ``pending``.
- ``messages.seq`` gaps and duplicates, a ``sessions.last_seq`` counter behind the messages, and message
  counters (``part_count``, ``token_estimate``) that disagree with the parts.

Reads light columns only: no part data but compaction parts, no output text.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import func, select

from ..integrity import LightMessage, expected_boundary, light_history, seq_anomalies
from ..maintenance import CheckReport, Problem
from .statements import C, M, O, Op, P, S, T, step

__all__ = ["check_database"]

_SHOWN_GAPS = 5


def _problem(kind: Any, where: Any, detail: str, *, row_id: str | None = None) -> Problem:
    """A problem about a row (its ``session_id`` names the session) or a session id."""
    session_id = where if isinstance(where, str) or where is None else getattr(where, "session_id", None)
    return Problem(kind=kind, session_id=session_id, row_id=row_id, detail=detail)


def _orphans() -> Op:
    found: list[Problem] = []
    rows = yield step(
        select(M.c.id, M.c.session_id).select_from(M.outerjoin(S, S.c.id == M.c.session_id)).where(S.c.id.is_(None)),
        fetch="all",
    )
    for r in rows:
        detail = f"message {r.id} belongs to no session ({r.session_id})"
        found.append(_problem("orphan-message", r, detail, row_id=r.id))
    rows = yield step(
        select(P.c.id, P.c.session_id, P.c.message_id, M.c.session_id.label("owner"))
        .select_from(P.outerjoin(M, M.c.id == P.c.message_id))
        .where(M.c.id.is_(None) | (M.c.session_id != P.c.session_id)),
        fetch="all",
    )
    for r in rows:
        if r.owner is None:
            found.append(_problem("orphan-part", r, f"part {r.id} belongs to no message ({r.message_id})", row_id=r.id))
        else:
            detail = f"part {r.id} says session {r.session_id}, its message is in {r.owner}"
            found.append(_problem("session-mismatch", r, detail, row_id=r.id))
    rows = yield step(
        select(T.c.part_id, T.c.session_id, P.c.type, P.c.session_id.label("owner"))
        .select_from(T.outerjoin(P, P.c.id == T.c.part_id))
        .where(P.c.id.is_(None) | (P.c.type != "tool") | (P.c.session_id != T.c.session_id)),
        fetch="all",
    )
    for r in rows:
        if r.type is None:
            found.append(_problem("orphan-tool-state", r, f"tool state {r.part_id} has no part", row_id=r.part_id))
        elif r.type != "tool":
            detail = f"tool state {r.part_id} sits on a {r.type!r} part"
            found.append(_problem("tool-state-without-tool-part", r, detail, row_id=r.part_id))
        else:
            detail = f"tool state {r.part_id} says session {r.session_id}, its part is in {r.owner}"
            found.append(_problem("session-mismatch", r, detail, row_id=r.part_id))
    rows = yield step(
        select(P.c.id, P.c.session_id)
        .select_from(P.outerjoin(T, T.c.part_id == P.c.id))
        .where(P.c.type == "tool", T.c.part_id.is_(None)),
        fetch="all",
    )
    found += [_problem("tool-part-without-state", r, f"tool part {r.id} has no tool state", row_id=r.id) for r in rows]
    rows = yield step(
        select(O.c.part_id).select_from(O.outerjoin(T, T.c.part_id == O.c.part_id)).where(T.c.part_id.is_(None)),
        fetch="all",
    )
    for r in rows:
        detail = f"tool output {r.part_id} has no tool state"
        found.append(_problem("orphan-tool-output", None, detail, row_id=r.part_id))
    return found


def _counters() -> Op:
    parts = func.count(P.c.id)
    tokens = func.coalesce(func.sum(P.c.tokens), 0)
    rows = yield step(
        select(M.c.id, M.c.session_id, M.c.part_count, M.c.token_estimate, parts.label("parts"), tokens.label("tokens"))
        .select_from(M.outerjoin(P, P.c.message_id == M.c.id))
        .group_by(M.c.id, M.c.session_id, M.c.part_count, M.c.token_estimate)
        .having((M.c.part_count != parts) | (M.c.token_estimate != tokens)),
        fetch="all",
    )
    return [
        Problem(
            kind="stale-message-counters",
            session_id=r.session_id,
            row_id=r.id,
            detail=(
                f"message {r.id} counts {r.part_count} parts / {r.token_estimate} tokens, "
                f"its parts are {r.parts} / {int(r.tokens)}"
            ),
        )
        for r in rows
    ]


def _session_problems(session: Any, messages: list[LightMessage]) -> list[Problem]:
    problems = []
    gaps, duplicated = seq_anomalies([m.seq for m in messages], session.last_seq)
    if gaps:
        shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in gaps[:_SHOWN_GAPS])
        more = f" and {len(gaps) - _SHOWN_GAPS} more gaps" if len(gaps) > _SHOWN_GAPS else ""
        detail = f"missing message seq {shown}{more} (counter at {session.last_seq})"
        problems.append(_problem("seq-gap", session.id, detail))
    if duplicated:
        detail = f"message seq used twice: {', '.join(map(str, duplicated[:10]))}"
        problems.append(_problem("seq-duplicate", session.id, detail))
    top = max((m.seq for m in messages), default=0)
    if session.last_seq < top:
        detail = f"last_seq is {session.last_seq} but a message has seq {top}"
        problems.append(_problem("seq-counter", session.id, detail))
    expected_id, expected_seq = expected_boundary(light_history(session.id, messages))
    if (session.boundary_message_id, session.boundary_seq or 0) != (expected_id, expected_seq):
        detail = (
            f"boundary pointer is {session.boundary_message_id} at seq {session.boundary_seq}, "
            f"the rows say {expected_id} at seq {expected_seq}"
        )
        problems.append(_problem("broken-boundary", session.id, detail, row_id=session.boundary_message_id))
    return problems


def check_database() -> Op:
    """Every integrity problem in the store, by kind then session."""
    sessions = yield step(
        select(S.c.id, S.c.last_seq, S.c.boundary_message_id, S.c.boundary_seq).order_by(S.c.id), fetch="all"
    )
    message_rows = yield step(
        select(
            M.c.session_id,
            M.c.id,
            M.c.seq,
            M.c.role,
            M.c.parent_id,
            M.c.summary,
            M.c.finish.is_not(None).label("finished"),
            M.c.error.is_not(None).label("errored"),
        ).order_by(M.c.session_id, M.c.seq, M.c.id),
        fetch="all",
    )
    compaction_rows = yield step(
        select(P.c.message_id, P.c.data).where(P.c.type == "compaction").order_by(P.c.message_id, P.c.position),
        fetch="all",
    )
    part_count = yield step(select(func.count().label("n")).select_from(P), fetch="first")
    tails: dict[str, str | None] = {}
    for row in compaction_rows:
        if row.message_id not in tails:  # the first compaction part of a message is the one that counts
            tails[row.message_id] = (row.data or {}).get("tail_start_id")
    by_session: dict[str, list[LightMessage]] = defaultdict(list)
    for r in message_rows:
        by_session[r.session_id].append(
            LightMessage(
                id=r.id,
                seq=r.seq,
                role=r.role,
                parent_id=r.parent_id,
                summary=bool(r.summary),
                finished=bool(r.finished),
                errored=bool(r.errored),
                compaction_tail=tails.get(r.id),
                has_compaction=r.role == "user" and r.id in tails,
            )
        )
    problems: list[Problem] = yield from _orphans()
    for session in sessions:
        problems += _session_problems(session, by_session.get(session.id, []))
    pending = yield step(
        select(C.c.id, C.c.session_id, C.c.created_at).where(C.c.status == "pending").order_by(C.c.created_at),
        fetch="all",
    )
    for r in pending:
        detail = f"compaction {r.id} is still pending (running now, or abandoned by a process that stopped)"
        problems.append(_problem("pending-compaction", r, detail, row_id=r.id))
    problems += yield from _counters()
    return CheckReport(sessions=len(sessions), messages=len(message_rows), parts=int(part_count.n), problems=problems)
