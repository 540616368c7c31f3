"""``check_database``: integrity of every row in the store; ``repair_database``: rebuild what is derived
(sans I/O like ``ops``).

What the check looks for (each a ``Problem`` kind):

- rows that lost their parent (``orphan-message``, ``orphan-part``, ``orphan-tool-state``,
  ``orphan-tool-output``), a tool state on a part that is not a tool part and a tool part without a state,
  rows whose ``session_id`` disagrees with their parent's (``session-mismatch``). Foreign keys prevent these;
  a database written with them off (or by hand) can still hold them.
- a session boundary pointer that is not what ``filter_compacted`` computes from the rows
  (``broken-boundary``; see ``brutus.check``).
- ``messages.seq`` gaps and duplicates, a ``sessions.last_seq`` counter behind the messages, and message
  counters (``part_count``, ``token_estimate``) that disagree with the parts.

Compaction markers left ``pending`` are notices, not problems: brutus survives a process killed mid-compaction
(the next compaction closes the marker). ``resolve_pending`` tells the abandoned ones (lock free) from the
running ones (lock held), given the sessions whose compaction lock is held.

``repair_database`` rebuilds, in one transaction, what brutus derives from the rows: message counters, a
``last_seq`` that is not the highest seq, boundary pointers. Nothing else: an orphan, a gap inside the
history or a mismatched row stays a problem. ``fail_abandoned`` marks a session's pending markers failed; the
store runs it while it holds that session's compaction lock, so a running compaction is never touched.

Reads light columns only: no part data but compaction parts, no output text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Generator
from typing import Any

from sqlalchemy import func, select, update

from ..check import LightMessage, expected_boundary, light_history, seq_anomalies
from ..errors import CompactionInProgress, InvalidInput
from ..flows import HeldLocks, Locked, Tx
from ..reports import CheckReport, Notice, Problem, Repair
from . import statements as st
from .compaction_ops import ABANDONED
from .statements import C, M, O, Op, P, S, T, step

__all__ = [
    "check_database",
    "check_flow",
    "fail_abandoned",
    "pending_sessions",
    "repair_database",
    "resolve_pending",
    "sessions_with_pending",
]

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


def _stale_counter_rows() -> Op:
    parts = func.count(P.c.id)
    tokens = func.coalesce(func.sum(P.c.tokens), 0)
    rows = yield step(
        select(M.c.id, M.c.session_id, M.c.part_count, M.c.token_estimate, parts.label("parts"), tokens.label("tokens"))
        .select_from(M.outerjoin(P, P.c.message_id == M.c.id))
        .group_by(M.c.id, M.c.session_id, M.c.part_count, M.c.token_estimate)
        .having((M.c.part_count != parts) | (M.c.token_estimate != tokens)),
        fetch="all",
    )
    return rows


def _counters() -> Op:
    rows = yield from _stale_counter_rows()
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


def _load() -> Op:
    """Every session's counters and pointer, its messages as ``LightMessage`` in seq order, the part count."""
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
    return sessions, by_session, len(message_rows), int(part_count.n)


def check_database() -> Op:
    """Every integrity problem in the store, by kind then session; pending compaction markers as notices
    (kind ``pending-compaction``: ``resolve_pending`` tells abandoned from running)."""
    sessions, by_session, messages, parts = yield from _load()
    problems: list[Problem] = yield from _orphans()
    for session in sessions:
        problems += _session_problems(session, by_session.get(session.id, []))
    pending = yield step(
        select(C.c.id, C.c.session_id, C.c.created_at).where(C.c.status == "pending").order_by(C.c.created_at),
        fetch="all",
    )
    notices = [
        Notice(kind="pending-compaction", session_id=r.session_id, row_id=r.id, detail=f"compaction {r.id} is pending")
        for r in pending
    ]
    problems += yield from _counters()
    return CheckReport(sessions=len(sessions), messages=messages, parts=parts, problems=problems, notices=notices)


def check_flow(*, repair: bool, read_only: bool, clock: Callable[[], int]) -> Generator[Any, Any, CheckReport]:
    """``store.check`` as a flow (``brutus.flows``): with ``repair``, each session's abandoned markers failed
    under its compaction lock (a session whose lock is held is running: left alone), then the derived
    columns rebuilt; then the check, its pending markers told apart by whose lock is held now."""
    repairs: list[Repair] = []
    if repair:
        if read_only:
            raise InvalidInput("check --repair needs a store that can write (this one is read-only)")
        for session_id in sorted((yield Tx(sessions_with_pending(), write=False))):
            try:
                repairs += yield Locked(session_id, Tx(fail_abandoned(session_id, now=clock())))
            except CompactionInProgress:
                continue  # running: left alone
        repairs += yield Tx(repair_database())
    report = yield Tx(check_database(), write=False)
    held = yield HeldLocks(pending_sessions(report))
    return resolve_pending(report, held).model_copy(update={"repaired": repair, "repairs": repairs})


