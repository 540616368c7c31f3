"""``tier_view``: the history as the model sees it once each covered range is replaced by its summary.

Rules:

- The *originals* are the history's messages that are not tier summaries. A tier summary applies when it
  is complete (``finish`` set, no ``error``), its metadata validates, both ends of its ``covers`` are among
  the originals given (in order), it comes after its range, and its range holds no *barrier*: a message
  with a ``compaction`` part, a prefix-compaction summary (``summary`` set), or the verbatim tail start of a
  completed compaction (so ``to_anthropic`` can still put the compaction pair before its tail).
- Newest first: a summary applies only when its range does not overlap the range of a newer applied
  summary. A goal batch covering earlier ``[SUMMARIZED]`` blocks therefore wins over them (hierarchical),
  and a partial overlap, which the strategies never write, leaves the older summary out.
- Each applied summary takes the place of the first message of its range; the rest of the range goes.
  A tier summary that does not apply is left out too: its content is either covered by a newer summary or
  sits behind a compaction boundary. Everything else keeps its order.
- It composes with ``filter_compacted`` (``tier_view(filter_compacted(h))``: ranges reaching behind the
  boundary do not apply) and with prune (pruned outputs stay pruned inside the messages kept). A range
  is made of whole messages, and a tool call and its result live in one part, so no substitution can
  separate them: ``to_anthropic`` of a tier view is as valid as that of any history.
- Pure: the view holds the caller's objects; nothing is copied or mutated.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from typing import NamedTuple

from ..history import compaction_part, completed_compactions
from ..models import MessageWithParts
from ..estimates import estimate_message_tokens
from .metadata import claims_tier_summary, tier_metadata

__all__ = ["Span", "barrier_ids", "is_barrier", "span_of", "tier_view", "view_tokens"]


class Span(NamedTuple):
    """The original messages a view message stands for (itself, or a summary's range)."""

    from_id: str
    from_seq: int
    to_id: str
    to_seq: int


def span_of(message: MessageWithParts) -> Span:
    """What a message of a tier view stands for: a summary's ``covers``, else the message itself."""
    metadata = tier_metadata(message)
    if metadata is not None:
        covers = metadata.covers
        return Span(covers.from_id, covers.from_seq, covers.to_id, covers.to_seq)
    info = message.info
    return Span(info.id, info.seq, info.id, info.seq)


def barrier_ids(history: Sequence[MessageWithParts]) -> frozenset[str]:
    """The ids of the tail starts of the completed compactions in ``history`` (the other barriers are
    recognised from the message alone, by ``is_barrier``)."""
    return frozenset(history[c.tail_index].info.id for c in completed_compactions(history) if c.tail_index is not None)


def is_barrier(message: MessageWithParts, tails: frozenset[str]) -> bool:
    """A message no tier range may hold: a compaction message, a prefix summary, or a kept tail's start."""
    info = message.info
    if info.role == "assistant" and info.summary:
        return True
    return compaction_part(message) is not None or info.id in tails


def _complete(message: MessageWithParts) -> bool:
    return bool(message.info.finish) and not message.info.error


def _overlaps(accepted: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end] meets one of the disjoint, start-sorted ``accepted`` ranges."""
    at = bisect_left(accepted, (end + 1, -1)) - 1
    return at >= 0 and accepted[at][1] >= start


def _ends(message: MessageWithParts) -> tuple[str, str] | None:
    """The ``covers`` ids of a tier summary, read without validating the rest (that is done only for the
    summaries that would apply: most are nested in a newer one)."""
    covers = (message.info.metadata or {}).get("covers")
    if isinstance(covers, dict) and isinstance(covers.get("from_id"), str) and isinstance(covers.get("to_id"), str):
        return covers["from_id"], covers["to_id"]
    return None


def _applied(history: Sequence[MessageWithParts]) -> tuple[list[MessageWithParts], dict[int, tuple[int, MessageWithParts]]]:
    originals: list[MessageWithParts] = []
    where: dict[str, int] = {}  # original id -> index among originals
    history_index: list[int] = []  # original index -> index in history
    candidates: list[tuple[int, MessageWithParts]] = []
    for index, message in enumerate(history):
        if claims_tier_summary(message):
            if _complete(message):
                candidates.append((index, message))
            continue
        where.setdefault(message.info.id, len(originals))
        history_index.append(index)
        originals.append(message)
    tails = barrier_ids(history)
    barriers_before = [0]
    for message in originals:
        barriers_before.append(barriers_before[-1] + is_barrier(message, tails))
    accepted: list[tuple[int, int]] = []
    starts: dict[int, tuple[int, MessageWithParts]] = {}
    for index, message in reversed(candidates):
        ends = _ends(message)
        if ends is None:
            continue
        start, end = where.get(ends[0]), where.get(ends[1])
        if start is None or end is None or start > end or history_index[end] > index:
            continue
        if barriers_before[end + 1] - barriers_before[start] or _overlaps(accepted, start, end):
            continue
        if tier_metadata(message) is None:
            continue
        insort(accepted, (start, end))
        starts[start] = (end, message)
    return originals, starts


def tier_view(history: Sequence[MessageWithParts]) -> list[MessageWithParts]:
    """``history`` with each covered range replaced by its newest covering summary (see the module rules)."""
    if not any(claims_tier_summary(message) for message in history):
        return list(history)
    originals, starts = _applied(history)
    view: list[MessageWithParts] = []
    index = 0
    while index < len(originals):
        found = starts.get(index)
        if found is None:
            view.append(originals[index])
            index += 1
        else:
            end, summary = found
            view.append(summary)
            index = end + 1
    return view


def view_tokens(view: Sequence[MessageWithParts]) -> int:
    """The estimate of a view as it would be sent: ``estimate_message_tokens`` summed."""
    return sum(estimate_message_tokens(message) for message in view)
