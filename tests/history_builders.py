"""Test-only: small constructors for in-memory histories (no database)."""

from __future__ import annotations

import itertools
from typing import Any

from brutus.models import (
    CacheTokens,
    CompactionPart,
    Message,
    MessageTime,
    MessageWithParts,
    Part,
    TextPart,
    TokenCounts,
    ToolPart,
    ToolState,
    ToolTime,
)

SESSION = "ses_test"
_clock = itertools.count(1_700_000_000_000)


def user(id: str, *parts: Part, **info: Any) -> MessageWithParts:
    return MessageWithParts(
        info=Message(id=id, session_id=SESSION, role="user", time=MessageTime(created=next(_clock)), **info),
        parts=list(parts),
    )


def assistant(
    id: str,
    *parts: Part,
    parent: str | None = None,
    finish: str | None = "stop",
    tokens: TokenCounts | None = None,
    **info: Any,
) -> MessageWithParts:
    return MessageWithParts(
        info=Message(
            id=id,
            session_id=SESSION,
            role="assistant",
            parent_id=parent,
            finish=finish,
            tokens=tokens or TokenCounts(),
            time=MessageTime(created=next(_clock)),
            **info,
        ),
        parts=list(parts),
    )


def summary(id: str, text_: str, *, parent: str, **info: Any) -> MessageWithParts:
    """A completed summary message answering the compaction user message ``parent``."""
    return assistant(id, text(text_), parent=parent, summary=True, mode="compaction", agent="compaction", **info)


def compaction(id: str, *, tail_start_id: str | None = None, auto: bool = False) -> MessageWithParts:
    return user(id, CompactionPart(id=f"prt_{id}", auto=auto, tail_start_id=tail_start_id))


def text(value: str, **fields: Any) -> TextPart:
    return TextPart(text=value, **fields)


def tool(
    call_id: str,
    *,
    name: str = "bash",
    status: str = "completed",
    output: str | None = None,
    tokens: int | None = None,
    input: dict[str, Any] | None = None,
    error: str | None = None,
    compacted: int | None = None,
    id: str | None = None,
) -> ToolPart:
    """A tool part; ``tokens=n`` makes a completed output of exactly n estimated tokens (4n ASCII bytes)."""
    if tokens is not None:
        output = "x" * (4 * tokens)
    if status == "completed" and output is None:
        output = ""
    return ToolPart(
        id=id or f"prt_{call_id}",
        call_id=call_id,
        tool=name,
        state=ToolState(
            status=status,
            input=input if input is not None else {},
            output=output,
            error=error,
            time=ToolTime(start=1, end=2 if status in ("completed", "error") else None, compacted=compacted),
        ),
    )


def usage(input: int = 0, output: int = 0, read: int = 0, write: int = 0, reasoning: int = 0) -> TokenCounts:
    return TokenCounts(input=input, output=output, reasoning=reasoning, cache=CacheTokens(read=read, write=write))