def pending_sessions(report: CheckReport) -> set[str]:
    """The sessions with a compaction marker pending in ``report``."""
    return {n.session_id for n in report.notices if n.kind == "pending-compaction" and n.session_id}


def sessions_with_pending() -> Op:
    """The sessions that have a compaction marker pending (one light query, for ``repair``)."""
    rows = yield step(select(C.c.session_id).where(C.c.status == "pending").distinct(), fetch="all")
    return {r.session_id for r in rows}


def resolve_pending(report: CheckReport, held: Collection[str]) -> CheckReport:
    """``report`` with each pending marker told apart: running (its session's compaction lock is in ``held``)
    or abandoned (the lock is free: the process that ran it stopped)."""
    notices = []
    for n in report.notices:
        if n.kind != "pending-compaction":
            notices.append(n)
        elif n.session_id in held:
            detail = f"compaction {n.row_id} is running (its session's compaction lock is held)"
            notices.append(n.model_copy(update={"kind": "running-compaction", "detail": detail}))
        else:
            detail = (
                f"compaction {n.row_id} was abandoned: still pending, its lock is free (the process running it "
                "stopped); the next compaction or check --repair marks it failed"
            )
            notices.append(n.model_copy(update={"kind": "abandoned-compaction", "detail": detail}))
    return report.model_copy(update={"notices": notices})


def fail_abandoned(session_id: str, *, now: int) -> Op:
    """Mark the session's pending markers failed (run it holding the session's compaction lock: then none of
    them is running); a ``Repair`` for each."""
    rows = yield step(
        select(C.c.id).where(C.c.session_id == session_id, C.c.status == "pending").order_by(C.c.created_at),
        fetch="all",
    )
    if rows:
        yield step(st.FAIL_PENDING_COMPACTIONS, {"b_sid": session_id, "b_error": ABANDONED, "b_now": now})
    return [
        Repair(kind="abandoned-compaction", session_id=session_id, row_id=r.id,
               detail=f"compaction {r.id}: pending → failed (abandoned)")
        for r in rows
    ]


def repair_database() -> Op:
    """Rebuild the derived columns from the rows, in this one transaction: message ``part_count`` /
    ``token_estimate``, ``sessions.last_seq`` (to the highest seq) and the boundary pointer. Returns the
    ``Repair``s made. (On PostgreSQL the session rows are locked first, so no append moves them meanwhile.)"""
    yield step(select(S.c.id).order_by(S.c.id).with_for_update(), fetch="all")
    sessions, by_session, _, _ = yield from _load()
    repairs: list[Repair] = []
    for r in (yield from _stale_counter_rows()):
        tokens = int(r.tokens)
        yield step(update(M).where(M.c.id == r.id).values(part_count=r.parts, token_estimate=tokens))
        detail = f"message {r.id}: {r.part_count} parts / {r.token_estimate} tokens → {r.parts} / {tokens}"
        repairs.append(Repair(kind="message-counters", session_id=r.session_id, row_id=r.id, detail=detail))
    for session in sessions:
        messages = by_session.get(session.id, [])
        top = max((m.seq for m in messages), default=0)
        if session.last_seq != top:
            yield step(update(S).where(S.c.id == session.id).values(last_seq=top))
            detail = f"last_seq {session.last_seq} → {top} (the highest message seq)"
            repairs.append(Repair(kind="seq-counter", session_id=session.id, detail=detail))
        expected_id, expected_seq = expected_boundary(light_history(session.id, messages))
        if (session.boundary_message_id, session.boundary_seq or 0) != (expected_id, expected_seq):
            yield step(
                update(S)
                .where(S.c.id == session.id)
                .values(boundary_message_id=expected_id, boundary_seq=expected_seq)
            )
            detail = (
                f"boundary {session.boundary_message_id} at seq {session.boundary_seq} → "
                f"{expected_id} at seq {expected_seq}"
            )
            repairs.append(Repair(kind="boundary", session_id=session.id, row_id=expected_id, detail=detail))
    return repairs
