"""What the maintenance operations report: a session's statistics, the database's integrity, a gc run.

``check`` sorts what it finds in three: ``problems`` (corruption: exit 1), ``notices`` (a compaction left
pending, by a process that died or one running now: exit 0) and, with ``repair``, ``repairs`` (what it
changed: abandoned compactions marked failed, stale counters and boundary pointers rebuilt from the rows).

The operations live in ``brutus.db.stats_ops``, ``brutus.db.check_ops`` and ``brutus.db.gc_ops``; these are
the pydantic shapes they return (and that ``brutus stats|check|gc --json`` print).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from .models import CompactionStatus, CompactionTrigger, TokenCounts

__all__ = [
    "CheckReport",
    "CompactionCounts",
    "CompactionStat",
    "GcResult",
    "Notice",
    "NoticeKind",
    "PartTypeStat",
    "Problem",
    "ProblemKind",
    "Repair",
    "RepairKind",
    "SessionStats",
    "ToolStat",
    "UnpricedUsage",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PartTypeStat(_Model):
    """Parts of one type in a session and their stored token estimates."""

    type: str
    parts: int
    tokens: int


class ToolStat(_Model):
    """Calls of one tool: how many, how they ended, their stored estimates (input + output + error) and the
    share of output tokens that prune marked."""

    tool: str
    calls: int
    completed: int
    errors: int
    tokens: int
    output_tokens: int
    pruned_calls: int
    pruned_tokens: int


class CompactionStat(_Model):
    """One compaction marker as ``stats`` shows it. ``refused``: a failed marker that an older brutus wrote for
    a compaction it refused before starting (an empty session, nothing new since the previous one); brutus no
    longer writes those. ``imported``: no marker at all, a completed boundary found in the messages (a user
    message holding a ``compaction`` part answered by a finished summary), as an imported transcript or
    ``append_messages`` writes it."""

    id: str
    trigger: CompactionTrigger
    status: CompactionStatus
    pre_tokens: int | None = None
    post_tokens: int | None = None
    fallback_used: str | None = None
    model: str | None = None
    cost: float = 0.0
    error: str | None = None
    created_at: int
    refused: bool = False
    imported: bool = False  # a completed boundary in the messages with no marker: id is its user message's


class CompactionCounts(_Model):
    """The compaction markers of a session by outcome; ``failed`` excludes the ``refused`` ones."""

    completed: int = 0
    failed: int = 0
    refused: int = 0
    pending: int = 0


class UnpricedUsage(_Model):
    """Assistant messages with provider-reported usage and no cost recorded (OpenCode records 0 for a
    subscription or a provider it does not price): what that usage costs at the list prices of the models
    brutus knows (``priced_as``); the others (``no_price``) are counted, never priced at another model's."""

    messages: int
    models: list[str]  # the models that answered them
    priced_as: list[str]  # those whose own list prices were used
    no_price: list[str] = Field(default_factory=list)  # those brutus has no price for
    cost: float | None  # of the priced_as models' messages; None when none of them has a price


class SessionStats(_Model):
    """Token accounting of one session, from SQL aggregates over the stored estimates and usage columns."""

    session_id: str
    title: str | None = None
    messages: int
    user_messages: int
    assistant_messages: int
    summary_messages: int
    estimated_tokens: int  # the sum of every part's stored estimate
    part_types: list[PartTypeStat] = Field(default_factory=list)
    tools: list[ToolStat] = Field(default_factory=list)
    pruned_parts: int = 0
    pruned_tokens: int = 0
    compactions: list[CompactionStat] = Field(default_factory=list)
    compaction_counts: CompactionCounts = Field(default_factory=CompactionCounts)
    provider_tokens: TokenCounts = Field(default_factory=TokenCounts)  # summed over the assistant messages
    cost: float = 0.0  # as recorded: summed over the messages' cost column
    unpriced: UnpricedUsage | None = None  # usage that recorded no cost, priced from the usage

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cache_read_share(self) -> float:
        """Of the input the provider counted (uncached, cache reads, cache writes), the share read from cache."""
        t = self.provider_tokens
        counted = t.input + t.cache.read + t.cache.write
        return round(t.cache.read / counted, 4) if counted else 0.0


