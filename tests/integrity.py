"""Test helpers for the reliability suites: what a healthy database looks like, and dumps to compare.

``integrity_problems(store)`` lists every broken rule it finds (empty when the database is sound):

- SQLite's own ``PRAGMA integrity_check`` and ``foreign_key_check``;
- no orphans: every message, part, tool state, tool output and compaction belongs to an existing parent of
  the same session; every ``tool`` part has exactly one tool state, no other part has one;
- per session, ``messages.seq`` is exactly 1..``last_seq`` (unique and gapless); per message, part positions
  are exactly 1..``part_count`` and ``token_estimate`` is the sum of its parts' estimates;
- tool states: a known status, a completed one has its output, ``output_tokens`` matches that output;
- the boundary cache (``sessions.boundary_*``) and ``store.filter_compacted`` agree with the pure
  ``brutus.history`` rules over the full history;
- compaction markers: a known status; a completed one points at its own compaction user message and the
  completed summary answering it, and no two completed markers share a message;
- and whatever ``brutus check`` (``brutus.db.check_ops.check_database``) reports, but for markers left
  pending: a writer killed mid-compaction leaves one until the next compaction closes it (test_crash checks
  that itself).

``dump(engine, session_id)`` is every row of one session (or of the whole database), in primary-key order,
JSON decoded, for before/after comparisons.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from sqlalchemy import Engine, func, select, text

from brutus.db.convert import text_out
from brutus.db.check_ops import check_database
from brutus.db.tables import CompactionRow, MessageRow, PartRow, SessionRow, ToolOutputRow, ToolStateRow
from brutus.history import completed_compactions, filter_compacted
from brutus.store import SessionStore
from brutus.tokens import estimate_tokens
from brutus.flows import Tx

__all__ = ["TABLES", "dump", "integrity_problems", "normalize"]

S, M, P, T, O, C = (
    SessionRow.__table__,
    MessageRow.__table__,
    PartRow.__table__,
    ToolStateRow.__table__,
    ToolOutputRow.__table__,
    CompactionRow.__table__,
)
TABLES = {"sessions": S, "messages": M, "parts": P, "tool_states": T, "tool_outputs": O, "compactions": C}
STATUSES = {"pending", "running", "completed", "error"}
COMPACTION_STATUSES = {"pending", "completed", "failed"}


def dump(engine: Engine, session_id: str | None = None, *, exclude: tuple[str, ...] = ()) -> dict[str, list[tuple]]:
    """Every row of ``session_id`` (all sessions when None), table by table, in primary-key order."""
    out: dict[str, list[tuple]] = {}
    with engine.connect() as conn:
        for name, table in TABLES.items():
            if name in exclude:
                continue
            query = select(table)
            if session_id is not None:
                if name == "sessions":
                    query = query.where(S.c.id == session_id)
                elif name == "tool_outputs":
                    query = query.where(O.c.part_id.in_(select(P.c.id).where(P.c.session_id == session_id)))
                else:
                    query = query.where(table.c.session_id == session_id)
            query = query.order_by(*table.primary_key.columns)
            out[name] = [tuple(row) for row in conn.execute(query)]
    return out


def normalize(value: Any, old: str, new: str) -> Any:
    """``value`` with ``old`` replaced by ``new`` in every string (to compare dumps of sessions tagged apart)."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {normalize(k, old, new): normalize(v, old, new) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(normalize(v, old, new) for v in value)
    return value


