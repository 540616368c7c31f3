"""The API types: sessions, messages, the twelve part types and what compaction returns (pydantic v2).

They mirror OpenCode's MessageV2 so an ``opencode export`` entry maps onto ``MessageWithParts`` one to one.
Times are integer milliseconds since the epoch. Storage rows live in ``brutus.db.tables``; nothing here
touches a database.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AgentPart",
    "CacheTokens",
    "CompactionConfig",
    "CompactionPart",
    "CompactionRecord",
    "CompactionResult",
    "CompactionStatus",
    "CompactionTrigger",
    "FilePart",
    "Message",
    "MessageTime",
    "MessageWithParts",
    "ModelLimits",
    "PART_TYPES",
    "Part",
    "PartTime",
    "PatchPart",
    "PruneResult",
    "ReasoningPart",
    "RetryPart",
    "Role",
    "Session",
    "SnapshotPart",
    "StepFinishPart",
    "StepStartPart",
    "SubtaskPart",
    "TextPart",
    "TokenCounts",
    "ToolPart",
    "ToolState",
    "ToolStatus",
    "ToolTime",
]

Role = Literal["user", "assistant"]
ToolStatus = Literal["pending", "running", "completed", "error"]
JSONObject = dict[str, Any]
# Token counts and times are stored in 64-bit integer columns.
MAX_COUNT = 2**63 - 1  # a BIGINT column's largest value
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Millis = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class CacheTokens(_Model):
    read: Count = 0
    write: Count = 0


class TokenCounts(_Model):
    """Provider-reported usage of one assistant message (or one step)."""

    input: Count = 0
    output: Count = 0
    reasoning: Count = 0
    cache: CacheTokens = Field(default_factory=CacheTokens)

    @property
    def total(self) -> int:
        return self.input + self.output + self.reasoning + self.cache.read + self.cache.write


class ModelLimits(_Model):
    """A model's limits; ``context=0`` means unlimited, ``input=0`` means derived from the context."""

    context: Count
    input: Count = 0
    output: Count = 0


class Session(_Model):
    id: str
    parent_id: str | None = None
    title: str | None = None
    directory: str | None = None
    created_at: Millis
    updated_at: Millis
    archived_at: Millis | None = None
    message_count: int = 0
    forked_from: str | None = None  # a fork (``store.fork``): the session it was copied from
    forked_at: str | None = None  # ... and that session's message it was copied up to, included


class MessageTime(_Model):
    created: Millis
    completed: Millis | None = None


class Message(_Model):
    id: str
    session_id: str
    seq: int = 0
    role: Role
    parent_id: str | None = None
    summary: bool = False
    synthetic: bool = False
    finish: str | None = None
    error: JSONObject | None = None
    tokens: TokenCounts = Field(default_factory=TokenCounts)
    cost: float = 0.0
    agent: str | None = None
    mode: str | None = None
    model_id: str | None = None
    provider_id: str | None = None
    metadata: JSONObject | None = None
    time: MessageTime


class PartTime(_Model):
    start: Millis | None = None
    end: Millis | None = None


class _PartBase(_Model):
    id: str | None = None
    session_id: str | None = None
    message_id: str | None = None


class TextPart(_PartBase):
    type: Literal["text"] = "text"
    text: str
    synthetic: bool = False
    ignored: bool = False
    time: PartTime | None = None
    metadata: JSONObject | None = None


class ReasoningPart(_PartBase):
    type: Literal["reasoning"] = "reasoning"
    text: str
    metadata: JSONObject | None = None
    time: PartTime | None = None


class FilePart(_PartBase):
    type: Literal["file"] = "file"
    mime: str
    filename: str | None = None
    url: str
    source: JSONObject | None = None


class ToolTime(_Model):
    start: Millis | None = None
    end: Millis | None = None
    compacted: Millis | None = None


class ToolState(_Model):
    """A tool call's state. ``output`` is set when completed (None when a pruned output was not loaded)."""

    status: ToolStatus
    input: JSONObject = Field(default_factory=dict)
    output: str | None = None
    error: str | None = None
    title: str | None = None
    metadata: JSONObject | None = None
    time: ToolTime = Field(default_factory=ToolTime)


class ToolPart(_PartBase):
    type: Literal["tool"] = "tool"
    call_id: str
    tool: str
    state: ToolState


class StepStartPart(_PartBase):
    type: Literal["step-start"] = "step-start"
    snapshot: str | None = None


