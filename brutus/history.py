"""Compaction boundaries in a loaded history, and the view that starts at the last one (OpenCode's filterCompacted).

Rules:

- A *completed summary* is an assistant message with ``summary`` set, a ``finish`` and no ``error``.
  A pending (no finish), failed or errored summary completes nothing.
- A *completed boundary* is a user message holding a ``compaction`` part whose id is the ``parent_id`` of a
  completed summary that comes after it.
- ``filter_compacted`` walks newest → oldest and stops at the first completed boundary it reaches, that
  message included. If the boundary's compaction part names a ``tail_start_id`` found before it, the walk
  goes on back to that message, included (the verbatim tail the summary did not cover). A tail start that is
  missing, or not before the boundary, is ignored. The result is chronological.
- Nothing here copies or mutates messages: the view holds the caller's objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .models import CompactionPart, MessageWithParts

__all__ = [
    "CompletedCompaction",
    "compaction_part",
    "completed_compactions",
    "filter_compacted",
    "is_completed_summary",
]


class CompletedCompaction(NamedTuple):
    """Where one completed compaction sits in a history (indices into that history)."""

    user_index: int  # the user message holding the compaction part
    summary_index: int  # its completed summary
    tail_index: int | None  # the tail start, when it names a message before ``user_index``


def compaction_part(message: MessageWithParts) -> CompactionPart | None:
    """The first ``compaction`` part of a user message; None for anything else."""
    if message.info.role != "user":
        return None
    for part in message.parts:
        if isinstance(part, CompactionPart):
            return part
    return None


def is_completed_summary(message: MessageWithParts) -> bool:
    """An assistant summary that finished without an error."""
    info = message.info
    return info.role == "assistant" and info.summary and bool(info.finish) and not info.error


def _tail_index(history: Sequence[MessageWithParts], boundary: int, tail_start_id: str | None) -> int | None:
    if not tail_start_id:
        return None
    for index in range(boundary - 1, -1, -1):
        if history[index].info.id == tail_start_id:
            return index
    return None


def filter_compacted(history: Sequence[MessageWithParts]) -> list[MessageWithParts]:
    """The messages back to the last completed compaction boundary (and its tail), chronological."""
    completed: set[str] = set()
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        info = message.info
        if info.role == "user" and info.id in completed:
            part = compaction_part(message)
            if part is not None:
                tail = _tail_index(history, index, part.tail_start_id)
                return list(history[index if tail is None else tail :])
        if is_completed_summary(message) and info.parent_id:
            completed.add(info.parent_id)
    return list(history)


def completed_compactions(history: Sequence[MessageWithParts]) -> list[CompletedCompaction]:
    """Every completed compaction in ``history``, oldest first (each user message paired with its first summary)."""
    summaries: dict[str, int] = {}
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if is_completed_summary(message) and message.info.parent_id:
            summaries[message.info.parent_id] = index  # walking backwards: the earliest summary wins
    found: list[CompletedCompaction] = []
    for index, message in enumerate(history):
        summary = summaries.get(message.info.id)
        if summary is None or summary <= index:
            continue
        part = compaction_part(message)
        if part is not None:
            found.append(CompletedCompaction(index, summary, _tail_index(history, index, part.tail_start_id)))
    return found
