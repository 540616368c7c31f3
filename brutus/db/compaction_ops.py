"""The compaction's database steps, as sans-I/O operations shared by the sync and async stores.

A compaction writes in exactly two places, so a crash anywhere leaves the history as it was:

1. ``begin_compaction`` (one transaction): refuses a compaction that would follow the previous one with
   nothing new in between (``NothingToCompact``: the transaction rolls back, no marker is written), marks
   markers that an earlier, dead process left pending as failed, and inserts the new pending marker. It
   writes no message: the view is unchanged.
2. ``complete_compaction`` (one transaction): the prune marks, the user message with the ``compaction`` part,
   the assistant summary message (its ``finish`` moves the session's boundary pointer), the synthetic
   "continue" message when due, and the marker set to completed.

A compaction that stops in between is recorded by ``fail_compaction``: failed markers are real attempts,
never refusals. The summarizer is called between the two transactions, never inside one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


from ..codec import encode_json
from ..errors import NotFound, NothingToCompact
from ..ids import new_id
from ..models import CompactionPart, CompactionRecord, TextPart, TokenCounts
from . import history_ops, ops
from .convert import text_in, text_out
from . import statements as st
from .statements import Op, step

__all__ = [
    "BeginResult",
    "Completion",
    "begin_compaction",
    "complete_compaction",
    "fail_compaction",
    "list_compactions",
]

CONTINUE_TEXT = "Continue if you have next steps"
ABANDONED = "abandoned: the process running this compaction stopped before it completed"
NOTHING_NEW = "nothing new since the previous compaction: compacting again would loop"


@dataclass(frozen=True, slots=True)
class BeginResult:
    compaction_id: str
    abandoned: int  # stale pending markers marked failed


@dataclass(frozen=True, slots=True)
class Completion:
    """Everything the final transaction writes (computed outside any transaction)."""

    session_id: str
    compaction_id: str
    snapshot_seq: int
    prune_ids: tuple[str, ...]
    auto: bool
    overflow: bool
    tail_start_id: str | None
    summary_text: str
    summary_model: str
    summary_tokens: TokenCounts
    summary_cost: float
    summary_metadata: dict[str, Any] | None
    user_agent: str | None
    continue_after: bool
    pre_tokens: int
    post_tokens: int
    fallback_used: str | None
    boundary: dict[str, Any]
    instructions: str | None


def begin_compaction(
    session_id: str, *, trigger: str, auto: bool, overflow: bool, instructions: str | None, now: int
) -> Op:
    session_id = ops.check_id("session", session_id)
    session = yield step(st.SESSION_FOR_UPDATE, {"b_sid": session_id}, fetch="first")
    if session is None:
        raise NotFound("session", session_id)
    previous = yield step(st.LAST_COMPLETED_SUMMARY_SEQ, {"b_sid": session_id}, fetch="first")
    if previous is not None:
        new = yield step(st.COUNT_NEW_MESSAGES, {"b_sid": session_id, "b_after_seq": previous.seq}, fetch="first")
        if not new.n:
            raise NothingToCompact(f"session {session_id}: {NOTHING_NEW}")
    abandoned = yield step(
        st.FAIL_PENDING_COMPACTIONS, {"b_sid": session_id, "b_error": ABANDONED, "b_now": now}, fetch="rowcount"
    )
    compaction_id = new_id("compaction", now)
    yield step(
        st.INSERT_COMPACTION,
        dict(
            id=compaction_id,
            session_id=session_id,
            trigger=trigger,
            auto=auto,
            overflow=overflow,
            status="pending",
            instructions=text_in(instructions),
            cost=0.0,
            created_at=now,
        ),
    )
    return BeginResult(compaction_id, abandoned or 0)


def fail_compaction(
    compaction_id: str, error: str, *, now: int, pre_tokens: int | None = None, post_tokens: int | None = None
) -> Op:
    yield step(
        st.FAIL_COMPACTION,
        {"b_cid": compaction_id, "b_error": text_in(error), "b_pre": pre_tokens, "b_post": post_tokens, "b_now": now},
    )
    return None


def complete_compaction(plan: Completion, *, now: int) -> Op:
    """The final transaction; returns the summary message id."""
    yield from history_ops.mark_pruned(plan.prune_ids, now=now)
    tail_start_id = plan.tail_start_id
    if tail_start_id is None:
        # Messages appended while the summarizer ran are not covered by the summary: keep them as the tail.
        newer = yield step(
            st.FIRST_MESSAGE_AFTER, {"b_sid": plan.session_id, "b_after_seq": plan.snapshot_seq}, fetch="first"
        )
        tail_start_id = newer.id if newer is not None else None
    user = yield from ops.append_message(plan.session_id, "user", {"agent": plan.user_agent}, now=now)
    yield from ops.append_part(
        user.id, CompactionPart(auto=plan.auto, overflow=plan.overflow, tail_start_id=tail_start_id), now=now
    )
    summary = yield from ops.append_message(
        plan.session_id,
        "assistant",
        {
            "parent_id": user.id,
            "summary": True,
            "agent": "compaction",
            "mode": "compaction",
            "model_id": plan.summary_model,
            "provider_id": "anthropic" if plan.summary_model.startswith("claude") else "brutus",
            "metadata": plan.summary_metadata,
        },
        now=now,
    )
    yield from ops.append_part(summary.id, TextPart(text=plan.summary_text), now=now)
    yield from ops.finish_message(
        summary.id, finish="stop", tokens=plan.summary_tokens, cost=plan.summary_cost, error=None, now=now
    )
    if plan.continue_after:
        follow = yield from ops.append_message(
            plan.session_id, "user", {"synthetic": True, "agent": plan.user_agent}, now=now
        )
        yield from ops.append_part(follow.id, TextPart(text=CONTINUE_TEXT, synthetic=True), now=now)
    done = yield step(
        st.COMPLETE_COMPACTION,
        {
            "b_cid": plan.compaction_id,
            "b_user_id": user.id,
            "b_summary_id": summary.id,
            "b_tail_id": tail_start_id,
            "b_pre": plan.pre_tokens,
            "b_post": plan.post_tokens,
            "b_model": text_in(plan.summary_model),
            "b_cost": plan.summary_cost,
            "b_fallback": plan.fallback_used,
            "b_boundary": encode_json(plan.boundary),
            "b_instructions": text_in(plan.instructions),
            "b_now": now,
        },
        fetch="rowcount",
    )
    if done != 1:
        raise NotFound("pending compaction", plan.compaction_id)
    return summary.id


def list_compactions(session_id: str) -> Op:
    session_id = ops.check_id("session", session_id)
    found = yield step(st.SESSION_ID, {"b_sid": session_id}, fetch="first")
    if found is None:
        raise NotFound("session", session_id)
    rows = yield step(st.COMPACTIONS, {"b_sid": session_id}, fetch="all")
    return [
        CompactionRecord(
            id=r.id,
            session_id=r.session_id,
            user_message_id=r.user_message_id,
            summary_message_id=r.summary_message_id,
            trigger=r.trigger,
            auto=bool(r.auto),
            overflow=bool(r.overflow),
            tail_start_id=r.tail_start_id,
            status=r.status,
            pre_tokens=r.pre_tokens,
            post_tokens=r.post_tokens,
            model=text_out(r.model),
            cost=float(r.cost or 0.0),
            error=text_out(r.error),
            instructions=text_out(r.instructions),
            fallback_used=r.fallback_used,
            boundary=r.boundary,
            created_at=r.created_at,
            completed_at=r.completed_at,
        )
        for r in rows
    ]
