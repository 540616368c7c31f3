"""``brutus replay --as-recorded``: every session of a recording replayed as it ran, priced, and its bill beside.

Rules:

- The sessions are ``load_recordings``': the main one, then its sub-agents' (Claude Code sidechains), each
  replayed (``brutus.replay.replay``) into a new session, a sub-agent's a child of the replayed main one.
- As it ran: with no limit (``ModelLimits(context=0)``), so only the recording's own compactions happen; any
  limit above the recording's peak is the same run. Every request is priced by the cost meter
  (``brutus.replay_cost``), never by summing the recorded usage.
- Beside it, the bill of the recorded usage (``replay_cost.billed``) and the ratio of the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .models import MessageWithParts, ModelLimits
from .replay import OnStep, ReplayReport, replay, session_model
from .replay_cost import Tally, billed
from .store import SessionStore

__all__ = ["AsRecordedReport", "AsRecordedSession", "Bill", "as_recorded", "recorded_bill"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Bill(_Model):
    """Requests and what they cost: in all, and tokens and US dollars by kind (``replay_cost.KINDS``)."""

    cost_usd: float
    requests: int
    tokens: dict[str, int]
    cost_by_kind: dict[str, float]


class AsRecordedSession(_Model):
    session_id: str  # the replayed session
    title: str | None = None
    sub_agent: bool = False
    requests: int
    cost_usd: float
    billed_usd: float | None = None  # its recorded usage priced, None when it carries none


class AsRecordedReport(Bill):
    """``replay --as-recorded``: every session of a recording replayed as it ran, priced, and its bill beside."""

    source: str | None = None
    database: str | None = None
    sessions: int
    cache_read_share: float
    billed: Bill | None = None  # the recorded usage priced (None: the recording carries none)
    ratio: float | None = None  # cost_usd / billed.cost_usd
    replays: list[AsRecordedSession] = Field(default_factory=list)


def as_recorded(
    store: SessionStore,
    recordings: Sequence[Any],
    *,
    source: str | None = None,
    summarizer: Any = None,
    on_step: OnStep | None = None,
) -> AsRecordedReport:
    """Replay every session of a recording (``load_recordings``: the main one, then its sub-agents, each a
    child of the replayed main session) as it ran: with no limit, so only its own compactions happen, every
    request priced by the cost meter at its recorded model; beside it, the bill of its recorded usage."""
    total, bill = Tally(), Tally()
    rows: list[AsRecordedSession] = []
    replayed: dict[str, str] = {}  # recorded session id -> replayed session id
    for recording in recordings:
        report = replay(
            store,
            recording.history,
            limits=ModelLimits(context=0),
            summarizer=summarizer,
            title=recording.title,
            directory=recording.directory,
            source=source,
            on_step=on_step,
            parent_id=replayed.get(recording.parent_id or ""),
        )
        replayed[recording.id] = report.session_id
        own = billed(recording.history, default=report.model)
        total.merge(_tally(report))
        bill.merge(own)
        rows.append(
            AsRecordedSession(
                session_id=report.session_id,
                title=recording.title,
                sub_agent=bool(recording.parent_id),
                requests=report.requests,
                cost_usd=report.cost_usd,
                billed_usd=round(own.cost, 6) if own.requests else None,
            )
        )
    recorded = Bill(**bill.as_json()) if bill.requests else None
    return AsRecordedReport(
        source=source,
        sessions=len(rows),
        cache_read_share=round(total.read_share, 4),
        billed=recorded,
        ratio=round(total.cost / bill.cost, 4) if recorded and bill.cost else None,
        replays=rows,
        **total.as_json(),
    )


def recorded_bill(history: Sequence[MessageWithParts]) -> Bill | None:
    """The bill of ``history``'s recorded usage (None: it carries none)."""
    bill = billed(history, default=session_model(history))
    return Bill(**bill.as_json()) if bill.requests else None


def _tally(report: ReplayReport) -> Tally:
    return Tally(requests=report.requests, tokens=dict(report.tokens), costs=dict(report.cost_by_kind))
