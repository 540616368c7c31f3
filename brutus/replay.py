"""Replay: drive a recorded session through the store as a live agent would, under a chosen model limit.

Rules:

- A fresh session gets the recording's messages in order, each written as a live agent writes it: the
  message and its parts in one transaction (tool parts ``pending``), then each tool part moved ``running`` →
  ``completed`` | ``error`` as recorded, then ``finish_message`` with the recorded usage and cost. Ids are
  new (a recording can be replayed any number of times); parent and tail pointers follow them. The
  recording's prune marks are not copied: the replay prunes by its own limit.
- After each message the replay measures its view (``store.filter_compacted``): ``context_size`` with the
  last call's recorded usage re-based on the replayed messages (``brutus.replay_meter``), since the recorded
  usage measured the original, unlimited context. Until the replay prunes or compacts, that is exactly the
  recorded figure.
- After each assistant message it runs the live agents' context policy (``brutus.policy``: the same
  ``plan_request``, ``over_threshold`` and ``compaction_config`` as ``Conversation``), the turn ended when the
  message's finish says so, with no idle time (so ``cold-cache`` prunes only over the threshold here);
  compactions have trigger ``auto``. A ``CompactionStalled``, or a compaction that leaves the view over the
  threshold, is recorded, and no compaction is tried again before the next user turn: never a loop.
- What it simulates: ``replay_limits``, the session's model's limits, or ``context_limit`` tokens with the
  output reserve cut to a quarter of them; ``replay_config``, prune's thresholds scaled to the room the
  messages have (the policy's switch and tail then apply to it).
- Every recorded call is a request the cost meter prices (``brutus.replay_cost``), sent when the recording
  sent it, at the model that answered it; a compaction's summary call is one more (``server_compaction``:
  priced as server-side compaction). ``comparison`` tables the four prune modes and ``WHAT_IFS`` beside
  the recording as it ran (``brutus.replay_recorded``, ``replay --as-recorded``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .compaction.plan import ENDED
from .errors import CompactionStalled, InvalidInput
from .models import (
    CompactionConfig,
    CompactionPart,
    Message,
    MessageWithParts,
    ModelLimits,
    Role,
    ToolPart,
    ToolState,
)
from .estimates import estimate_message_tokens
from .limits import DEFAULT_MODEL_LIMITS, model_limits, output_ceiling, usable_tokens
from .policy import ContextPolicy, Plan, over_threshold, plan_request, threshold
from .replay_cost import PROMPT_MISS, CostMeter
from .replay_meter import RecordedCalls, Usage, measure_view
from .store import SessionStore

__all__ = [
    "ReplayCompaction",
    "ReplayPoint",
    "ReplayPrune",
    "ReplayReport",
    "ReplayStall",
    "WHAT_IFS",
    "comparison",
    "load_recording",
    "load_recordings",
    "replay",
    "replay_config",
    "replay_file",
    "replay_limits",
    "session_model",
    "write_message",
]

Action = Literal["prune", "compact", "prune+compact", "stalled", "prune+stalled"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReplayPoint(_Model):
    """The context after one replayed message (``step`` counts recorded messages from 1)."""

    step: int
    message_id: str
    role: Role
    view_tokens: int  # the replayed view, as measured after the message was written
    after_tokens: int  # the same after the prune / compaction this step ran (= view_tokens without one)
    original_tokens: int  # the recorded session's context at this step, which had no such limit
    view_messages: int
    action: Action | None = None
    cost: float = 0.0  # the cumulative cost of the simulated requests so far, US dollars (replay_cost.py)


class ReplayPrune(_Model):
    step: int
    pruned_tokens: int
    parts: int
    view_before: int
    view_after: int


class ReplayCompaction(_Model):
    """One compaction: the replay's measure of the view before and after, and the store's own figures
    (``pre_tokens`` / ``post_tokens`` from the recorded usage the stored messages carry)."""

    step: int
    compaction_id: str
    trigger: str
    view_before: int
    view_after: int
    pre_tokens: int
    post_tokens: int
    pruned_tokens: int
    fallback_used: str | None = None
    summary_model: str | None = None


class ReplayStall(_Model):
    step: int
    reason: str


class ReplayReport(_Model):
    """What a replay did, step by step."""

    session_id: str
    database: str | None = None  # where the session was written (``brutus replay`` says it; None: not told)
    source: str | None = None
    title: str | None = None
    model: str | None = None
    limits: ModelLimits
    usable_tokens: int  # is_overflow's threshold: above it, the next call would not fit
    compact_at: int  # the policy's threshold (its compact_at share of the usable tokens)
    policy: str = "on-compaction"  # the ContextPolicy's prune mode
    compact_at_share: float = 0.8  # the ContextPolicy's compact_at
    cache_ttl: str = "5m"  # the ContextPolicy's cache TTL, which the cost meter prices the writes at
    server_compaction: bool = False  # compactions' summary calls priced as server-side compaction
    prune_protect: int
    prune_minimum: int
    summarizer: str
    steps: int
    tool_calls: int
    fixed_tokens: int  # what the recorded calls counted beyond the messages (system prompt, tool definitions)
    token_ratio: float  # real tokens per estimated token of the messages, at the last recorded call
    prunes: list[ReplayPrune] = Field(default_factory=list)
    compactions: list[ReplayCompaction] = Field(default_factory=list)
    stalls: list[ReplayStall] = Field(default_factory=list)
    curve: list[ReplayPoint] = Field(default_factory=list)
    max_view_tokens: int = 0
    max_original_tokens: int = 0
    final_view_tokens: int = 0
    final_view_messages: int = 0
    pruned_tokens: int = 0  # every tool output token the replay pruned: its prunes and those inside compactions
    cost_usd: float = 0.0  # what the simulated requests would have cost with prompt caching (replay_cost.py)
    cache_read_share: float = 0.0  # of their input tokens, the share read from the cache
    priced_as: str | None = None  # the models whose prices apply, in order of first use
    requests: int = 0  # the simulated requests: the recorded calls, and the summary calls of its compactions
    tokens: dict[str, int] = Field(default_factory=dict)  # of the requests, by kind (replay_cost.KINDS)
    cost_by_kind: dict[str, float] = Field(default_factory=dict)


# -- limits -------------------------------------------------------------------------------------------------


def session_model(history: Sequence[MessageWithParts]) -> str | None:
    """The model that answered most of the session's assistant messages (the first of equals)."""
    counts = Counter(
        m.info.model_id for m in history if m.info.role == "assistant" and m.info.model_id and not m.info.summary
    )
    return counts.most_common(1)[0][0] if counts else None


