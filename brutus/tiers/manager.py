"""``StrategyManager``: runs ToolCallSummarization, ThresholdSummarization and GoalBatchCompaction in order.

Rules:

- Each strategy sees the tier view left by the ones before it (ADR-0041: "each strategy leaves the context
  in a state that benefits the next"); its selections are all made on that one view, then summarized one
  summarizer call each, then written. A summary names its range by original ids, so writing one does not
  move the others.
- The run is a flow (``tier_flow``, ``brutus.flows``) that yields ``Summarize`` and, for each summary to
  write, the action its caller makes of it (``write``): a ``Tx`` on a store (``brutus.tiers.run``), the
  ``NewSummary`` itself in memory (``apply_tiers``). So the same decisions drive both. Nothing here does I/O.
- Never crash: a summarizer failure falls back to the extractive summary, then to the truncation text (the
  ``summarizers.fallbacks``); a request larger than ``summarizer_context`` is shrunk first.
  The text always starts with its tag: ``[SUMMARIZED]`` or ``[GOAL BATCH]``.
- A goal batch is asked for within its span (``goal_batch_budget``) and checked before it is written
  (``brutus.tiers.goal_batch``): one that is larger than the span it replaces, cut off or without a Human
  Direction section is replaced by the extractive one, so no ``[GOAL BATCH]`` makes the view larger.
- A summary message is an assistant message with ``summary`` false (it is no prefix-compaction boundary),
  ``synthetic`` true (no new conversation: a compaction after it still counts as a repeat), agent
  ``compaction``, mode its kind, the summarizer's model and cost, ``finish`` ``stop``, and the tier
  metadata (``brutus.tiers.metadata``). The originals are never touched.
- Each strategy that writes logs one line on ``brutus.tiers``: summaries, turns, tokens before and after.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput
from ..flows import Summarize, drive_flow
from ..ids import new_id
from ..models import Message, MessageTime, MessageWithParts, TextPart
from ..summarizers.base import Summary, SummaryRequest
from .config import TierConfig
from .goal_batch import fit_goal_batch, goal_batch_budget
from .metadata import TierCovers, TierKind, TierMetadata, tier_metadata, tier_text
from .report import StrategyReport, TierRunReport
from .strategies import DEFAULT_STRATEGIES, Selection, Strategy
from .view import span_of, tier_view, view_tokens

__all__ = ["NewSummary", "StrategyManager", "TierFlow", "apply_tiers", "tier_flow"]

log = logging.getLogger("brutus.tiers")

TIER_AGENT = "compaction"


@dataclass(frozen=True)
class NewSummary:
    """A tier summary to write: its text, metadata and who wrote it."""

    kind: TierKind
    text: str
    metadata: TierMetadata
    parent_id: str | None
    model: str
    cost: float = 0.0

    def message_fields(self) -> dict[str, Any]:
        """The ``append_message`` fields of the summary message (its text goes in one text part)."""
        return dict(
            parent_id=self.parent_id,
            agent=TIER_AGENT,
            mode=self.kind,
            model_id=self.model,
            synthetic=True,
            metadata=self.metadata.dump(),
            finish="stop",
            cost=self.cost,
        )


TierFlow = Generator[Any, Any, TierRunReport]


def _covered_messages(covered: Sequence[MessageWithParts]) -> int:
    total = 0
    for message in covered:
        metadata = tier_metadata(message)
        total += metadata.covered_messages if metadata is not None else 1
    return total


def _new_summary(selection: Selection, covered: list[MessageWithParts], summary: Summary, fallback: str | None) -> NewSummary:
    first, last = span_of(covered[0]), span_of(covered[-1])
    metadata = TierMetadata(
        summary_type=selection.kind,
        turn_count=selection.turn_count,
        covers=TierCovers(from_id=first.from_id, from_seq=first.from_seq, to_id=last.to_id, to_seq=last.to_seq),
        covered_messages=_covered_messages(covered),
        covered_tokens=view_tokens(covered),
        usage=summary.tokens,
        model=summary.model,
        fallback=fallback,
    )
    text = tier_text(selection.kind, summary.text)
    return NewSummary(selection.kind, text, metadata, selection.parent_id, summary.model, summary.cost)


def tier_flow(
    history: Sequence[MessageWithParts],
    *,
    config: TierConfig,
    strategies: Sequence[Strategy] = DEFAULT_STRATEGIES,
    session_id: str | None = None,
    summarizer: Any = None,
    write: Callable[[NewSummary], Any] = lambda new: new,
) -> TierFlow:
    """One run of ``strategies`` in order over ``history`` (filtered, with its tier summaries): yields
    ``Summarize(request, summarizer)`` (send back ``(Summary, fallback)``) and ``write(summary)`` for each new
    summary (send back the stored message)."""
    from ..summarizers.shrink import shrink_request

    history = list(history)
    view = tier_view(history)
    report = TierRunReport(session_id=session_id)
    report.tokens_before = report.tokens_after = view_tokens(view)
    for strategy in strategies:
        step = StrategyReport(kind=strategy.kind, tokens_before=report.tokens_after, tokens_after=report.tokens_after)
        report.strategies.append(step)
        if not strategy.should_run(view, config):
            continue
        step.ran = True
        for selection in strategy.select(view, config):
            covered = selection.messages(view)
            goal = selection.kind == "goal_batch"
            budget = goal_batch_budget(covered, config) if goal else config.summary_max_tokens
            request = SummaryRequest(history=covered, kind=selection.kind, max_tokens=budget)
            summary, fallback = yield Summarize(shrink_request(request, config.summarizer_context), summarizer)
            if goal:
                checked = fit_goal_batch(request, summary, fallback)
                if checked is None:
                    continue
                summary, fallback = checked
            new = _new_summary(selection, covered, summary, fallback)
            stored: MessageWithParts = yield write(new)
            history.append(stored)
            step.summaries += 1
            step.turns += selection.turn_count
            step.messages += new.metadata.covered_messages
            step.fallbacks += fallback is not None
            step.summary_ids.append(stored.info.id)
        if step.summaries:
            view = tier_view(history)
            step.tokens_after = report.tokens_after = view_tokens(view)
            log.info(
                "tiers %s: %s wrote %d summar%s over %d turns (%d messages), view %d -> %d tokens (saved %d)",
                session_id or "(in memory)", strategy.kind, step.summaries, "y" if step.summaries == 1 else "ies",
                step.turns, step.messages, step.tokens_before, step.tokens_after, step.tokens_saved,
            )
    return report


class StrategyManager:
    """Runs the tier strategies in ADR-0041's order (or the ones given) with one ``TierConfig``."""

    def __init__(self, config: TierConfig | None = None, strategies: Sequence[Strategy] = DEFAULT_STRATEGIES) -> None:
        if config is not None and not isinstance(config, TierConfig):
            raise InvalidInput(f"config must be a TierConfig, got {type(config).__name__}")
        self.config = config or TierConfig()
        self.strategies = tuple(strategies)

    def __repr__(self) -> str:
        return f"StrategyManager(strategies={list(self.strategies)!r})"

    def flow(
        self,
        history: Sequence[MessageWithParts],
        *,
        session_id: str | None = None,
        summarizer: Any = None,
        write: Callable[[NewSummary], Any] = lambda new: new,
    ) -> TierFlow:
        """``tier_flow`` with this manager's config and strategies."""
        return tier_flow(
            history, config=self.config, strategies=self.strategies, session_id=session_id, summarizer=summarizer, write=write
        )

    def run(
        self,
        history: Sequence[MessageWithParts],
        summarizer: Any,
        append: Callable[[NewSummary], MessageWithParts],
        *,
        session_id: str | None = None,
    ) -> TierRunReport:
        """One run: summaries from ``summarizer`` (with fallbacks), each written by ``append``."""
        from ..summarizers.fallbacks import summarize_with_fallbacks

        def do(action: Summarize | NewSummary) -> Any:
            if isinstance(action, Summarize):
                return summarize_with_fallbacks(action.summarizer, action.request)
            return append(action)

        return drive_flow(self.flow(history, session_id=session_id, summarizer=summarizer), do)


