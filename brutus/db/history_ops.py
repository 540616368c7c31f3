"""Reading a session's history and pruning it: ``messages()`` / ``filter_compacted()`` and ``prune``.

Operations in the ``Step`` protocol (see ``statements``), like ``ops``: the store runs each in one
transaction.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInput, NotFound
from ..models import CompactionConfig, MessageWithParts, PruneResult
from ..pruning import PruneCandidate, plan_prune, prune_result
from . import statements as st
from .convert import build_history, message_from_row, part_from_row, reuse_history
from .ops import check_id
from .statements import Op, step

__all__ = ["load_message", "load_messages", "mark_pruned", "prune_session"]


# -- reads --------------------------------------------------------------------------------------------------


def load_messages(session_id: Any, *, filtered: bool, reuse: dict[str, Any] | None = None) -> Op:
    """The history of a session, whole or from its last completed boundary on, as ``MessageWithParts``.

    Filtered, both queries are index range scans from the boundary (cost grows with the view, not the
    history), and the output of a pruned part is not read. ``reuse``: see ``convert.reuse_history``.
    """
    session_id = check_id("session", session_id)
    session = yield step(st.SESSION_BOUNDARY, {"b_sid": session_id}, fetch="first")
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
