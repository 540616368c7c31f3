"""``session_stats``: a session's token accounting as SQL aggregates (a read operation, sans I/O like ``ops``).

Everything comes from stored numbers: the per-part estimates written with each part, the tool states'
output estimates and prune marks, the provider-reported usage columns of the messages, and the compaction
markers. No part data or output text is read.

The compactions are the markers, and the completed boundaries in the messages that have none (an imported
Claude Code auto-compaction, whole messages appended): a boundary is a fact derived from the rows (DESIGN §2),
so ``stats`` counts it as ``show`` and ``search`` see it.

Refused compactions are counted apart from failed ones. brutus now refuses a compaction with nothing to do
without writing a marker; older versions wrote a ``failed`` one (error ``stalled: nothing new since the
previous compaction…`` or ``InvalidInput: session … has nothing to compact``), and those count as refused.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import and_, case, func, select

from ..errors import NotFound
from ..reports import CompactionCounts, CompactionStat, PartTypeStat, SessionStats, ToolStat, UnpricedUsage
from ..models import CacheTokens, TokenCounts
from .convert import text_out
from .ops import check_id
from .statements import C, M, Op, P, S, T, step

__all__ = ["refused", "session_stats"]


def _int(value: Any) -> int:
    return int(value or 0)  # PostgreSQL sums BIGINTs as NUMERIC (Decimal)


def _count_if(condition: Any) -> Any:
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def _sum(column: Any) -> Any:
    return func.coalesce(func.sum(column), 0)


_REFUSALS = ("stalled: nothing new since the previous compaction", "InvalidInput: session ")


def refused(status: str, error: str | None) -> bool:
    """Whether a marker is a refusal an older brutus recorded as ``failed`` (see the module docstring)."""
    if status != "failed" or not error:
        return False
    return error.startswith(_REFUSALS[0]) or (error.startswith(_REFUSALS[1]) and "has nothing to compact" in error)


def _counts(markers: list[CompactionStat]) -> CompactionCounts:
    return CompactionCounts(**Counter("refused" if c.refused else c.status for c in markers))


def session_stats(session_id: Any) -> Op:
    """Messages, parts by type, tools, pruned tokens, compactions and provider usage of one session."""
    session_id = check_id("session", session_id)
    session = yield step(select(S.c.id, S.c.title).where(S.c.id == session_id), fetch="first")
    if session is None:
        raise NotFound("session", session_id)
    usage = yield step(
        select(
            func.count().label("messages"),
            _count_if(M.c.role == "user").label("users"),
            _count_if(M.c.role == "assistant").label("assistants"),
            _count_if(M.c.summary.is_(True)).label("summaries"),
            _sum(M.c.tokens_input).label("input"),
            _sum(M.c.tokens_output).label("output"),
            _sum(M.c.tokens_reasoning).label("reasoning"),
            _sum(M.c.tokens_cache_read).label("cache_read"),
            _sum(M.c.tokens_cache_write).label("cache_write"),
            _sum(M.c.cost).label("cost"),
        ).where(M.c.session_id == session_id),
        fetch="first",
    )
    by_type = yield step(
        select(P.c.type.label("type"), func.count().label("parts"), _sum(P.c.tokens).label("tokens"))
        .where(P.c.session_id == session_id)
        .group_by(P.c.type)
        .order_by(P.c.type),
        fetch="all",
    )
    pruned = T.c.compacted_at.is_not(None)
    by_tool = yield step(
        select(
            T.c.tool.label("tool"),
            func.count().label("calls"),
            _count_if(T.c.status == "completed").label("completed"),
            _count_if(T.c.status == "error").label("errors"),
            _sum(P.c.tokens).label("tokens"),
            _sum(T.c.output_tokens).label("output_tokens"),
            _count_if(pruned).label("pruned_calls"),
            _sum(case((pruned, T.c.output_tokens), else_=0)).label("pruned_tokens"),
        )
        .select_from(T.join(P, P.c.id == T.c.part_id))
        .where(T.c.session_id == session_id)
        .group_by(T.c.tool)
        .order_by(T.c.tool),
        fetch="all",
    )
    markers = yield step(
        select(
            C.c.id,
            C.c.trigger,
            C.c.status,
            C.c.pre_tokens,
            C.c.post_tokens,
            C.c.fallback_used,
            C.c.model,
            C.c.cost,
            C.c.error,
            C.c.created_at,
        )
        .where(C.c.session_id == session_id)
        .order_by(C.c.created_at, C.c.id),
        fetch="all",
    )
    unmarked = yield from _unmarked_boundaries(session_id)
    unpriced = yield from _unpriced(session_id)
    tools = [
        ToolStat(
            tool=text_out(r.tool) or "",
            calls=_int(r.calls),
            completed=_int(r.completed),
            errors=_int(r.errors),
            tokens=_int(r.tokens),
            output_tokens=_int(r.output_tokens),
            pruned_calls=_int(r.pruned_calls),
            pruned_tokens=_int(r.pruned_tokens),
        )
        for r in by_tool
    ]
    compactions = [
        CompactionStat(
            id=r.id,
            trigger=r.trigger,
            status=r.status,
            pre_tokens=r.pre_tokens,
            post_tokens=r.post_tokens,
            fallback_used=r.fallback_used,
            model=text_out(r.model),
            cost=float(r.cost or 0.0),
            error=text_out(r.error),
            created_at=r.created_at,
            refused=refused(r.status, text_out(r.error)),
        )
        for r in markers
    ]
    compactions = sorted([*compactions, *unmarked], key=lambda c: (c.created_at, c.id))
    part_types = [PartTypeStat(type=r.type, parts=_int(r.parts), tokens=_int(r.tokens)) for r in by_type]
    return SessionStats(
        session_id=session.id,
        title=text_out(session.title),
        messages=_int(usage.messages),
        user_messages=_int(usage.users),
        assistant_messages=_int(usage.assistants),
        summary_messages=_int(usage.summaries),
        estimated_tokens=sum(p.tokens for p in part_types),
        part_types=part_types,
        tools=tools,
        pruned_parts=sum(t.pruned_calls for t in tools),
        pruned_tokens=sum(t.pruned_tokens for t in tools),
        compactions=compactions,
        compaction_counts=_counts(compactions),
        provider_tokens=TokenCounts(
            input=_int(usage.input),
            output=_int(usage.output),
            reasoning=_int(usage.reasoning),
            cache=CacheTokens(read=_int(usage.cache_read), write=_int(usage.cache_write)),
        ),
        cost=float(usage.cost or 0.0),
        unpriced=unpriced,
    )


def _unmarked_boundaries(session_id: str) -> Op:
    """The session's completed boundaries that no marker completed, as ``filter_compacted`` finds boundaries:
    a user message holding a ``compaction`` part, answered by a summary with a finish and no error."""
    a, u = M.alias("a"), M.alias("u")
    rows = yield step(
        select(u.c.id, u.c.created_at, P.c.data, a.c.model_id)
        .select_from(a.join(u, u.c.id == a.c.parent_id).join(P, and_(P.c.message_id == u.c.id, P.c.type == "compaction")))
        .where(
            a.c.session_id == session_id,
            a.c.role == "assistant",
            a.c.summary.is_(True),
            a.c.finish.is_not(None),
            a.c.error.is_(None),
            u.c.session_id == session_id,
            u.c.role == "user",
            u.c.seq < a.c.seq,
            ~select(C.c.id).where(C.c.session_id == session_id, C.c.summary_message_id == a.c.id).exists(),
        )
        .order_by(u.c.seq, P.c.position),
        fetch="all",
    )
    found: dict[str, CompactionStat] = {}
    for r in rows:
        data = r.data or {}
        trigger = "overflow" if data.get("overflow") else "auto" if data.get("auto") else "manual"
        found.setdefault(r.id, CompactionStat(id=r.id, trigger=trigger, status="completed", model=text_out(r.model_id),
                                              created_at=r.created_at, imported=True))
    return list(found.values())


def _unpriced(session_id: str) -> Op:
    """The assistant messages that carry usage but recorded no cost, priced from their usage where brutus
    knows their model's price."""
    from ..pricing import cost_of, price_of

    rows = yield step(
        select(
            M.c.model_id,
            func.count().label("messages"),
            _sum(M.c.tokens_input).label("input"),
            _sum(M.c.tokens_output).label("output"),
            _sum(M.c.tokens_reasoning).label("reasoning"),
            _sum(M.c.tokens_cache_read).label("cache_read"),
            _sum(M.c.tokens_cache_write).label("cache_write"),
        )
        .where(
            M.c.session_id == session_id,
            M.c.role == "assistant",
            M.c.cost == 0,
            (M.c.tokens_input + M.c.tokens_output + M.c.tokens_reasoning + M.c.tokens_cache_read
             + M.c.tokens_cache_write) > 0,
        )
        .group_by(M.c.model_id)
        .order_by(M.c.model_id),
        fetch="all",
    )
    if not rows:
        return None
    models, priced_as, no_price, cost = [], [], [], 0.0
    for r in rows:
        model = text_out(r.model_id) or "unknown"
        models.append(model)
        if price_of(model) is None:  # another provider's model: no Anthropic price stands in for its own
            no_price.append(model)
            continue
        tokens = TokenCounts(input=_int(r.input), output=_int(r.output), reasoning=_int(r.reasoning),
                             cache=CacheTokens(read=_int(r.cache_read), write=_int(r.cache_write)))
        priced_as.append(model)
        cost += cost_of(model, tokens)
    return UnpricedUsage(messages=sum(_int(r.messages) for r in rows), models=models, priced_as=priced_as,
                         no_price=no_price, cost=round(cost, 6) if priced_as else None)