def _memory_message(new: NewSummary, session_id: str, seq: int, now: int) -> MessageWithParts:
    message_id = new_id("message", now)
    fields = new.message_fields()
    info = Message(
        id=message_id,
        session_id=session_id,
        seq=seq,
        role="assistant",
        time=MessageTime(created=now, completed=now),
        **fields,
    )
    part = TextPart(id=new_id("part", now), session_id=session_id, message_id=message_id, text=new.text)
    return MessageWithParts(info=info, parts=[part])


def apply_tiers(
    history: Sequence[MessageWithParts],
    summarizer: Any = None,
    config: TierConfig | None = None,
    *,
    strategies: Sequence[Strategy] = DEFAULT_STRATEGIES,
    clock: Callable[[], int] | None = None,
) -> tuple[list[MessageWithParts], TierRunReport]:
    """One run over an in-memory history, no database: the history with the new summaries appended (the
    input list is not changed) and the report. The summarizer defaults as ``store.compact``'s does."""
    from ..summarizers.default import default_summarizer

    summarizer = summarizer or default_summarizer()
    clock = clock or (lambda: int(time.time() * 1000))
    result = list(history)
    session_id = result[0].info.session_id if result else "ses_memory"

    def append(new: NewSummary) -> MessageWithParts:
        seq = max((m.info.seq for m in result), default=0) + 1
        message = _memory_message(new, session_id, seq, clock())
        result.append(message)
        return message

    report = StrategyManager(config, strategies).run(history, summarizer, append, session_id=None)
    return result, report
