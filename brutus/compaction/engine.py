"""One compaction, start to finish, written once for the sync and async stores.

``compaction_flow`` is a flow (``brutus.flows``) over two kinds of action: ``Tx`` (run this store operation in
its own transaction) and ``Summarize`` (ask the summarizer, with fallbacks). ``compaction`` is what
``store.compact`` and a live conversation run: the flow under the session's compaction lock (``Locked``). The order — load the view, begin marker, plan, hooks, summarize (outside any transaction),
final transaction, hooks — is what makes a crash at any point leave the history loading as before:
nothing the model sees is written until the final transaction commits.

A compaction with nothing to do (an empty view, nothing new since the previous compaction) is refused with
``NothingToCompact`` before any marker is written: ``failed`` markers record real attempts only.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ..db import compaction_ops, history_ops
from ..errors import CompactionStalled, InvalidInput, NothingToCompact
from ..models import CompactionConfig, CompactionResult
from ..estimates import has_conversation_messages
from ..flows import Locked, Summarize, Tx
from ..db.ops import check_id
from . import plan
from .hooks import Hooks

__all__ = ["TRIGGERS", "compaction", "compaction_flow"]

TRIGGERS = ("auto", "manual", "overflow")


Flow = Generator[Tx | Summarize, Any, CompactionResult]


def compaction(
    session_id: str,
    summarizer: Any = None,
    *,
    trigger: str = "manual",
    instructions: str | None = None,
    hooks: Hooks | None = None,
    config: CompactionConfig | None = None,
    clock: Any,
) -> Locked:
    """The work of ``store.compact``: ``compaction_flow`` holding the session's compaction lock; the summarizer
    defaults to ``brutus.summarizers.default_summarizer()``."""
    from ..summarizers import default_summarizer

    session_id = check_id("session", session_id)
    flow = compaction_flow(
        session_id,
        summarizer=summarizer or default_summarizer(),
        trigger=trigger,
        instructions=instructions,
        hooks=hooks,
        config=config or CompactionConfig(),
        clock=clock,
    )
    return Locked(session_id, flow)


def compaction_flow(
    session_id: str,
    *,
    summarizer: Any,
    trigger: str,
    instructions: str | None,
    hooks: Hooks | None,
    config: CompactionConfig,
    clock: Any,
) -> Flow:
    from ..summarizers import SummaryRequest, shrink_request
    from ..tiers import tier_view

    if trigger not in TRIGGERS:
        raise InvalidInput(f"trigger must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidInput("instructions must be a string")
    hooks = hooks or Hooks()
    auto, overflow = trigger != "manual", trigger == "overflow"
    view = yield Tx(history_ops.load_messages(session_id, filtered=True), write=False)
    if not has_conversation_messages(view):
        what = "it has no messages" if not view else "no text, tool call or file to summarize"
        raise NothingToCompact(f"session {session_id} has nothing to compact: {what}")
    snapshot_seq = view[-1].info.seq  # the compaction covers the view as loaded; later messages stay the tail
    begin: compaction_ops.BeginResult = yield Tx(
        compaction_ops.begin_compaction(
            session_id, trigger=trigger, auto=auto, overflow=overflow, instructions=instructions, now=clock()
        )
    )
    pre = post = None
    try:
        prepared = plan.prepare(view, config, now=clock())
        pre = prepared.pre_tokens
        instructions = hooks.run_pre_compact(session_id, trigger, instructions)
        request = SummaryRequest(
            history=tier_view(prepared.head),  # tier summaries stand in for the ranges they cover
            previous_summary=prepared.previous_summary,
            instructions=instructions,
            max_tokens=config.summary_max_tokens,
        )
        request = shrink_request(request, config.summarizer_context)
        summary, fallback = yield Summarize(request, summarizer)
        post = plan.post_tokens(summary.text, prepared.tail)
        stalled = plan.stall_reason(pre, post, config)
        if stalled:
            raise CompactionStalled(stalled)
        boundary = plan.boundary_event(session_id, trigger, pre, post)
        summary_id = yield Tx(
            compaction_ops.complete_compaction(
                compaction_ops.Completion(
                    session_id=session_id,
                    compaction_id=begin.compaction_id,
                    snapshot_seq=snapshot_seq,
                    prune_ids=prepared.prune_ids,
                    auto=auto,
                    overflow=overflow,
                    tail_start_id=prepared.tail[0].info.id if prepared.tail else None,
                    summary_text=summary.text,
                    summary_model=summary.model,
                    summary_tokens=summary.tokens,
                    summary_cost=summary.cost,
                    summary_metadata=summary.metadata,
                    user_agent=prepared.user_agent,
                    continue_after=auto and not plan.ended_turn(view),
                    pre_tokens=pre,
                    post_tokens=post,
                    fallback_used=fallback,
                    boundary=boundary,
                    instructions=instructions,
                ),
                now=clock(),
            )
        )
    except GeneratorExit:
        raise  # cancelled: leave the marker pending, as a crash would; the next compaction resolves it
    except BaseException as exc:
        yield Tx(
            compaction_ops.fail_compaction(
                begin.compaction_id, f"{type(exc).__name__}: {exc}", now=clock(), pre_tokens=pre, post_tokens=post
            )
        )
        raise
    hooks.run_after(session_id, trigger, summary.text)
    message = yield Tx(history_ops.load_message(summary_id), write=False)
    return CompactionResult(
        compaction_id=begin.compaction_id,
        summary_message=message,
        boundary=boundary,
        pre_tokens=pre,
        post_tokens=post,
        pruned=prepared.pruned_tokens,
        fallback_used=fallback,
    )