def integrity_problems(store: SessionStore, sessions: list[str] | None = None) -> list[str]:
    """Everything wrong with the database behind ``store`` (see the module docstring); [] when sound.
    The views are checked for ``sessions`` only when given (loading every session's history is slow)."""
    problems: list[str] = []
    engine = store.engine
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            checked = [r[0] for r in conn.execute(text("PRAGMA integrity_check"))]
            if checked != ["ok"]:
                problems.append(f"PRAGMA integrity_check: {checked}")
            broken = conn.execute(text("PRAGMA foreign_key_check")).all()
            if broken:
                problems.append(f"PRAGMA foreign_key_check: {broken}")
        rows = {r.id: r for r in conn.execute(select(S))}
        messages = {r.id: r for r in conn.execute(select(M))}
        parts = {r.id: r for r in conn.execute(select(P))}
        states = {r.part_id: r for r in conn.execute(select(T))}
        outputs = {r.part_id: text_out(r.output) for r in conn.execute(select(O))}
        markers = conn.execute(select(C)).all()
        conn.rollback()

    for m in messages.values():
        if m.session_id not in rows:
            problems.append(f"message {m.id}: no session {m.session_id}")
    for p in parts.values():
        owner = messages.get(p.message_id)
        if owner is None:
            problems.append(f"part {p.id}: no message {p.message_id}")
        elif owner.session_id != p.session_id:
            problems.append(f"part {p.id}: session {p.session_id} but its message is in {owner.session_id}")
        if (p.type == "tool") != (p.id in states):
            problems.append(f"part {p.id} ({p.type}): {'no' if p.type == 'tool' else 'a'} tool state")
    for part_id, s in states.items():
        part = parts.get(part_id)
        if part is not None and part.session_id != s.session_id:
            problems.append(f"tool state {part_id}: session {s.session_id}, part's {part.session_id}")
        if s.status not in STATUSES:
            problems.append(f"tool state {part_id}: status {s.status!r}")
        if s.status == "completed" and part_id not in outputs:
            problems.append(f"tool state {part_id}: completed without an output")
        if part_id in outputs and s.output_tokens != estimate_tokens(outputs[part_id]):
            problems.append(f"tool state {part_id}: output_tokens {s.output_tokens} for {len(outputs[part_id])} chars")
        if s.status in ("completed", "error") and s.ended_at is None:
            problems.append(f"tool state {part_id}: {s.status} without ended_at")
    for part_id in outputs:
        if part_id not in states:
            problems.append(f"tool output {part_id}: no tool state")

    seqs: dict[str, list[int]] = defaultdict(list)
    for m in messages.values():
        seqs[m.session_id].append(m.seq)
    for session_id, s in rows.items():
        got = sorted(seqs.get(session_id, []))
        if got != list(range(1, s.last_seq + 1)):
            problems.append(f"session {session_id}: seqs {_short(got)} but last_seq {s.last_seq}")
        if s.parent_id is not None and s.parent_id not in rows:
            problems.append(f"session {session_id}: no parent {s.parent_id}")
    by_message: dict[str, list[Any]] = defaultdict(list)
    for p in parts.values():
        by_message[p.message_id].append(p)
    for m in messages.values():
        own = by_message.get(m.id, [])
        positions = sorted(p.position for p in own)
        if positions != list(range(1, m.part_count + 1)):
            problems.append(f"message {m.id}: positions {_short(positions)} but part_count {m.part_count}")
        if m.token_estimate != sum(p.tokens for p in own):
            problems.append(f"message {m.id}: token_estimate {m.token_estimate} != {sum(p.tokens for p in own)}")

    used = Counter()
    for c in markers:
        if c.session_id not in rows:
            problems.append(f"compaction {c.id}: no session {c.session_id}")
        if c.status not in COMPACTION_STATUSES:
            problems.append(f"compaction {c.id}: status {c.status!r}")
        if c.status != "completed":
            continue
        user, summary = messages.get(c.user_message_id), messages.get(c.summary_message_id)
        if user is None or summary is None:
            problems.append(f"compaction {c.id}: completed without its messages")
            continue
        if user.session_id != c.session_id or summary.session_id != c.session_id:
            problems.append(f"compaction {c.id}: messages of another session")
        if not any(p.type == "compaction" for p in by_message.get(user.id, [])):
            problems.append(f"compaction {c.id}: user message {user.id} holds no compaction part")
        if not (summary.summary and summary.parent_id == user.id and summary.seq > user.seq):
            problems.append(f"compaction {c.id}: {summary.id} is not the summary answering {user.id}")
        used.update([user.id, summary.id])
    problems += [f"message {mid} belongs to {n} completed compactions" for mid, n in used.items() if n > 1]

    for session_id in sessions if sessions is not None else list(rows):
        s = rows[session_id]
        history = store.messages(session_id)
        expected = [m.info.id for m in filter_compacted(history)]
        view = [m.info.id for m in store.filter_compacted(session_id)]
        if view != expected:
            problems.append(f"session {session_id}: filter_compacted {_short(view)}, the rules say {_short(expected)}")
        done = completed_compactions(history)
        boundary = history[done[-1].user_index].info.id if done else None
        if s.boundary_message_id != boundary:
            problems.append(f"session {session_id}: boundary_message_id {s.boundary_message_id}, the rules say {boundary}")
    report = store.run(Tx(check_database(), write=False))  # as `brutus check` runs it
    problems += [f"brutus check: {p.kind} {p.session_id} {p.row_id}: {p.detail}" for p in report.problems if p.kind != "pending-compaction"]
    return problems


def _short(values: list[Any]) -> str:
    return repr(values) if len(values) <= 12 else f"{values[:5]} … {values[-5:]} ({len(values)})"


def count_rows(engine: Engine) -> dict[str, int]:
    """The number of rows in each table."""
    with engine.connect() as conn:
        return {name: conn.execute(select(func.count()).select_from(table)).scalar_one() for name, table in TABLES.items()}