ProblemKind = Literal[
    "orphan-message",
    "orphan-part",
    "orphan-tool-state",
    "orphan-tool-output",
    "tool-state-without-tool-part",
    "tool-part-without-state",
    "session-mismatch",
    "broken-boundary",
    "seq-gap",
    "seq-duplicate",
    "seq-counter",
    "stale-message-counters",
]


class Problem(_Model):
    """One integrity problem: what kind, where (session, and the row it is about), and a sentence."""

    kind: ProblemKind
    session_id: str | None = None
    row_id: str | None = None
    detail: str


# pending-compaction: a pending marker before its lock was looked at (``check_database`` alone)
NoticeKind = Literal["pending-compaction", "abandoned-compaction", "running-compaction"]


class Notice(_Model):
    """Something ``check`` reports that is not corruption: a compaction marker left pending by a process that
    stopped (its lock is free: ``abandoned``), or one whose compaction is running now (its lock is held)."""

    kind: NoticeKind
    session_id: str | None = None
    row_id: str | None = None
    detail: str


RepairKind = Literal["abandoned-compaction", "message-counters", "seq-counter", "boundary"]


class Repair(_Model):
    """One change ``check --repair`` made: what, where, and a sentence with the values before and after."""

    kind: RepairKind
    session_id: str | None = None
    row_id: str | None = None
    detail: str


class CheckReport(_Model):
    """What ``check`` looked at and what it found; ``ok`` when no problem (notices are not problems).

    With ``repaired`` (``check(repair=True)``) ``repairs`` lists what was changed, and ``problems`` and
    ``notices`` are what a check after those changes found."""

    sessions: int
    messages: int
    parts: int
    problems: list[Problem] = Field(default_factory=list)
    notices: list[Notice] = Field(default_factory=list)
    repaired: bool = False
    repairs: list[Repair] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return not self.problems


class GcResult(_Model):
    """What a gc dropped (or, with ``dry_run``, would drop): the output text of parts pruned before
    ``before`` (their metadata and token counts stay), and what that freed.

    ``bytes_before`` / ``bytes_after``: on SQLite the database file plus its WAL after a checkpoint, on
    PostgreSQL the whole database (``pg_database_size``). Both are None in a dry run. ``bytes_reclaimed``:
    what they shrank by (never below 0), space given back to the operating system.

    ``bytes_reusable``: space freed inside the database for new rows, not given back. SQLite: what the file's
    free list grew by (``PRAGMA freelist_count`` × page size; 0 after ``vacuum`` or on a file with
    ``auto_vacuum = INCREMENTAL``, which give it back). PostgreSQL: what the dropped outputs took as stored
    (``pg_column_size``, compressed, TOAST included; the rows' and chunks' headers not counted, so a lower
    bound), space VACUUM makes reusable by new rows.

    ``bytes_free`` (SQLite; None on PostgreSQL): the file's whole free list after gc, what later writes fill
    before the file grows. ``vacuumed``: a VACUUM ran (SQLite: only when asked; PostgreSQL: always, FULL when
    asked).
    """

    before: int
    dry_run: bool
    parts: int
    tokens: int
    output_bytes: int
    vacuumed: bool = False
    bytes_before: int | None = None
    bytes_after: int | None = None
    bytes_reusable: int | None = None
    bytes_free: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def bytes_reclaimed(self) -> int | None:
        """What the database's storage shrank by, never below 0 (PostgreSQL's VACUUM maps, SQLite's search index
        delete markers can grow it a little)."""
        if self.bytes_before is None or self.bytes_after is None:
            return None
        return max(0, self.bytes_before - self.bytes_after)
