"""The edits besides appending: renaming or moving a session, and rewinding its history.

Rules:

- ``update_session`` sets the title and/or the directory given (None leaves one as it is), and the session's
  own ``created_at`` / ``updated_at`` when given (an import restoring the times a session was recorded with;
  otherwise a change sets ``updated_at`` to now).
- ``rewind(session_id, message_id)`` deletes that message and every later one of the session, with their
  parts, tool states and outputs, and the compaction markers whose compaction or summary message goes with
  them; the next message appended takes the first deleted message's seq (seqs stay gapless), and the cached
  boundary is recomputed. It is the undo of an append (an agent SDK's ``pop_item``, a mirror replacing the
  message it is still receiving), never a way to shorten a history compaction covers: that is ``compact``.

Operations in the ``Step`` protocol (see ``statements``), like ``ops``: each runs in one transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, update

from ..errors import InvalidInput, NotFound
from . import statements as st
from .convert import session_from_row, text_in
from .sqlite_driver import prebuilt
from .ops import check_id
from .statements import Op, refresh_boundary, step

__all__ = ["rewind", "update_session"]


_SET_TIMES = prebuilt(
    update(st.S)
    .where(st.S.c.id == bindparam("b_sid"))
    .values(created_at=bindparam("b_created"), updated_at=bindparam("b_updated"))
)


def update_session(
    session_id: Any,
    *,
    title: str | None,
    directory: str | None,
    now: int,
    created_at: int | None = None,
    updated_at: int | None = None,
) -> Op:
    session_id = check_id("session", session_id)
    for name, value in (("title", title), ("directory", directory)):
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"session {name} must be a string, got {type(value).__name__}")
    for name, value in (("created_at", created_at), ("updated_at", updated_at)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63):
            raise InvalidInput(f"session {name} must be milliseconds since the epoch (an int >= 0), got {value!r}")
    if title is not None:
        yield step(st.RENAME_SESSION, {"b_sid": session_id, "b_title": text_in(title), "b_now": now})
    if directory is not None:
        yield step(st.MOVE_SESSION, {"b_sid": session_id, "b_directory": text_in(directory), "b_now": now})
    row = yield step(st.SESSION, {"b_sid": session_id}, fetch="first")
    if row is None:
        raise NotFound("session", session_id)
    if created_at is not None or updated_at is not None:
        created = row.created_at if created_at is None else created_at
        updated = row.updated_at if updated_at is None else updated_at
        yield step(_SET_TIMES, {"b_sid": session_id, "b_created": created, "b_updated": updated})
        row = yield step(st.SESSION, {"b_sid": session_id}, fetch="first")
    return session_from_row(row)


def rewind(session_id: Any, message_id: Any, *, now: int) -> Op:
    """Delete ``message_id`` and everything after it in its session; the number of messages deleted."""
    session_id = check_id("session", session_id)
    message_id = check_id("message", message_id)
    session = yield step(st.SESSION_FOR_UPDATE, {"b_sid": session_id}, fetch="first")  # appenders wait
    if session is None:
        raise NotFound("session", session_id)
    found = yield step(st.MESSAGE_SEQ_IN_SESSION, {"b_mid": message_id, "b_sid": session_id}, fetch="first")
    if found is None:
        raise NotFound("message", message_id)
    params = {"b_sid": session_id, "b_from_seq": found.seq}
    yield step(st.DELETE_COMPACTIONS_FROM, params)
    deleted = yield step(st.DELETE_MESSAGES_FROM, params, fetch="rowcount")
    yield step(st.REWIND_SESSION, {"b_sid": session_id, "b_seq": found.seq - 1, "b_now": now})
    if session.boundary_seq:  # a boundary at or after the cut is gone with it; one before it stays
        yield from refresh_boundary(session_id)
    return deleted