class StepFinishPart(_PartBase):
    type: Literal["step-finish"] = "step-finish"
    reason: str
    snapshot: str | None = None
    cost: float = 0.0
    tokens: TokenCounts = Field(default_factory=TokenCounts)


class SnapshotPart(_PartBase):
    type: Literal["snapshot"] = "snapshot"
    snapshot: str


class PatchPart(_PartBase):
    type: Literal["patch"] = "patch"
    hash: str
    files: list[str] = Field(default_factory=list)


class AgentPart(_PartBase):
    type: Literal["agent"] = "agent"
    name: str
    source: JSONObject | None = None


class RetryPart(_PartBase):
    type: Literal["retry"] = "retry"
    attempt: int
    error: JSONObject | str | None = None
    time: PartTime | None = None


class CompactionPart(_PartBase):
    type: Literal["compaction"] = "compaction"
    auto: bool = False
    overflow: bool = False
    tail_start_id: str | None = None


class SubtaskPart(_PartBase):
    type: Literal["subtask"] = "subtask"
    prompt: str
    description: str
    agent: str
    model: JSONObject | None = None
    command: str | None = None


Part = Annotated[
    Union[
        TextPart,
        ReasoningPart,
        FilePart,
        ToolPart,
        StepStartPart,
        StepFinishPart,
        SnapshotPart,
        PatchPart,
        AgentPart,
        RetryPart,
        CompactionPart,
        SubtaskPart,
    ],
    Field(discriminator="type"),
]

PART_TYPES: dict[str, type[BaseModel]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        TextPart,
        ReasoningPart,
        FilePart,
        ToolPart,
        StepStartPart,
        StepFinishPart,
        SnapshotPart,
        PatchPart,
        AgentPart,
        RetryPart,
        CompactionPart,
        SubtaskPart,
    )
}


class MessageWithParts(_Model):
    """One entry of a session's history: the shape of an ``opencode export`` message."""

    info: Message
    parts: list[Part] = Field(default_factory=list)


class CompactionConfig(_Model):
    """Compaction settings (seed 004 defaults).

    ``tail_tokens`` keeps the newest turns verbatim after a compaction, up to that many estimated tokens
    (0: none, OpenCode's default). ``stall_ratio``: a compaction whose post-tokens are at least this share of
    its pre-tokens is stopped as stalled. ``summarizer_context`` bounds the summary request (shrunk to fit).
    """

    auto: bool = True
    prune: bool = True
    prune_protect: Count = 40_000
    prune_minimum: Count = 20_000
    protected_tools: tuple[str, ...] = ("skill",)
    protected_turns: Count = 2
    tail_tokens: Count = 0
    stall_ratio: float = Field(default=0.95, gt=0, le=1)
    summary_max_tokens: Count = 4096
    summarizer_context: Count = 200_000


CompactionTrigger = Literal["auto", "manual", "overflow"]
CompactionStatus = Literal["pending", "completed", "failed"]


class CompactionRecord(_Model):
    """One row of ``compactions``: a compaction marker and how it ended."""

    id: str
    session_id: str
    user_message_id: str | None = None
    summary_message_id: str | None = None
    trigger: CompactionTrigger
    auto: bool = False
    overflow: bool = False
    tail_start_id: str | None = None
    status: CompactionStatus
    pre_tokens: int | None = None
    post_tokens: int | None = None
    model: str | None = None
    cost: float = 0.0
    error: str | None = None
    instructions: str | None = None
    fallback_used: str | None = None
    boundary: JSONObject | None = None
    created_at: Millis
    completed_at: Millis | None = None


class CompactionResult(_Model):
    """What ``store.compact`` did: the summary message, the ``compact_boundary`` event, tokens before and
    after, how many tokens prune reclaimed, and which fallback wrote the summary (None: the summarizer)."""

    compaction_id: str
    summary_message: MessageWithParts
    boundary: JSONObject
    pre_tokens: int
    post_tokens: int
    pruned: int = 0
    fallback_used: Literal["extractive", "truncation"] | None = None


class PruneResult(_Model):
    """What a prune reclaimed: ``pruned`` tokens out of ``total`` scanned, and the parts it marked.

    Why it pruned nothing, with the numbers: ``prunable`` tokens of tool output lay beyond the ``protect``
    window, which prune commits only above ``minimum`` (the thresholds used; None when pruning was off)."""

    pruned: int = 0
    total: int = 0
    parts: list[ToolPart] = Field(default_factory=list)
    prunable: int = 0
    protect: int | None = None
    minimum: int | None = None
