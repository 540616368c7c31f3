"""Pruning old tool outputs (seed 004, exactly): mark them compacted so they render as a short placeholder.

The rule, over messages newest → oldest:

- count user messages as turns; skip messages while fewer than ``config.protected_turns`` (2) have been seen;
- stop at an assistant summary message (the previous compaction checkpoint);
- walk the message's parts newest → oldest, looking only at *completed* tool parts whose tool is not in
  ``config.protected_tools`` (``skill``);
- stop entirely at a part already compacted (everything older was pruned before);
- add the output's token estimate to ``total``; once ``total`` exceeds ``config.prune_protect`` (40,000), the
  part is to be pruned and its estimate added to ``pruned``;
- commit only if ``pruned`` exceeds ``config.prune_minimum`` (20,000): then exactly those parts get
  ``state.time.compacted = now``. Otherwise nothing is marked and ``pruned`` is 0 (``total`` is still reported,
  and ``prunable`` says how much was beyond the protect window: why nothing was pruned, with the numbers).
- ``config.prune = False`` does nothing and reports zeros.

The output text is never changed. ``plan_prune`` is the one implementation of the rule: it runs over
light rows (``PruneCandidate``) so a store can feed it stored token estimates without reading any output
text; ``prune`` builds those rows from loaded messages and marks the parts it chose.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .models import CompactionConfig, MessageWithParts, PruneResult, Role, ToolPart, ToolStatus
from .tokens import estimate_tokens

__all__ = ["PruneCandidate", "PrunePlan", "plan_prune", "prune", "prune_result"]


class PruneCandidate(NamedTuple):
    """One row of the prune scan: a tool part, or a message without tool parts (``part_id`` None).

    Rows come in chronological order: by message, then by part position within the message. Every message
    appears at least once (a ``LEFT JOIN`` of messages to tool states gives exactly this), because user
    messages count turns whether or not they hold tools. ``message_seq`` groups the rows of one message.
    A named tuple: built at C speed, one per message of the scan.
    """

    message_seq: int
    role: Role
    summary: bool = False
    part_id: str | None = None
    tool: str | None = None
    status: ToolStatus | None = None
    output_tokens: int = 0
    compacted: bool = False


@dataclass(frozen=True, slots=True)
class PrunePlan:
    """What ``plan_prune`` decided: ``part_ids`` (newest first) are to be marked; empty when nothing commits.
    ``prunable``: the tokens beyond the protect window, committed or not (under the minimum: not)."""

    pruned: int
    total: int
    part_ids: tuple[str, ...]
    prunable: int = 0


def _messages_newest_first(rows: Sequence[PruneCandidate]) -> Iterator[Sequence[PruneCandidate]]:
    end = len(rows)
    while end > 0:
        start = end - 1
        while start > 0 and rows[start - 1].message_seq == rows[end - 1].message_seq:
            start -= 1
        yield rows[start:end]
        end = start


def plan_prune(rows: Sequence[PruneCandidate], config: CompactionConfig = CompactionConfig()) -> PrunePlan:
    """Which tool parts to mark compacted, by seed 004's rule (see the module docstring)."""
    if not config.prune:
        return PrunePlan(0, 0, ())
    total = pruned = turns = 0
    marked: list[str] = []
    for message in _messages_newest_first(rows):
        head = message[0]
        if head.role == "user":
            turns += 1
        if turns < config.protected_turns:
            continue
        if head.role == "assistant" and head.summary:
            break
        for row in reversed(message):
            if row.part_id is None or row.status != "completed" or row.tool in config.protected_tools:
                continue
            if row.compacted:
                return _commit(pruned, total, marked, config)
            total += row.output_tokens
            if total > config.prune_protect:
                pruned += row.output_tokens
                marked.append(row.part_id)
    return _commit(pruned, total, marked, config)


def _commit(pruned: int, total: int, marked: list[str], config: CompactionConfig) -> PrunePlan:
    if pruned <= config.prune_minimum:
        return PrunePlan(0, total, (), prunable=pruned)
    return PrunePlan(pruned, total, tuple(marked), prunable=pruned)


def prune_result(plan: PrunePlan, config: CompactionConfig, parts: list[ToolPart]) -> PruneResult:
    """The ``PruneResult`` of ``plan`` (under ``config``'s thresholds) with the parts it marked."""
    return PruneResult(
        pruned=plan.pruned if parts else 0,
        total=plan.total,
        parts=parts,
        prunable=plan.prunable,
        protect=config.prune_protect if config.prune else None,
        minimum=config.prune_minimum if config.prune else None,
    )


def prune(
    history: Sequence[MessageWithParts],
    config: CompactionConfig = CompactionConfig(),
    *,
    now: int | None = None,
) -> PruneResult:
    """Mark old tool outputs of ``history`` compacted (mutating those part objects) and say what was reclaimed.

    ``now`` is the marker in epoch milliseconds (the current time when None).
    """
    rows: list[PruneCandidate] = []
    parts: dict[str, ToolPart] = {}
    for index, message in enumerate(history):
        info = message.info
        tools = [(position, part) for position, part in enumerate(message.parts) if isinstance(part, ToolPart)]
        if not tools:
            rows.append(PruneCandidate(index, info.role, info.summary))
        for position, part in tools:
            key = f"{index}:{position}"  # positional: parts built in memory may have no id yet
            parts[key] = part
            state = part.state
            rows.append(
                PruneCandidate(
                    message_seq=index,
                    role=info.role,
                    summary=info.summary,
                    part_id=key,
                    tool=part.tool,
                    status=state.status,
                    output_tokens=estimate_tokens(state.output),
                    compacted=bool(state.time.compacted),
                )
            )
    plan = plan_prune(rows, config)
    if not plan.part_ids:
        return prune_result(plan, config, [])
    stamp = int(time.time() * 1000) if now is None else now
    marked = [parts[key] for key in plan.part_ids]
    for part in marked:
        part.state.time.compacted = stamp
    return prune_result(plan, config, marked)
