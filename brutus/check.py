"""The rules ``check`` holds the stored rows to, as pure functions over light rows (no database here).

- A session's cached boundary (``sessions.boundary_message_id`` / ``boundary_seq``) must be what
  ``filter_compacted`` computes from its messages: the user message of the last completed compaction, and
  the seq the view starts at (its tail start, when it keeps one); ``(None, 0)`` without a completed one.
- ``messages.seq`` runs 1, 2, … ``sessions.last_seq`` per session: no gap, no duplicate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .history import completed_compactions, filter_compacted
from .models import CompactionPart, Message, MessageTime, MessageWithParts

__all__ = ["LightMessage", "expected_boundary", "light_history", "seq_anomalies"]


@dataclass(frozen=True, slots=True)
class LightMessage:
    """What the boundary rule reads of a message: no text, no tool output."""

    id: str
    seq: int
    role: str
    parent_id: str | None
    summary: bool
    finished: bool
    errored: bool
    compaction_tail: str | None = None  # the tail_start_id of its compaction part
    has_compaction: bool = False


def light_history(session_id: str, rows: Sequence[LightMessage]) -> list[MessageWithParts]:
    """``MessageWithParts`` carrying only what ``filter_compacted`` looks at (compaction parts, summary flags)."""
    history = []
    for row in rows:
        info = Message.model_construct(
            id=row.id,
            session_id=session_id,
            seq=row.seq,
            role=row.role,
            parent_id=row.parent_id,
            summary=row.summary,
            finish="stop" if row.finished else None,
            error={"message": "error"} if row.errored else None,
            time=MessageTime.model_construct(created=0, completed=None),
        )
        parts = []
        if row.has_compaction:
            parts.append(CompactionPart.model_construct(type="compaction", tail_start_id=row.compaction_tail))
        history.append(MessageWithParts.model_construct(info=info, parts=parts))
    return history


def expected_boundary(history: Sequence[MessageWithParts]) -> tuple[str | None, int]:
    """The boundary pointer a session with this history must hold: (boundary user message id, view start seq)."""
    found = completed_compactions(history)
    if not found:
        return None, 0
    view = filter_compacted(history)
    return history[found[-1].user_index].info.id, view[0].info.seq


def seq_anomalies(seqs: Sequence[int], last_seq: int) -> tuple[list[tuple[int, int]], list[int]]:
    """The gaps (inclusive ranges of missing seqs) and the duplicated seqs of a session whose counter stands
    at ``last_seq``."""
    counts = Counter(seqs)
    gaps: list[tuple[int, int]] = []
    expected = 1
    for seq in sorted(counts):
        if seq > expected:
            gaps.append((expected, seq - 1))
        expected = max(expected, seq + 1)
    if last_seq >= expected:
        gaps.append((expected, last_seq))
    duplicated = sorted(n for n, count in counts.items() if count > 1)
    return gaps, duplicated