def replay_limits(
    history: Sequence[MessageWithParts], *, context_limit: int | None = None, model: str | None = None
) -> tuple[str | None, ModelLimits]:
    """The model whose limits apply and the limits: ``model`` (default: the session's) as the table knows
    it, or ``context_limit`` tokens of context with that model's output reserve cut to a quarter of it."""
    model = model or session_model(history)
    base = model_limits(model) if model else DEFAULT_MODEL_LIMITS.model_copy()
    if context_limit is None:
        return model, base
    if isinstance(context_limit, bool) or not isinstance(context_limit, int) or context_limit <= 0:
        raise InvalidInput(f"the context limit must be a positive number of tokens, got {context_limit!r}")
    return model, ModelLimits(context=context_limit, output=min(output_ceiling(base), context_limit // 4))


def replay_config(limits: ModelLimits, fixed_tokens: int = 0) -> CompactionConfig:
    """Prune's thresholds scaled to the room the messages have: a quarter of it protected, an eighth the
    minimum worth pruning. The room is the usable context less the ``fixed_tokens`` every call carries
    (system prompt, tool definitions); on a 200K model with a 15K system prompt that is seed 004's 40K / 20K."""
    if not limits.context:
        return CompactionConfig()
    room = max(0, usable_tokens(limits) - fixed_tokens)
    return CompactionConfig(prune_protect=min(40_000, room // 4), prune_minimum=min(20_000, room // 8))


# -- writing as a live agent ----------------------------------------------------------------------------------


def _fresh_part(part: Any, ids: Mapping[str, str]) -> Any:
    cleared = {"id": None, "session_id": None, "message_id": None}
    if isinstance(part, ToolPart):
        return ToolPart(call_id=part.call_id, tool=part.tool, state=ToolState(status="pending", input=part.state.input))
    if isinstance(part, CompactionPart):
        return part.model_copy(update={**cleared, "tail_start_id": ids.get(part.tail_start_id or "")})
    return part.model_copy(update=cleared)


def _run_tool(store: SessionStore, part_id: str, state: ToolState) -> None:
    if state.status == "pending":
        return
    store.update_tool(part_id, status="running", title=state.title)
    if state.status == "completed":
        output = state.output or ""
        store.update_tool(part_id, status="completed", output=output, title=state.title, metadata=state.metadata)
    elif state.status == "error":
        store.update_tool(part_id, status="error", error=state.error or "error", metadata=state.metadata)


def write_message(store: SessionStore, session_id: str, entry: MessageWithParts, ids: dict[str, str]) -> Message:
    """Append one recorded message the way a live agent does; ``ids`` maps recorded ids to the new ones."""
    info = entry.info
    fields: dict[str, Any] = dict(
        parent_id=ids.get(info.parent_id or ""),
        agent=info.agent,
        mode=info.mode,
        model_id=info.model_id,
        provider_id=info.provider_id,
        summary=info.summary,
        synthetic=info.synthetic,
        created_at=info.time.created,
    )
    finishes = info.role == "assistant" and bool(info.finish)
    if not finishes:  # nothing will finish it: what was recorded is written with it
        fields.update(
            finish=info.finish, tokens=info.tokens, cost=info.cost, error=info.error, completed_at=info.time.completed
        )
    tools: list[tuple[str, ToolState]] = []
    with store.batch():
        message = store.append_message(session_id, info.role, **fields)
        ids[info.id] = message.id
        for part in entry.parts:
            written = store.append_part(message.id, _fresh_part(part, ids))
            if isinstance(part, ToolPart):
                tools.append((written.id, part.state))
    for part_id, state in tools:
        _run_tool(store, part_id, state)
    if finishes:
        message = store.finish_message(
            message.id, finish=info.finish or "", tokens=info.tokens, cost=info.cost, error=info.error
        )
    return message


# -- the replay -----------------------------------------------------------------------------------------------

OnStep = Callable[[ReplayPoint, int], None]


@dataclass
class _Run:
    """One replay in progress: the session, the recorded calls and their replayed twins, the report."""

    store: SessionStore
    session_id: str
    limits: ModelLimits
    config: CompactionConfig | None  # None: replay_config of the fixed tokens measured so far
    summarizer: Any
    report: ReplayReport
    recorded: RecordedCalls
    policy: ContextPolicy
    meter: CostMeter
    usage: dict[str, Usage] = field(default_factory=dict)  # replayed message id -> its recorded call
    ids: dict[str, str] = field(default_factory=dict)  # recorded message id -> replayed message id
    server_compaction: bool = False  # price compactions as server-side ones
    turns: int = 0
    blocked_turn: int = -1  # no compaction until a user turn after this one
    view: list[MessageWithParts] = field(default_factory=list)  # as the last measure() loaded it

    def measure(self) -> tuple[int, int]:
        """The replayed view's tokens and messages."""
        self.view = self.store.filter_compacted(self.session_id)
        return measure_view(self.view, self.usage, self.recorded.last), len(self.view)

    def step(self, index: int, entry: MessageWithParts) -> ReplayPoint:
        call = self.recorded.observe(index)
        if call is not None:  # the request this call answered: the view as it is now
            sent, prompted = self.recorded.sent_at(index), index > 0 and _typed(self.recorded.history[index - 1])
            self.meter.request(self.view, call, sent, estimate_message_tokens, entry.info.model_id, prompted)
        message = write_message(self.store, self.session_id, entry, self.ids)
        if call is not None:
            self.usage[message.id] = call
        if entry.info.role == "user":
            self.turns += 1
        tokens, count = self.measure()
        after, action = tokens, None
        if entry.info.role == "assistant" and self.limits.context:
            plan = plan_request(
                self.policy,
                tokens=tokens,
                limits=self.limits,
                blocked=self.turns <= self.blocked_turn,
                turn_ended=entry.info.finish in ENDED,
            )
            if plan.prune or plan.compact:
                after, action = self.relieve(index + 1, tokens, plan, entry)
            if action:
                count = self.measure()[1]
        return ReplayPoint(
            step=index + 1,
            message_id=message.id,
            role=entry.info.role,
            view_tokens=tokens,
            after_tokens=after,
            original_tokens=self.recorded.tokens_at(index),
            view_messages=count,
            action=action,
            cost=round(self.meter.cost, 6),
        )

    def relieve(self, step: int, tokens: int, plan: Plan, entry: MessageWithParts) -> tuple[int, Action | None]:
        """Run the policy's plan (prune, compact, or prune then compact when still over) after ``entry``; the
        view after, and what was done."""
        done: list[str] = []
        config = self.policy.compaction_config(self.config or replay_config(self.limits, self.recorded.fixed or 0))
        pruned = self.store.prune(self.session_id, config) if plan.prune else None
        if pruned is not None and pruned.pruned:
            after = self.measure()[0]
            prune = ReplayPrune(
                step=step, pruned_tokens=pruned.pruned, parts=len(pruned.parts), view_before=tokens, view_after=after
            )
            self.report.prunes.append(prune)
            tokens = after
            done.append("prune")
        if plan.compact is None or (plan.compact_if_still_over and not over_threshold(tokens, self.limits, self.policy)):
            return tokens, _action(done)
        summarized = self.view
        try:
            result = self.store.compact(self.session_id, self.summarizer, trigger="auto", config=config)
        except CompactionStalled as exc:
            self.report.stalls.append(ReplayStall(step=step, reason=str(exc)))
            self.blocked_turn = self.turns
            return tokens, _action([*done, "stalled"])
        after = self.measure()[0]
        self.price_summary(summarized, result.summary_message, entry)
        self.report.compactions.append(
            ReplayCompaction(
                step=step,
                compaction_id=result.compaction_id,
                trigger="auto",
                view_before=tokens,
                view_after=after,
                pre_tokens=result.pre_tokens,
                post_tokens=result.post_tokens,
                pruned_tokens=result.pruned,
                fallback_used=result.fallback_used,
                summary_model=result.summary_message.info.model_id,
            )
        )
        if over_threshold(after, self.limits, self.policy):
            reason = f"the view is still {after:,} tokens after compacting, over the threshold: the rest cannot be compacted"
            self.report.stalls.append(ReplayStall(step=step, reason=reason))
            self.blocked_turn = self.turns
        return after, _action([*done, "compact"])

    def price_summary(self, view: list[MessageWithParts], summary: MessageWithParts, entry: MessageWithParts) -> None:
        """The compaction's summary call, right after ``entry``: its own cost, else simulated (replay_cost.py)."""
        if summary.info.cost:
            self.meter.add(summary.info.cost)
            return
        info = entry.info
        self.meter.summary(
            view,
            self.recorded.last or Usage(fixed=0, ratio=1.0, output=0),
            info.time.completed or info.time.created,
            estimate_message_tokens,
            estimate_message_tokens(summary),
            model=info.model_id,
            server=self.server_compaction,
        )


def _typed(message: MessageWithParts) -> bool:
    """Whether ``message`` is a prompt someone typed (not a synthetic or compaction message)."""
    info = message.info
    return info.role == "user" and not info.synthetic and not any(isinstance(p, CompactionPart) for p in message.parts)


def _prompt_miss(history: Sequence[MessageWithParts]) -> float:
    """``PROMPT_MISS`` for a Claude Code recording (its messages carry ``claude_code`` metadata), else 0."""
    from .importers.claude_code_builder import NAMESPACE

    return PROMPT_MISS if NAMESPACE in (history[0].info.metadata or {}) else 0.0


def _action(done: list[str]) -> Action | None:
    return "+".join(done) or None  # type: ignore[return-value]


def replay(
    store: SessionStore,
    history: Sequence[MessageWithParts],
    *,
    limits: ModelLimits | None = None,
    model: str | None = None,
    summarizer: Any = None,
    config: CompactionConfig | None = None,
    title: str | None = None,
    directory: str | None = None,
    source: str | None = None,
    on_step: OnStep | None = None,
    policy: ContextPolicy | None = None,
    parent_id: str | None = None,
    server_compaction: bool = False,
) -> ReplayReport:
    """Replay ``history`` into a new session of ``store`` (a child of ``parent_id`` when given) under ``limits``
    (default: ``replay_limits``) with ``summarizer`` (default: ``default_summarizer()``), prune ``config``
    (default: ``replay_config``) and the context ``policy`` (default: ``ContextPolicy()``);
    ``on_step(point, total)`` is called after every message; ``server_compaction`` prices each compaction's summary
    call as server-side compaction does (``brutus.replay_cost``)."""
    from .summarizers import default_summarizer

    if not history:
        raise InvalidInput("nothing to replay: the recording holds no messages")
    model = model or session_model(history)
    if limits is None:
        model, limits = replay_limits(history, model=model)
    summarizer = summarizer or default_summarizer()
    policy = policy or ContextPolicy()
    session = store.create_session(
        title=f"replay: {title}" if title else "replay", directory=directory, parent_id=parent_id
    )
    report = ReplayReport(
        session_id=session.id,
        source=source,
        title=title,
        model=model,
        limits=limits,
        usable_tokens=usable_tokens(limits),
        compact_at=threshold(limits, policy),
        policy=policy.prune,
        compact_at_share=policy.compact_at,
        cache_ttl=policy.cache_ttl,
        server_compaction=server_compaction,
        prune_protect=0,
        prune_minimum=0,
        summarizer=getattr(summarizer, "model", None) or type(summarizer).__name__,
        steps=len(history),
        tool_calls=sum(1 for m in history for p in m.parts if isinstance(p, ToolPart)),
        fixed_tokens=0,
        token_ratio=1.0,
    )
    meter = CostMeter(model, ttl=policy.cache_ttl, prompt_miss=_prompt_miss(history))
    run = _Run(store, session.id, limits, config, summarizer, report, RecordedCalls(history), policy, meter,
               server_compaction=server_compaction)
    for index, entry in enumerate(history):
        point = run.step(index, entry)
        report.curve.append(point)
        if on_step is not None:
            on_step(point, len(history))
    recorded = run.recorded
    final = config or replay_config(limits, recorded.fixed or 0)
    return report.model_copy(
        update=dict(
            fixed_tokens=recorded.fixed or 0,
            token_ratio=round(recorded.last.ratio, 3) if recorded.last else 1.0,
            prune_protect=final.prune_protect,
            prune_minimum=final.prune_minimum,
            max_view_tokens=max(p.view_tokens for p in report.curve),
            max_original_tokens=max(p.original_tokens for p in report.curve),
            final_view_tokens=report.curve[-1].after_tokens,
            final_view_messages=report.curve[-1].view_messages,
            pruned_tokens=sum(p.pruned_tokens for p in report.prunes) + sum(c.pruned_tokens for c in report.compactions),
            cost_usd=round(run.meter.cost, 6),
            cache_read_share=round(run.meter.read_share, 4),
            priced_as=run.meter.priced_as,
            requests=run.meter.tally.requests,
            tokens=dict(run.meter.tally.tokens),
            cost_by_kind={kind: round(cost, 6) for kind, cost in run.meter.tally.costs.items()},
        )
    )


# the what-ifs of ``replay --compare`` beside the policies: (label, ContextPolicy fields, server-side compaction)
WHAT_IFS: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("compact at 0.6", {"compact_at": 0.6}, False),
    ("compact at 0.7", {"compact_at": 0.7}, False),
    ("compact at 0.8", {}, False),  # the default policy: its row of the policies
    ("compact at 0.9", {"compact_at": 0.9}, False),
    ("cache TTL 1h", {"cache_ttl": "1h"}, False),
    ("server compaction", {}, True),
)


def _row(report: ReplayReport) -> dict[str, Any]:
    return {
        "cost_usd": report.cost_usd,
        "cache_read_share": report.cache_read_share,
        "peak_tokens": report.max_view_tokens,
        "compactions": len(report.compactions),
        "stalls": len(report.stalls),
        "pruned_tokens": report.pruned_tokens,
        "session_id": report.session_id,
    }


def comparison(
    reports: Sequence[ReplayReport],
    what_ifs: Sequence[tuple[str, ReplayReport]] = (),
    recorded: ReplayReport | None = None,
    billed_usd: float | None = None,
) -> dict[str, Any]:
    """``replay --compare --json``: the same recording under each policy (DESIGN §3 "Cost"); with ``what_ifs``
    (label, report) the other settings, and beside them the ``recorded`` run (no limit) and its bill."""
    table: dict[str, Any] = {
        "limit": reports[0].limits.context,
        "default": ContextPolicy().prune,
        "policies": [{"policy": r.policy, **_row(r)} for r in reports],
    }
    if what_ifs:
        table["what_ifs"] = [{"setting": label, **_row(r)} for label, r in what_ifs]
    if recorded is not None:
        table["as_recorded"] = {
            **_row(recorded),
            "billed_usd": billed_usd,
            "ratio": round(recorded.cost_usd / billed_usd, 4) if billed_usd else None,
        }
    return table


# -- from a file --------------------------------------------------------------------------------------------


def load_recording(path: str | Path) -> Any:
    """The main session of a recorded file in any format ``brutus import`` reads (an ``ImportedSession``:
    title, directory, history), without writing anything. ``ImportFormatError`` for a file it cannot read."""
    return load_recordings(path)[0]


def load_recordings(path: str | Path) -> list[Any]:
    """Every session of a recorded file with a conversation, the main one first, then its sub-agents'
    (``ImportedSession``s, nothing written); ``InvalidInput`` when the main one has none."""
    from .importers import plan_document, read_document

    sessions = plan_document(read_document(path))
    if not sessions or not sessions[0].history:
        raise InvalidInput(f"{path}: no conversation to replay in this file")
    return [s for s in sessions if s.history]


def replay_file(
    store: SessionStore,
    path: str | Path,
    *,
    context_limit: int | None = None,
    model: str | None = None,
    summarizer: Any = None,
    on_step: OnStep | None = None,
    policy: ContextPolicy | None = None,
) -> ReplayReport:
    """Replay the recorded session in ``path`` under ``replay_limits(context_limit=…, model=…)``."""
    recording = load_recording(path)
    model, limits = replay_limits(recording.history, context_limit=context_limit, model=model)
    return replay(
        store,
        recording.history,
        limits=limits,
        model=model,
        summarizer=summarizer,
        title=recording.title,
        directory=recording.directory,
        source=str(path),
        on_step=on_step,
        policy=policy,
    )
